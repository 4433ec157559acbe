#include "ergon/credentials.hpp"

#include <openssl/rand.h>

#include <fstream>
#include <stdexcept>

#include "private_files.hpp"

namespace ergon {

std::string make_secret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    throw std::runtime_error("OpenSSL has no randomness for a secret");
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 0xf];
  }
  return out;
}

result<std::string> read_secret_file(const std::string& path, file_access access) {
  std::ifstream in{path};
  if (!in)
    return status{error::io_error, path + ": cannot read it"};
  if (auto st = runtime::check_private_file(path, access, "path"); !st)
    return st;
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  if (line.empty())
    return status{error::invalid_argument, path + ": its first line is empty", "path"};
  return line;
}

}  // namespace ergon
