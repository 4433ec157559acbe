// retry_failed: putting failed jobs back to pending (storage/src/retry_failed.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/listing.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct retry_failed_args {
  /// One job (its errors are the call's), or else every failed job that
  /// `filter` matches (its status is taken as failed).
  std::optional<job_id> id;
  job_filter filter;
  /// With an id: a job of any final status runs again (queue::replay),
  /// not only a failed one.
  bool replay = false;
  /// With a filter: only rows after this one (the previous step's
  /// resume_after), at most `limit` of them.
  int64_t after_row = 0;
  /// With a filter: only rows below this one (INT64_MAX: no bound).
  int64_t before_row = INT64_MAX;
  size_t limit = 500;
};

struct retry_failed_result {
  std::vector<job_key> requeued;  ///< now pending, due now
  std::vector<job_key> waiting;   ///< waiting on dependencies that have not ended
  std::vector<job_id> skipped;    ///< unique key held by another job
  /// The status the jobs had: failed, or with replay the job's own.
  job_status from = job_status::failed;
  /// With a filter: the highest row this step looked at if it found
  /// `limit` jobs, for the next step's after_row; 0 when it found fewer.
  int64_t resume_after = 0;
};

/// Puts failed jobs back to pending, due now, with fresh tries: the tries
/// so far become the job's try_base, so 1 + max_retries more attempts are
/// allowed, and the attempt that failed moves into the history. The job
/// keeps its payload and checkpoint; it loses its deadline, result,
/// progress and cancel request, and an instance of a recurring job leaves
/// its chain (recurring_id is cleared: it runs once more on its own). Its
/// unique key is taken again. Lowers the unfinished low mark. One job:
/// errors not_found, job_running or job_finished (it is not failed),
/// already_exists (another job holds its unique key). A filter: up to
/// `limit` failed jobs it matches past after_row (one step of a bulk
/// retry); those whose key is held are skipped. Within a step a job waits
/// for the dependencies retried with it, whatever the rows' order; a
/// dependency retried in a later step does not make it wait.
result<retry_failed_result> retry_failed(db& d, const retry_failed_args& args, int64_t now_ms);

}  // namespace ergon::storage
