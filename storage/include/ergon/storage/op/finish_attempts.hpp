// finish_attempts: recording the outcomes workers report
// (storage/src/finish_attempts.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/op/insert_jobs.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct finish_attempts_args {
  std::vector<attempt_report> reports;
  std::vector<double> randoms;  ///< one U[0,1) per report, for backoff jitter
  size_t max_result_bytes = 0;  ///< 0: unlimited
  /// Snoozes a job may take (options::max_snoozes); one more is a failure.
  int64_t max_snoozes = 1'000;
  /// How spawned children are inserted (its jobs are ignored).
  insert_jobs_args children{};
};

/// Records each report. A success ends the job `succeeded` (its result kept
/// for the job's result_ttl_ms); a failure retries it with backoff (or
/// after its retry_after) or, with no retries left or failed_permanently,
/// ends it `failed`; a snooze puts it back to pending after its delay
/// without spending a try, unless the job took max_snoozes already (then
/// it is a failure); a spawn inserts the children and parks the job
/// (spawn_children), or, if the queue refuses a child, fails the attempt
/// with that error as its message (a try spent) and answers the error;
/// after a cancel
/// request every report but a success ends it `cancelled`. A success sent
/// again after it committed (same row and token; its answer was lost) is
/// ok and changes nothing. Any other report whose token is not the running
/// attempt's gets `stale_attempt` and changes nothing. Per-report statuses
/// come back in `statuses`; `ended` lists what changed.
struct finish_attempts_result {
  std::vector<status> statuses;
  std::vector<attempt_end> ended;
  /// The children that spawned reports inserted, one insert per report.
  std::vector<insert_jobs_result> spawned;
};
result<finish_attempts_result> finish_attempts(db& d, const finish_attempts_args& args,
                                               int64_t now_ms);

/// PostgreSQL's statement that completes a run of successes (?1 rows, ?2
/// now, ?3 tokens, ?4 results; with `of_base`, ?3 the tokens' shared base
/// and no results), for the plan check in test-storage.
const char* complete_batch_sql(bool of_base = false) noexcept;

}  // namespace ergon::storage
