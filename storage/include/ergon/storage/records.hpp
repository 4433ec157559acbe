// The records several storage operations share, or that the actors and the
// runtime carry around: job keys, attempt references, attempt ends and
// reports, progress, and the retry timing and backoff delay.
//
// Every database operation ergon performs is one function, defined in its own
// storage/src/<name>.cpp with its SQL as named constants at the top, and
// declared with its arguments and results in op/<name>.hpp beside it.
//
// Write operations assume the caller holds a transaction (db_writer wraps each
// request in a SAVEPOINT) and never read a clock: `now_ms` is an argument.
// A failed write returns an error and leaves rolling back to the caller.
// Reads (read_jobs, list_jobs, count_jobs, ...) take any connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"

namespace ergon::storage {

/// What the dispatcher keeps in memory about a pending job.
struct job_key {
  int64_t row = 0;  ///< internal row id
  job_id id;        ///< external id
  std::string type;
  std::string group;  ///< empty: no group
  int32_t priority = 0;
  int64_t run_at = 0;
  int32_t weight = 1;
  int64_t added_at = 0;
  int64_t ready_since = 0;  ///< start of the aging clock (kept across retries)
  std::optional<int64_t> deadline;
  std::string recurring_id;  ///< empty: not an instance of a recurring job
  int64_t io_read = 0;   ///< declared I/O in bytes (job::expected_io); 0: none
  int64_t io_write = 0;
};

/// One attempt of a job: its row and the token chosen when it was claimed.
struct attempt_ref {
  int64_t row = 0;
  int64_t token = 0;
};

struct key_change {
  job_key before;
  job_key after;
};

/// A waiting job that ended without running: a job it depends on ended
/// unsuccessfully (job::on_dependency_failure: cancel or fail), or it was
/// cancelled or replaced itself.
struct dependent_end {
  job_key key;
  job_status status = job_status::cancelled;
  std::string message;  ///< "dependency <id> ended <status>", ...
  bool has_children = false;  ///< it spawned children: its end stops them
};

/// A running job asked to stop (its parent ended unsuccessfully).
struct stop_request {
  attempt_ref attempt;
  job_key key;
};

/// What the end of jobs did to the jobs waiting on them, and to their
/// children, in the same transaction, transitively: waiting jobs released
/// (now pending) or ended, pending children cancelled, and running
/// children asked to stop.
struct dependents_settled {
  std::vector<job_key> released;
  std::vector<dependent_end> ended;
  std::vector<dependent_end> cancelled;  ///< pending children
  std::vector<stop_request> stopping;
  /// Next instances of recurring jobs whose instances ended here.
  std::vector<job_key> next_instances;

  bool empty() const noexcept {
    return released.empty() && ended.empty() && cancelled.empty() && stopping.empty()
           && next_instances.empty();
  }
  void append(dependents_settled&& more) {
    auto move_all = [](auto& to, auto& from) {
      for (auto& x : from)
        to.push_back(std::move(x));
    };
    move_all(released, more.released);
    move_all(ended, more.ended);
    move_all(cancelled, more.cancelled);
    move_all(stopping, more.stopping);
    move_all(next_instances, more.next_instances);
  }
};

/// The query that finds the jobs waiting on a job that ended (?1 its row),
/// through the view dependency_edges: for plan checks.
const char* waiting_dependents_sql() noexcept;

/// A cancelled job, the next instance if it was one of a recurring job,
/// and what its end did to the jobs waiting on it.
struct cancelled_job {
  job_key key;
  std::optional<job_key> next_instance;
  dependents_settled dependents{};
  /// The job was waiting, not pending: it is the first of
  /// `dependents.ended`.
  bool was_waiting = false;
};

/// A job that is now running: what a worker needs to run it.
struct claimed_job {
  job_key key;  ///< key.id is the job's id
  int64_t token = 0;
  int32_t try_number = 0;  ///< 1 for the first attempt
  std::string payload;     ///< the checkpoint if there is one, else the payload
  int64_t started_at = 0;
  int64_t expires_at = 0;
};

/// A claimed job put back to pending.
struct released_claim {
  int64_t token = 0;
  job_key key;
};

/// How an attempt that did not succeed continues.
enum class retry_timing : uint8_t {
  backoff,    ///< run_at = now + the job's backoff delay
  immediate,  ///< run_at = now (restart recovery's retry_immediately)
};

/// The longest delay before a retry or after a snooze: 100 years.
inline constexpr int64_t max_retry_delay_ms = int64_t{100} * 365 * 24 * 3600 * 1000;

/// The backoff delay after the `failed_try`-th attempt (1-based) failed:
/// the kind's growth (initial * multiplier^(failed_try-1), initial, or
/// initial * failed_try) * (1 + u * randomization), with u in [0, 1), at
/// most max_ms if set, and at most 100 years so huge exponents can't
/// overflow.
int64_t retry_delay(const backoff_policy& b, int32_t failed_try, double u) noexcept;

/// What ending an attempt did to its job.
struct attempt_end {
  int64_t row = 0;
  job_id id;
  std::string type;
  std::string group;
  int32_t try_number = 0;
  attempt_outcome outcome = attempt_outcome::failed;
  std::string message;  ///< the failure text ("expired", ...); empty on success
  job_status status = job_status::failed;  ///< pending if retried
  job_key key;       ///< the job's new key if it was retried
  int64_t started_at = 0;
  /// The next instance, if the job was one of a recurring job and ended.
  std::optional<job_key> next_instance;
  /// What the job's end did to the jobs waiting on it.
  dependents_settled dependents{};
};

/// How job code ended an attempt.
enum class report_kind : uint8_t {
  succeeded = 0,           ///< complete(), or the code returned
  failed = 1,              ///< fail() or a throw: retried if tries are left
  failed_permanently = 2,  ///< fail_permanently(): the job fails at once
  stopped = 3,             ///< the code returned after a cancel request
  /// job_context::yield() after the dispatcher asked the attempt to make
  /// room (preemption): the job goes back to pending without spending a try
  yielded = 4,
  /// job_context::snooze(): the job goes back to pending after `after_ms`,
  /// without spending a try
  snoozed = 5,
  /// job_context::submit_children(): `children` are submitted and the job
  /// waits for them, its checkpoint `text`, without spending a try
  spawned = 6,
};

/// One outcome reported by a worker: success with an optional result, or a
/// failure with a message.
struct attempt_report {
  int64_t row = 0;
  int64_t token = 0;
  report_kind kind = report_kind::succeeded;
  std::string text;  ///< result bytes on success, the failure message otherwise
  /// For snoozed, the delay in ms; for failed, a retry delay that replaces
  /// the backoff's (job_context::fail's retry_after). -1: none.
  int64_t after_ms = -1;
  /// For spawned: the children.
  std::vector<job> children{};
};

/// A running job's progress report (job_context::progress).
struct progress_report {
  int64_t row = 0;
  int64_t token = 0;
  int64_t done = 0;
  int64_t total = 0;
  std::string message;
  int64_t at = 0;  ///< when the job reported it
  std::optional<int64_t> eta;
};

/// Log lines of one running attempt (job_context::log) and how many it
/// dropped so far, as its worker hands them over.
struct attempt_logs {
  int64_t row = 0;
  int64_t token = 0;  ///< the attempt's: lines of an attempt that is not the job's latest go
  std::vector<log_line> lines;
  int64_t dropped = 0;
};

/// A stored progress report, for its event.
struct progress_stored {
  job_id id;
  std::string type;
  std::string group;
  std::string recurring_id;
  progress_report report;
};

}  // namespace ergon::storage
