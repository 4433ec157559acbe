// commit_feed: what the dispatcher and the writer tell each other, with no
// actors: the dispatcher's writes (a worker's outcomes and claims, expiries,
// lost attempts) and the writer's commit feeds. The dispatcher's deciding
// core (dispatch_core) sees only these; the actors wrap them in messages.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/event.hpp"
#include "ergon/storage/op/expire_attempt.hpp"
#include "ergon/storage/op/hold_attempts.hpp"
#include "ergon/storage/op/load_unfinished.hpp"
#include "ergon/storage/op/lose_attempts.hpp"
#include "ergon/storage/op/save_worker.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::actors {

/// Attempts that workers in other processes ran when the queue's last owner
/// died, kept running at open rather than recovered (options::remote_grace):
/// each waits for its holder to join again until `until` (ms), and is lost
/// then. Their stored expiry is at least `until`.
struct held_attempts {
  std::vector<storage::running_job> attempts;
  int64_t until = 0;
};

/// One worker's writes, committed in one transaction: the outcomes and
/// released claims of its report, and the jobs the dispatcher picked for it.
struct worker_writes {
  uint64_t worker_id = 0;
  std::vector<storage::attempt_report> outcomes;
  std::vector<storage::attempt_ref> released;
  std::vector<storage::attempt_ref> claims;
  bool answers_report = false;
  /// The claims' holder: "<node>/<worker>" for a worker on another node.
  std::string holder{};
};

/// The dispatcher saw these attempts pass their expiry (local only).
struct expire_batch {
  std::vector<storage::expire_attempt_args> attempts;
};

/// A remote worker went away with these attempts running (local only).
struct lose_batch {
  storage::lose_attempts_args args;
};

/// A worker registered, or left: its row in the workers table (local only).
struct worker_save {
  storage::worker_row row;
};

/// A remote worker went away with these attempts running, and they wait for
/// it to join again (options::remote_grace): their expiry moves to at least
/// `args.until` (local only).
struct hold_batch {
  storage::hold_attempts_args args;
};

/// The dispatcher saw these pending jobs pass their deadline (local only).
struct expire_pending_batch {
  std::vector<int64_t> rows;
};

/// A standing offer: while nothing is ready for a hungry worker, the
/// dispatcher lets the writer claim one new job for it within the
/// transaction that inserts the job, and hand it over after that one
/// commit. The writer takes it only for the one job of its transaction that
/// fits (`types`, at most `room` units, due) when that transaction makes no
/// other job ready that fits, no feed after `fed_through` made a job ready
/// (the dispatcher decided without it), and only before `valid_until` (when
/// a waiting job becomes due). Otherwise it gives the offer back in the
/// feed (commit_feed::offers_ended), as it does on withdraw_offer.
struct job_offer {
  uint64_t serial = 0;  ///< names the offer in the answer
  uint64_t worker_id = 0;
  std::vector<std::string> types;
  int32_t room = 0;
  int64_t valid_until = 0;
  uint64_t fed_through = 0;  ///< the last feed (commit_feed::seq) the dispatcher applied
  std::string holder{};      ///< as worker_writes::holder
};

/// The dispatcher takes offer `serial` back (nothing fits it any more, or
/// its worker leaves). Answered only if the offer is still unused.
struct withdraw_offer {
  uint64_t serial = 0;
};

/// The claims of one worker_writes, or the one claim of an offer.
struct claim_result {
  uint64_t worker_id = 0;
  std::vector<storage::claimed_job> claimed;
  std::vector<int64_t> missed;
  uint64_t offer = 0;  ///< the offer the writer claimed it with; 0: none
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
  /// An offer whose use or giving back did not commit: it ended unused
  /// (alone in its write_failed).
  uint64_t offer = 0;
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
  std::vector<uint64_t> offers_ended;  ///< standing offers given back unused
  /// Jobs submitted waiting for their dependencies (for events alone).
  std::vector<storage::job_key> waiting;
  /// Failed jobs retry_failed put back to wait for their dependencies
  /// (for events alone).
  std::vector<storage::job_key> requeued_waiting;
  /// Waiting jobs whose last dependency ended: pending now.
  std::vector<storage::job_key> unblocked;
  /// Waiting jobs that ended without running (a dependency failed, a cancel).
  std::vector<storage::dependent_end> ended_waiting;
  /// Pending children cancelled because their parent ended unsuccessfully.
  std::vector<storage::dependent_end> children_cancelled;
  /// Run-time controls the writer changed itself (a recurring job's pause),
  /// as their control_changed events.
  std::vector<event> controls;
  uint64_t seq = 0;  ///< the writer numbers the feeds it sends, from 1

  bool empty() const noexcept {
    return added.empty() && cancelled.empty() && changed.empty() && claims.empty()
           && ended.empty() && released.empty() && extended.empty() && expired.empty()
           && failed.empty() && cancel_requests.empty() && progress.empty()
           && requeued.empty() && offers_ended.empty() && waiting.empty()
           && requeued_waiting.empty()
           && unblocked.empty() && ended_waiting.empty() && children_cancelled.empty()
           && controls.empty();
  }
};

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


}  // namespace ergon::actors
