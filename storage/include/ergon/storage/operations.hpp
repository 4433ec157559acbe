// Every database operation ergon performs, one function each, each in its own
// storage/src/<name>.cpp with its SQL as named constants at the top.
//
// Write operations assume the caller holds a transaction (db_writer wraps each
// request in a SAVEPOINT) and never read a clock: `now_ms` is an argument.
// A failed write returns an error and leaves rolling back to the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/listing.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/count_delta.hpp"
#include "ergon/storage/db.hpp"

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

// -- submit ----------------------------------------------------------------------

struct insert_jobs_args {
  std::vector<job> jobs;
  size_t max_payload_bytes = 0;  ///< 0: unlimited
  uint32_t id_tag = 0;           ///< the database's tag (read_meta)
  /// First free row id if the caller knows it (it holds the write lock and
  /// inserted last); 0 makes the operation read max(id) itself.
  int64_t next_row = 0;
};

/// What a submit did.
struct insert_jobs_result {
  /// Per input job, in order: its new id, or the id of the job that holds
  /// its unique key (unique_policy::skip, or a later job of the same batch
  /// that replaced it).
  std::vector<job_id> ids;
  /// The jobs inserted, all pending, in input order.
  std::vector<job_key> added;
  /// Pending jobs cancelled by unique_policy::replace.
  std::vector<job_key> replaced;
};

/// Validates every job, then inserts them as pending with fresh ids. A job
/// with a unique key meets a holder as its policy says; within the batch,
/// jobs are taken in order, as if submitted one by one. All-or-nothing:
/// an invalid job (invalid_argument), a rejected key (already_exists), or a
/// replace of a running holder (job_running) fails the call, naming the
/// job's position in a batch, and the caller rolls back.
result<insert_jobs_result> insert_jobs(db& d, const insert_jobs_args& args, int64_t now_ms);

// -- change a pending job ----------------------------------------------------------

struct update_pending_args {
  job_id id;
  job_update changes;
  size_t max_payload_bytes = 0;
};

struct key_change {
  job_key before;
  job_key after;
};

/// Applies `changes` to a pending job. Errors: invalid_argument, not_found,
/// job_running, job_finished. Nothing changes on error.
result<key_change> update_pending(db& d, const update_pending_args& args,
                                  int64_t now_ms);

struct cancel_pending_args {
  job_id id;
};

/// A cancelled job, and the next instance if it was one of a recurring job.
struct cancelled_job {
  job_key key;
  std::optional<job_key> next_instance;
};

/// Marks a pending job cancelled. Errors: not_found, job_running,
/// job_finished. Returns the key the job had.
result<cancelled_job> cancel_pending(db& d, const cancel_pending_args& args,
                                     int64_t now_ms);

/// What cancel_job did.
struct cancel_job_result {
  /// Set if the job was pending: it is cancelled now.
  std::optional<cancelled_job> pending;
  /// Set if it was running: the attempt asked to stop, and the job's key.
  /// Its end (stop, failure, expiry, recovery) will end the job
  /// `cancelled`; a success that commits first still wins.
  std::optional<attempt_ref> running;
  job_key key;
};

/// Cancels a pending job as cancel_pending does, or records a cancel
/// request (cancel_requested_at, kept from the first request) for a running
/// one. Errors: not_found, job_finished. Nothing changes on error.
struct cancel_job_args {
  job_id id;
};
result<cancel_job_result> cancel_job(db& d, const cancel_job_args& args, int64_t now_ms);

// -- run -------------------------------------------------------------------------------

struct claim_jobs_args {
  /// The jobs the dispatcher wants to start, with the tokens it chose.
  std::vector<attempt_ref> claims;
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

struct claim_jobs_result {
  std::vector<claimed_job> claimed;
  /// Rows that were no longer pending and due (cancelled, updated to a later
  /// run_at, or already claimed). Not an error.
  std::vector<int64_t> missed;
};

/// Marks each requested job running: try + 1, the attempt token, started_at
/// and expires_at = now + timeout. Only jobs still pending and due are taken.
result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms);

