// What every operation that gives a job a final status (succeeded, failed,
// cancelled, expired) also does, in the same transaction: release or hold
// the job's unique key, and for an instance of a recurring job record it as
// the last run and create the next instance. Internal to storage/.
#pragma once

#include <cstdint>
#include <optional>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// Runs the effects above for the job at `row`, which reached `status` at
/// `now_ms`. Returns the next instance it created, if any: none if the job
/// is no instance, its recurring job was deleted, or its schedule has no
/// time left.
result<std::optional<job_key>> on_job_final(db& d, int64_t row, job_status final_status,
                                            int64_t now_ms);

/// SQL for a column that tells whether a finished job needs on_job_final,
/// so operations on hot paths skip the call for plain jobs.
#define ERGON_JOB_HAS_LINKS "(recurring_id IS NOT NULL OR unique_key IS NOT NULL)"

}  // namespace ergon::storage
