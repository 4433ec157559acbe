// db_writer: the actor that owns the only write connection.
//
// Every write goes through it. It runs on its own thread (SQLite blocks) as a
// blocking actor so that it controls how it waits: it drains its mailbox, runs
// each request in its own SAVEPOINT, commits once for the whole batch, and only
// then replies. A request that fails rolls back to its savepoint and doesn't
// disturb the others. When the mailbox is empty it spins briefly before it
// sleeps, because waking a sleeping thread costs more than a commit here.
#pragma once

#include <chrono>
#include <functional>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

#include "ergon/actors/job_counters.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/reply.hpp"
#include "ergon/actors/run_metrics.hpp"
#include "ergon/clock.hpp"
#include "ergon/job.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/operations.hpp"

namespace ergon::actors {

/// A request from a thread that blocks until the writer has committed.
template <class Args, class V>
struct local_call {
  Args args;
  reply_to<V> reply;
};

/// Jobs to insert; the writer assigns their ids.
struct submit_args {
  std::vector<job> jobs;
};

using submit_call = local_call<submit_args, result<std::vector<job_id>>>;
using update_call = local_call<storage::update_pending_args, status>;
using cancel_call = local_call<storage::cancel_pending_args, status>;
using cancel_job_call = local_call<storage::cancel_job_args, status>;
using retry_failed_call = local_call<storage::retry_failed_args, result<retry_summary>>;
using delete_finished_call =
  local_call<storage::delete_finished_args, result<storage::delete_finished_result>>;

/// One step of the retention sweeper, answered (by response promise) with a
/// sweep_reply once committed. Each step is one request in one writer
/// batch, so a busy sweeper never holds the writer for long.
struct sweep_step {
  /// Finished jobs to delete; empty for a step that only drops results.
  std::optional<storage::sweep_finished_args> jobs;
  /// Results to drop (result_expires_at passed), at most this many.
  size_t results = 0;
};

struct sweep_reply {
  status outcome;
  int64_t deleted = 0;
  int64_t resume_after = 0;  ///< the next step's after_row; 0: this status is done
  int64_t results_dropped = 0;
  /// How long the step ran in the writer, in microseconds (real time).
  int64_t busy_us = 0;
};
/// Answered with the recurring job's unfinished instance.
using put_recurring_call = local_call<storage::put_recurring_args, result<job_id>>;
using delete_recurring_call = local_call<storage::delete_recurring_args, status>;

/// Asks the writer to commit what it has, close the database and stop. The
/// reply comes after the connection is closed.
struct close_args {};
using close_call = local_call<close_args, status>;

/// One worker's writes, committed in one transaction (local only): the
/// outcomes and released claims of its report, and the jobs the dispatcher
/// picked for it. After the commit the writer sends `worker` one
/// assign_jobs, ahead of the commit feed: the claimed jobs, and the
/// outcomes' statuses if the batch answers a report.
struct worker_batch {
  uint64_t worker_id = 0;
  caf::actor worker;
  std::vector<storage::attempt_report> outcomes;
  std::vector<storage::attempt_ref> released;
  std::vector<storage::attempt_ref> claims;
  bool answers_report = false;
};

/// The dispatcher saw these attempts pass their expiry (local only).
struct expire_batch {
  std::vector<storage::expire_attempt_args> attempts;
};

/// A remote worker went away with these attempts running (local only).
struct lose_batch {
  storage::lose_attempts_args args;
};

/// The dispatcher saw these pending jobs pass their deadline (local only).
struct expire_pending_batch {
  std::vector<int64_t> rows;
};

/// Rings `listener` with feed_ready_atom when commit feeds wait in
/// `channel` (local only).
struct listen_to {
  caf::actor listener;
};

/// Runs `then` once every write the writer received before this message is
/// committed and fed to the listener. A snapshot taken after it (metrics)
/// covers everything a caller could have observed, such as a job that started.
struct after_writes {
  std::function<void()> then;
};

/// The claims of one worker_batch.
struct claim_result {
  uint64_t worker_id = 0;
  std::vector<storage::claimed_job> claimed;
  std::vector<int64_t> missed;
};

/// A running attempt's expiry moved (heartbeat, checkpoint, or an expiry
/// check that found it extended).
struct expiry_moved {
  int64_t row = 0;
  int64_t token = 0;
  int64_t expires_at = 0;
  bool by_worker = false;  ///< a heartbeat or checkpoint, not an expiry check
};

/// A dispatcher request that did not commit (storage error): the dispatcher
/// puts the jobs back and tries again later.
struct write_failed {
  uint64_t worker_id = 0;  ///< for failed claims
  std::vector<int64_t> claim_rows;
  std::vector<storage::expire_attempt_args> expiries;  ///< also lost attempts
  std::vector<int64_t> deadline_rows;
  status why;
};

/// A running job asked to stop (queue::cancel).
struct cancel_request {
  storage::attempt_ref attempt;
  storage::job_key key;
};

/// What one commit changed (and which dispatcher requests failed), queued for
/// the listener after every commit, in commit order.
struct commit_feed {
  std::vector<storage::job_key> added;      ///< submitted, or a recurring job's next instance
  std::vector<storage::job_key> cancelled;  ///< pending jobs cancelled
  std::vector<storage::key_change> changed; ///< pending jobs updated
  std::vector<claim_result> claims;
  std::vector<storage::attempt_end> ended;  ///< attempts that ended (retried keys inside)
  std::vector<storage::released_claim> released;  ///< claims given back: pending again
  std::vector<expiry_moved> extended;
  std::vector<storage::job_key> expired;    ///< pending jobs past their deadline
  std::vector<write_failed> failed;         ///< dispatcher requests lost
  std::vector<cancel_request> cancel_requests;
  std::vector<storage::progress_stored> progress;
  std::vector<storage::job_key> requeued;  ///< failed jobs retry_failed put back