struct release_claims_args {
  std::vector<attempt_ref> attempts;
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

/// The backoff delay after the `failed_try`-th attempt (1-based) failed:
/// initial * multiplier^(failed_try-1) * (1 + u * randomization), with u in
/// [0, 1). Capped at 100 years so huge exponents can't overflow.
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
};

/// Puts claimed jobs whose code never started back to pending, as if the
/// claim had not happened: the try is not spent. An attempt that is no
/// longer running (it expired meanwhile) is skipped.
struct release_claims_result {
  std::vector<released_claim> released;
  /// Claims of jobs asked to stop (cancel_job): they end `cancelled`
  /// instead, so a cancel acknowledged before the release is not lost.
  std::vector<attempt_end> cancelled;
};
result<release_claims_result> release_claims(db& d, const release_claims_args& args,
                                             int64_t now_ms);

/// How job code ended an attempt.
enum class report_kind : uint8_t {
  succeeded = 0,           ///< complete(), or the code returned
  failed = 1,              ///< fail() or a throw: retried if tries are left
  failed_permanently = 2,  ///< fail_permanently(): the job fails at once
  stopped = 3,             ///< the code returned after a cancel request
  /// job_context::yield() after the dispatcher asked the attempt to make
  /// room (preemption): the job goes back to pending without spending a try
  yielded = 4,
};

/// One outcome reported by a worker: success with an optional result, or a
/// failure with a message.
struct attempt_report {
  int64_t row = 0;
  int64_t token = 0;
  report_kind kind = report_kind::succeeded;
  std::string text;  ///< result bytes on success, the failure message otherwise
};

struct finish_attempts_args {
  std::vector<attempt_report> reports;
  std::vector<double> randoms;  ///< one U[0,1) per report, for backoff jitter
  size_t max_result_bytes = 0;  ///< 0: unlimited
};

/// Records each report. A success ends the job `succeeded` (its result kept
/// for the job's result_ttl_ms); a failure retries it with backoff or, with
/// no retries left or failed_permanently, ends it `failed`; after a cancel
/// request every report but a success ends it `cancelled`. A report whose
/// token is not the running attempt's gets `stale_attempt` and changes
/// nothing. Per-report statuses come back in `statuses`; `ended` lists what
/// changed.
struct finish_attempts_result {
  std::vector<status> statuses;
  std::vector<attempt_end> ended;
};
result<finish_attempts_result> finish_attempts(db& d, const finish_attempts_args& args,
                                               int64_t now_ms);

struct heartbeat_args {
  int64_t row = 0;
  int64_t token = 0;
  /// Set for a checkpoint: the payload the next attempt receives.
  std::optional<std::string> checkpoint;
  size_t max_payload_bytes = 0;
};

/// Extends the running attempt: expires_at = max(expires_at, now +
/// heartbeat_increment); a checkpoint also stores the payload. Returns the new
/// expires_at. Errors, and nothing changes: stale_attempt; cancelled (a
/// cancel was requested: the attempt is no longer extended, so code that
/// ignores the request is fenced when it expires).
result<int64_t> heartbeat(db& d, const heartbeat_args& args, int64_t now_ms);

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

/// A stored progress report, for its event.
struct progress_stored {
  job_id id;
  std::string type;
  std::string group;
  std::string recurring_id;
  progress_report report;
};

/// Stores each report on its attempt's job, running or just ended (the
/// last report may commit after the outcome). A report of an attempt that
/// is not the job's latest is skipped. Returns the stored ones.
result<std::vector<progress_stored>> record_progress(db& d,
                                                     const std::vector<progress_report>& reports);

struct expire_attempt_args {
  int64_t row = 0;
  int64_t token = 0;
  double random = 0;  ///< U[0,1) for backoff jitter
};

/// Ends the running attempt as "expired" if its expires_at has passed, and
/// retries or fails the job. If a heartbeat moved expires_at past now, returns
/// `still_running` with the new time instead. A stale token is not an error:
/// the attempt already ended (`gone`).
struct expire_attempt_result {
  enum { expired, still_running, gone } what = gone;
  attempt_end ended;
  int64_t expires_at = 0;
};
result<expire_attempt_result> expire_attempt(db& d, const expire_attempt_args& args,
                                             int64_t now_ms);

