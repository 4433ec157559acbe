// job_runner: a worker's job threads and the claimed jobs that wait for them
// (the prefetch window). Internal to the worker.
//
// A thread whose job returned takes the next waiting job itself, so a busy
// worker wakes no thread per job. Job threads leave outcomes, and the
// attempts whose code returned, in an outbox. The worker actor is poked once
// when the outbox fills while the poke is armed, and takes everything in it
// for one report. A worker that holds its report for the rest of a burst
// arms the idle poke instead, which comes when the last attempt held
// returns or when job code waits for its outcome's answer.
//
// Threads start on demand up to one per weight unit and stay for reuse.
// They are detached and share the runner: job code that never returns must
// not hang the process on shutdown.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "ergon/actors/reply.hpp"
#include "ergon/job_context.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::actors {

class running_attempt;
struct worker_counters;

class job_runner : public std::enable_shared_from_this<job_runner> {
 public:
  using code = std::function<std::string(job_context&)>;

  /// What job threads left for the next report.
  struct outbox {
    std::vector<storage::attempt_report> outcomes;
    /// One per outcome: the blocking caller to answer, if any.
    std::vector<std::optional<reply_to<status>>> replies;
    std::vector<storage::attempt_ref> returned;
    /// Weight held (running plus waiting) as the outbox was taken. Read
    /// with it, so that every attempt whose weight is free is in
    /// `returned`: room reported without its return would let the
    /// dispatcher fill the slot against stale group shares.
    int32_t held_weight = 0;

    bool empty() const noexcept { return outcomes.empty() && returned.empty(); }
  };

  /// `max_weight`: most weight running at once. `poke` tells the worker
  /// actor that the outbox has something; it must not call back into us.
  /// `counters` get the running jobs and weight.
  job_runner(int32_t max_weight, std::function<void()> poke,
             std::shared_ptr<worker_counters> counters);
  job_runner(const job_runner&) = delete;
  job_runner& operator=(const job_runner&) = delete;

  /// Queues a claimed attempt; it starts as soon as its weight fits.
  void add(std::shared_ptr<running_attempt> attempt, code run);
  /// Removes every attempt that has not started (the worker is stopping).
  std::vector<std::shared_ptr<running_attempt>> take_waiting();
  /// Removes the attempt with `token` if it has not started; false if it
  /// started or isn't here. Its claim is the caller's to give back.
  bool take_waiting(int64_t token);
  /// Removes the attempt with `token` if it has not started, and puts its
  /// outcome (report_kind::stopped) and return in the outbox without a
  /// poke: the caller reports. False if it started or isn't here.
  bool cancel_waiting(int64_t token);

  /// An outcome from job code, before its code returned.
  void report(storage::attempt_report outcome, std::optional<reply_to<status>> reply);

  /// Takes the outbox; the poke stays disarmed until arm_poke().
  outbox take();
  /// Pokes on the next outbox entry. False if the outbox has entries now:
  /// take them instead.
  bool arm_poke();

  /// Pokes once no attempt runs or waits, or once job code waits for the
  /// answer to its outcome, even if the outbox has entries (a worker
  /// holding its report for the rest of a burst). False if none runs or
  /// waits now. Taking the outbox disarms it.
  bool arm_idle_poke();
  /// True if the outbox has entries and no job code waits for their answer
  /// (complete(), fail(), yield() block until it comes).
  bool mail_may_wait() const;

  /// Runs up to `max_weight` from now on (at least 1). Running jobs carry
  /// on; while they weigh more, nothing new starts.
  void resize(int32_t max_weight);

  /// Weight of the attempts held: running plus waiting.
  int32_t held_weight() const;
  /// True if no attempt runs or waits.
  bool idle() const;
  /// Lets idle threads exit, and busy ones after their current job.
  void shut_down();

 private:
  struct waiting_job {
    std::shared_ptr<running_attempt> attempt;
    code run;
  };

  static void thread_main(std::shared_ptr<job_runner> self);
  std::optional<waiting_job> next_locked();
  void wake_locked();
  // Records what the attempt's return means; true if the worker must be poked.
  bool returned_locked(running_attempt& a, storage::report_kind kind, std::string text);
  bool poke_locked();

  int32_t max_weight_;
  const std::function<void()> poke_;
  const std::shared_ptr<worker_counters> counters_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<waiting_job> waiting_;
  int32_t waiting_weight_ = 0;
  int32_t running_weight_ = 0;
  int32_t running_ = 0;
  int32_t threads_ = 0;
  int32_t idle_ = 0;
  int32_t waking_ = 0;  // notified or started, not yet looking for work
  bool stopping_ = false;
  bool poke_armed_ = false;
  bool idle_poke_armed_ = false;
  outbox outbox_;
};

}  // namespace ergon::actors
