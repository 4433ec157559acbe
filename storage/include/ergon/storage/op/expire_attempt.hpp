// expire_attempt: ending a running attempt past its expiry
// (storage/src/expire_attempt.cpp).
#pragma once

#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct expire_attempt_args {
  int64_t row = 0;
  int64_t token = 0;
  double random = 0;  ///< U[0,1) for backoff jitter
};

/// Ends the running attempt as "expired" if its expires_at has passed, and
/// retries or fails the job. If a heartbeat moved expires_at past now, returns
/// `still_running` with the new time instead. A stale token is not an error:
/// the attempt already ended (`gone`).
struct expire_attempt_result {
  enum { expired, still_running, gone } what = gone;
  attempt_end ended;
  int64_t expires_at = 0;
};
result<expire_attempt_result> expire_attempt(db& d, const expire_attempt_args& args,
                                             int64_t now_ms);

}  // namespace ergon::storage
