// eta_estimate: when a job should finish, extrapolated from its recent
// progress reports (job_context::progress), as taskmill's progress reporter
// does. A plain class: the running attempt owns one; its unit tests run on
// made-up times.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace ergon::actors {

class eta_estimate {
 public:
  /// Reports older than this count only while fewer than two are newer.
  static constexpr int64_t window_ms = 60'000;
  /// Most reports kept; older ones go first.
  static constexpr size_t max_samples = 64;

  /// Records that `done` of `total` units were done at `now_ms`, and returns
  /// when the rest should be done at the rate since the oldest report kept:
  /// now for a finished total; nothing without a total (0), without an
  /// earlier report at another time, or when `done` did not grow since it.
  /// A `done` below the previous one starts over (the job went back).
  /// Saturates at never_ms.
  std::optional<int64_t> add(int64_t now_ms, int64_t done, int64_t total);

 private:
  std::deque<std::pair<int64_t, int64_t>> samples_;  // (time, done), oldest first
};

}  // namespace ergon::actors
