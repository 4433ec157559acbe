// worker_registry: the workers registered with the dispatcher, the credit
// each has for new jobs, the claim each has at the writer, and the line of
// workers waiting for jobs. Internal to the dispatcher; no actors (the
// dispatcher's actor keeps each worker's handle).
//
// Credit: a worker's last report said it had `capacity` units free after
// receiving `received` units in all; `sent` counts every unit claimed for
// it. It wants `capacity - (sent - received)` more, so reports that overtake
// jobs on their way never make it over-assigned. A worker has at most
// max_claims_at_writer claims at the writer: the next one can be picked
// while the last commits, so a fast worker's claims share transactions.
//
// A standing offer (dispatch_core) counts as one of those claims: it holds
// the worker's room at the writer until the writer claims a new job with it
// or gives it back.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ergon/actors/scheduling_policy.hpp"
#include "ergon/error.hpp"

namespace ergon::actors {

class worker_registry {
 public:
  /// Claims one worker may have at the writer at once.
  static constexpr size_t max_claims_at_writer = 2;

  struct worker {
    std::vector<uint32_t> types;  ///< scheduling_policy's type ids
    int32_t max_capacity = 0;
    int32_t prefetch = 0;
    int32_t capacity = 0;
    int64_t received = 0;
    int64_t sent = 0;
    bool leaving = false;  ///< unregistered while claiming: goes after its claims
    /// Room held by a standing offer at the writer, counted as sent; 0: none.
    int32_t offered = 0;
    /// The jobs of each of its claims at the writer, oldest first.
    std::deque<std::vector<picked_job>> claims;
    /// The writer hands claimed jobs to the worker directly, so the worker
    /// may report an attempt's code as returned before its claim's feed
    /// arrives: (row, token) pairs kept until then.
    std::set<std::pair<int64_t, int64_t>> returned_early;
    /// A claim or an offer for it is at the writer.
    bool claiming() const { return !claims.empty() || offered > 0; }
    size_t at_writer() const { return claims.size() + (offered > 0 ? 1 : 0); }
    /// It may have one more claim picked now. Not while a return waits for
    /// its claim's feed: the slot it frees is counted only then, and a pick
    /// made before would see its group one job fuller than it is.
    bool may_claim() const {
      return !leaving && at_writer() < max_claims_at_writer && wanted() > 0
             && returned_early.empty();
    }

    /// Units the dispatcher may still assign: free capacity minus what is
    /// on its way to the worker.
    int32_t wanted() const { return static_cast<int32_t>(capacity - (sent - received)); }
  };

  /// Ids are given from `first_id` on.
  explicit worker_registry(uint64_t first_id = 1) : next_id_(first_id) {}

  /// Registers a worker with no credit yet; returns its id.
  uint64_t add(std::vector<uint32_t> types, int32_t max_capacity, int32_t prefetch);

  /// Worker `id` runs up to `max_capacity` units from now on (its report
  /// said so after a resize_worker). False if it is not registered.
  bool resize(uint64_t id, int32_t max_capacity);

  /// Worker `id` was told to run at most `max_capacity` units, fewer than it
  /// has: the room of its last report counts as at most that much (plus
  /// its prefetch) until its next report, so credit it had is not spent
  /// past the new max meanwhile.
  void shrink_room(uint64_t id, int32_t max_capacity);

  /// The worker `id`, or null if it is not registered.
  const worker* find(uint64_t id) const;

  /// Whether a report's room is possible for worker `id`: 0 to
  /// max_capacity + prefetch units free, having received 0 to what was sent
  /// it. ok for a worker that is not registered (its report credits
  /// nothing). Error: invalid_argument naming "capacity" or
  /// "received_weight".
  status check_credit(uint64_t id, int32_t capacity, int64_t received) const;

  /// The worker's report: it has `capacity` units free after receiving
  /// `received` units in all. False if it is not registered.
  bool credit(uint64_t id, int32_t capacity, int64_t received);

  /// The next job for `types` that fits `room` units, or nothing.
  using picker = std::function<std::optional<picked_job>(const std::vector<uint32_t>& types,
                                                         int32_t room)>;

  /// Picks jobs for the room the worker wants and records them as a claim
  /// at the writer; returns their rows. Room beyond max_capacity is its
  /// prefetch window, so each pick must still fit max_capacity. Picks
  /// nothing while max_claims_at_writer claims are there or the worker is
  /// leaving.
  std::vector<int64_t> claim(uint64_t id, const picker& pick);

  /// The worker reports the code of attempt (row, token) returned, and the
  /// attempt is not running yet: kept for claim_committed() if `row` is in
  /// one of its claims at the writer, or for offer_taken() while it has an
  /// offer there.
  void returned_before_claim(uint64_t id, int64_t row, int64_t token);

