// cron: the fields of a cron spec and the next local time that matches
// them. Time zones and DST are schedule.hpp's; this file sees only wall
// clock times (date::local_seconds).
//
// Syntax: 5 fields (minute hour day-of-month month day-of-week) or 6 with
// seconds first; lists (1,5), ranges (1-5), steps (*/15, 1-30/5, 10/5),
// month and day names (jan, mon; any case), day-of-week 0-7 (0 and 7 are
// Sunday), and the macros @yearly (@annually), @monthly, @weekly, @daily
// (@midnight) and @hourly. Day-of-month and day-of-week combine as in
// Vixie cron: if both fields start with something other than `*`, a day
// matching either one matches; otherwise a day must match both.
#pragma once

#include <bitset>
#include <optional>
#include <string>

#include <date/date.h>

#include "ergon/error.hpp"

namespace ergon::storage {

struct cron_fields {
  std::bitset<60> seconds;
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days_of_month;  ///< bits 1-31
  std::bitset<13> months;         ///< bits 1-12
  std::bitset<7> days_of_week;    ///< 0 is Sunday
  /// Vixie cron's rule: a field that starts with `*` does not restrict the
  /// day on its own.
  bool day_of_month_star = false;
  bool day_of_week_star = false;

  /// True if the day `ymd` matches the day fields.
  bool day_matches(const date::year_month_day& ymd) const;
};

/// Parses a cron spec. Errors: invalid_argument with field "schedule" and a
/// message naming the cron field and what is wrong in it, for example
/// "minute: 61 is out of range 0-59"; also for a spec that can never fire
/// ("day_of_month: no day of the spec occurs in its months, so it never fires").
result<cron_fields> parse_cron(const std::string& spec);

/// The first local time at or after `from` that matches `c`, or nothing if
/// there is none before the year 10000.
std::optional<date::local_seconds> next_cron_match(const cron_fields& c,
                                                   date::local_seconds from);

}  // namespace ergon::storage
