#include "handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ergon::runtime {
namespace {

std::string hex(const unsigned char* data, size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += digits[data[i] >> 4];
    out += digits[data[i] & 0xf];
  }
  return out;
}

}  // namespace

status validate_secret(const std::string& secret) {
  if (secret.size() < min_secret_bytes)
    return {error::invalid_argument,
            "the secret has " + std::to_string(secret.size()) + " bytes; it needs at least "
              + std::to_string(min_secret_bytes) + " (32 random bytes recommended)",
            "secret"};
  return {};
}

std::string make_nonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    throw std::runtime_error("OpenSSL has no randomness for a nonce");
  return hex(bytes, sizeof(bytes));
}

bool is_nonce(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

std::string handshake_proof(const std::string& secret, const char* role,
                            const std::string& client_nonce, const std::string& queue_nonce,
                            const caf::node_id& client, const caf::node_id& queue) {
  std::string transcript = std::string{"ergon-handshake-1\n"} + role + '\n' + client_nonce + '\n'
                           + queue_nonce + '\n' + caf::to_string(client) + '\n'
                           + caf::to_string(queue);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(transcript.data()), transcript.size(), mac, &len);
  return hex(mac, len);
}

bool same_proof(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ergon::runtime
