#include <caf/actor_system_config.hpp>
#include <caf/timespan.hpp>

#include "ergon/queue_actor.hpp"
#include "validate_options.hpp"

namespace ergon {

status set_peer_timeout(caf::actor_system_config& cfg, std::chrono::milliseconds timeout) {
  if (auto st = runtime::validate_peer_timeout("timeout", timeout); !st)
    return st;
  cfg.set("middleman.heartbeat-interval", caf::timespan{timeout / 4});
  cfg.set("middleman.connection-timeout", caf::timespan{timeout});
  return {};
}

}  // namespace ergon
