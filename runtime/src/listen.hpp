// listen: how a queue opened with options::listen takes other processes'
// connections: through a queue actor over it, published. Internal to
// runtime/; defined in queue_actor.cpp, beside publish.
#pragma once

#include <memory>

#include "runtime_access.hpp"
#include "queue_impl.hpp"

namespace ergon::runtime {

/// Spawns a queue actor over `q` in q's actor system and publishes it as
/// `where` says. On error the queue is closed and the error returned.
status listen(const std::shared_ptr<queue_impl>& q, const listen_options& where);

}  // namespace ergon::runtime
