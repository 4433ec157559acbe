// Column lists and row readers shared by the operations that read jobs.
// Internal to storage/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage::rows {

/// Columns read into a job_key, in the order `read_key` expects.
#define ERGON_JOB_KEY_COLUMNS \
  "id, type, group_key, priority, run_at, weight, added_at, deadline, external_id, " \
  "ready_since, recurring_id, io_read_bytes, io_write_bytes"

/// How many columns ERGON_JOB_KEY_COLUMNS has.
inline constexpr int key_column_count = 13;

/// Reads ERGON_JOB_KEY_COLUMNS starting at column `first`.
job_key read_key(const stmt& s, int first = 0);

/// jobs.ttl_after_start of `j`: its ttl when it counts from the first
/// attempt, else empty.
inline std::optional<int64_t> ttl_after_start(const job& j) {
  return j.ttl_from == ttl_start::first_attempt ? j.ttl_ms : std::nullopt;
}

/// Columns read into a job_info (without attempts), in `read_info` order.
#define ERGON_JOB_INFO_COLUMNS                                                   \
  "id, external_id, type, name, group_key, status, priority, weight, run_at, " \
  "deadline, payload, checkpoint, result, current_try, max_retries, "          \
  "backoff_initial_ms, backoff_multiplier, backoff_randomization, timeout_ms, "  \
  "heartbeat_increment_ms, added_at, started_at, finished_at, expires_at, "     \
  "last_outcome, last_message, ready_since, recurring_id, scheduled_at, unique_key, "   \
  "result_expires_at, try_base, cancel_requested_at, progress_done, progress_total, "   \
  "progress_message, progress_at, progress_eta, yields, io_read_bytes, io_write_bytes, " \
  ERGON_BACKOFF_COLUMNS ", waiting_on, dependency_policy, has_dependents, parent, only_dependency, " \
  "worker"

/// What a job row says beyond its job_info (ERGON_JOB_INFO_COLUMNS): its
/// latest attempt, and which links to other jobs it has.
struct row_details {
  std::optional<attempt_outcome> outcome;
  std::string message;
  int64_t link_bits = 0;  ///< jobs.has_dependents (dependents.hpp)
  bool has_parent = false;
  bool has_only_dependency = false;
  int64_t worker = 0;  ///< who ran the latest attempt; 0: none recorded
};

/// Reads ERGON_JOB_INFO_COLUMNS; returns the row id and latest attempt.
job_info read_info(const stmt& s, int64_t& row, row_details& details);

/// Fills `info.attempts` from the attempts table plus the latest attempt,
/// which lives in the jobs row (running, or the one that ended the job).
status read_attempts(db& d, int64_t row, const row_details& details, job_info& info);

/// Fills `info.tags` if `details` says the job has some.
status read_tags(db& d, int64_t row, const row_details& details, job_info& info);

/// Fills `info.depends_on` and `info.dependents` from the edges of `row`,
/// and `info.parent`, reading only the links `details` says it has.
status read_dependencies(db& d, int64_t row, const row_details& details, job_info& info);

/// The row id, status and key of the job with external id `id`.
struct job_state {
  int64_t row = 0;
  job_status status = job_status::pending;
  int32_t tries = 0;
  job_key key;
};

/// Looks a job up by external id. Error: not_found.
result<job_state> find_job(db& d, const job_id& id);

/// The error for an operation that needs a pending job but found `s`.
status not_pending_error(const job_id& id, job_status s);

/// The key a new job `j` gets at row `row`: run_at from run_at_ms or the
/// delay, the aging clock from when it is due, the deadline from its ttl.
job_key new_key(const job& j, int64_t now_ms, uint32_t id_tag, int64_t row);

/// The statement insert_job runs; prepare it once for many jobs.
result<stmt*> prepare_insert(db& d);

/// Inserts `j` with `insert` (from prepare_insert) as a pending job with key
/// `k` (row, id, run_at, deadline, ready_since, added_at and recurring_id
/// from `k`), and for an instance of a recurring job its time on the
/// schedule, with its dependencies as `links` says.
struct dependency_links {
  bool waits = false;        ///< inserted waiting, not pending
  int32_t waiting_on = 0;    ///< dependencies that have not ended
  int64_t link_bits = 0;  ///< jobs.has_dependents (dependents.hpp)
  std::optional<int64_t> parent;  ///< the row of the job that spawned it
  /// Its one dependency's row, kept in its row rather than as an edge.
  std::optional<int64_t> only_dependency;
};
status insert_job(db& d, stmt& insert, const job& j, const job_key& k,
                  std::optional<int64_t> scheduled_at, const dependency_links& links = {});

/// The columns a job shares with a recurring job's template, in the order
/// bind_template binds them.
#define ERGON_TEMPLATE_COLUMNS                                                        \
  "type, name, group_key, priority, weight, payload, max_retries, "                 \
  "backoff_initial_ms, backoff_multiplier, backoff_randomization, timeout_ms, "     \
  "heartbeat_increment_ms"

/// A backoff's kind and cap, on both the jobs and the recurring_jobs rows.
/// Statements put them at the end of their column lists (they came after
/// the template's columns).
#define ERGON_BACKOFF_COLUMNS "backoff_kind, backoff_max_ms"

/// Binds ERGON_BACKOFF_COLUMNS of `b` to parameters first and first + 1.
void bind_backoff(stmt& s, int first, const backoff_policy& b);

/// Reads ERGON_BACKOFF_COLUMNS at column `first` into `b`.
void read_backoff(const stmt& s, int first, backoff_policy& b);

/// Binds ERGON_TEMPLATE_COLUMNS of `j` to parameters first .. first + 11,
/// without copies: `j` must outlive the statement's next step.
void bind_template(stmt& s, int first, const job& j);

/// Marks the pending job at `row` cancelled at `now_ms`, with `why` as its
/// last message if set. Returns whether it was pending (one row changed).
result<bool> cancel_row(db& d, int64_t row, int64_t now_ms,
                        const std::optional<std::string>& why = std::nullopt);

/// The first free row id: past every row there is and every row
/// delete_finished removed. Read inside the writer's transaction, so no
/// other process can take it in between.
result<int64_t> next_row(db& d);

/// Binds a job id as a 16-byte blob.
void bind_id(stmt& s, int i, const job_id& id);

/// The 16 bytes `bind_id` binds, as a view of `id`.
std::string_view id_bytes(const job_id& id);

/// Reads a 16-byte blob column as a job id.
job_id column_id(const stmt& s, int i);

}  // namespace ergon::storage::rows
