// The pause that keeps a stepped background duty (the retention sweeper, a
// bulk action) to its share of the writer's time. Internal to actors/.
#pragma once

#include <caf/atom.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

#include "ergon/storage/times.hpp"

namespace ergon::actors {

/// Self-sent once the pause after a step has passed.
using next_step_atom = caf::atom_constant<caf::atom("nextstep")>;

/// How long to wait after a step that took `busy_us` in the writer (its
/// own time there, not its wait in the mailbox) to keep to `share`: t * (1
/// / share - 1). Empty for a share of 1: no waits.
inline std::optional<std::chrono::milliseconds> writer_pause(int64_t busy_us, double share) {
  if (share >= 1.0)
    return std::nullopt;
  return storage::timer_delay(
    storage::ms_from_double(static_cast<double>(busy_us) / 1'000.0 * (1.0 / share - 1.0)));
}

/// After a step's reply is recorded: runs `step(self)` at once when no step
/// is left (`more` false) or the share is 1, and otherwise sends `self`
/// next_step_atom after the pause.
template <class Self, class Step>
void pace(Self* self, bool more, int64_t busy_us, double share, Step step) {
  auto pause = writer_pause(busy_us, share);
  if (!pause || !more) {
    step(self);
    return;
  }
  self->delayed_send(self, *pause, next_step_atom::value);
}

}  // namespace ergon::actors
