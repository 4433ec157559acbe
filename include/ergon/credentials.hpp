// credentials: how the nodes of one queue prove who they are. See
// docs/distribution.md for what each mode protects against.
//
//   caf::actor_system_config cfg;
//   cfg.load<caf::io::middleman>();
//   ergon::use_tls(cfg, {"node.pem", "node.key", "", "ca.pem"});  // mutual TLS
//   ...
//   ergon::connect(sys, "10.0.0.5", 4780, {secret});              // and/or a secret
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "ergon/error.hpp"

namespace ergon {

/// Certificates for mutual TLS. Every file is PEM.
struct tls_options {
  std::string certificate;  ///< this node's certificate (chain)
  std::string key;          ///< its private key
  std::string passphrase;   ///< the key's passphrase; empty if it has none
  std::string ca_file;      ///< CAs that a peer's certificate must chain to
};

/// Loads caf-openssl into `cfg`, set up with `tls`, so that every
/// connection of the actor system built from `cfg` is TLS and both sides
/// must present a certificate that chains to a CA of `ca_file`; a peer
/// without one is refused by the handshake and reaches nothing. Call it
/// after loading caf::io::middleman and before building the system.
/// Errors: invalid_argument naming the field (certificate, key, ca_file)
/// when a file is missing, unreadable or not PEM, or when the key does not
/// match the certificate or its passphrase is wrong. Nothing is loaded then.
status use_tls(caf::actor_system_config& cfg, const tls_options& tls);

/// What a client or worker proves to a queue, and a queue to them.
struct credentials {
  /// A secret shared by the queue and everyone who may use it, at least 16
  /// bytes (32 random bytes recommended). Each side proves it by a
  /// challenge and response over fresh nonces and both node ids, so it
  /// never crosses the wire. Empty: no secret.
  std::string secret;
};

/// The first line of a secret or passphrase file, without its line break
/// (LF or CRLF), as ergon-server's --secret-file reads it. Errors: io_error
/// naming the file (missing or unreadable), invalid_argument ("path": the
/// first line is empty).
result<std::string> read_secret_file(const std::string& path);

}  // namespace ergon
