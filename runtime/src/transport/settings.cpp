#include "transport/settings.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "ergon/queue_actor.hpp"

namespace ergon {
namespace transport {
namespace {

constexpr caf::string_view max_message_key = "ergon.max-message-bytes";

std::string sha256_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += digits[digest[i] >> 4];
    out += digits[digest[i] & 0xf];
  }
  return out;
}

}  // namespace

std::vector<actors::role_secret> role_secrets(const listen_options& where) {
  std::vector<actors::role_secret> out;
  if (where.creds.secret.empty())
    return out;
  out.push_back({where.creds.secret, role::operator_});
  for (auto [secret, granted] : {std::pair{&where.worker_secret, role::worker},
                                 std::pair{&where.client_secret, role::client}})
    if (!secret->empty())
      out.push_back({*secret, granted});
  return out;
}

std::string realm_of(const std::string& secret, const tls_options& tls) {
  if (!secret.empty())
    return "secret:" + sha256_hex("ergon-realm\n" + secret).substr(0, 32);
  if (!tls.certificate.empty()) {
    std::ostringstream pem;
    pem << std::ifstream{tls.ca_file}.rdbuf();
    return "tls:" + sha256_hex(pem.str() + '\n' + tls.peer_name).substr(0, 32);
  }
  return {};
}

size_t max_message_bytes_of(const caf::actor_system& sys) {
  auto n = caf::get_or(caf::content(sys.config()), max_message_key,
                       static_cast<int64_t>(default_message_limit));
  return static_cast<size_t>(n);
}

}  // namespace transport

status set_max_message_size(caf::actor_system_config& cfg, size_t bytes) {
  if (bytes < min_message_limit || bytes > max_message_limit)
    return {error::invalid_argument,
            "must be " + std::to_string(min_message_limit) + " to "
              + std::to_string(max_message_limit) + " bytes, got " + std::to_string(bytes),
            "bytes"};
  caf::put(cfg.content, transport::max_message_key, static_cast<int64_t>(bytes));
  return {};
}

}  // namespace ergon
