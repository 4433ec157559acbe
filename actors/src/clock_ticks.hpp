// clock_ticks: with a manual clock, an actor learns of every advance by a
// tick_atom message, and re-checks its timers (a real clock needs none: the
// actor arms CAF timers). Internal to actors/.
#pragma once

#include <memory>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/clock.hpp"

namespace ergon::actors {

/// Sends `self` a tick after each advance of `clock`, until `self` exits.
template <class Self>
void tick_on_advance(Self* self, const std::shared_ptr<ergon::clock>& clock) {
  caf::actor_addr addr = self->address();
  auto handle = clock->subscribe([addr] {
    if (auto hdl = caf::actor_cast<caf::actor>(addr))
      tell(hdl, tick_atom::value);
  });
  self->attach_functor([clock, handle] { clock->unsubscribe(handle); });
}

}  // namespace ergon::actors
