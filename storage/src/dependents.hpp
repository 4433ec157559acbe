// The submit's side of dependencies between jobs (dependents.cpp; the end's
// side is settle_dependents in job_final.hpp). Internal to storage/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// jobs.has_dependents' bits: a job depends on this one (set when the
/// dependent is submitted, even if this one had ended); this one spawned
/// children (job_context::submit_children); this one's own dependencies
/// are edge rows (one alone is jobs.only_dependency); this one has tags
/// (job_tags); this one waits behind the running holder of its unique key
/// (unique_policy::requeue), so a later requeue duplicate gives it its
/// payload. A listing looks for a job's links and tags only where the bits
/// say there are some.
inline constexpr int64_t has_dependents_bit = 1;
inline constexpr int64_t has_children_bit = 2;
inline constexpr int64_t has_edges_bit = 4;
inline constexpr int64_t has_tags_bit = 8;
inline constexpr int64_t requeued_bit = 16;

/// The job at row `job` waits on the job at row `depends_on`.
struct dependency_edge {
  int64_t depends_on = 0;
  int64_t job = 0;
};

/// Writes `edges`; both rows of each must exist, and callers pass each pair
/// once (the key refuses a repeat).
status insert_edges(db& d, const std::vector<dependency_edge>& edges);

/// Marks the jobs at `rows` as ones that jobs wait on (jobs.has_dependents),
/// so their ends settle them.
status mark_depended(db& d, const std::vector<int64_t>& rows);

/// Ends the waiting job at `row`, as `policy` (cancel or fail) says, because
/// its dependency `dependency` ended `dependency_status`, and settles the
/// jobs waiting on it in turn. Nothing if the job no longer waits.
result<dependents_settled> end_waiting(db& d, int64_t row, dependency_failure policy,
                                       const job_id& dependency, job_status dependency_status,
                                       int64_t now_ms);

/// Ends the waiting job at `row` `status` (cancelled: a cancel, a replace)
/// with `message`, and settles the jobs waiting on it in turn. The job is
/// the first of `ended`. Nothing if it no longer waits.
result<dependents_settled> end_waiting(db& d, int64_t row, job_status status,
                                       std::string message, int64_t now_ms);

}  // namespace ergon::storage
