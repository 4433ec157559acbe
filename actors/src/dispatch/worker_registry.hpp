// worker_registry: the workers registered with the dispatcher, the credit
// each has for new jobs, the claim each has at the writer, and the line of
// workers waiting for jobs. Internal to the dispatcher; no actors (the
// dispatcher's actor keeps each worker's handle).
//
// Credit: a worker's last report said it had `capacity` units free after
// receiving `received` units in all; `sent` counts every unit claimed for
// it. It wants `capacity - (sent - received)` more, so reports that overtake
// jobs on their way never make it over-assigned. A worker has at most one
// claim at the writer; its next claim waits for that claim's commit feed.
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
  struct worker {
    std::vector<uint32_t> types;  ///< scheduling_policy's type ids
    int32_t max_capacity = 0;
    int32_t prefetch = 0;
    int32_t capacity = 0;
    int64_t received = 0;
    int64_t sent = 0;
    bool claiming = false;  ///< a claim for it is at the writer
    bool leaving = false;   ///< unregistered while claiming: goes after the claim
    std::vector<picked_job> claim;  ///< the jobs of the claim at the writer
    /// The writer hands claimed jobs to the worker directly, so the worker
    /// may report an attempt's code as returned before its claim's feed
    /// arrives: (row, token) pairs kept until then.
    std::set<std::pair<int64_t, int64_t>> returned_early;

    /// Units the dispatcher may still assign: free capacity minus what is
    /// on its way to the worker.
    int32_t wanted() const { return static_cast<int32_t>(capacity - (sent - received)); }
  };

  /// Registers a worker with no credit yet; returns its id.
  uint64_t add(std::vector<uint32_t> types, int32_t max_capacity, int32_t prefetch);

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

  /// Picks jobs for the room the worker wants and records them as its claim
  /// at the writer; returns their rows. Room beyond max_capacity is its
  /// prefetch window, so each pick must still fit max_capacity. Picks
  /// nothing while a claim is at the writer or the worker is leaving.
  std::vector<int64_t> claim(uint64_t id, const picker& pick);

  /// The worker reports the code of attempt (row, token) returned, and the
  /// attempt is not running yet: kept for claim_committed() if `row` is in
  /// its claim at the writer.
  void returned_before_claim(uint64_t id, int64_t row, int64_t token);

  /// What a committed claim had picked.
  struct committed_claim {
    std::unordered_map<int64_t, picked_job> picked;  ///< by row
    std::vector<pending_job> missed;  ///< picked but not claimed: unpick them
    /// Attempts whose code already returned (see worker::returned_early).
    std::set<std::pair<int64_t, int64_t>> returned_early;
    bool left = false;  ///< it was leaving and is gone now: answer its unregister
  };

  /// The worker's claim committed; `missed` rows were not claimed, and
  /// their weight no longer counts as sent. The worker waits for more jobs
  /// if it wants some. Empty if it is not registered.
  committed_claim claim_committed(uint64_t id, const std::vector<int64_t>& missed);

  /// What a failed claim had picked.
  struct failed_claim {
    std::vector<picked_job> picks;  ///< put them back
    bool left = false;  ///< it was leaving and is gone now: answer its unregister
  };

  /// The worker's claim did not commit: its weight no longer counts as
  /// sent, and the worker waits for jobs again.
  failed_claim claim_failed(uint64_t id);

  enum class leave_result {
    unknown,      ///< not registered
    left,         ///< gone now
    after_claim,  ///< goes when its claim at the writer commits or fails
  };

  /// The worker unregisters: it gets no more jobs, and its capacity no
  /// longer counts. Jobs of a claim at the writer still reach it first.
  leave_result leave(uint64_t id);

  /// The worker is gone. Returns the picks of its claim at the writer, to
  /// put back; nothing if it is not registered.
  std::optional<std::vector<picked_job>> remove(uint64_t id);

  // -- the waiting line --------------------------------------------------------------

  bool anyone_waiting() const noexcept { return !waiting_.empty(); }
  size_t waiting_count() const noexcept { return waiting_.size(); }

  /// Takes the first worker in line. Nothing if it cannot take a claim now
  /// (gone, claiming, leaving, or without room); it leaves the line anyway.
  std::optional<uint64_t> pop_waiting();

  /// Puts the worker at the back of the line if it wants jobs and has no
  /// claim at the writer.
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
  // Clears the worker's claim at the writer; a leaving worker goes (true).
  bool end_claim(std::unordered_map<uint64_t, worker>::iterator i);

  std::unordered_map<uint64_t, worker> workers_;
  std::deque<uint64_t> waiting_;
  uint64_t next_id_ = 1;
};

}  // namespace ergon::actors
