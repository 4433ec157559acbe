// Ending a running attempt that did not succeed: shared by finish_attempts
// (a reported failure), expire_attempt and recover_running, so a retry is
// decided and written in exactly one place. Internal to storage/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// How an attempt that did not succeed ended.
struct failed_attempt {
  attempt_outcome outcome = attempt_outcome::failed;
  std::string message;
  bool retryable = true;  ///< false: the job fails even with retries left
  /// If set, the retry is due this long after now, not after the backoff.
  std::optional<int64_t> retry_after_ms = std::nullopt;
  /// false (a snooze): the job goes back to pending even without retries
  /// left, and gets one more try in return (try_base moves up by one).
  bool spends_try = true;
};

/// Inserts the attempts row for an attempt of `row` that the job outlives
/// (a retry, a snooze, a wait for children).
status record_attempt(db& d, int64_t row, int32_t try_number, int64_t started_at,
                      int64_t finished_at, attempt_outcome outcome,
                      const std::string& message);

/// Records the attempt of `row` as `how` says, then ends the job
/// `cancelled` if a cancel was requested, else puts it back to pending
/// (run_at from `timing`) if it is retryable with retries left, else ends it
/// `failed`. With a token, only that attempt is ended. Returns nothing if
/// the job is not running (or runs another attempt): nothing changed then.
result<std::optional<attempt_end>> end_attempt(db& d, int64_t row,
                                               std::optional<int64_t> token,
                                               const failed_attempt& how,
                                               retry_timing timing, double random,
                                               int64_t now_ms);

/// Puts the running attempt `token` of `row` back to pending as yielded:
/// the try is not spent (the next attempt has the same try number), the
/// checkpoint stays, `yields` counts it, and the deadline is dropped (the job
/// did start in time). After a cancel request the job ends `cancelled`
/// instead. Returns nothing if that attempt is not running.
result<std::optional<attempt_end>> yield_attempt(db& d, int64_t row, int64_t token,
                                                 int64_t now_ms);

/// Ends `count` attempts, the i-th as `end_one(i)` (an end_attempt call)
/// does, and collects the ones that changed. The first error stops it; the
/// caller's transaction rolls back.
template <class EndOne>
result<std::vector<attempt_end>> end_attempts(size_t count, EndOne end_one) {
  std::vector<attempt_end> out;
  for (size_t i = 0; i < count; ++i) {
    result<std::optional<attempt_end>> ended = end_one(i);
    if (!ended)
      return ended.error();
    if (*ended)
      out.push_back(std::move(**ended));
  }
  return out;
}

}  // namespace ergon::storage
