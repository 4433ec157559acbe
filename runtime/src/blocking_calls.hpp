// The queue actor's calls that wait: reads, metrics, scheduling controls and
// close. They wait for a read connection or for the dispatcher, so they run
// on a blocking actor with a thread of its own; the queue actor stays a
// scheduled actor and delegates them here. (CAF 0.17's detached actors can
// hang actor_system's destructor: actor-framework issue #1196.)
// Internal to runtime/.
#pragma once

#include <memory>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "runtime_access.hpp"
#include "queue_impl.hpp"

namespace ergon::runtime {

/// Spawns the actor that runs `q`'s waiting calls, behind `q`'s gate. It
/// takes the queue actor's messages for those calls and answers the
/// requester directly, and close_atom: stop the queue, answer, and exit.
caf::actor spawn_blocking_calls(caf::actor_system& sys, std::shared_ptr<queue_impl> q);

}  // namespace ergon::runtime
