#include "private_files.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace ergon {
namespace runtime {
namespace {

constexpr size_t min_hex_digits = 64;     // 32 bytes
constexpr size_t min_base64_chars = 43;   // 32 bytes, unpadded

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

status check_private_file(const std::string& path, file_access access, const char* field) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return {error::io_error, path + ": " + std::strerror(errno)};
  if ((st.st_mode & 077) == 0)
    return {};
  auto what = path + " may be read by its group or others (mode " + octal(st.st_mode) + ")";
  if (access == file_access::any) {
    std::cerr << "ergon: warning: " << what << "; chmod 600 it\n";
    return {};
  }
  return {error::invalid_argument,
          what + ": chmod 600 it, or accept it with file_access::any "
                 "(ergon-server --allow-open-files)",
          field};
}

status validate_secret(const std::string& secret) {
  auto hex = std::all_of(secret.begin(), secret.end(),
                         [](unsigned char c) { return std::isxdigit(c) != 0; });
  auto base64 = std::all_of(secret.begin(), secret.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '+' || c == '/' || c == '-' || c == '_' || c == '=';
  });
  auto significant = secret.size() - static_cast<size_t>(std::count(secret.begin(), secret.end(), '='));
  if ((hex && secret.size() >= min_hex_digits) || (!hex && base64 && significant >= min_base64_chars))
    return {};
  return {error::invalid_argument,
          "the secret must be at least 32 random bytes, written as 64 or more hex digits or 43 or "
          "more base64 characters (got " + std::to_string(secret.size())
            + " characters" + (hex || base64 ? "" : ", not all hex or base64")
            + "); make one with ergon::make_secret() or ergon-server --make-secret FILE",
          "secret"};
}

}  // namespace runtime
}  // namespace ergon
