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

#include "ergon/storage/records.hpp"

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
  void asked(const candidate& victim, int64_t preemptor);
  /// Whether attempts asked for `preemptor` have not all freed their slots.
  bool asking_for(int64_t preemptor) const;
  /// Whether the attempt of `row` was asked and has not freed its slot.
  bool asked(int64_t row) const { return asks_.count(row) == 1; }
  /// Weight of `group`'s running attempts asked to yield that still run:
  /// what it is about to lose (min_slots count it).
  int32_t losing(uint32_t group) const;

  /// The attempt (row, token) ended; `yielded` if it yielded (its job then
  /// waits for hold()). `slot_free`: its code is not running any more (or
  /// never will report back); otherwise the request stays outstanding until
  /// slot_freed(), as the worker has no room until the code returns. A
  /// token that is not the asked attempt's changes nothing.
  void attempt_ended(int64_t row, int64_t token, bool yielded, bool slot_free);
  /// The code of attempt (row, token) returned, or its worker is gone (no
  /// token: whichever attempt was asked): its request is answered. The
  /// attempt's end may commit after this (the writer's feed and the
  /// worker's return race); a yield that does is still held.
  void slot_freed(int64_t row, std::optional<int64_t> token);

  /// The job of `row` left the queue (cancelled, expired): nothing of it is
  /// kept, and a held key is dropped rather than resumed.
  void forget(int64_t row);
  /// A held job was updated: keeps `after` as its key. False if it is not
  /// held (the caller moves it in the index instead).
  bool update_held(const storage::job_key& after);

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
  size_t held() const noexcept { return held_by_.size(); }

 private:
  struct ask {
    int64_t preemptor = 0;
    candidate victim;
    bool ended = false;  ///< its attempt's end committed
  };
  /// An ask whose slot was freed before its attempt's end committed.
  struct answered {
    int64_t preemptor = 0;
    int64_t token = 0;
  };
  struct preemptor_state {
    int32_t asks = 0;  ///< asked attempts that have not freed their slots
    bool started = false;
    std::unordered_map<int64_t, storage::job_key> held;  // by row
  };

  std::unordered_map<int64_t, ask> asks_;         // by victim row
  std::unordered_map<int64_t, answered> answered_;  // by victim row
  std::unordered_map<uint32_t, int32_t> losing_;  // by group
  std::unordered_map<int64_t, int64_t> yielded_;  // yielded row -> preemptor row
  std::unordered_map<int64_t, int64_t> held_by_;  // held row -> preemptor row
  std::unordered_map<int64_t, preemptor_state> preemptors_;

  // Drops preemptor `p`, returning the keys held for it.
  std::vector<storage::job_key> release(
    std::unordered_map<int64_t, preemptor_state>::iterator p);
};

}  // namespace ergon::actors
