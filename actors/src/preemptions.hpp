// preemptions: the dispatcher's record of preemption (docs/scheduling.md).
// Which running attempts were asked to yield and for which waiting job (the
// preemptor), and the yielded jobs held back until their preemptor's
// attempt ends. Internal to the dispatcher; no actors.
//
// A preemptor asks again only once every attempt asked for it has ended, so
// the waiting work never takes more slots than it needs. A held job is
// released when its preemptor ends, leaves the queue without running, or
// stops waiting for a slot (paused, say): a held job never waits on work
// that is not about to use its slot.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ergon/storage/operations.hpp"

namespace ergon::actors {

class preemptions {
 public:
  /// A running attempt that may be asked to yield.
  struct candidate {
    int64_t row = 0;
    int64_t token = 0;
    uint64_t worker = 0;
    uint32_t group = 0;
    int32_t weight = 1;
    int32_t priority = 0;  ///< effective priority when it started
    int64_t started_at = 0;
  };

  /// Free units a worker has now.
  using room_of = std::function<int32_t(uint64_t worker)>;
  /// Whether `group` may lose `weight` more units of running work.
  using may_lose = std::function<bool(uint32_t group, int32_t weight)>;

  /// The attempts to ask so that one worker has room for `need` units: the
  /// lowest priority first, and among equals the latest started (it loses
  /// the least work). Skips groups that `lose` refuses. Empty if no worker
  /// can make the room. The caller has filtered `candidates` to attempts of
  /// lower priority on workers that can run the preemptor.
  static std::vector<candidate> choose(std::vector<candidate> candidates, int32_t need,
                                       const room_of& room, const may_lose& lose);

  /// Records that `victim` was asked to yield for `preemptor`.
  void asked(int64_t victim, int64_t preemptor);
  /// Whether attempts asked for `preemptor` have not all ended.
  bool asking_for(int64_t preemptor) const;
  /// Whether the attempt of `row` was asked and has not ended.
  bool asked(int64_t row) const { return asks_.count(row) == 1; }

  /// The attempt of `row` ended; `yielded` if it yielded (its job then
  /// waits for hold()). `slot_free`: its code is not running any more (or
  /// never will report back); otherwise the request stays outstanding until
  /// slot_freed(), as the worker has no room until the code returns.
  void attempt_ended(int64_t row, bool yielded, bool slot_free);
  /// The code of the attempt of `row` returned: its request is answered.
  void slot_freed(int64_t row);

  /// The job of `row` is ready to run again. Returns true if it yielded and
  /// must be held until its preemptor ends (it is kept with `key`); false if
  /// it may run now. `resumed` says whether it yielded.
  bool hold(const storage::job_key& key, bool& resumed);

  /// The preemptor's claim is on its way (it got a slot) or was undone.
  void started(int64_t preemptor, bool yes);

  /// The attempt of `row` ended, or its job left the queue without running:
  /// the jobs held for it are released (returned).
  std::vector<storage::job_key> ended(int64_t row);

  /// Releases the jobs held for preemptors that neither got a slot nor are
  /// in `waiting` (the preemptors that still wait for one).
  std::vector<storage::job_key> release_stale(const std::unordered_set<int64_t>& waiting);

  /// Yielded jobs held now.
  size_t held() const noexcept { return held_count_; }

 private:
  struct preemptor_state {
    int32_t asks = 0;  ///< asked attempts that have not ended
    bool started = false;
    std::vector<storage::job_key> held;
  };

  std::unordered_map<int64_t, int64_t> asks_;     // victim row -> preemptor row
  std::unordered_map<int64_t, int64_t> yielded_;  // yielded row -> preemptor row
  std::unordered_map<int64_t, preemptor_state> preemptors_;
  size_t held_count_ = 0;
};

}  // namespace ergon::actors
