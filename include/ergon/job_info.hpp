// job_info: what `queue::job_info` returns, a snapshot of one job and its
// attempts. Also the job status and attempt outcome enums.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ergon/job_id.hpp"

namespace ergon {

/// Where a job is in its life. The numeric values are stored in the database
/// and are frozen.
enum class job_status : uint8_t {
  pending = 0,    ///< waiting for its run_at, or for a free worker
  running = 1,    ///< claimed by a worker; an attempt is in progress
  succeeded = 2,  ///< an attempt completed
  failed = 3,     ///< the last allowed attempt failed
  /// cancelled while pending, or while running (queue::cancel): its
  /// attempt stopped, failed or expired after the request
  cancelled = 4,
  expired = 5,    ///< its deadline passed before it could start
  /// waiting for the jobs it depends on (job::depends_on): it takes no slot
  /// and becomes pending when the last of them succeeds (docs/workflows.md)
  waiting = 6,
};

/// Number of job_status values; sizes per-status arrays.
inline constexpr size_t job_status_count = 7;

/// Returns "pending", "running", ...
const char* to_string(job_status s) noexcept;
std::ostream& operator<<(std::ostream& out, job_status s);

/// True for succeeded, failed, cancelled and expired.
inline bool is_final(job_status s) noexcept {
  return s != job_status::pending && s != job_status::running && s != job_status::waiting;
}

/// How one attempt ended. Stored in the database: values are frozen.
enum class attempt_outcome : uint8_t {
  running = 0,          ///< still in progress (only ever the latest attempt)
  succeeded = 1,        ///< the job code completed
  failed = 2,           ///< the job code failed or threw; the message says why
  expired = 3,          ///< timeout or heartbeat expiry; the message is "expired"
  process_restart = 4,  ///< the process died mid-attempt; found at reopen
  /// The remote worker running it went away (its process died or its
  /// connection dropped); the message is "worker lost".
  worker_lost = 5,
  /// The job was cancelled while this attempt ran (queue::cancel), and the
  /// code then stopped: it returned without complete(), or called fail().
  cancelled = 6,
  /// The job code failed and said not to retry (job_context::
  /// fail_permanently, or a thrown ergon::permanent_failure): the job
  /// ended `failed` with retries left. The message says why.
  failed_permanently = 7,
  /// The job code gave its slot to higher-priority work when asked
  /// (job_context::yield): the job went back to pending with its checkpoint
  /// and without spending a try. Never in the attempt history: the next
  /// attempt has the same try number (job_info::yields counts them).
  yielded = 8,
  /// The job code asked to run again later (job_context::snooze): the job
  /// went back to pending with its checkpoint, due after the delay. It
  /// spent no try: the snooze is in the attempt history, and the job gets
  /// one more try in return. The message says for how long.
  snoozed = 9,
  /// The job code submitted children (job_context::submit_children): the
  /// job waits for them with its checkpoint, without spending a try. The
  /// message says how many.
  spawned = 10,
};

/// Returns "running", "succeeded", ...
const char* to_string(attempt_outcome o) noexcept;
std::ostream& operator<<(std::ostream& out, attempt_outcome o);

/// A worker as the queue recorded it when it registered: who ran an
/// attempt (attempt_info::worker) and who is registered now (worker_info).
struct worker_identity {
  /// The queue's id for this registration, counting on across reopens and
  /// takeovers; a worker that joins again (a remote one whose connection
  /// dropped) gets a new one. 0: not recorded (the attempt ran before the
  /// queue recorded workers).
  int64_t id = 0;
  std::string name;  ///< worker_options::name
  /// The host name and process id of the worker's process. Empty and 0
  /// when the record is gone: the retention sweeper deletes a worker's
  /// record once it left longer ago than the longest retention.
  std::string host;
  int64_t pid = 0;
  /// For a worker on another node, its CAF node ("<node id>/<actor id>");
  /// empty for one in the queue's own process.
  std::string node;
};

/// How much a job's log line matters (job_context::log). Stored: values
/// are frozen.
enum class log_level : uint8_t {
  debug = 0,
  info = 1,
  warn = 2,
  error = 3,
};

/// Returns "debug", "info", "warn" or "error".
const char* to_string(log_level l) noexcept;
std::ostream& operator<<(std::ostream& out, log_level l);

/// A line that job code wrote to its attempt (job_context::log).
struct log_line {
  int32_t seq = 0;    ///< 0 for the attempt's first line
  int64_t at_ms = 0;  ///< when the code wrote it (the queue's clock)
  log_level level = log_level::info;
  std::string text;
};

/// One attempt at running a job.
struct attempt_info {
  int32_t try_number = 0;  ///< 1 for the first run
  int64_t started_at_ms = 0;
  std::optional<int64_t> finished_at_ms;  ///< empty while running
  attempt_outcome outcome = attempt_outcome::running;
  std::string message;  ///< failure text; empty on success
  /// The worker that ran it.
  worker_identity worker;
  /// The lines its code wrote (job_context::log), in order; those of a
  /// running attempt as far as the worker handed them over. Only
  /// queue::job_info and inspector::job_info read them: listings leave
  /// them empty.
  std::vector<log_line> logs;
  /// Lines dropped past worker_options::log_lines or log_bytes.
  int64_t logs_dropped = 0;
};

/// The last progress a running job reported (job_context::progress).
struct progress_info {
  int64_t done = 0;   ///< units done
  int64_t total = 0;  ///< units in all; 0: not known
  std::string message;
  int64_t reported_at_ms = 0;  ///< when the job reported it (the queue's clock)
  /// When the job should finish at its recent rate: extrapolated from the
  /// reports of the last minute. Empty without a total, or before two
  /// reports with different `done` values.
  std::optional<int64_t> eta_ms;
};

/// How the delay before a retry grows with the tries spent (n = 1 after
/// the first failed try).
enum class backoff_kind : uint8_t {
  exponential = 0,  ///< initial * multiplier^(n-1)
  constant = 1,     ///< initial, every time
  linear = 2,       ///< initial * n
};

/// Returns "exponential", "constant" or "linear".
const char* to_string(backoff_kind k) noexcept;
std::ostream& operator<<(std::ostream& out, backoff_kind k);

/// What a job does when a job it depends on ends failed, cancelled or
/// expired (job::on_dependency_failure). Stored: values are frozen.
enum class dependency_failure : uint8_t {
  /// It ends `cancelled` ("dependency <id> ended failed"), and so, each by
  /// its own policy, do the jobs that wait on it. The default.
  cancel = 0,
  /// It ends `failed` with that message, without running.
  fail = 1,
  /// The dependency counts as done: the job runs once the rest have ended.
  run = 2,
};

/// Returns "cancel", "fail" or "run".
const char* to_string(dependency_failure p) noexcept;
std::ostream& operator<<(std::ostream& out, dependency_failure p);

/// The delay between attempts: the kind's delay (see backoff_kind) times
/// (1 + U[0,1) * randomization), at most max_ms if that is set. The
/// defaults are exponential from 20 s, doubling, with 20% jitter and no cap.
/// A job whose backoff is left at these defaults takes its type's policy
/// if the queue has one (options::retry_policies).
struct backoff_policy {
  int64_t initial_ms = 20'000;
  double multiplier = 2.0;  ///< exponential only
  double randomization = 0.2;
  backoff_kind kind = backoff_kind::exponential;
  /// The longest delay, jitter included; 0: none (a delay stops at 100
  /// years regardless).
  int64_t max_ms = 0;