struct expire_pending_args {
  std::vector<int64_t> rows;
};

struct expire_pending_result {
  std::vector<job_key> expired;
  /// Next instances of the recurring jobs among them.
  std::vector<job_key> next_instances;
};

/// Ends pending jobs whose deadline has passed as `expired`. Returns the keys
/// of the jobs it expired; rows no longer pending or not yet past their
/// deadline are skipped.
result<expire_pending_result> expire_pending(db& d, const expire_pending_args& args,
                                             int64_t now_ms);

struct recover_running_args {
  std::vector<int64_t> rows;  ///< jobs found running at open
  retry_timing timing = retry_timing::backoff;
  std::vector<double> randoms;  ///< one per row
};

struct lose_attempts_args {
  std::vector<attempt_ref> attempts;  ///< the lost worker's running attempts
};

/// A remote worker went away: each of its attempts that still runs ends as
/// "worker lost" and its job is retried at once (the try is spent), or ends
/// `failed` if it has no retries left. Attempts that already ended, or were
/// claimed again, are skipped.
result<std::vector<attempt_end>> lose_attempts(db& d, const lose_attempts_args& args,
                                               int64_t now_ms);

/// At open, every running job belongs to a dead process: its attempt ends as
/// "process restart", and the job is retried (immediately or with backoff) or
/// ends `failed` if it has no retries left.
result<std::vector<attempt_end>> recover_running(db& d, const recover_running_args& args,
                                                 int64_t now_ms);

// -- recurring jobs (recurring.hpp) ---------------------------------------------------

/// How put_recurring treats an id that exists, or doesn't.
enum class put_mode : uint8_t {
  add,     ///< error already_exists if it exists
  update,  ///< error not_found if it doesn't
  upsert,  ///< either
};

struct put_recurring_args {
  recurring_job job;
  put_mode mode = put_mode::add;
  size_t max_payload_bytes = 0;
};

struct put_recurring_result {
  /// The unfinished instance's id (nil if the schedule has no time left).
  job_id instance;
  /// A new recurring job's first instance (also after an update found none).
  std::optional<job_key> created;
  /// The pending instance, given the new template (and, if the schedule
  /// changed, the schedule's next time after now).
  std::optional<key_change> changed;
  /// A pending instance cancelled because the template changed its type,
  /// group or weight; `created` replaces it.
  std::optional<job_key> superseded;
};

/// Adds or updates a recurring job, with its instance, in one transaction.
/// A new one whose deleted namesake's instance still runs adopts it.
/// A new one gets its first instance at the first slot after now (or now,
/// with run_now). An update that keeps the schedule and zone keeps the
/// pending instance's time; one that changes either moves it to the new
/// schedule's first slot after now, and later slots count from now. The
/// template applies to the pending instance and later ones (one whose type,
/// group or weight changes is cancelled and replaced by a new instance at
/// the same time); a running instance finishes as it started. With no slot
/// left before the year 10000 there is no instance (`instance` is nil). Errors: invalid_argument (validate),
/// already_exists (add), not_found (update).
result<put_recurring_result> put_recurring(db& d, const put_recurring_args& args,
                                           int64_t now_ms);

struct delete_recurring_args {
  std::string id;
};

/// Deletes a recurring job. Its pending instance is cancelled (and
/// returned); a running instance finishes, and no instance follows it.
/// Error: not_found.
result<std::optional<job_key>> delete_recurring(db& d, const delete_recurring_args& args,
                                                int64_t now_ms);

/// A recurring job with its last and unfinished instance. Error: not_found.
result<recurring_info> read_recurring(db& d, const std::string& id);

/// Recurring jobs whose id starts with `prefix` (byte for byte: % and _ are
/// ordinary characters), ordered by id. An empty prefix lists all.
result<std::vector<recurring_info>> list_recurring(db& d, const std::string& prefix);

