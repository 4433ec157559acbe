// The CAF side of a connection whose handshake passed: a scribe (CAF's
// byte stream for a broker) over the socket, plain or TLS, that checks each
// chunk BASP reads against basp_rules before BASP sees it, closes the
// connection on the first broken rule, and admits the peer's node in the
// connection's realm for as long as the connection lives.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/io/fwd.hpp>

#include <memory>
#include <mutex>
#include <string>

#include "ergon/actors/node_gate.hpp"
#include "transport/connection.hpp"

namespace ergon::transport {

/// Why the scribe closed a connection, for the dialer that waits on it.
struct closing_note {
  std::mutex mtx;
  std::string why;
  bool other_credentials = false;  ///< the peer's node is live in another realm or role
};

/// What a connection may do once CAF has it.
struct connection_terms {
  bool accepted = false;         ///< the peer dialed us
  size_t max_message_bytes = 0;  ///< the largest BASP payload taken
  std::string realm;             ///< where its peer's node is admitted
  /// What its peer may do (the credentials it proved); a queue we dialed
  /// may do everything.
  role granted = role::operator_;
  std::string peer;              ///< "address:port", for log lines
  /// Counts connections closed for breaking the rules; may be null.
  std::shared_ptr<actors::node_gate> gate;
  /// Told why the connection was closed, if it was; may be null.
  std::shared_ptr<closing_note> note;
};

/// A scribe for `sys`'s BASP broker over `conn`, which it owns from now on.
caf::io::scribe_ptr make_scribe(caf::actor_system& sys, std::unique_ptr<connection> conn,
                                connection_terms terms);

/// Logs a connection closed for `why`: the first of each kind in a minute,
/// then a count of the others with the next one.
void log_refused_connection(const std::string& peer, const std::string& why);

}  // namespace ergon::transport
