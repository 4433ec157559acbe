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
};

struct retry_failed_result {
  std::vector<job_key> requeued;  ///< now pending, due now
  std::vector<job_key> waiting;   ///< waiting on dependencies that have not ended
  std::vector<job_id> skipped;    ///< unique key held by another job
};

/// Puts failed jobs back to pending, due now, with fresh tries: the tries
/// so far become the job's try_base, so 1 + max_retries more attempts are
/// allowed, and the attempt that failed moves into the history. The job
/// keeps its payload and checkpoint; it loses its deadline, result,
/// progress and cancel request, and an instance of a recurring job leaves
/// its chain (recurring_id is cleared: it runs once more on its own). Its
/// unique key is taken again. Lowers the unfinished low mark. One job:
/// errors not_found, job_running or job_finished (it is not failed),
/// already_exists (another job holds its unique key). A filter: every
/// failed job it matches, in one transaction; those whose key is held are
/// skipped.
result<retry_failed_result> retry_failed(db& d, const retry_failed_args& args, int64_t now_ms);

}  // namespace ergon::storage