struct reconcile_recurring_result {
  std::vector<key_change> moved;   ///< skip-mode instances moved past missed slots
  std::vector<job_key> created;    ///< instances for recurring jobs that had none
};

/// At open, in the recovery transaction: a pending instance of a recurring
/// job in catch_up::skip mode that missed a later slot while the queue was
/// down moves to the first slot after now; a recurring job with no
/// unfinished instance (its time zone was missing from the tz database
/// when the last one ended) gets one. In catch_up::once mode a late
/// instance stays due: it is the one catch-up run.
result<reconcile_recurring_result> reconcile_recurring(db& d, int64_t now_ms);

// -- listings, dead letters and retention ---------------------------------------------

/// One page of the jobs `filter` matches (listing.hpp), with their attempts.
/// Served by one range of an index or of the row ids (job_filter_sql.hpp);
/// reads rows of that range until `page.limit` match. Errors:
/// invalid_argument ("limit", "after", or a filter field).
result<job_page> list_jobs(db& d, const job_filter& filter, const page_request& page);

/// The statement list_jobs runs for `filter`, for EXPLAIN QUERY PLAN.
const char* list_jobs_sql(const job_filter& filter, bool newest_first);

struct retry_failed_args {
  /// One job (its errors are the call's), or else every failed job that
  /// `filter` matches (its status is taken as failed).
  std::optional<job_id> id;
  job_filter filter;
};

