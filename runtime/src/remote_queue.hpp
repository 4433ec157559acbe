// remote_queue: the local actor behind connect()'s handle. It forwards each
// queue_actor request to the queue on another node over one connection and
// answers every request in flight with `unreachable` if that connection
// drops, so no caller hangs. It reconnects with backoff: at once for
// workers waiting to register again, and for clients on their next request.
//
// Its handle crosses the wire with every request, so CAF's registry keeps it
// alive for good: it quits by itself once the actors it serves are gone.
// connect() returns a front actor that never crosses the wire and so dies
// with its last handle; the remote queue monitors it and its workers.
// Internal to runtime/.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>

#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/worker.hpp"
#include "ergon/credentials.hpp"
#include "ergon/queue_actor.hpp"

namespace ergon::runtime {

using actors::rejoin_atom;
/// Self-sent: try to connect again (local only).
using reconnect_atom = caf::atom_constant<caf::atom("ergrecon")>;
/// The connection serves this actor (a handle from connect, or a worker)
/// until it terminates (local only).
using hold_atom = caf::atom_constant<caf::atom("erghold")>;
/// Connect now and answer once connected and authenticated, or with why not
/// (local only).
using dial_atom = caf::atom_constant<caf::atom("ergdial")>;

using remote_queue_actor = queue_actor::extend<caf::replies_to<rejoin_atom>::with<caf::actor>,
                                               caf::replies_to<dial_atom>::with<ok_atom>,
                                               caf::reacts_to<reconnect_atom>,
                                               caf::reacts_to<hold_atom, caf::actor>>;

/// Where the queue may be, and how to reach it.
struct remote_target {
  /// Tried in turn each round (connect_options::addresses).
  std::vector<queue_address> addresses;
  /// Asked first each round for the owner's addresses (connect_options::owner_of).
  std::string owner_of;
  std::chrono::milliseconds dial_timeout{10'000};
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5'000};
};

/// Connects to the queue at one of `target`'s addresses (blocking), runs
/// the handshake with `creds` and returns the local actor that stands for
/// it.
result<queue_actor> connect_remote(caf::actor_system& sys, const remote_target& target,
                                   const credentials& creds);

/// A connection made by connect_remote: its actor, and the gate its
/// workers share.
struct remote_connection {
  remote_queue_actor link;
  std::shared_ptr<actors::node_gate> gate;

  explicit operator bool() const { return static_cast<bool>(link); }
};

/// The connection behind `q`, if `q` is one of this process.
remote_connection find_remote_queue(const queue_actor& q);

/// Starts a worker here for the queue behind `q`; it registers with that
/// queue's dispatcher and, after a dropped connection, asks `q` again.
/// `opts` must be valid (runtime::validate).
result<worker> start_remote_worker(const remote_connection& q, worker_options opts);

}  // namespace ergon::runtime
