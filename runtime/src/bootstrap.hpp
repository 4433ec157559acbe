// bootstrap: everything queue::open does before the queue takes calls: it
// validates the options, takes ownership of the file, opens and migrates it,
// runs restart recovery and starts the writer, dispatcher and event bus.
// Internal to runtime/.
#pragma once

#include <memory>
#include <string>

#include "runtime_access.hpp"
#include "queue_impl.hpp"

namespace ergon::runtime {

/// Checks `path` and `opts` for a queue in `sys`: what queue::open(sys, …)
/// refuses before it opens anything.
status validate_in(caf::actor_system& sys, const std::string& path, const options& opts);

/// Opens the queue at `path` in `sys`, which must outlive it.
result<std::unique_ptr<queue_impl>> bootstrap(caf::actor_system& sys, const std::string& path,
                                               options opts);

/// Opens the queue at `path` in an actor system of its own, built from `opts`.
result<std::unique_ptr<queue_impl>> bootstrap(const std::string& path, options opts);

}  // namespace ergon::runtime
