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

}  // namespace ergon::storage