  /// What a committed claim had picked.
  struct committed_claim {
    std::unordered_map<int64_t, picked_job> picked;  ///< by row
    std::vector<pending_job> missed;  ///< picked but not claimed: unpick them
    /// Attempts whose code already returned (see worker::returned_early).
    std::set<std::pair<int64_t, int64_t>> returned_early;
    bool left = false;  ///< it was leaving and is gone now: answer its unregister
  };

  /// The worker's claim that picked `row` committed (a claim's feeds can
  /// come out of order: one that failed is told after the commit of the
  /// transaction it shared); `missed` rows were not claimed, and their
  /// weight no longer counts as sent. The worker waits for more jobs if it
  /// wants some. Empty if it is not registered or has no such claim.
  committed_claim claim_committed(uint64_t id, int64_t row, const std::vector<int64_t>& missed);

  /// What a failed claim had picked.
  struct failed_claim {
    std::vector<picked_job> picks;  ///< put them back
    bool left = false;  ///< it was leaving and is gone now: answer its unregister
  };

  /// The worker's claim that picked `row` did not commit: its weight no
  /// longer counts as sent, and the worker waits for jobs again.
  failed_claim claim_failed(uint64_t id, int64_t row);

  // -- standing offers ------------------------------------------------------------

  /// Takes the first worker in line out of it and holds its room (up to its
  /// max_capacity) for a standing offer; returns it. Nothing if that worker
  /// has a claim or offer at the writer already (it keeps its place).
  std::optional<uint64_t> offer();

  /// The writer claimed job `row` of `weight` with the worker's offer, in
  /// the transaction that inserted it; `pick` is the policy's pick of it,
  /// if it made one. The rest of the offered room is free again. Empty if
  /// the worker is not registered or has no offer.
  committed_claim offer_taken(uint64_t id, int64_t row, int32_t weight,
                              const std::optional<picked_job>& pick);

  /// The worker's offer came back unused: its room is free again, and the
  /// worker waits for jobs. True if it was leaving and is gone now.
  bool offer_ended(uint64_t id);

  enum class leave_result {
    unknown,      ///< not registered
    left,         ///< gone now
    after_claim,  ///< goes when its claims at the writer commit or fail
  };

  /// The worker unregisters: it gets no more jobs, and its capacity no
  /// longer counts. Jobs of a claim at the writer still reach it first.
  leave_result leave(uint64_t id);

  /// The worker is gone. Returns the picks of its claims at the writer, to
  /// put back, and how many claims (an offer counts as one) were there;
  /// nothing if it is not registered.
  struct removed {
    std::vector<picked_job> picks;
    size_t claims = 0;
  };
  std::optional<removed> remove(uint64_t id);

  // -- the waiting line --------------------------------------------------------------

  bool anyone_waiting() const noexcept { return !waiting_.empty(); }
  size_t waiting_count() const noexcept { return waiting_.size(); }

  /// Takes the first worker in line. Nothing if it cannot take a claim now
  /// (gone, claiming, leaving, or without room); it leaves the line anyway.
  std::optional<uint64_t> pop_waiting();

  /// Puts the worker at the back of the line if it may have a claim picked
  /// (worker::may_claim).
  void wait_for_jobs(uint64_t id);

  // -- capacity ----------------------------------------------------------------------

  /// What the workers not leaving can take.
  struct total_capacity {
    /// Their max_capacity plus prefetch. Shares are of the claims workers
    /// hold, prefetch windows included: the jobs in a window run next, in
    /// the order they were picked.
    int32_t weight = 0;
    /// Per type id, the largest max_capacity: heavier jobs cannot run.
    std::unordered_map<uint32_t, int32_t> largest_by_type;
  };

  total_capacity capacity() const;

  /// Registered workers, leaving ones included.
  size_t size() const noexcept { return workers_.size(); }

  /// Calls `f` with every registered worker.
  template <class F>
  void each(F f) const {
    for (auto& [id, w] : workers_)
      f(w);
  }

 private:
  // The worker's claim at the writer that picked `row`, or end().
  static std::deque<std::vector<picked_job>>::iterator claim_of(worker& w, int64_t row);
  // Drops a claim at the writer; a leaving worker with none left goes (true).
  bool end_claim(std::unordered_map<uint64_t, worker>::iterator i,
                 std::deque<std::vector<picked_job>>::iterator claim);
  static void drop_stale_returns(worker& w);
  // A leaving worker with nothing left at the writer goes (true).
  bool gone_if_left(std::unordered_map<uint64_t, worker>::iterator i);

  std::unordered_map<uint64_t, worker> workers_;
  std::deque<uint64_t> waiting_;
  uint64_t next_id_ = 1;
};

}  // namespace ergon::actors
