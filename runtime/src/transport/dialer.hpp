// The connecting side of ergon's transport: connects, runs TLS (when the
// actor system has use_tls) and ergon's handshake with a deadline on each
// step, and only then hands the connection to CAF's BASP broker. Blocking:
// call it from a thread of its own.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/node_id.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "ergon/credentials.hpp"
#include "ergon/error.hpp"

namespace ergon::transport {

/// What CAF's remote_actor gives: the node, the actor published there and
/// its interface.
struct dialed {
  caf::node_id node;
  caf::strong_actor_ptr actor;
  std::set<std::string> ifs;
};

/// Connects to host:port. Errors: unreachable (nothing answers, the TLS
/// handshake failed, a step took longer than `timeout`, or the queue
/// closed the connection; naming host and port), unauthenticated (a
/// refused or unproved secret), closed (not an ergon queue of this
/// version), invalid_argument (the TLS files of use_tls no longer load).
result<dialed> dial(caf::actor_system& sys, const std::string& host, uint16_t port,
                    const credentials& creds, std::chrono::milliseconds timeout);

}  // namespace ergon::transport
