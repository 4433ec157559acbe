// times: arithmetic on ms timestamps and durations that never overflows.
// Internal; every sum of a time and a duration in ergon goes through here.
//
// A sum past the largest int64 saturates at `never_ms`, which every reader
// takes literally: a run_at, expiry or pause end at never_ms never comes.
// So `timeout(milliseconds::max())` means "never expires" rather than
// wrapping into the past.
#pragma once

#include <chrono>
#include <string>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ergon/job.hpp"

namespace ergon::storage {

inline constexpr int64_t never_ms = ergon::never_ms;

/// t + d, saturating at never_ms (and at the smallest int64 below).
constexpr int64_t add_ms(int64_t t, int64_t d) noexcept {
  if (d > 0 && t > never_ms - d)
    return never_ms;
  if (d < 0 && t < std::numeric_limits<int64_t>::min() - d)
    return std::numeric_limits<int64_t>::min();
  return t + d;
}

/// n * d for n, d >= 0, saturating at never_ms.
constexpr int64_t mul_ms(int64_t n, int64_t d) noexcept {
  if (n <= 0 || d <= 0)
    return 0;
  return n > never_ms / d ? never_ms : n * d;
}

/// A non-negative double of ms as int64, saturating (NaN counts as never).
inline int64_t ms_from_double(double ms) noexcept {
  if (!(ms < 9.2e18))
    return never_ms;
  return ms <= 0 ? 0 : static_cast<int64_t>(ms);
}

/// The SQL for t + d (d >= 0) saturating at never_ms: SQLite turns an
/// overflowing integer sum into a float instead.
#define ERGON_SQL_ADD_MS(t, d) \
  "(CASE WHEN " d " > 9223372036854775807 - " t " THEN 9223372036854775807 ELSE " t " + " d " END)"

/// Real time `d` from now on the steady clock; time_point::max() for
/// durations past what the clock can hold (milliseconds::max() included).
inline std::chrono::steady_clock::time_point steady_deadline(std::chrono::milliseconds d) {
  using std::chrono::steady_clock;
  auto now = steady_clock::now();
  auto room = std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::time_point::max()
                                                                    - now);
  if (d >= room)
    return steady_clock::time_point::max();
  return now + (d.count() > 0 ? d : std::chrono::milliseconds{0});
}

/// The ms in one of a duration's units: "ms", "s", "m", "h" or "d"; 0 for
/// anything else. Schedules ("every 90s") and ergonctl's flags use it.
inline int64_t unit_ms(const std::string& unit) noexcept {
  if (unit == "ms")
    return 1;
  if (unit == "s")
    return 1'000;
  if (unit == "m")
    return 60'000;
  if (unit == "h")
    return 3'600'000;
  if (unit == "d")
    return 86'400'000;
  return 0;
}

/// A duration >= 0: a number with a unit (ms, s, m, h, d: "250ms", "90s";
/// "1h30m" is not accepted), as ergonctl's flags and ergon-server's
/// configuration file take them. A bare number is refused: "7" meant as
/// days must not be read as ms. Error: invalid_argument naming `field`,
/// with a message that starts with it (no number, no unit or an unknown
/// one, negative, or past the ms range).
result<std::chrono::milliseconds> parse_duration(const std::string& text,
                                                 const std::string& field);

/// The longest single CAF timer: CAF counts in ns, so a longer delay would
/// overflow. A timer that fires early re-checks and re-arms.
inline constexpr std::chrono::milliseconds max_timer{24LL * 3600 * 1000};

/// `ms` from now as a CAF timer delay: within [0, max_timer].
inline std::chrono::milliseconds timer_delay(int64_t ms) noexcept {
  return std::chrono::milliseconds{ms <= 0 ? 0 : ms < max_timer.count() ? ms : max_timer.count()};
}

}  // namespace ergon::storage
