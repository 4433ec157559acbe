// delete_finished, first_row_submitted_at_or_after, drop_expired_results,
// expire_idempotency_keys and forget_inbox_entries: deleting finished jobs,
// expired results, and keys and inbox entries past their window
// (storage/src/delete_finished.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/listing.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// A job deleted by delete_finished.
struct deleted_job {
  int64_t row = 0;
  std::string type;
  job_status status = job_status::succeeded;
};

struct delete_finished_args {
  job_filter filter;  ///< filter.status must be a final status
  /// Only rows with ids after this one (a sweep's cursor; 0: from the start).
  int64_t after_row = 0;
  /// Only rows below this id (INT64_MAX: no bound).
  int64_t before_row = INT64_MAX;
  size_t limit = 500;
};

struct delete_finished_result {
  std::vector<deleted_job> deleted;
  /// The highest row the statement looked at if it stopped at `limit`, for
  /// the next call's after_row; 0 when it found fewer (the range is done).
  int64_t resume_after = 0;
};

/// Deletes up to `limit` finished jobs that `filter` matches, with their
/// attempts, lowest ids first. First records the highest row id in
/// meta.row_high_water, so that new rows never reuse a deleted row's id
/// (it could lie below the unfinished low mark). Error: invalid_argument
/// (no final status, or a filter field).
result<delete_finished_result> delete_finished(db& d, const delete_finished_args& args);

/// The first row id whose job was submitted at or after `at_ms`, found by
/// binary search over the row ids (submission times grow with them, up to
/// clock jumps); one past the highest row if none.
result<int64_t> first_row_submitted_at_or_after(db& d, int64_t at_ms);

/// Drops up to `limit` results whose result_expires_at has passed; the
/// jobs stay. Returns how many.
result<int64_t> drop_expired_results(db& d, int64_t now_ms, size_t limit);

/// Deletes up to `limit` idempotency keys whose window ended by `now_ms`,
/// oldest first, and returns how many. A key past its window already
/// counts as free; this only gives the space back.
result<int64_t> expire_idempotency_keys(db& d, int64_t now_ms, size_t limit);

/// PostgreSQL: deletes up to `limit` inbox entries taken in (or refused)
/// before `before_ms`, oldest first, and returns how many (drain_inbox
/// calls it). On SQLite, which has no inbox, it deletes nothing.
result<int64_t> forget_inbox_entries(db& d, int64_t before_ms, size_t limit);

}  // namespace ergon::storage
