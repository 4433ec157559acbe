#include <caf/actor_system_config.hpp>
#include <caf/openssl/manager.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <fstream>
#include <memory>

#include "ergon/credentials.hpp"

namespace ergon {
namespace {

std::string openssl_reason() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out = buf;  // the last one is the outermost
  }
  return out.empty() ? "not PEM" : out;
}

status bad(const char* field, const std::string& path, const std::string& why) {
  return {error::invalid_argument, std::string{field} + " " + path + ": " + why, field};
}

int passphrase_cb(char* buf, int size, int, void* user) {
  auto& pass = *static_cast<const std::string*>(user);
  auto n = std::min<size_t>(pass.size(), static_cast<size_t>(size));
  pass.copy(buf, n);
  return static_cast<int>(n);
}

// Loads the files as caf-openssl will, so a mistake is an error here
// rather than an exception in CAF's network thread later.
status check(const tls_options& tls) {
  struct named {
    const char* field;
    const std::string& path;
  };
  for (auto f : {named{"certificate", tls.certificate}, named{"key", tls.key},
                 named{"ca_file", tls.ca_file}}) {
    if (f.path.empty())
      return {error::invalid_argument, std::string{f.field} + " is empty: mutual TLS needs a "
                                         "certificate, its key and the CA file", f.field};
    if (!std::ifstream{f.path})
      return bad(f.field, f.path, "cannot be read");
  }
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx{SSL_CTX_new(TLS_method()),
                                                        SSL_CTX_free};
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate.c_str()) != 1)
    return bad("certificate", tls.certificate, openssl_reason());
  std::string pass = tls.passphrase;
  SSL_CTX_set_default_passwd_cb(ctx.get(), passphrase_cb);
  SSL_CTX_set_default_passwd_cb_userdata(ctx.get(), &pass);
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return bad("key", tls.key, "not a PEM key, or the passphrase is wrong: " + openssl_reason());
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return bad("key", tls.key, "does not match the certificate " + tls.certificate);
  if (SSL_CTX_load_verify_locations(ctx.get(), tls.ca_file.c_str(), nullptr) != 1)
    return bad("ca_file", tls.ca_file, openssl_reason());
  return {};
}

}  // namespace

status use_tls(caf::actor_system_config& cfg, const tls_options& tls) {
  if (auto st = check(tls); !st)
    return st;
  cfg.openssl_certificate = tls.certificate;
  cfg.openssl_key = tls.key;
  cfg.openssl_passphrase = tls.passphrase;
  cfg.openssl_cafile = tls.ca_file;
  cfg.load<caf::openssl::manager>();
  return {};
}

result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    return status{error::io_error, path + ": cannot read it"};
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  if (line.empty())
    return status{error::invalid_argument, path + ": its first line is empty", "path"};
  return line;
}

}  // namespace ergon
