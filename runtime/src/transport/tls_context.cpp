#include "transport/tls_context.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <fstream>

#include "private_files.hpp"

namespace ergon {
namespace transport {
namespace {

// TLS 1.2's forward-secret AEAD suites; TLS 1.3's are all forward secret.
constexpr const char* tls12_ciphers =
  "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
  "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
  "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256";

status bad(const char* field, const std::string& path, const std::string& why) {
  return {error::invalid_argument, std::string{field} + " " + path + ": " + why, field};
}

int passphrase_cb(char* buf, int size, int, void* user) {
  auto& pass = *static_cast<const std::string*>(user);
  auto n = std::min<size_t>(pass.size(), static_cast<size_t>(size));
  pass.copy(buf, n);
  return static_cast<int>(n);
}

bool is_ip(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// The settings use_tls stores; under "ergon.tls".
constexpr caf::string_view keys[] = {"ergon.tls.certificate", "ergon.tls.key",
                                     "ergon.tls.passphrase", "ergon.tls.ca-file",
                                     "ergon.tls.peer-name"};

}  // namespace

std::string openssl_reason() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out = buf;  // the last one is the outermost
  }
  return out.empty() ? "not PEM" : out;
}

result<std::shared_ptr<tls_context>> tls_context::make(const tls_options& tls, bool server,
                                                      bool peer_must_prove) {
  struct named {
    const char* field;
    const std::string& path;
  };
  bool mutual = peer_must_prove || !tls.ca_file.empty();
  for (auto f : {named{"certificate", tls.certificate}, named{"key", tls.key},
                 named{"ca_file", tls.ca_file}}) {
    if (f.path.empty() && !mutual && std::string{f.field} == "ca_file")
      continue;
    if (f.path.empty())
      return status{error::invalid_argument,
                    std::string{f.field}
                      + (peer_must_prove
                           ? " is empty: mutual TLS needs a certificate, its key and the CA file"
                           : " is empty: TLS needs a certificate and its key"),
                    f.field};
    if (!std::ifstream{f.path})
      return bad(f.field, f.path, "cannot be read");
  }
  if (auto st = runtime::check_private_file(tls.key, tls.key_access, "key"); !st)
    return st;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx{
    SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()), SSL_CTX_free};
  if (!ctx)
    return status{error::internal, "OpenSSL cannot make a TLS context: " + openssl_reason()};
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.certificate.c_str()) != 1)
    return bad("certificate", tls.certificate, openssl_reason());
  std::string pass = tls.passphrase;
  SSL_CTX_set_default_passwd_cb(ctx.get(), passphrase_cb);
  SSL_CTX_set_default_passwd_cb_userdata(ctx.get(), &pass);
  auto key_loaded = SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key.c_str(), SSL_FILETYPE_PEM);
  SSL_CTX_set_default_passwd_cb_userdata(ctx.get(), nullptr);
  if (key_loaded != 1)
    return bad("key", tls.key, "not a PEM key, or the passphrase is wrong: " + openssl_reason());
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return bad("key", tls.key, "does not match the certificate " + tls.certificate);
  if (mutual && SSL_CTX_load_verify_locations(ctx.get(), tls.ca_file.c_str(), nullptr) != 1)
    return bad("ca_file", tls.ca_file, openssl_reason());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (SSL_CTX_set_cipher_list(ctx.get(), tls12_ciphers) != 1)
    return status{error::internal, "OpenSSL refuses ergon's ciphers: " + openssl_reason()};
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET
                                   | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  // CAF's stream may resend a write from a moved buffer; idle connections
  // keep no 16 KiB read buffers.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE
                                | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_verify(ctx.get(),
                     mutual ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_NONE,
                     nullptr);
  // A peer's chain is a few KiB; OpenSSL's default takes 100 KiB from anyone.
  SSL_CTX_set_max_cert_list(ctx.get(), 32 * 1024);
  return std::shared_ptr<tls_context>{new tls_context(ctx.release(), tls, server)};
}

tls_context::tls_context(SSL_CTX* ctx, tls_options tls, bool server)
    : ctx_(ctx), tls_(std::move(tls)), server_(server) {}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

SSL* tls_context::session(int fd) const {
  SSL* ssl = SSL_new(ctx_);
  if (!ssl)
    return nullptr;
  auto& name = tls_.peer_name;
  bool named = true;
  if (!name.empty())
    named = is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) == 1
                        : SSL_set1_host(ssl, name.c_str()) == 1;
  if (!named || SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  if (!server_ && !name.empty() && !is_ip(name))
    SSL_set_tlsext_host_name(ssl, name.c_str());
  return ssl;
}

tls_options tls_of(const caf::actor_system& sys) {
  auto& content = caf::content(sys.config());
  tls_options tls;
  std::string* fields[] = {&tls.certificate, &tls.key, &tls.passphrase, &tls.ca_file,
                           &tls.peer_name};
  for (size_t i = 0; i < std::size(keys); ++i)
    *fields[i] = caf::get_or(content, keys[i], std::string{});
  // use_tls checked the key's permissions, or was told not to.
  tls.key_access = file_access::any;
  return tls;
}

}  // namespace transport

status use_tls(caf::actor_system_config& cfg, const tls_options& tls) {
  if (auto ctx = transport::tls_context::make(tls, true); !ctx)
    return ctx.error();
  const std::string* fields[] = {&tls.certificate, &tls.key, &tls.passphrase, &tls.ca_file,
                                 &tls.peer_name};
  for (size_t i = 0; i < std::size(transport::keys); ++i)
    caf::put(cfg.content, transport::keys[i], *fields[i]);
  return {};
}

}  // namespace ergon
