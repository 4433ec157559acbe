// job_context: what job code receives while it runs.
//
//   worker_opts.runners["resize"] = [](ergon::job_context& ctx) {
//     auto image = ergon::unpack<image_spec>(ctx.payload());  // msgpack.hpp
//     for (auto& tile : tiles(*image)) {
//       if (ctx.cancelled()) return;      // expired or shutting down
//       if (ctx.preempted()) {            // urgent work waits for the slot
//         ctx.checkpoint(progress_bytes);
//         ctx.yield();
//         return;
//       }
//       render(tile);
//       ctx.heartbeat();                  // keeps a long job alive
//     }
//     ctx.complete(summary_bytes);        // or return the bytes, or nothing
//   };
//
// Returning normally completes the job, with the returned bytes as its
// result if the handler returns a std::string. Throwing fails the attempt
// with the exception's text (ergon::permanent_failure: without retries);
// the worker keeps running. Returning after queue::cancel committed its
// request ends the job `cancelled` instead, even if the code has not seen
// cancelled() turn true yet: the queue decides when it records the outcome.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"

namespace ergon {


/// The running attempt of one job. Valid only during the handler call.
/// Thread-safe: the handler may pass it to helper threads it joins. Only
/// ergon's workers make one.
class job_context {
 public:
  job_context(const job_context&) = delete;
  job_context& operator=(const job_context&) = delete;

  virtual job_id id() const = 0;
  virtual const std::string& type() const = 0;
  virtual const std::string& group() const = 0;

  /// The payload this attempt runs with: the last checkpoint if an earlier
  /// attempt stored one, else the submitted payload.
  virtual const std::string& payload() const = 0;

  /// 1 for the first attempt, 2 for the first retry, ...
  virtual int32_t try_number() const = 0;

  /// True once queue::cancel asked the job to stop, the attempt expired
  /// (its result will be rejected), or the worker is stopping. Long jobs
  /// should check it and return early.
  virtual bool cancelled() const = 0;

  /// Waits until cancelled() is true or `timeout` passes, and returns
  /// cancelled(): for job code that waits on something else and must stop
  /// promptly when asked, without polling. A timeout of 0 or less doesn't
  /// wait; milliseconds::max() waits without limit. Not an error either way.
  virtual bool wait_cancelled(std::chrono::milliseconds timeout) = 0;

  /// True once the dispatcher asked this attempt to give its slot to
  /// waiting work of higher priority (preemption, docs/scheduling.md). Job
  /// code that can pause should checkpoint and call yield(); code that
  /// ignores the request runs on, and keeps its slot.
  virtual bool preempted() const = 0;

  /// Waits until preempted() or cancelled() is true or `timeout` passes,
  /// and returns preempted(). Timeouts as for wait_cancelled.
  virtual bool wait_preempted(std::chrono::milliseconds timeout) = 0;

  /// Ends the attempt as yielded, after preempted() turned true: the job
  /// goes back to pending with its last checkpoint (job_info::yields counts
  /// it), without spending a try, and resumes once the work that preempted
  /// it has finished, ahead of other jobs of its priority. Returns once
  /// committed; the code should then return. Errors: invalid_argument if
  /// the attempt was not asked to yield (nothing is reported), and those of
  /// complete. After a cancel request the job ends `cancelled` instead.
  virtual status yield() = 0;

  /// Stores `payload` as what the next attempt receives if this one fails,
  /// and extends the expiry like a heartbeat. Returns once committed.
  /// Errors: invalid_argument (too large), stale_attempt (expired),
  /// cancelled (queue::cancel asked the job to stop: nothing is stored, and
  /// the attempt is no longer extended), closed, and for a worker on
  /// another node unreachable (the connection dropped).
  virtual status checkpoint(std::string payload) = 0;

