// credentials: how the nodes of one queue prove who they are. Every
// connection opens with ergon's handshake, before CAF reads a byte of it;
// see docs/distribution.md for what each mode protects against.
//
//   caf::actor_system_config cfg;
//   cfg.load<caf::io::middleman>();
//   ergon::use_tls(cfg, {"node.pem", "node.key", "", "ca.pem"});  // mutual TLS
//   ...
//   auto secret = ergon::read_secret_file("secret");              // and/or a secret
//   ergon::connect(sys, "10.0.0.5", 4780, {*secret});
#pragma once

#include <string>

#include <caf/fwd.hpp>

#include "ergon/error.hpp"

namespace ergon {

/// How a file that holds a secret (a shared secret, a TLS key, a
/// passphrase) may be shared, as ssh checks its keys.
enum class file_access {
  owner_only,  ///< refuse a file its group or others may read (the default)
  any,         ///< accept it, with a warning on stderr
};

/// Certificates for mutual TLS. Every file is PEM.
struct tls_options {
  std::string certificate;  ///< this node's certificate (chain)
  std::string key;          ///< its private key
  std::string passphrase;   ///< the key's passphrase; empty if it has none
  std::string ca_file;      ///< CAs that a peer's certificate must chain to
  /// The name the peer's certificate must carry (a DNS name or an IP
  /// address, in its subject alternative names or common name): on a
  /// client, the server's; on a server, every client's. Empty: any
  /// certificate the CA file's CAs signed.
  std::string peer_name;
  /// Whether `key` may be a file its group or others can read.
  file_access key_access = file_access::owner_only;
};

/// Stores `tls` in `cfg`, so that every connection ergon makes or takes in
/// the actor system built from `cfg` is TLS 1.2 or later, with
/// forward-secret ciphers only, and both sides must present a certificate
/// that chains to a CA of `ca_file` (and carries `peer_name`, if set); a
/// peer without one is refused before any of its messages is read. Call it
/// before building the system.
/// Errors: invalid_argument naming the field (certificate, key, ca_file)
/// when a file is missing, unreadable or not PEM, when the key does not
/// match the certificate or its passphrase is wrong, or when others may
/// read the key file (unless key_access is any). Nothing is stored then.
status use_tls(caf::actor_system_config& cfg, const tls_options& tls);

/// What a peer that authenticated may do at a queue (docs/distribution.md,
/// "Roles"). The queue's own secret (listen_options::creds), a certificate
/// without a role, and a queue without credentials grant operator; the
/// others come from listen_options::worker_secret, client_secret and
/// certificate_roles.
enum class role : uint8_t {
  /// Registers workers and runs their jobs: a worker's reports, heartbeats,
  /// progress and dependency results, and join (start_worker).
  worker = 1,
  /// Submits jobs and recurring jobs, and reads: job_info, listings,
  /// counts, metrics, controls, workers, wait, subscribe.
  client = 2,
  /// Everything: a client's and a worker's messages, and retry, cancel,
  /// update, replay, delete, purge, pause, settings, recurring deletes and
  /// pauses, close.
  operator_ = 3,
};

/// "worker", "client" or "operator".
const char* to_string(role r) noexcept;

/// What a client or worker proves to a queue, and a queue to them.
struct credentials {
  /// A secret shared by the queue and everyone who may use it: at least 32
  /// random bytes, written as 64 or more hex digits (make_secret) or 43 or
  /// more base64 characters. The client proves it first, then the queue,
  /// each by an HMAC over fresh nonces and the TLS channel (if any), so it
  /// never crosses the wire. Empty: no secret.
  std::string secret;
};

/// 32 random bytes from OpenSSL, as 64 hex digits: a secret for
/// credentials. Throws std::runtime_error if OpenSSL has no randomness.
std::string make_secret();

/// The first line of a secret or passphrase file, without its line break
/// (LF or CRLF), as ergon-server's --secret-file reads it. Errors: io_error
/// naming the file (missing or unreadable), invalid_argument ("path": the
/// first line is empty, or its group or others may read the file and
/// `access` is owner_only).
result<std::string> read_secret_file(const std::string& path,
                                     file_access access = file_access::owner_only);

}  // namespace ergon
