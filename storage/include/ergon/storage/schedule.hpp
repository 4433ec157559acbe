// schedule: when a recurring job's instances are due. Either a cron spec
// (cron.hpp) read in a time zone, or `every <duration>`.
//
// DST: a cron time is a wall clock time in the schedule's zone.
//  - In a spring-forward gap, a time that does not exist runs once, at the
//    first valid instant after it (the end of the gap). Several such times
//    in one gap run once together.
//  - In a fall-back overlap, a time that occurs twice runs once, at its
//    first occurrence; the repeated hour runs nothing again.
// `every` counts milliseconds from an anchor and knows no zones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/cron.hpp"

namespace date {
class time_zone;
}

namespace ergon::storage {

class schedule {
 public:
  /// Parses `spec`: a cron spec or macro, or "every <duration>" where the
  /// duration is one or more <count><unit> with units ms, s, m, h and d
  /// ("every 90s", "every 1h30m"), at most 100 years. `time_zone` is an
  /// IANA name read from the system's tz database; empty means UTC, and it
  /// must be empty for `every`. `anchor_ms` is where an `every` schedule
  /// counts from (its slots are anchor + k * period). Errors:
  /// invalid_argument, field "schedule" (what is wrong, naming the cron
  /// field) or "time_zone" (unknown zone, or a zone with `every`).
  static result<schedule> parse(const std::string& spec, const std::string& time_zone,
                                int64_t anchor_ms);

  /// The first instant (ms since the epoch, UTC) strictly after `after_ms`
  /// when an instance is due, or nothing if there is none before the year
  /// 10000.
  std::optional<int64_t> next_after(int64_t after_ms) const;

  /// The latest instant at or before `at_ms` when an instance is due, if
  /// there is one after `after_ms` (exclusive). Finds it in a few steps
  /// even after years of downtime.
  std::optional<int64_t> last_at_or_before(int64_t at_ms, int64_t after_ms) const;

  /// For `every`: the period in ms; 0 for cron.
  int64_t period_ms() const { return period_ms_; }

 private:
  schedule() = default;

  std::optional<int64_t> next_cron_after(int64_t after_ms) const;

  cron_fields cron_;
  const date::time_zone* zone_ = nullptr;  ///< null: UTC
  int64_t period_ms_ = 0;
  int64_t anchor_ms_ = 0;
};

/// The instance after one that ended: its time on the schedule, and when it
/// runs (later than that for a catch-up).
struct next_slot {
  int64_t scheduled_at = 0;
  int64_t run_at = 0;
};

/// The rule for the next instance of a recurring job, applied in the
/// transaction that ends the current one. `slot` is the ended instance's
/// time on the schedule, `started_at` when its latest attempt started (none
/// if it never ran), and `since_ms` when the schedule last changed (slots at
/// or before it don't count).
///  - The next slot after max(slot, since) is the next instance if it lies
///    after now: a late run doesn't drift the schedule.
///  - Otherwise slots were missed. Those due before the ended instance
///    started count as run by it. If any fell due after it started, `once`
///    runs one catch-up now, for the latest of them; `skip` (and `once`
///    when none did) continues at the first slot after now.
/// Nothing if the schedule has no slot left before the year 10000.
std::optional<next_slot> next_instance(const schedule& s, int64_t slot,
                                       std::optional<int64_t> started_at, int64_t since_ms,
                                       catch_up mode, int64_t now_ms);

/// At open, for a pending instance in `skip` mode: where it moves if it
/// missed later slots (the next slot after max(slot, since) is not after
/// now), namely the first slot after now. Nothing if it stays.
std::optional<int64_t> skip_missed(const schedule& s, int64_t slot, int64_t since_ms,
                                   int64_t now_ms);

}  // namespace ergon::storage
