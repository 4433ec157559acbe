// queue: a durable job queue in one SQLite file.
//
//   auto q = ergon::queue::open("jobs.db");
//   if (!q) { std::cerr << q.error().to_string() << '\n'; return 1; }
//   auto id = q->submit(*ergon::job_builder("resize").payload("img-42").build());
//   auto info = q->job_info(*id);   // status, tries, attempts, payloads
//   q->close();
//
// A job is durable once submit returns: it survives a crash of the process.
// All methods are thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/event.hpp"
#include "ergon/inspector.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/listing.hpp"
#include "ergon/options.hpp"
#include "ergon/recurring.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/worker.hpp"

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace ergon {

/// Ends its subscription when destroyed or cancelled. Move-only.
class subscription {
 public:
  subscription() = default;
  explicit subscription(std::function<void()> cancel) : state_(std::make_shared<state>()) {
    state_->cancel = std::move(cancel);
  }
  subscription(subscription&& other) noexcept = default;
  subscription& operator=(subscription&& other) noexcept {
    if (this != &other) {
      cancel();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~subscription() { cancel(); }
  /// Stops deliveries. Once it returns, the callback is not running and is
  /// never called again, so what it captured may be destroyed. Calling it
  /// from inside the callback is allowed.
  void cancel() {
    if (!state_)
      return;
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> guard{state_->mtx};
      f = state_->cancel;
    }
    if (f)
      f();
  }

 private:
  // A callback cancelling itself runs on the event thread while the owner
  // may cancel or destroy the subscription, so the event thread never writes
  // the subscription object. Every cancel() runs the function: a later one
  // by the owner still waits for a call that cancelled itself to return.
  struct state {
    std::mutex mtx;
    std::function<void()> cancel;
  };
  std::shared_ptr<state> state_;
};

/// A handle to an open queue. Move-only; the destructor closes it. A
/// moved-from handle answers every call with `closed` (counts() gives zeros,
/// subscribe() an inactive subscription, max_wait() nothing); clock()
/// throws std::logic_error, having nothing to refer to.
class queue {
 public:
  /// Opens (creating if needed) the database at `path` and starts the queue in
  /// an actor system of its own. The queue owns the file until it closes:
  /// another open of it, from this process or another, fails with `busy`
  /// naming the owner's pid and host, and changes nothing. A killed owner
  /// never blocks the next open (the lock dies with its process), which then
  /// recovers the jobs it left running. Errors: invalid_argument ("path" is
  /// empty or ":memory:"), busy (owned by another queue, or locked by another
  /// program for longer than busy_timeout), corrupt (another program's SQLite
  /// file, left byte for byte unchanged; not SQLite; or from a newer ergon),
  /// read_only (file not writable), io_error (WAL unavailable, I/O failure).
  static result<queue> open(const std::string& path, options opts = {});

  /// Opens `path` read-only, beside its owner if it has one (inspector.hpp).
  /// Errors: invalid_argument ("path"), io_error (no such file), corrupt (not
  /// an ergon database, or no queue has opened it yet).
  static result<inspector> inspect(const std::string& path);

  /// Same, but spawns the queue's actors in `sys`, which must outlive the
  /// queue. Call `register_types` on its config first if workers in other
  /// processes will connect.
  static result<queue> open(caf::actor_system& sys, const std::string& path,
                            options opts = {});

  /// Adds ergon's message types to a config you build yourself.
  static void register_types(caf::actor_system_config& cfg);

  queue(queue&&) noexcept;
  queue& operator=(queue&&) noexcept;
  ~queue();

  /// Submits one job and returns its id once it is committed to disk. A job
  /// with dependencies (job::depends_on) is committed `waiting`, or ends at
  /// once if one of them already ended unsuccessfully (see
  /// job::on_dependency_failure). Errors: invalid_argument (names the
  /// field: "depends_on" for an id that names no job), storage_full,
  /// read_only, busy, io_error, closed.
  result<job_id> submit(job j);

  /// Submits several jobs in one transaction: all are committed, or none is.
  /// One invalid job fails the call with invalid_argument, and its message
  /// gives the job's position. Returns ids in input order. A job may
  /// depend on earlier jobs of the batch by position
  /// (job::depends_on_batch), so a whole graph goes in at once.
  result<std::vector<job_id>> submit_batch(std::vector<job> jobs);

  /// A snapshot of the job with its attempt history. Error: not_found.
  result<ergon::job_info> job_info(const job_id& id) const;

  /// Jobs submitted with this name, oldest first, at most `limit` (1 to
  /// max_page_size); empty if none. For more, page through list_jobs with
  /// job_filter::name. Errors: invalid_argument ("limit", or "name" over
  /// 256 bytes), closed.
  result<std::vector<ergon::job_info>> jobs_by_name(const std::string& name,
                                                    size_t limit = max_page_size) const;

  /// One page of the jobs `filter` matches, with their attempts, in
  /// submission order (listing.hpp). Each filter is served by one range of
  /// an index or of the row ids, never a scan of the table: by name; by
  /// failed, cancelled or expired status (a partial index); by pending or
  /// running status (the rows from the oldest unfinished job on); else by
  /// row id from the cursor. Other fields filter the rows of that range, so
  /// a page reads rows until `limit` match. Errors: invalid_argument
  /// ("limit", "after", or the filter's field), closed.
  result<job_page> list_jobs(const job_filter& filter, const page_request& page = {}) const;

  /// Dead letters: list_jobs for jobs that ended `failed` (filter.status is
  /// ignored), each with every attempt's outcome and message.
  result<job_page> list_failed(job_filter filter, const page_request& page = {}) const;

  /// Puts a failed job back to pending, due now, with fresh tries: it may
  /// run max_retries + 1 more attempts, counted on from its tries so far.
  /// Its history stays, with the attempt that failed it; its deadline,
  /// result and progress go; it takes its unique key again. An instance of
  /// a recurring job runs once more on its own (its recurring_id is
  /// cleared; the schedule's chain goes on without it). A job with
  /// dependencies that have not ended waits for them again (status
  /// waiting; those that ended unsuccessfully no longer stop it), and jobs
  /// still waiting on this one wait for its rerun. Errors: not_found,
  /// invalid_argument ("id": it is pending), job_running, job_finished (it
  /// succeeded, was cancelled or expired), already_exists (another job
  /// holds its unique key now; it stays failed), closed.
  status retry_failed(const job_id& id);

  /// Runs a finished job again (taskito's replay): a job that succeeded,
  /// failed, was cancelled or expired goes back to pending as retry_failed
  /// puts a failed one back, with fresh tries, its history (the attempt
  /// that ended it joins it) and its payload, and without its result. A
  /// `requeued` event says so. Errors: not_found, invalid_argument ("id":
  /// it is pending or waiting), job_running, already_exists (another job
  /// holds its unique key now; it stays as it was), closed.
  status replay(const job_id& id);

  /// retry_failed for every failed job `filter` matches (filter.status is
  /// ignored): a bulk action (options::bulk), in steps of its own
  /// transactions that keep to a share of the writer's time, over the jobs
  /// there were when it began; on error (closed, when the queue closes
  /// meanwhile) the steps before stay done and the message says what they
  /// did. Jobs whose unique key another job holds stay
  /// failed and are listed in the summary. Within a step a job waits for
  /// the dependencies retried with it; one retried in a later step (a
  /// child, whose id is higher) does not make it wait. Errors:
  /// invalid_argument (the filter), closed, storage errors.
  result<retry_summary> retry_failed(job_filter filter);

  /// Deletes the failed jobs `filter` matches (filter.status is ignored),
  /// with their attempts, logs and tags, and returns how many: a bulk
  /// action as retry_failed's. Errors: invalid_argument, closed.
  result<int64_t> purge_failed(job_filter filter);

  /// Cancels every pending, waiting or running job `filter` matches, as
  /// cancel() does each: a bulk action as retry_failed's. Jobs submitted
  /// after it began are left alone (the next instance of a recurring job
  /// it cancelled, say). A running job already asked to stop is not
  /// counted again. Errors: invalid_argument ("status" final, or another
  /// field), closed.
  result<cancel_summary> cancel_jobs(job_filter filter);

  /// Deletes every finished job `filter` matches (any final status when
  /// filter.status is empty), with its attempts, logs and tags, and
  /// returns how many: a bulk action as retry_failed's. Unfinished jobs
  /// stay: cancel them first. Errors: invalid_argument ("status" not
  /// final, or another field), closed.
  result<int64_t> delete_jobs(job_filter filter);

  /// purge_failed for jobs that failed more than `older_than` ago (on the
  /// queue's clock). Error: invalid_argument ("older_than" negative).
  result<int64_t> purge_failed(std::chrono::milliseconds older_than);

  /// Waits until the job reaches a final status (succeeded, failed,
  /// cancelled, expired) and returns it: job_info::status, and
  /// job_info::result for a success. Returns at once for a job that already
  /// finished. Nothing polls: the commit that finishes the job wakes the
  /// wait. A timeout of 0 or less only looks; milliseconds::max() waits
  /// without limit. Errors: not_found (no such job), timeout (still pending
  /// or running; the job is unaffected), closed (the queue closed while
  /// waiting).
  result<ergon::job_info> wait(const job_id& id, std::chrono::milliseconds timeout) const;

  /// The same without blocking: `done` is called exactly once with what
  /// wait() would return, on a thread of the queue's actor system, so it
  /// must return quickly. A callback that throws is not reported further.
  void wait_async(const job_id& id, std::chrono::milliseconds timeout,
                  std::function<void(result<ergon::job_info>)> done) const;

  /// Number of jobs in each status, from counters kept current by every commit.
  status_counts counts() const;

  /// Changes fields of a pending job. Errors: invalid_argument (also "id"
  /// for a job still waiting for its dependencies), not_found,
  /// job_running, job_finished. Nothing changes on error.
  status update_pending(const job_id& id, const job_update& changes);

  /// Cancels a pending or waiting job; it will never run. The jobs waiting
  /// on it end or run as their on_dependency_failure says, in the same
  /// transaction. Errors: not_found, job_running, job_finished.
  status cancel_pending(const job_id& id);

  /// Cancels a job, pending or running. A pending job is cancelled as by
  /// cancel_pending. For a running job the request is committed, then its
  /// context's cancelled() turns true and wait_cancelled() wakes; a claim
  /// that has not started never starts. The attempt then ends the job
  /// `cancelled` however it ends (the code returns or fails, the attempt
  /// expires, the worker is lost, or the process dies), without a retry;
  /// only a complete() that commits first still succeeds. Heartbeats are
  /// refused from the request on (error::cancelled), so code that ignores
  /// it is fenced when its attempt expires. Cancelling again is not an
  /// error. Errors: not_found, job_finished.
  status cancel(const job_id& id);

  /// Starts a worker that runs jobs of the types in `opts.runners`.
  /// Errors: invalid_argument (no runners, a bad type name, concurrency
  /// limits out of range, progress_interval out of range), closed.
  result<worker> start_worker(worker_options opts);

  /// Calls `f` for every event from now on (see event.hpp for what runs
  /// where). Keep the subscription alive as long as you want events.
  subscription subscribe(std::function<void(const event&)> f);

  // -- recurring jobs (see recurring.hpp and docs/recurring.md) --------------

  /// Adds a recurring job and its first instance in one transaction, and
  /// returns the instance's id. If a deleted recurring job of the same id
  /// still has an instance running, the new one adopts it instead: it
  /// finishes as it started, and the new schedule follows it. Errors: invalid_argument (as
  /// validate(recurring_job) names it; nothing is written), already_exists
  /// (a recurring job with this id exists), closed, and storage errors.
  result<job_id> add_recurring(const recurring_job& r);

  /// Replaces a recurring job's schedule, zone, catch-up mode and template.
  /// Keeping the schedule and zone keeps the pending instance's time;
  /// changing either moves it to the new schedule's first time after now.
  /// The template applies to the pending instance and later ones; a
  /// pending instance whose type, group or weight changes is cancelled and
  /// replaced by a new one at the same time (a new id). A running instance
  /// finishes as it started. Returns the unfinished instance's id (nil if
  /// the schedule has no time left before the year 10000). Errors:
  /// invalid_argument, not_found (no such id).
  result<job_id> update_recurring(const recurring_job& r);

  /// add_recurring if the id is new, update_recurring otherwise.
  result<job_id> upsert_recurring(const recurring_job& r);

  /// Deletes a recurring job. Its pending instance is cancelled; a running
  /// instance finishes, and nothing follows it. Error: not_found.
  status delete_recurring(const std::string& id);

  /// Pauses one recurring job: no instance of it starts until the pause
  /// ends. Until resumed (no duration, or milliseconds::max()), its pending
  /// instance is cancelled and none is made; with a duration, the pending
  /// instance moves to the first slot at or after the pause's end. A
  /// running instance finishes; the next one follows the pause. Slots the
  /// pause covers are skipped, whatever catch_up says. The pause is stored
  /// with the recurring job (recurring_info::paused_since_ms), so it
  /// survives a reopen and a takeover; an update keeps it. Pausing again
  /// replaces the end. Each call that changes it is a control_changed
  /// event with `recurring_id` set, counted in
  /// metrics_snapshot::control_changes. Errors: invalid_argument ("id"
  /// empty, too long or not UTF-8; "duration" not positive), not_found,
  /// closed.
  status pause_recurring(const std::string& id,
                         std::optional<std::chrono::milliseconds> duration = std::nullopt);
  /// Ends a recurring job's pause: its next instance is made for the first
  /// slot after now. Resuming one that is not paused changes nothing and is
  /// not an error. Errors: as pause_recurring.
  status resume_recurring(const std::string& id);

  /// The recurring job with its template, last run and next instance.
  /// Error: not_found.
  result<ergon::recurring_info> recurring_info(const std::string& id) const;

  /// Recurring jobs whose id starts with `prefix` byte for byte (% and _
  /// are ordinary characters; an empty prefix lists all), ordered by id.
  result<std::vector<ergon::recurring_info>> list_recurring(const std::string& prefix = {}) const;

  // -- fair scheduling (see scheduling.hpp and docs/scheduling.md) -----------

  // Run-time controls: pauses, weights, slots, caps and rate limits changed
  // while the queue runs. Each is saved in the database before the call
  // returns, so it survives a reopen, a restart and a takeover by a standby
  // (a timed pause keeps its end); each is a control_changed event and
  // counts in metrics_snapshot::control_changes. A call that changes
  // nothing stored (resuming what is not paused) is not an error. Every
  // one may also fail with what the database answers (storage errors), or
  // `closed`. docs/scheduling.md, "Run-time controls".

  /// Changes a group's weight (set_group with only a weight). The
  /// allocation is recomputed at once. Error: invalid_argument ("weight"
  /// below 1 or above max_weight, "group" longer than 256 bytes, or "name"
  /// past max_controls).
  status set_group_weight(const std::string& group, int32_t weight);

  /// Restores every group's configured weight.
  status reset_group_weights();

  /// Changes a group's settings: the fields of `change` that are set
  /// replace the group's values (see settings_change). A group with no jobs
  /// yet may be set ahead. Errors: invalid_argument naming the field
  /// ("group", "weight", "min_slots", "max_running", "rate.per_second",
  /// "rate.burst", "settings" when none is set, or "name" when max_controls
  /// controls are in force and this would add one).
  status set_group(const std::string& group, const settings_change& change);

  /// The same for a job type: max_running and rate only (invalid_argument
  /// "weight" or "min_slots" otherwise).
  status set_type(const std::string& type, const settings_change& change);

  /// Back to what scheduling_options configured for the group or type (its
  /// pause, if any, stays).
  status reset_group(const std::string& group);
  status reset_type(const std::string& type);

  /// Changes the concurrency of every worker named `name`
  /// (worker_options::name), local and remote, running now or registering
  /// later: `change.max_running` replaces their max_concurrency, up or down (a
  /// min_concurrency below a worker's own max stays, capped by the new
  /// one; prefetch stays). Running jobs are not
  /// stopped: a worker lowered below what it runs starts nothing until it
  /// is under, and gives back unstarted claims heavier than the new max. Each worker takes it as soon as the message reaches it, and
  /// its next report tells the dispatcher. Errors: invalid_argument
  /// ("worker" empty, too long, not UTF-8 or with control characters;
  /// "max_running" missing or not 1 to max_weight; "weight", "min_slots"
  /// or "rate", which a worker has not; "name" past max_controls).
  status set_worker(const std::string& name, const settings_change& change);

  /// Back to each worker's own worker_options::max_concurrency.
  status reset_worker(const std::string& name);

  /// Stops starting any job (running ones continue), for `duration` or
  /// until resume_queue or resume_all; aging stands still meanwhile.
  /// Error: invalid_argument ("duration" not positive).
  status pause_queue(std::optional<std::chrono::milliseconds> duration = std::nullopt);
  status resume_queue();

  /// Every run-time control in force, by scope and name: what a reopen
  /// would restore.
  result<std::vector<control_info>> controls() const;

  /// Stops starting jobs of `group` (running ones continue) and gives its
  /// share to other groups. With a duration, it resumes by itself after it
  /// (on the queue's clock); a duration so long that its end passes never_ms
  /// (milliseconds::max()) lasts until resumed. Its jobs' aging clocks stand
  /// still meanwhile. A group with no jobs yet may be paused ahead: its
  /// first job finds it paused. At most max_paused_ahead such names (and as
  /// many types) are held; resuming one forgets it.
  /// Error: invalid_argument ("duration" not positive; "group" empty, too
  /// long, not UTF-8 or with control characters, or one name past
  /// max_paused_ahead), closed.
  status pause_group(const std::string& group,
                     std::optional<std::chrono::milliseconds> duration = std::nullopt);
  status resume_group(const std::string& group);

  /// The same for a job type.
  status pause_type(const std::string& type,
                    std::optional<std::chrono::milliseconds> duration = std::nullopt);
  status resume_type(const std::string& type);

  /// Closes the circuit breaker of job type `type`
  /// (scheduling_options::breakers) and forgets its failures: its jobs start
  /// again at once. Closing a closed breaker is not an error. Errors:
  /// invalid_argument ("type" empty, too long, not UTF-8 or with control
  /// characters), not_found (the type has no breaker), closed.
  status reset_breaker(const std::string& type);

  /// Ends every pause, of the queue, groups and types, with names paused
  /// ahead among them, and returns how many there were (the queue's own
  /// pause is listed in metrics().controls, the others in pauses too). metrics().pauses lists them
  /// before. Error: closed.
  result<int64_t> resume_all();

  /// The longest a job of `base_priority` waits before aging makes it urgent
  /// (or lifts it to the ceiling): grace + steps * interval. Empty without
  /// aging. See docs/scheduling.md for what the bound assumes.
  std::optional<std::chrono::milliseconds> max_wait(int32_t base_priority) const;

  /// Scheduling metrics plus job counts per status and type.
  result<metrics_snapshot> metrics() const;

  /// Every registered worker, local and remote, in id order: who it is,
  /// its types, what it runs against its capacity, its credit and its last
  /// report. Error: closed.
  result<std::vector<worker_info>> workers() const;

  /// Stops the queue: hands out no more jobs, waits up to `timeout` for
  /// running jobs to finish and their outcomes to commit, then closes the
  /// database. Afterwards jobs are only pending or in a final state, except
  /// that on `timeout` the jobs still running stay marked running; they are
  /// recovered (retried) when the file is opened again. Later calls fail with
  /// `closed`; closing twice is not an error.
  status close(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// The port the queue listens on (options::listen). Errors:
  /// invalid_argument if it does not listen, closed once it closed.
  result<uint16_t> listening_port() const;

  /// The port of the queue's HTTP endpoint (options::http). Errors:
  /// invalid_argument if it has none, closed once it closed.
  result<uint16_t> http_port() const;

  /// The clock this queue reads.
  ergon::clock& clock() const;


 private:
  struct impl;
  friend struct runtime_access;  // the runtime's own code (runtime/src)
  explicit queue(std::shared_ptr<impl> p) noexcept;
  // Shared with the queue actor that listens for other processes, if any.
  std::shared_ptr<impl> impl_;
};

}  // namespace ergon
