// Mutual TLS for ergon's connections, with OpenSSL directly rather than
// caf-openssl: ergon runs its handshake inside TLS before CAF reads a byte,
// binds the proof to the TLS channel, and sets the protocol floor, the
// ciphers and the peer's name, none of which caf-openssl 0.17 can do.
#pragma once

#include <caf/fwd.hpp>

#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "ergon/credentials.hpp"

namespace ergon::transport {

/// An SSL_CTX for one side: TLS 1.2 at least, forward-secret AEAD ciphers
/// only, no renegotiation, tickets or compression, and (with a CA file) a
/// certificate that chains to it required of the peer (and, with
/// `peer_name`, that names it).
class tls_context {
 public:
  /// Loads `tls`'s files. Without `peer_must_prove` (the HTTP endpoint),
  /// the CA file may be empty, and then the peer shows no certificate.
  /// Errors: invalid_argument naming the field (certificate, key, ca_file)
  /// that is missing, unreadable, not PEM, does not match, or (the key) may
  /// be read by others; nothing is loaded.
  static result<std::shared_ptr<tls_context>> make(const tls_options& tls, bool server,
                                                   bool peer_must_prove = true);

  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  /// A new session on the connected socket `fd`, checking the peer's name
  /// when the options gave one. Null if OpenSSL can't make one.
  SSL* session(int fd) const;

  const tls_options& options() const { return tls_; }

 private:
  tls_context(SSL_CTX* ctx, tls_options tls, bool server);

  SSL_CTX* ctx_;
  tls_options tls_;
  bool server_;
};

/// The TLS options use_tls stored in `sys`'s config; empty certificate if
/// it has none.
tls_options tls_of(const caf::actor_system& sys);

/// OpenSSL's reason for the last failure, emptying its error queue.
std::string openssl_reason();

}  // namespace ergon::transport
