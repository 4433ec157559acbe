// worker_impl: the state behind a worker handle. The queue keeps a weak
// reference to each one so that closing the queue stops its workers.
// Internal to runtime/.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "runtime_access.hpp"
#include "ergon/actors/worker.hpp"
#include "ergon/worker.hpp"

namespace ergon {

struct worker::impl {
  actors::worker_actor actor;
  std::shared_ptr<actors::worker_counters> counters;
  std::mutex mtx;
  bool stopped = false;

  /// Spawns a worker actor in `sys` that asks `dispatcher` for jobs. A
  /// worker of a queue on another node asks `rejoin` for the dispatcher
  /// again after its connection drops (see actors::worker_config). `gate`
  /// says which nodes may message it. `opts` must be valid
  /// (runtime::validate).
  static std::shared_ptr<impl> spawn(caf::actor_system& sys, worker_options opts,
                                     std::shared_ptr<ergon::clock> clock,
                                     caf::actor dispatcher,
                                     std::shared_ptr<actors::node_gate> gate,
                                     caf::actor rejoin = {});

  /// Stops once; later calls return ok at once.
  status stop(std::chrono::milliseconds timeout);
};

}  // namespace ergon
