// lease_clock: when an owner must take its PostgreSQL lease as lapsed, on
// its own clock, and when to renew it. Internal to runtime/.
//
// The server extends a lease from the moment it runs the renewal, which is
// after the owner sent it. So counting from the send of the last renewal
// that succeeded errs on the safe side: the owner takes its lease as
// lapsed a margin before any successor can take it over, and stops serving
// (lease_keeper). The margin absorbs clocks that run at slightly different
// rates.
#pragma once

#include <chrono>

namespace ergon::runtime {

class lease_clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A lease of `lease_time` whose acquire was sent at `acquired`.
  lease_clock(std::chrono::milliseconds lease_time, time_point acquired) noexcept
      : lease_time_(lease_time), confirmed_(acquired) {}

  /// A renewal sent at `sent` succeeded. An older send changes nothing.
  void renewed(time_point sent) noexcept {
    if (sent > confirmed_)
      confirmed_ = sent;
  }

  /// A tenth of the lease, at most 1 s.
  std::chrono::milliseconds margin() const noexcept;

  /// When the lease lapses on this clock: its last confirmed send, plus
  /// the lease, less the margin.
  time_point lapses_at() const noexcept { return confirmed_ + lease_time_ - margin(); }

  bool lapsed(time_point now) const noexcept { return now >= lapses_at(); }

  /// When to send the next renewal after one that ended at `now`: a third
  /// of the lease after the last confirmed send, or, when that is already
  /// past (the last one failed), a tenth of the lease from `now`, so a few
  /// more tries fit before the lease lapses.
  time_point next_renewal(time_point now) const noexcept;

 private:
  std::chrono::milliseconds lease_time_;
  time_point confirmed_;
};

}  // namespace ergon::runtime
