// worker: runs job code. Start one with queue::start_worker.
//
//   ergon::worker_options opts;
//   opts.max_concurrency = 8;
//   opts.runners["send_email"] = [](ergon::job_context& ctx) { send(ctx.payload()); };
//   auto w = q.start_worker(std::move(opts));
//   ...
//   w->stop(std::chrono::seconds(10));  // finish running jobs, take no more
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "ergon/error.hpp"
#include "ergon/job_context.hpp"

namespace ergon {

/// Hooks around every job a worker runs (worker_options::middleware), for
/// tracing, logging and metrics without touching each runner. Each may be
/// empty. They run on the job's thread: `before` ahead of the job code,
/// then `after` once the code returned, or `on_error` once it threw (with
/// what it threw, as text); the exception then fails the attempt as it
/// would without hooks (a permanent_failure stays one). With several,
/// `before` runs in order and the others in reverse, like nested scopes. A
/// hook that throws changes nothing for the job or the other hooks: it is
/// logged to stderr and counted in worker_stats::middleware_errors, as a
/// throwing subscriber is counted and skipped.
struct job_middleware {
  std::function<void(job_context&)> before;
  std::function<void(job_context&)> after;
  std::function<void(job_context&, const std::string& error)> on_error;
};

/// How a worker runs.
struct worker_options {
  /// For diagnostics: recorded with each attempt it runs
  /// (attempt_info::worker) and shown by queue::workers. Up to
  /// max_type_bytes of UTF-8 without control characters; may be empty.
  std::string name = "worker";

  /// Job code per type; the worker serves exactly these types. Required.
  std::map<std::string, job_handler> runners;

  /// Most weight units running at once. A job of weight w takes w units, and
  /// a job heavier than this is never given to this worker.
  /// queue::set_worker changes it for every worker of this name while the
  /// queue runs.
  int32_t max_concurrency = 4;

  /// When the running weight drops below this, the worker asks for
  /// max_concurrency minus running weight more. Empty: equal to
  /// max_concurrency (refill as soon as anything finishes). Lower values
  /// fetch in bigger batches.
  std::optional<int32_t> min_concurrency;

  /// Weight units of claimed jobs the worker holds beyond max_concurrency,
  /// waiting for a thread (0 to max_weight). A thread whose job returned
  /// starts the next one at once, without a round trip, and claims commit
  /// in bigger batches: for short jobs this raises throughput by about half
  /// (docs/performance.md). Off by default, as in River and graphile-worker,
  /// because of what it costs:
  ///  - a claimed job's timeout starts at its claim, so time in the window
  ///    counts toward it: size the window so that jobs wait in it for much
  ///    less than their timeout;
  ///  - on a crash, claimed jobs that never started are recovered like
  ///    running ones (their try is spent);
  ///  - group shares apply to the claims workers hold, so the jobs running
  ///    at one instant can differ from the shares by up to the window
  ///    (docs/scheduling.md);
  ///  - a waiting job can't go to another worker that is idle.
  /// stop() gives unstarted claims back without spending their try.
  int32_t prefetch = 0;

  /// If set, every running attempt gets a heartbeat this often, so jobs
  /// that don't call heartbeat() survive past their timeout while they run.
  std::optional<std::chrono::milliseconds> auto_heartbeat;

  /// At most one progress report per job is stored this often (on the queue's
  /// clock), the latest winning; the last report before an attempt ends is
  /// stored anyway. 0 to 1 hour; 0 hands each report over as soon as the
  /// worker gets to it (reports made faster than that still coalesce).
  std::chrono::milliseconds progress_interval{1'000};

  /// The most log lines (job_context::log) one attempt keeps, 0 to 1,000,
  /// and the most bytes of their text, 0 to 1 MiB; later lines are
  /// dropped and counted. 0 lines: logging is off (every line is counted
  /// as dropped).
  int32_t log_lines = 100;
  int64_t log_bytes = 64 * 1024;

  /// Hooks around every job this worker runs (job_middleware), outermost
  /// first.
  std::vector<job_middleware> middleware;
};

/// What a worker has done so far.
struct worker_stats {
  int64_t jobs_received = 0;     ///< attempts handed to this worker
  int64_t batches_received = 0;  ///< hand-overs (one per claim)
  int64_t requests_sent = 0;     ///< times it asked the dispatcher for work
  int64_t outcomes_committed = 0;
  /// Outcomes sent again because their write failed for a passing cause
  /// (the queue's PostgreSQL was unreachable or timed out).
  int64_t outcomes_resent = 0;
  int32_t running_jobs = 0;      ///< attempts whose code is running
  int32_t running_weight = 0;
  /// Middleware hooks that threw (job_middleware); each also logged.
  int64_t middleware_errors = 0;
  /// Its max_concurrency now: its own, or what queue::set_worker set for
  /// its name.
  int32_t max_concurrency = 0;
};

/// A registered worker as the queue's dispatcher sees it (queue::workers).
struct worker_info {
  worker_identity identity;
  std::vector<std::string> types;  ///< the job types it runs
  int32_t max_concurrency = 0;     ///< worker_options::max_concurrency
  int32_t prefetch = 0;            ///< worker_options::prefetch
  int32_t running = 0;             ///< attempts of its running now
  int32_t running_weight = 0;      ///< their weight, against max_concurrency
  /// Weight units it asked for and was not yet given: its room at its last
  /// report, less what is on its way to it.
  int32_t credit = 0;
  int64_t registered_at_ms = 0;    ///< queue clock
  /// When its last report (outcomes, room) arrived; empty: none yet.
  std::optional<int64_t> last_report_ms;
  /// It unregistered (worker::stop) and waits for claims in flight.
  bool leaving = false;
};

/// A running worker. Move-only; destroying it stops it (waiting up to 30 s).
/// On a moved-from handle, stop() fails with `closed` and stats() is zero.
class worker {
 public:
  worker(worker&&) noexcept;
  worker& operator=(worker&&) noexcept;
  ~worker();

  /// Takes no new jobs and waits up to `timeout` for running ones to finish
  /// and their outcomes to commit. Error: timeout if some are still running;
  /// their contexts are flagged cancelled and their attempts expire and retry
  /// as usual. A timeout of 0 or less doesn't wait (timeout unless already
  /// stopped); milliseconds::max() waits without limit. Stopping twice is not
  /// an error.
  status stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// A snapshot of the worker's counters.
  worker_stats stats() const;

 private:
  struct impl;
  friend struct runtime_access;  // the runtime's own code (runtime/src)
  explicit worker(std::shared_ptr<impl> p) noexcept;
  std::shared_ptr<impl> impl_;
};

}  // namespace ergon