  bool operator==(const backoff_policy& o) const noexcept {
    return initial_ms == o.initial_ms && multiplier == o.multiplier
           && randomization == o.randomization && kind == o.kind && max_ms == o.max_ms;
  }
  bool operator!=(const backoff_policy& o) const noexcept { return !(*this == o); }
};

/// A snapshot of a job.
/// The disk I/O a job expects to do while it runs, in bytes: what the
/// dispatcher's I/O budget counts (admission_options::io_budget). Both
/// >= 0.
struct io_estimate {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
};

struct job_info {
  job_id id;
  std::string type;
  std::optional<std::string> name;
  std::optional<std::string> group;
  job_status status = job_status::pending;
  int32_t priority = 0;
  /// The priority the dispatcher ranks the job by right now: `priority`
  /// raised by aging for a pending job when the queue ages priorities
  /// (docs/scheduling.md); otherwise equal to `priority`. Never stored.
  int32_t effective_priority = 0;
  int32_t weight = 1;
  /// For a pending job: its weight exceeds the max_concurrency of every
  /// worker registered for its type, so none can take it until a larger
  /// worker starts (see event_kind::job_too_heavy). False while no worker of
  /// its type is registered. Never stored.
  bool too_heavy = false;
  int64_t run_at_ms = 0;
  /// When the job first became due; its aging clock starts here. Retries
  /// keep it; moving run_at of a job that never started restarts it.
  int64_t ready_since_ms = 0;
  /// The job must start before this time or it ends `expired`. Empty: no limit.
  std::optional<int64_t> deadline_ms;
  std::string payload;  ///< as submitted (or as last updated while pending)
  /// The payload the next attempt receives, if the job checkpointed.
  std::optional<std::string> checkpoint;
  /// What the succeeding attempt passed to complete() or returned, if
  /// anything, until result_expires_at_ms.
  std::optional<std::string> result;
  /// When the result is dropped (job::result_ttl_ms); empty: kept.
  std::optional<int64_t> result_expires_at_ms;
  int32_t tries = 0;  ///< attempts started so far (retry_failed keeps counting)
  /// Tries that don't count against max_retries: those spent before
  /// queue::retry_failed last requeued the job, and snoozes
  /// (job_context::snooze). The job may run max_retries + 1 attempts
  /// beyond them.
  int32_t tries_before_retry = 0;
  int32_t max_retries = 3;
  backoff_policy backoff;
  int64_t timeout_ms = 300'000;
  int64_t heartbeat_increment_ms = 120'000;
  int64_t added_at_ms = 0;
  std::optional<int64_t> started_at_ms;   ///< start of the latest attempt
  std::optional<int64_t> finished_at_ms;  ///< set once the status is final
  std::optional<int64_t> expires_at_ms;   ///< while running: attempt expiry
  std::vector<attempt_info> attempts;     ///< oldest first
  /// For an instance of a recurring job: the recurring job's id
  /// (recurring.hpp), and the time its schedule gave the instance (run_at
  /// may differ: a catch-up runs late, and update_pending may move it).
  std::optional<std::string> recurring_id;
  std::optional<int64_t> scheduled_at_ms;
  /// The job's unique key (job::unique_key), if it has one.
  std::optional<std::string> unique_key;
  /// When queue::cancel asked the running job to stop, if it did.
  std::optional<int64_t> cancel_requested_at_ms;
  /// The last progress report of the latest attempt, if any.
  std::optional<progress_info> progress;
  /// Attempts that yielded their slot to higher-priority work (job_context::
  /// yield); none of them spent a try.
  int32_t yields = 0;
  /// The I/O the job declared (job::expected_io).
  std::optional<io_estimate> expected_io;
  /// The jobs this one depends on (job::depends_on), oldest first; a
  /// dependency deleted by retention is no longer listed.
  std::vector<job_id> depends_on;
  /// The jobs that depend on this one, oldest first.
  std::vector<job_id> dependents;
  /// While `waiting`: how many of its dependencies have not ended yet.
  int32_t waiting_on = 0;
  /// What a dependency that ends unsuccessfully does to this job.
  dependency_failure on_dependency_failure = dependency_failure::cancel;
  /// For a child (job_context::submit_children): the job that spawned it.
  std::optional<job_id> parent;
  /// The job's tags (job::tags), kept with it for as long as its record.
  std::map<std::string, std::string> tags;
};

/// How a job this one depends on ended (job_context::dependency_results):
/// its id, its status, and its result if it succeeded with one.
struct dependency_result {
  job_id id;
  job_status status = job_status::succeeded;
  std::optional<std::string> result;
};

/// Number of jobs per status, indexed by `static_cast<size_t>(job_status)`.
struct status_counts {
  std::array<int64_t, job_status_count> by_status{};
  int64_t operator[](job_status s) const noexcept {
    return by_status[static_cast<size_t>(s)];
  }
  int64_t total() const noexcept;
};

}  // namespace ergon
