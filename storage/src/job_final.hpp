// What every operation that gives a job a final status (succeeded, failed,
// cancelled, expired) also does, in the same transaction: release or hold
// the job's unique key, for an instance of a recurring job record it as
// the last run and create the next instance, and settle the jobs waiting on
// it (dependents.cpp). Internal to storage/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// What a job's end did beyond its own row.
struct final_effects {
  /// The next instance it created, if any: none if the job is no instance,
  /// its recurring job was deleted, or its schedule has no time left.
  std::optional<job_key> next_instance;
  dependents_settled dependents;
};

/// Runs the effects above for the job at `row`, which reached `status` at
/// `now_ms`.
result<final_effects> on_job_final(db& d, int64_t row, job_status final_status,
                                   int64_t now_ms);

/// The effects above but the dependents' (which a caller settles), for the
/// job at `row`: its key, and the next instance of its recurring job.
struct ended_links {
  job_id id;
  bool has_children = false;
  std::optional<job_key> next_instance;
};
result<ended_links> end_links(db& d, int64_t row, job_status final_status, int64_t now_ms);

/// Settles the jobs waiting on the job at `row` (external id `id`), which
/// ended `final_status` at `now_ms`: a success, or a failure of a
/// dependent whose policy is `run`, counts its wait down and releases it at
/// zero; otherwise the dependent ends cancelled or failed, its key is
/// released, and the jobs waiting on it are settled in turn. A job that
/// `has_children` and did not succeed ends its unfinished children. For
/// writes that end a job without on_job_final (a replaced holder, a
/// superseded instance).
result<dependents_settled> settle_dependents(db& d, int64_t row, const job_id& id,
                                             job_status final_status, int64_t now_ms,
                                             bool has_children = false);

/// Releases or holds the unique key `key` of the job at `row`, which
/// finished at `now_ms` (`hold`: job::unique_hold_ms).
status release_key(db& d, const std::string& key, int64_t row, std::optional<int64_t> hold,
                   int64_t now_ms);

/// SQL for a column that tells whether a finished job needs on_job_final,
/// so operations on hot paths skip the call for plain jobs.
#define ERGON_JOB_HAS_LINKS \
  "(recurring_id IS NOT NULL OR unique_key IS NOT NULL OR (has_dependents & 3) <> 0)"

}  // namespace ergon::storage