  bool empty() const noexcept {
    return added.empty() && cancelled.empty() && changed.empty() && claims.empty()
           && ended.empty() && released.empty() && extended.empty() && expired.empty()
           && failed.empty() && cancel_requests.empty() && progress.empty()
           && requeued.empty();
  }
};

/// Rung when commit feeds are waiting in a feed_channel.
using feed_ready_atom = caf::atom_constant<caf::atom("feedready")>;

/// Commit feeds from the writer to the dispatcher. The writer appends a feed
/// per commit and rings the listener at most once until the listener takes
/// them, so under load one message carries many commits.
///
/// Feeds that only add jobs may wait: unless the dispatcher is hungry (a
/// worker is waiting for work), they are rung once `defer_limit` new jobs
/// pile up or when the writer goes idle. A burst of submissions with no idle
/// worker thus costs no dispatcher wake-up per commit; with one waiting, a
/// new job is handed out at once.
class feed_channel {
 public:
  static constexpr size_t defer_limit = 8'192;

  /// Appends `f`; true if the listener must be rung now.
  bool push(commit_feed f);
  /// True if feeds wait unrung (the writer calls this before it sleeps).
  bool ring_waiting();
  /// Takes every waiting feed, oldest first.
  std::vector<commit_feed> take();
  /// Set by the dispatcher: some worker waits for jobs.
  void set_hungry(bool hungry) noexcept { hungry_.store(hungry, std::memory_order_relaxed); }

 private:
  std::mutex mtx_;
  std::vector<commit_feed> feeds_;
  size_t deferred_jobs_ = 0;  // added jobs waiting unrung
  bool rung_ = false;
  std::atomic<bool> hungry_{false};
};


/// How to run the writer.
struct db_writer_config {
  /// The migrated write connection; the writer takes it over.
  std::shared_ptr<storage::db> db;
  std::shared_ptr<ergon::clock> clock;
  std::shared_ptr<job_counters> counters;
  /// Commit feeds go here; the listener (set with listen_to) is rung.
  std::shared_ptr<feed_channel> feeds = std::make_shared<feed_channel>();
  caf::actor listener;
  /// Most requests in one transaction.
  size_t batch_limit = 1024;
  /// Spin this long on an empty mailbox before sleeping.
  std::chrono::microseconds idle_spin{50};
  /// Payload (and checkpoint, and result) size limit; 0 means none.
  size_t max_payload_bytes = 0;
  /// The database's id tag (storage::read_meta).
  uint32_t id_tag = 0;
  /// Which nodes may reach the writer (it answers remote heartbeats).
  std::shared_ptr<node_gate> gate;
  /// Batch sizes and commit times, for metrics.
  std::shared_ptr<writer_stats> stats = std::make_shared<writer_stats>();
};

/// Spawns the writer on its own thread. Stop it with a close_call; requests
/// that arrive afterwards get `closed`.
caf::actor spawn_db_writer(caf::actor_system& sys, db_writer_config cfg);

}  // namespace ergon::actors

namespace caf {
template <class Args, class V>
struct allowed_unsafe_message_type<ergon::actors::local_call<Args, V>>
    : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::worker_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::expire_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::expire_pending_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::lose_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::listen_to> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::after_writes> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::sweep_step> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::storage::delete_finished_result> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::sweep_reply> : std::true_type {};

}  // namespace caf
