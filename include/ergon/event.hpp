// event: what `queue::subscribe` delivers as jobs move through the queue.
//
//   auto sub = q.subscribe([](const ergon::event& e) {
//     if (e.kind == ergon::event_kind::failed)
//       std::cerr << e.id << " failed: " << e.message << '\n';
//   });
//
// Callbacks run on an actor thread of the queue, one event at a time and in
// commit order; a callback must return quickly (copy what you need and hand
// it off) because later events wait for it. A callback that throws loses
// nothing for anyone: see event_kind::subscriber_failed.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"

namespace ergon {

/// What happened.
enum class event_kind : uint8_t {
  submitted,  ///< the job was committed as pending
  started,    ///< an attempt was claimed and handed to a worker (with a
              ///< prefetch window, its code may start a little later)
  succeeded,  ///< the attempt completed
  failed,     ///< the attempt failed and no retries are left: the job is failed
  retried,    ///< the attempt failed or expired; the job waits for run_at
  expired,    ///< the attempt ran past its expiry, or the job missed its deadline
  /// The job was cancelled: while pending, or (after cancel_requested)
  /// its running attempt then ended; `message` says how for a running one.
  cancelled,
  heartbeat,  ///< a heartbeat or checkpoint extended the running attempt
  job_aged,   ///< aging raised the job's effective priority (fair scheduling)
  group_allocation_changed,  ///< a group's slot allocation changed
  /// A subscriber's callback threw while handling an event. Every other
  /// subscriber gets this event; the one that threw does not. `message`
  /// says which event kind and what was thrown; id and type are the failed
  /// event's. The callback stays subscribed, and later events reach it and
  /// everyone else as usual. Counted in metrics_snapshot::subscriber_errors.
  subscriber_failed,
  /// A pending job is heavier than the max_concurrency of every worker
  /// registered for its type: it waits until a worker that can take it
  /// starts. Sent when such a job is submitted or retried, and when the
  /// largest worker of its type stops. `message` names both numbers.
  job_too_heavy,
  /// A stopping worker gave back a claimed attempt whose code never started
  /// (worker_options::prefetch), or a worker lowered (queue::set_worker)
  /// below the attempt's weight did: the job is pending again, its try
  /// unspent.
  released,
  /// queue::cancel asked a running job to stop: its context is flagged.
  /// A `cancelled` event follows once the attempt ends (or `succeeded`, if
  /// it completed first).
  cancel_requested,
  /// A running job reported progress (job_context::progress); `progress`
  /// has it. Throttled like the stored report: at most one per job per
  /// worker_options::progress_interval, plus the last one.
  progress,
  /// queue::retry_failed put a failed job back to pending, due at run_at_ms.
  requeued,
  /// A pass of the retention sweeper (options::retention) deleted finished
  /// jobs, dropped expired results or deleted idempotency keys past their
  /// window or records of workers that left (worker_identity), or the
  /// inbox's sweep (pg.hpp) deleted entries past
  /// options::idempotency_window: jobs_deleted, results_dropped,
  /// keys_expired, workers_deleted and inbox_entries_deleted say how many.
  /// No job is named.
  /// Passes that change nothing send none.
  swept,
  /// The dispatcher asked this running job to yield its slot to waiting
  /// work of higher priority (preemption); `message` names that job and
  /// `effective_priority` is this job's.
  preempted,
  /// The job's code yielded (job_context::yield): it is pending again with
  /// its checkpoint and its try unspent, and waits for its preemptor.
  yielded,
  /// A yielded job is ready again: the work that preempted it ended.
  resumed,
  /// The owner refused a job that a PostgreSQL transaction enqueued
  /// (pg.hpp): `inbox_entry` names the entry, `type` is the job's type,
  /// and `message` says why ("invalid_argument: ..." naming the field,
  /// "already_exists: ..." naming the unique key's holder). The refusal is
  /// also recorded on the entry's row (pg::find_entry). No job is named.
  inbox_refused,
  /// The job code asked to run again later (job_context::snooze): the job
  /// is pending until run_at_ms, its try unspent; `message` says for how
  /// long.
  snoozed,
  /// The last job this one waited on (job::depends_on) ended, in the same
  /// commit: it is pending now, due at run_at_ms. A waiting job's
  /// `submitted` says "waiting for its dependencies"; one that a
  /// dependency's failure ends sends `cancelled` or `failed` with a
  /// message naming that dependency.
  unblocked,
  /// The job's code submitted children (job_context::submit_children): the
  /// job waits for them, holding no slot; `message` says how many.
  spawned,
  /// A job type's circuit breaker opened (scheduling_options::breakers):
  /// no job of `type` starts until run_at_ms; `message` says why.
  breaker_opened,
  /// Its cool-down ended: one trial job of `type` may start.
  breaker_half_open,
  /// It closed: the trial succeeded, or an operator reset it
  /// (queue::reset_breaker); `message` says which.
  breaker_closed,
  /// A run-time control changed (queue::pause_queue, pause_group,
  /// pause_type, set_group, set_type, set_worker, their resumes and
  /// resets), or a timed pause ended by itself. `message` says what
  /// ("paused group \"a\" until ...", "set type \"b\": max_running 4",
  /// "set worker \"c\": max_running 8"); `group` or `type` names it
  /// (neither for the queue or a worker); run_at_ms is a timed pause's end. No job is
  /// named. Counted in metrics_snapshot::control_changes.
  control_changed,
};

const char* to_string(event_kind k) noexcept;
std::ostream& operator<<(std::ostream& out, event_kind k);

/// Why a group's allocation changed (group_allocation_changed only).
enum class allocation_reason : uint8_t {
  weight_change,  ///< set_group_weight or reset_group_weights
  rebalance,      ///< groups gained or lost ready work, or were paused/resumed
  group_drained,  ///< the group ran out of ready work
};

const char* to_string(allocation_reason r) noexcept;

/// One event. Fields that do not apply to a kind keep their defaults.
struct event {
  event_kind kind = event_kind::submitted;
  /// When it happened (the queue's clock).
  int64_t at_ms = 0;
  /// The job (nil for group_allocation_changed).
  job_id id;
  std::string type;
  std::string group;
  /// The attempt number for started/succeeded/failed/retried/expired.
  int32_t try_number = 0;
  /// Failure text for failed/retried/expired; "expired" for an expiry.
  std::string message;
  /// For retried and snoozed: when the next attempt is due.
  int64_t run_at_ms = 0;
  /// For heartbeat: the attempt's new expiry.
  int64_t expires_at_ms = 0;
  /// The job's stored priority and its priority after aging.
  int32_t base_priority = 0;
  int32_t effective_priority = 0;
  /// For started and job_aged: how long the job had waited, in ms.
  int64_t wait_ms = 0;
  /// For group_allocation_changed: slots before and after, and why.
  int32_t previous_slots = 0;
  int32_t new_slots = 0;
  allocation_reason reason = allocation_reason::rebalance;
  /// For a job that is an instance of a recurring job: that recurring
  /// job's id (recurring.hpp); empty otherwise. Set on every kind that
  /// names a job (subscriber_failed: the failed event's) except job_too_heavy.
  std::string recurring_id;
  /// For progress: the report.
  progress_info progress;
  /// For swept: what the pass did.
  int64_t jobs_deleted = 0;
  int64_t results_dropped = 0;
  int64_t keys_expired = 0;
  int64_t workers_deleted = 0;
  int64_t inbox_entries_deleted = 0;
  /// For inbox_refused: the inbox entry (pg::submit's answer).
  int64_t inbox_entry = 0;
};

}  // namespace ergon