struct retry_failed_result {
  std::vector<job_key> requeued;  ///< now pending, due now
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

/// A job deleted by delete_finished.
struct deleted_job {
  int64_t row = 0;
  std::string type;
  job_status status = job_status::succeeded;
};

struct delete_finished_args {
  job_filter filter;  ///< filter.status must be a final status
  /// Only rows with ids after this one (a sweep's cursor; 0: from the start).
  int64_t after_row = 0;
  /// Only rows below this id (INT64_MAX: no bound).
  int64_t before_row = INT64_MAX;
  size_t limit = 500;
};

struct delete_finished_result {
  std::vector<deleted_job> deleted;
  /// The highest row the statement looked at if it stopped at `limit`, for
  /// the next call's after_row; 0 when it found fewer (the range is done).
  int64_t resume_after = 0;
};

/// Deletes up to `limit` finished jobs that `filter` matches, with their
/// attempts, lowest ids first. First records the highest row id in
/// meta.row_high_water, so that new rows never reuse a deleted row's id
/// (it could lie below the unfinished low mark). Error: invalid_argument
/// (no final status, or a filter field).
result<delete_finished_result> delete_finished(db& d, const delete_finished_args& args);

/// The first row id whose job was submitted at or after `at_ms`, found by
/// binary search over the row ids (submission times grow with them, up to
/// clock jumps); one past the highest row if none.
result<int64_t> first_row_submitted_at_or_after(db& d, int64_t at_ms);

struct sweep_finished_args {
  job_status status = job_status::succeeded;  ///< a final status
  int64_t cutoff_ms = 0;  ///< jobs that finished before this go
  int64_t after_row = 0;  ///< the previous step's resume_after
  size_t limit = 500;
};

/// One step of the retention sweeper: delete_finished for jobs of `status`
/// that finished before the cutoff, among the rows submitted before it
/// (first_row_submitted_at_or_after bounds the range, so a step never reads
/// the young end of the table).
result<delete_finished_result> sweep_finished(db& d, const sweep_finished_args& args);

/// Drops up to `limit` results whose result_expires_at has passed; the
/// jobs stay. Returns how many.
result<int64_t> drop_expired_results(db& d, int64_t now_ms, size_t limit);

// -- job counts ----------------------------------------------------------------------

/// Adds the finished statuses of `delta` (succeeded, failed, cancelled,
/// expired) to the finished_counts table: one UPSERT per (type, status) whose
/// change is not zero. Pending and running changes are skipped, so submits,
/// claims and retries cost nothing here. Runs in the caller's transaction,
/// which must be the one that finished the jobs: the table then always equals
/// a count of the finished jobs.
status add_finished_counts(db& d, const count_delta& delta);

// -- reads (any connection) --------------------------------------------------------

/// The job with this id, with its attempts. Error: not_found.
result<job_info> read_job(db& d, const job_id& id);

/// Jobs with this name, oldest first (possibly none), at most `limit`.
result<std::vector<job_info>> read_jobs_by_name(db& d, const std::string& name, size_t limit);

/// Job counts per (type, status).
struct type_status_count {
  std::string type;
  job_status status = job_status::pending;
  int64_t count = 0;
};

/// Pending and running jobs per (group, status), jobs without a group under
/// "": a range scan from the unfinished low mark.
struct group_status_count {
  std::string group;
  job_status status = job_status::pending;
  int64_t count = 0;
};
result<std::vector<group_status_count>> count_unfinished_by_group(db& d);

/// Where count_jobs gets its numbers.
enum class count_source : uint8_t {
  /// The finished_counts table (schema version 2) plus a range scan of the
  /// unfinished jobs from the low mark: the cost grows with the jobs added
  /// since the last open, not with the finished history.
  table,
  /// A GROUP BY over every job: about 1.3 ms per 1,000 jobs. For files older
  /// than version 2, and for checking the table.
  scan,
};

/// Job counts per (type, status), ordered by type then status, leaving out
/// pairs with no jobs; both sources give the same answer. Fails only with
/// storage errors, including when asked for the table of a version-1 file (it
/// has none: use `scan`).
result<std::vector<type_status_count>> count_jobs(db& d,
                                                  count_source from = count_source::table);

/// Per-database values kept in the meta table.
struct meta_values {
  uint32_t id_tag = 0;
  int64_t unfinished_low_mark = 0;
};
result<meta_values> read_meta(db& d);

/// Jobs that are pending or running, found by scanning rows from the low
/// mark up (no status index: see schema.cpp).
struct unfinished_jobs {
  std::vector<job_key> pending;
  std::vector<job_key> running;
  /// The lowest unfinished row id, or one past the highest row if none.
  int64_t low_mark = 0;
};
result<unfinished_jobs> load_unfinished(db& d, int64_t from_row);

/// Records that no unfinished job has a row id below `mark`. Write
/// operation. Never lowers the stored mark.
status raise_low_mark(db& d, int64_t mark);

/// Records that the job at `row` is unfinished again (retry_failed), so
/// the low mark is at most `row`. Write operation.
status lower_low_mark(db& d, int64_t row);

/// Moves the low mark up past finished jobs while the queue runs, so the next
/// open scans the unfinished jobs, not the history since the previous open.
/// Reads at most `max_rows` rows from the mark and stops at the first pending
/// or running one. Returns the mark now stored. Write operation, in the
/// caller's transaction. Correct because a finished job never becomes
/// unfinished again and new jobs get higher row ids; an operation that breaks
/// either must lower the mark.
result<int64_t> advance_low_mark(db& d, int64_t max_rows);

struct backup_result {
  int64_t pages = 0;
  int64_t bytes = 0;
};
/// Copies the database of `source` (a read-only connection will do: the
/// source is only read) into a new file at `out`, with `file_mode`, as one
/// consistent snapshot; then checks the copy (quick_check) and only then
/// gives it its name, so `out` is never a partial copy. Errors:
/// already_exists (`out` exists; nothing is overwritten), invalid_argument
/// ("out": empty), io_error or read_only (can't write beside `out`),
/// corrupt (the copy fails its check; it is removed), busy.
result<backup_result> backup_to(db& source, const std::string& out, uint32_t file_mode);

// -- transactions ------------------------------------------------------------------

/// RAII SAVEPOINT: rolls back unless `release()` succeeds.
class savepoint {
 public:
  explicit savepoint(db& d);
  savepoint(const savepoint&) = delete;
  savepoint& operator=(const savepoint&) = delete;
  ~savepoint();
  /// Whether the SAVEPOINT statement itself succeeded.
  const status& begin_status() const noexcept { return begin_; }
  /// Makes the changes part of the enclosing transaction.
  status release();

 private:
  db& db_;
  status begin_;
  bool done_ = false;
};

}  // namespace ergon::storage
