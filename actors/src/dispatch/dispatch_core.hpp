// dispatch_core: the dispatcher's decisions, with no actors. It takes one
// input at a time (a commit's feed, a worker's registration, report,
// unregistration or loss, a timer tick, a control call) with the current
// time, and returns the effects it wants: writes for the writer, requests to
// workers, events, answers, and the next wake-up. The dispatcher actor
// (dispatcher.cpp) keeps only what CAF needs: worker handles, monitors,
// response promises and the timer, and sends the effects in order.
//
// It keeps the scheduling keys of pending jobs (scheduling_policy), the
// attempts running (attempt_table), the workers and their credit
// (worker_registry) and preemption (preemptions). A worker is its id here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ergon/actors/commit_feed.hpp"
#include "ergon/actors/dispatcher_calls.hpp"
#include "ergon/actors/protocol_records.hpp"
#include "ergon/event.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/worker.hpp"
#include "ergon/storage/records.hpp"
#include "ergon/storage/times.hpp"

namespace ergon::actors {

class dispatch_core {
 public:
  struct config {
    scheduling_options scheduling;
    uint32_t id_tag = 0;  ///< the database's id tag, to name jobs in events
    /// Whether anyone listens: events are built only then. Null: nobody.
    std::function<bool()> wants_events;
    /// Whether anyone waits for jobs to finish: effects::finished is filled
    /// only then. Null: nobody.
    std::function<bool()> wants_finished;
    /// Attempt tokens: a fresh non-negative base per pick; each claim's
    /// token is the base XOR its row. Null: random.
    std::function<int64_t()> new_token;
    /// Standing offers (job_offer) to a hungry worker while nothing is
    /// ready; false: the dispatcher claims every job itself.
    bool offers = true;
    /// The writer's commit feeds that wait, oldest first; each input takes
    /// and applies them before it decides. Null: none.
    std::function<std::vector<commit_feed>()> take_feeds;
    /// options::remote_grace: how long a remote worker that went down has
    /// to join again before its running attempts are lost; 0: lost at once.
    int64_t remote_grace_ms = 0;
    /// The run-time controls stored in the database (read at open).
    std::vector<control_info> controls;
    /// The id of the first worker to register: one past the highest in
    /// the workers table, so that ids count on across opens.
    int64_t first_worker_id = 1;
  };

  /// A write for the writer, in the order it must be sent. worker_writes,
  /// lose_batch and offers go ahead of submissions (high priority).
  using write = std::variant<worker_writes, expire_batch, expire_pending_batch, lose_batch,
                             hold_batch, job_offer, withdraw_offer, control_save,
                             worker_save>;

  /// A request to a worker's running attempt.
  struct to_worker {
    uint64_t worker = 0;
    std::variant<cancel_attempt, preempt_attempt, resize_worker> request;
  };

  /// What one input asks the actor to do, in this order: writes, requests
  /// to workers, waiters told, unregistrations answered, events published.
  struct effects {
    std::vector<write> writes;
    std::vector<to_worker> requests;
    /// Rows whose job a commit finished (queue::wait's final_watch).
    std::vector<int64_t> finished;
    /// Workers whose unregistration is complete: answer them.
    std::vector<uint64_t> unregistered;
    std::vector<event> events;
    /// A protocol message that breaks its rules: what, and why (logged).
    std::vector<std::pair<std::string, status>> rejected;
    /// Whether a worker waits for jobs now (the writer rings at once then);
    /// unset: unchanged.
    std::optional<bool> hungry;
    /// When the core wants a tick next (queue clock); never_ms: no change.
    int64_t wake_at = storage::never_ms;
  };

  /// Loads the pending jobs found at open, and the remote workers' attempts
  /// kept running for them (lost when their grace ends).
  dispatch_core(config cfg, std::vector<storage::job_key> pending, int64_t now,
                held_attempts held = {});
  ~dispatch_core();
  dispatch_core(const dispatch_core&) = delete;
  dispatch_core& operator=(const dispatch_core&) = delete;

  /// A worker's registration (validated by the caller). Its row goes to
  /// the writer (worker_save), and again with its end once it unregisters
  /// or goes down.
  struct joining {
    std::string name;
    std::string host;
    int64_t pid = 0;
    std::vector<std::string> types;
    int32_t max_capacity = 1;
    int32_t prefetch = 0;
    /// A worker on another node ("<node>/<worker>"), whose attempts are held
    /// for its return (config::remote_grace_ms) or lost when it goes down,
    /// and whose claims record it; empty: a local one.
    std::string holder;
    /// Attempts it kept across a dropped connection: those it runs or holds
    /// (`held`), and those whose code returned with an outcome not yet
    /// acknowledged (`returned`).
    std::vector<storage::attempt_ref> held;
    std::vector<storage::attempt_ref> returned;
  };

  /// How a registration went.
  struct joined {
    uint64_t id = 0;
    /// Listed attempts it does not get back: they ended, or are not its.
    std::vector<storage::attempt_ref> stale;
    /// The concurrency set for its name (queue::set_worker); 0: its own.
    int32_t max_capacity = 0;
  };

  /// A worker registered. A remote worker gets back the listed attempts
  /// kept for it (since open, or by an earlier registration of its own
  /// whose loss is on its way), under their tokens; the others kept for it
  /// that it did not list are lost, as its code for them is gone.
  joined register_worker(joining w, int64_t now, effects& out);

  /// Whether worker `id` is registered (one leaving after its claim is,
  /// until that claim commits or fails).
  bool registered(uint64_t id) const;

  /// How an unregistration went.
  enum class leaving {
    unknown,      ///< not registered: answer now
    left,         ///< gone now: answer now
    after_claim,  ///< answered by a later effects::unregistered
  };

  /// The worker stops taking jobs.
  leaving unregister_worker(uint64_t id, int64_t now, effects& out);

  /// A worker's report (its sender was checked by the caller). Its writes
  /// come first in `out.writes` if it has any.
  void report(worker_report r, int64_t now, effects& out);

  /// These workers are gone (their actor went down; one actor may have
  /// registered several times). All go before anything is handed out again.
  void workers_gone(const std::vector<uint64_t>& ids, int64_t now, effects& out);

  /// Applies the commit feeds that wait and hands out work (the writer rang,
  /// or a snapshot must include every commit so far).
  void catch_up(int64_t now, effects& out);

  /// A timer tick: expiries, deadlines and timed pauses that are due.
  void tick(int64_t now, effects& out);

  /// The queue is closing: no more jobs are handed out.
  void drain(int64_t now, effects& out);

  /// A scheduling change, answered through `c.reply`: at once if it is
  /// refused or changes nothing stored, else by the writer once the
  /// control_save in `out.writes` is committed. resume_all answers how many
  /// pauses it ended.
  void control(const scheduling_control& c, int64_t now, effects& out);

  /// The registered workers, in id order (queue::workers).
  std::vector<worker_info> workers() const;

  /// The run-time controls in force (metrics_snapshot::controls).
  std::vector<control_info> controls(int64_t now) const;

  /// The core's metrics (everything metrics_snapshot has from the dispatcher).
  void fill_metrics(metrics_snapshot& snap, int64_t now) const;

  /// What the dispatcher sees of these pending jobs now, in order.
  std::vector<pending_view> view(const std::vector<pending_query>& jobs, int64_t now) const;

  /// The core's state; opaque outside dispatch_core.cpp.
  struct state;

 private:
  std::unique_ptr<state> st_;
  void settle(int64_t now, effects& out);
};

}  // namespace ergon::actors
