// job: what you submit, and job_update: what you may change while it waits.
//
// Build a job with ergon::job_builder (job_builder.hpp), which validates each
// field as you go; `queue::submit` validates again, so a hand-filled struct is
// safe too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"

namespace ergon {

/// Limits on field sizes, checked by `validate`.
inline constexpr size_t max_type_bytes = 256;  ///< type, name and group
inline constexpr int32_t max_weight = 1'000'000;
inline constexpr int32_t max_retries_limit = 100'000;

/// The largest time: a run_at, deadline or expiry here never comes.
inline constexpr int64_t never_ms = INT64_MAX;

/// What `submit` does with a job whose unique key is already held: by an
/// unfinished job, or by a finished one within its `unique_hold_ms`.
enum class unique_policy : uint8_t {
  /// Submit nothing and return the holder's id (a call that submits nothing
  /// is not an error).
  skip = 0,
  /// Cancel the pending holder ("replaced by <id>") and submit this job with
  /// a fresh id and a fresh aging clock. Errors, with nothing written:
  /// job_running if the holder runs, already_exists if it finished within
  /// its hold.
  replace = 1,
  /// Fail with already_exists naming the holder; nothing is written.
  reject = 2,
  /// Run once more after a holder that is running (taskmill's requeue,
  /// BullMQ's keepLastIfActive): this job is submitted to wait for the
  /// holder to end, however it ends, and takes the key. While it waits, a
  /// later requeue duplicate gives it its payload (the latest one runs) and
  /// returns its id. A holder that has not started, or that finished
  /// within its hold, is kept as with skip. Takes no depends_on: its place
  /// behind the holder is its dependency.
  requeue = 3,
};

const char* to_string(unique_policy p) noexcept;

/// Where a job's ttl counts from (job::ttl_from).
enum class ttl_start : uint8_t {
  /// Its run_at: the job must start within ttl of being due, and so must
  /// each retry.
  run_at = 0,
  /// Its first attempt's start (taskmill's ttl_from): the job may wait any
  /// time for its first start, and its retries must start within ttl of it.
  first_attempt = 1,
};

const char* to_string(ttl_start s) noexcept;

/// A job to submit. Defaults follow Effectum.
///
/// Times and durations never overflow. Any duration from its minimum up to
/// milliseconds::max() is accepted, and a time plus a duration saturates at
/// `never_ms`: delay(max) leaves the job pending until its run_at is updated,
/// ttl(max) sets no deadline, timeout(max) and heartbeat_increment(max) make
/// an attempt that never expires. Negative durations and times are
/// invalid_argument naming the field. Retry delays stop at 100 years.
struct job {
  /// Which runner handles it. Required, 1 to 256 bytes of UTF-8 without
  /// control characters, as are name and group (they reach metrics, logs
  /// and the dashboard).
  std::string type;
  /// Opaque bytes handed to the runner (see msgpack.hpp for typed payloads).
  std::string payload;
  /// Optional label for lookups with `queue::jobs_by_name`; need not be unique.
  std::optional<std::string> name;
  /// Optional fairness group (tenant, endpoint, ...).
  std::optional<std::string> group;
  /// Higher runs first.
  int32_t priority = 0;
  /// Capacity the job takes on a worker, 1 to max_weight.
  int32_t weight = 1;
  /// Earliest start, in ms since the epoch. Empty: now plus `delay_ms`.
  std::optional<int64_t> run_at_ms;
  /// Delay from submission when `run_at_ms` is empty; >= 0.
  int64_t delay_ms = 0;
  /// If set, the job must start within this many ms of its run_at, or it
  /// ends `expired` without running; with ttl_from first_attempt, the
  /// retries must start within it of the first attempt's start instead.
  std::optional<int64_t> ttl_ms;
  /// Where ttl_ms counts from. first_attempt needs a ttl_ms, and is kept
  /// neither by recurring jobs nor by PostgreSQL's inbox. The deadline is
  /// set when the job is first claimed (job_info::deadline_ms shows it);
  /// a snooze or yield drops it, as it does a deadline from run_at.
  ttl_start ttl_from = ttl_start::run_at;
  /// Attempts after the first one, 0 to max_retries_limit.
  int32_t max_retries = 3;
  backoff_policy backoff;
  /// An attempt fails as "expired" this long after it starts, unless
  /// heartbeats extend it. > 0.
  int64_t timeout_ms = 300'000;
  /// Each heartbeat (and checkpoint) extends the expiry to at least now plus
  /// this. > 0.
  int64_t heartbeat_increment_ms = 120'000;
  /// Optional unique key, 1 to 256 bytes: at most one job holds it. The
  /// database enforces it in the writer's transaction, so it holds under
  /// concurrent submitters, within a batch, and for every process that
  /// submits through one queue. A job holds its key from submission until
  /// it finishes (any final status), plus `unique_hold_ms`.
  std::optional<std::string> unique_key;
  /// What happens when the key is held (see unique_policy).
  unique_policy on_duplicate = unique_policy::skip;
  /// With on_duplicate skip or requeue: a holder that has not started yet
  /// (pending or waiting) and has a lower priority takes this job's
  /// (taskmill's priority upgrade). A running holder keeps its own.
  /// Needs `unique_key`.
  bool raise_holder_priority = false;
  /// How long the key stays held after the job finishes, >= 0 (0: free at
  /// once; milliseconds::max(): forever). Needs `unique_key`.
  int64_t unique_hold_ms = 0;
  /// How long the result of a successful attempt is kept, >= 0. Once it
  /// passes, the retention sweeper drops the result (job_info::result
  /// becomes empty) and keeps the job's row. Empty: kept as long as the
  /// job (options::retention); 0: not stored at all.
  std::optional<int64_t> result_ttl_ms;
  /// Optional idempotency key, 1 to 256 bytes: submitting a job again
  /// under a key that a job took within options::idempotency_window (24 h
  /// by default) returns that job's id and writes nothing, so a submit
  /// whose answer was lost (`unreachable`, as during a takeover) can be
  /// sent again safely. The same key with a job that differs in any other
  /// field is refused (already_exists, field "idempotency_key"). The
  /// window counts from the first submission; the id it returns may be a
  /// unique-key holder's, as the first submit returned.
  std::optional<std::string> idempotency_key;
  /// The disk I/O the job expects to do. Counted by the dispatcher's I/O
  /// budget, which defers jobs while the declared I/O of running jobs would
  /// pass its share of the disk's throughput (docs/scheduling.md). Empty:
  /// none, as is {0, 0}: the budget never defers the job. Not carried by
  /// recurring jobs.
  std::optional<io_estimate> expected_io;
  /// Jobs that must end before this one may run (docs/workflows.md). Until
  /// they have, the job is `waiting`: it takes no slot, and in the same
  /// transaction that ends the last of them it becomes pending (or ends,
  /// per on_dependency_failure). Each id must name a job in the queue
  /// (invalid_argument "depends_on" otherwise); one that already ended
  /// counts as it ended. At most max_dependencies in all, with
  /// depends_on_batch.
  std::vector<job_id> depends_on;
  /// The same for jobs of the same submit_batch, by their position in it:
  /// each must be smaller than this job's own position, so a batch can
  /// hold a whole graph and no cycle can be made (invalid_argument
  /// "depends_on_batch" for a position that is not earlier). A position
  /// means the job that position's submit returned: a job that a unique
  /// key skipped to, or an idempotency key's first job. Only in
  /// submit_batch (a single submit has no earlier jobs).
  std::vector<uint32_t> depends_on_batch;
  /// What a dependency that ends failed, cancelled or expired does.
  dependency_failure on_dependency_failure = dependency_failure::cancel;
  /// Key/value labels to find the job by (job_filter::tags and tag_prefix)
  /// and to act on many jobs at once (queue::cancel_jobs, retry_failed,
  /// delete_jobs): a tenant, a batch, a customer. At most max_tags; keys
  /// of 1 to max_tag_key_bytes and values of 0 to max_tag_value_bytes,
  /// UTF-8 without control characters (invalid_argument "tags" naming the
  /// key otherwise). Kept with the job for as long as its record
  /// (job_info::tags), through retries and retry_failed. Not carried by
  /// recurring jobs, nor by PostgreSQL's inbox.
  std::map<std::string, std::string> tags;
};

/// Limits on job::tags.
inline constexpr size_t max_tags = 16;
inline constexpr size_t max_tag_key_bytes = 64;
inline constexpr size_t max_tag_value_bytes = 256;

/// The most dependencies one job may name (depends_on plus
/// depends_on_batch).
inline constexpr size_t max_dependencies = 100'000;

/// Changes to a pending job; empty fields stay as they are.
struct job_update {
  std::optional<int32_t> priority;
  std::optional<int32_t> weight;
  std::optional<int64_t> run_at_ms;
  std::optional<std::string> payload;
  std::optional<int32_t> max_retries;
  std::optional<int64_t> timeout_ms;
  /// With a new `payload`: keep the checkpoint an earlier attempt stored,
  /// so the next attempt still resumes from it (a checkpoint replaces the
  /// payload an attempt receives; see job_context::checkpoint). By default
  /// a new payload drops the checkpoint, and the next attempt gets the new
  /// payload. Without `payload` it is an error (field "keep_checkpoint").
  bool keep_checkpoint = false;
};

/// Checks every field of `j`. On failure the status is `invalid_argument`
/// and `field()` names the first bad field ("type", "weight", ...).
/// `max_payload_bytes` of 0 skips the payload size check.
status validate(const job& j, size_t max_payload_bytes = 0);

/// Checks the fields set in `u` with the same rules as `validate(job)`.
/// An update that changes nothing is invalid (field "update").
status validate(const job_update& u, size_t max_payload_bytes = 0);

}  // namespace ergon