  /// Extends the expiry to at least now + heartbeat_increment. Returns once
  /// committed. Errors: stale_attempt (the attempt already expired),
  /// cancelled (queue::cancel asked the job to stop; the expiry stays),
  /// closed, unreachable (a worker on another node lost its connection).
  virtual status heartbeat() = 0;

  /// Ends the attempt successfully with optional result bytes. Returns once
  /// committed. Errors: invalid_argument naming "result" (larger than the
  /// queue's limit), cancelled (queue::cancel's request committed first:
  /// the job ends `cancelled` and the result is discarded), stale_attempt (the attempt expired: the result is
  /// discarded and the job's state is unchanged), job_finished (complete or
  /// fail was already called), closed, and for a worker on another node
  /// unreachable (the connection dropped before the commit was
  /// acknowledged; the queue fences the outcome if it retried the job).
  virtual status complete(std::string result = {}) = 0;

  /// Ends the attempt as failed with `message`: the job is retried with
  /// backoff, or fails if no retries are left. Returns once committed. Same
  /// errors as complete. After a cancel request the job ends `cancelled`.
  /// The message is stored as text: a byte that is not part of UTF-8, or a
  /// NUL, is kept as "\xNN" (so on every engine; fail_permanently and
  /// progress messages too).
  virtual status fail(std::string message) = 0;

  /// fail(message), but the retry is due `retry_after` from now rather than
  /// after the job's backoff: for a failure that says when to come back,
  /// such as an HTTP 429's Retry-After. It spends a try as fail() does; with
  /// no retries left the job fails. Errors: invalid_argument naming
  /// "retry_after" if it is negative (nothing is reported), and those of
  /// fail.
  virtual status fail(std::string message, std::chrono::milliseconds retry_after) = 0;

  /// Ends the attempt as "not yet": the job goes back to pending with its
  /// last checkpoint, due `delay` from now, and spends no try (River's
  /// JobSnooze, Oban's {:snooze, s}). The snooze is in the attempt history
  /// (attempt_outcome::snoozed) and sends event_kind::snoozed. A job may
  /// snooze options::max_snoozes times; a snooze past that counts as a
  /// failure (a try, the backoff), so a job can't snooze forever. Returns
  /// once committed; the code should then return. Errors: invalid_argument
  /// naming "delay" if it is negative (nothing is reported), and those of
  /// complete. After a cancel request the job ends `cancelled` instead.
  virtual status snooze(std::chrono::milliseconds delay) = 0;

  /// Ends the attempt as failed with `message` and the job `failed` at once,
  /// whatever retries it has left: for failures that retrying can't fix
  /// (bad input, a refused request). The attempt's outcome is
  /// failed_permanently. Same errors as complete. Throwing
  /// ergon::permanent_failure does the same.
  virtual status fail_permanently(std::string message) = 0;

  /// Reports that `done` of `total` units are done (total 0: unknown), with
  /// an optional short message (up to 1,024 bytes). Doesn't wait: reports
  /// are stored and published (job_info::progress, event_kind::progress) at
  /// most once per worker_options::progress_interval per job, the latest
  /// winning, joining the writer's next transaction rather than committing
  /// one per report; the last report before the attempt ends is always
  /// stored. The ETA comes from the reports of the last minute (at most 64
  /// of them). Errors, with
  /// nothing recorded: invalid_argument naming "done" (negative, or above a
  /// nonzero total), "total" (negative) or "message" (too long);
  /// job_finished after complete or fail.
  virtual status progress(int64_t done, int64_t total, std::string message = {}) = 0;

  /// Writes a line to this attempt's log (attempt_info::logs), as taskito's
  /// task logs. Doesn't wait: lines go to the writer with the progress
  /// reports (at most once per worker_options::progress_interval) and with
  /// the outcome, so the last ones are stored before it. Text over 4,096
  /// bytes is cut there (on a UTF-8 boundary); bytes that are not UTF-8
  /// are kept as "\xNN". Past worker_options::log_lines lines or log_bytes
  /// bytes of text an attempt's lines are dropped and counted
  /// (attempt_info::logs_dropped): not an error. Retention removes them
  /// with their job. Errors, with nothing written: invalid_argument naming
  /// "level" for a value outside log_level; job_finished after complete
  /// or fail.
  virtual status log(log_level level, std::string text) = 0;

