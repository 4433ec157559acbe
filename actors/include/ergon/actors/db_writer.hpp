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
#include <map>
#include <string>
#include <atomic>
#include <memory>
#include <optional>
#include <mutex>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "ergon/actors/commit_feed.hpp"
#include "ergon/actors/dispatcher_calls.hpp"
#include "ergon/actors/job_counters.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/actors/reply.hpp"
#include "ergon/actors/run_metrics.hpp"
#include "ergon/clock.hpp"
#include "ergon/job.hpp"
#include "ergon/queue_actor.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/op/cancel_job.hpp"
#include "ergon/storage/op/cancel_jobs.hpp"
#include "ergon/storage/op/cancel_pending.hpp"
#include "ergon/storage/op/delete_finished.hpp"
#include "ergon/storage/op/delete_recurring.hpp"
#include "ergon/storage/op/pause_recurring.hpp"
#include "ergon/storage/op/drain_inbox.hpp"
#include "ergon/storage/op/put_recurring.hpp"
#include "ergon/storage/op/retry_failed.hpp"
#include "ergon/storage/op/sweep_finished.hpp"
#include "ergon/storage/op/update_pending.hpp"

namespace ergon::actors {

/// A request from a thread that blocks until the writer has committed.
template <class Args, class V>
struct local_call {
  using answer = V;
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

/// One step of the retention sweeper, answered (by response promise) with a
/// sweep_reply once committed. Each step is one request in one writer
/// batch, so a busy sweeper never holds the writer for long.
struct sweep_step {
  /// Finished jobs to delete; empty for a step that only drops results.
  std::optional<storage::sweep_finished_args> jobs;
  /// Results to drop (result_expires_at passed), at most this many.
  size_t results = 0;
  /// Idempotency keys past their window to delete, at most this many.
  size_t keys = 0;
  /// Workers that left before `first` to delete, at most `second`.
  std::optional<std::pair<int64_t, size_t>> workers;
};

struct sweep_reply {
  status outcome;
  int64_t deleted = 0;
  int64_t resume_after = 0;  ///< the next step's after_row; 0: this status is done
  int64_t results_dropped = 0;
  int64_t keys_expired = 0;
  int64_t workers_deleted = 0;
  /// How long the step ran in the writer, in microseconds (real time).
  int64_t busy_us = 0;
};

/// Which bulk action a bulk_step takes (bulk_action.hpp).
enum class bulk_kind : uint8_t {
  cancel,  ///< storage::cancel_jobs
  retry,   ///< storage::retry_failed with a filter
  remove,  ///< storage::delete_finished
};

/// One step of a bulk action, answered (by response promise) with a
/// bulk_reply once committed: one request in one writer batch, as a
/// sweep_step.
struct bulk_step {
  bulk_kind kind = bulk_kind::cancel;
  /// For remove, its status is final.
  job_filter filter;
  int64_t after_row = 0;
  int64_t before_row = 0;  ///< cancel: storage::cancel_jobs_args::before_row
  size_t limit = 500;
};

struct bulk_reply {
  status outcome;
  int64_t cancelled = 0;
  int64_t stop_requested = 0;
  int64_t retried = 0;
  std::vector<job_id> skipped;  ///< retry: failed jobs whose key is held
  int64_t deleted = 0;
  int64_t resume_after = 0;  ///< the next step's after_row; 0: done
  int64_t before_row = 0;    ///< cancel: the next step's before_row
  /// How long the step ran in the writer, in microseconds (real time).
  int64_t busy_us = 0;
};

/// One step of the inbox's drain (inbox_drain.hpp): takes in up to `limit`
/// entries, answered (by response promise) with a drain_reply once
/// committed.
struct drain_step {
  size_t limit = 500;
  /// Also deletes up to `limit` entries taken in longer ago than
  /// options::idempotency_window.
  bool forget = false;
};

struct drain_reply {
  status outcome;
  size_t taken = 0;
  bool more = false;  ///< more entries may wait
  int64_t forgotten = 0;
  std::vector<storage::inbox_refusal> refused;
};

/// Answered with the recurring job's unfinished instance.
using put_recurring_call = local_call<storage::put_recurring_args, result<job_id>>;
using delete_recurring_call = local_call<storage::delete_recurring_args, status>;
/// Pauses or resumes one recurring job; its feed carries the
/// control_changed event.
using pause_recurring_call = local_call<storage::pause_recurring_args, status>;

/// Asks the writer to commit what it has, close the database and stop. The
/// reply comes after the connection is closed.
struct close_args {};
using close_call = local_call<close_args, status>;

/// One worker's writes, committed in one transaction (local only). After
/// the commit the writer sends `worker` one assign_jobs, ahead of the commit feed: the claimed jobs, and the
/// outcomes' statuses if the batch answers a report.
struct worker_batch {
  caf::actor worker;
  worker_writes writes;
};

/// A standing offer for `worker` (local only): after the commit that claims
/// a job with it, the writer sends `worker` that job in an assign_jobs.
struct offer_batch {
  caf::actor worker;
  job_offer offer;
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

/// Rung when commit feeds are waiting in a feed_channel.
using feed_ready_atom = caf::atom_constant<caf::atom("feedready")>;

/// What an actor that sent a local_call without a reply_to gets back: ok for
/// a status, the value for a result<T> (errors come as CAF errors).
template <class V>
struct call_answer;
template <>
struct call_answer<status> {
  using type = ok_atom;
};
template <class T>
struct call_answer<result<T>> {
  using type = T;
};

/// The signature of a local_call in the writer's interface.
template <class Call>
using call_signature =
  typename caf::replies_to<Call>::template with<typename call_answer<typename Call::answer>::type>;

/// Every message the writer takes; a send of anything else does not compile.
using db_writer_actor = worker_writer_actor::extend<
  call_signature<submit_call>, call_signature<update_call>, call_signature<cancel_call>,
  call_signature<cancel_job_call>, call_signature<retry_failed_call>,
call_signature<put_recurring_call>,
  call_signature<delete_recurring_call>, call_signature<pause_recurring_call>,
  call_signature<close_call>,
  caf::replies_to<sweep_step>::with<sweep_reply>, caf::replies_to<bulk_step>::with<bulk_reply>,
  caf::replies_to<drain_step>::with<drain_reply>, caf::reacts_to<worker_batch>,
  caf::reacts_to<offer_batch>, caf::reacts_to<withdraw_offer>, caf::reacts_to<expire_batch>, caf::reacts_to<expire_pending_batch>,
  caf::reacts_to<lose_batch>, caf::reacts_to<hold_batch>, caf::reacts_to<control_save>,
  caf::reacts_to<worker_save>, caf::reacts_to<listen_to>,
  caf::reacts_to<after_writes>>;

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
  /// Per type, the backoff a job left at the defaults takes
  /// (options::retry_policies).
  std::map<std::string, backoff_policy> retry_policies;
  /// Snoozes a job may take (options::max_snoozes).
  int64_t max_snoozes = 1'000;
  /// How long idempotency keys are kept (options::idempotency_window).
  int64_t idempotency_window_ms = 86'400'000;
  /// The database's id tag (storage::read_meta).
  uint32_t id_tag = 0;
  /// Which nodes may reach the writer (it answers remote heartbeats).
  std::shared_ptr<node_gate> gate;
  /// Batch sizes and commit times, for metrics.
  std::shared_ptr<writer_stats> stats = std::make_shared<writer_stats>();
};

/// Spawns the writer on its own thread. Stop it with a close_call; requests
/// that arrive afterwards get `closed`.
db_writer_actor spawn_db_writer(caf::actor_system& sys, db_writer_config cfg);

}  // namespace ergon::actors

namespace caf {
template <class Args, class V>
struct allowed_unsafe_message_type<ergon::actors::local_call<Args, V>>
    : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::worker_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::offer_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::withdraw_offer> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::expire_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::expire_pending_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::lose_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::hold_batch> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::control_save> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::worker_save> : std::true_type {};
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
template <>
struct allowed_unsafe_message_type<ergon::actors::drain_step> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::bulk_step> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::bulk_reply> : std::true_type {};
template <>
struct allowed_unsafe_message_type<ergon::actors::drain_reply> : std::true_type {};

}  // namespace caf
