// The listening side of ergon's transport. Its own thread accepts TCP
// connections and runs TLS and ergon's handshake on each without blocking,
// so a peer that has not proved itself costs at most a few kilobytes, for
// at most the handshake timeout, and never delays CAF's network thread or
// anyone else's handshake. Only a connection that passed is handed to CAF's
// BASP broker, as a connection to the actor published on this port.
#pragma once

#include <caf/actor_system.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ergon/actors/node_gate.hpp"
#include "ergon/credentials.hpp"
#include "ergon/error.hpp"
#include "ergon/options.hpp"
#include "transport/tls_context.hpp"

namespace ergon::transport {

struct listener_terms {
  std::string bind = "127.0.0.1";
  uint16_t port = 0;  ///< 0: a free one
  std::string secret;  ///< empty: none; grants operator
  /// Secrets that grant less (listen_options::worker_secret, client_secret).
  std::vector<actors::role_secret> other_secrets;
  /// Roles by a TLS peer certificate's common name; set: an unlisted name
  /// is refused (listen_options::certificate_roles).
  std::map<std::string, role> certificate_roles;
  /// Mutual TLS before the handshake; null: none.
  std::shared_ptr<tls_context> tls;
  std::string realm;
  size_t max_message_bytes = default_message_limit;
  /// How long a connection may take from accept to a passed handshake.
  std::chrono::milliseconds handshake_timeout{10'000};
  /// Connections between accept and a passed handshake; past it the oldest
  /// is closed, so a flood can't keep a prompt client out.
  size_t max_pending = 512;
  /// Of those, connections in their TLS handshake: OpenSSL may hold up to
  /// about 130 KiB for each (it sizes its buffer by the length a ClientHello
  /// declares). Past it the oldest of them is closed.
  size_t max_tls_pending = 128;
  /// Counts failed handshakes and refused connections.
  std::shared_ptr<actors::node_gate> gate;
};

class acceptor {
 public:
  /// Listens on terms.bind:terms.port and serves `whom` (with interface
  /// `ifs`) to every connection that passes. Errors: io_error naming the
  /// address when it can't be bound.
  static result<std::unique_ptr<acceptor>> open(caf::actor_system& sys, listener_terms terms,
                                                caf::strong_actor_ptr whom,
                                                std::set<std::string> ifs);

  /// Stops accepting, closes the handshakes in progress and tells CAF the
  /// port serves nothing any more. Connections already handed over stay.
  ~acceptor();

  uint16_t port() const;

  class impl;

 private:
  explicit acceptor(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ergon::transport