  /// The jobs this one depends on (job::depends_on, and its children after
  /// submit_children), oldest first, each with how it ended and its
  /// result: a dependent reads what it waited for. A dependency deleted by
  /// retention is no longer listed. Errors: stale_attempt (the attempt is
  /// no longer current), job_finished (the attempt already reported its
  /// outcome), closed, unreachable.
  virtual result<std::vector<dependency_result>> dependency_results() = 0;

  /// Submits `children` and ends the attempt: the job waits, holding no
  /// slot, until every child has ended, and then runs again with
  /// `checkpoint` as its payload (taskmill's finalize step), where
  /// dependency_results() gives the children's results. The children, the
  /// checkpoint and the wait commit in one transaction, so an attempt
  /// that dies before it does spawns nothing, and the retried code sees no
  /// checkpoint; once it returns ok, the children exist and the code
  /// should return. The wait spends no try (attempt_outcome::spawned).
  /// A child that ends failed, cancelled or expired does to the parent
  /// what the parent's job::on_dependency_failure says: by default it
  /// cancels the parent, and a parent that ends so cancels its unfinished
  /// children (fail-fast); `run` waits for them all. A cancelled parent
  /// cancels its children. A child's deadline is at most its parent's.
  /// Children may depend on each other by position (depends_on_batch).
  /// Errors: invalid_argument naming "children" (empty) or a child's
  /// field as "children[i].<field>" (nothing is reported, the attempt
  /// goes on); the errors of complete; and, when the queue refuses a
  /// child (a depends_on naming no job, a unique key rejected, a child
  /// that names the parent or a job waiting on it, directly or through its
  /// unique or idempotency key: the parent would wait on itself), that
  /// error: the attempt then fails with it as its message, spending a
  /// try.
  virtual status submit_children(std::vector<job> children, std::string checkpoint) = 0;

 protected:
  job_context() = default;
  ~job_context() = default;
};

/// Thrown by job code: the attempt fails with what() and the job ends
/// `failed` without using its remaining retries (job_context::
/// fail_permanently).
class permanent_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Job code for one job type: a callable taking job_context&, returning
/// nothing or the result bytes (std::string). Empty if default-constructed
/// or made from an empty std::function.
class job_handler {
 public:
  job_handler() = default;
  job_handler(std::nullptr_t) {}  // NOLINT: empty, like std::function

  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, job_handler>
                                              && std::is_invocable_v<F&, job_context&>>>
  job_handler(F f) {  // NOLINT: converts from any job code, as std::function does
    if constexpr (is_nullable<F>::value)
      if (!f)
        return;
    using returned = std::invoke_result_t<F&, job_context&>;
    if constexpr (std::is_void_v<returned>) {
      f_ = [f = std::move(f)](job_context& ctx) mutable {
        f(ctx);
        return std::string{};
      };
    } else {
      static_assert(std::is_convertible_v<returned, std::string>,
                    "job code returns nothing or the result bytes as std::string");
      f_ = [f = std::move(f)](job_context& ctx) mutable { return std::string(f(ctx)); };
    }
  }

  /// Runs the job code; returns its result bytes (empty for code that
  /// returns nothing).
  std::string operator()(job_context& ctx) const { return f_(ctx); }
  explicit operator bool() const noexcept { return static_cast<bool>(f_); }

 private:
  // Callables that may be empty: function pointers and std::function.
  template <class F>
  struct is_nullable : std::is_pointer<F> {};
  template <class Sig>
  struct is_nullable<std::function<Sig>> : std::true_type {};

  std::function<std::string(job_context&)> f_;
};

}  // namespace ergon
