// ready_index: the dispatcher's in-memory scheduling keys of pending jobs.
// Internal to actors/.
//
// Jobs that are due sit in buckets keyed by (type, group, weight), each
// ordered by dispatch order (priority desc, run_at, row). A worker with room
// for weight w takes the best head among the buckets of its types whose
// weight fits: a heavy job at the head never blocks lighter ones. Jobs not
// yet due wait in a run_at-ordered map until `promote` moves them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace ergon::actors {

/// 40 bytes per pending job; 1M pending jobs stay well under 100 MB.
struct ready_entry {
  int64_t row = 0;
  int64_t run_at = 0;
  int64_t aging_start = 0;
  int32_t priority = 0;
  int32_t weight = 1;
  uint32_t type = 0;   ///< interned type name
  uint32_t group = 0;  ///< interned group name; 0 = no group
};

/// Dispatch order: priority desc, run_at, row (explicit, as in storage::runs_before).
struct dispatch_order {
  bool operator()(const ready_entry& a, const ready_entry& b) const noexcept {
    if (a.priority != b.priority)
      return a.priority > b.priority;
    if (a.run_at != b.run_at)
      return a.run_at < b.run_at;
    return a.row < b.row;
  }
};

class ready_index {
 public:
  /// Adds a job: ready if run_at <= now, else waiting for its time.
  void add(const ready_entry& e, int64_t now);

  /// Removes the job with exactly this key; false if it is not here (for
  /// example, picked and being claimed).
  bool remove(const ready_entry& e);

  /// Moves every job due at `now` from waiting to ready.
  void promote(int64_t now);

  /// The earliest run_at among waiting jobs.
  std::optional<int64_t> next_due() const;

  /// Removes and returns the best ready job of one of `types` with weight <=
  /// `max_weight`.
  std::optional<ready_entry> pop_best(const std::vector<uint32_t>& types, int32_t max_weight);

  size_t ready_count() const noexcept { return ready_count_; }
  size_t waiting_count() const noexcept { return waiting_.size(); }

 private:
  using bucket_key = std::tuple<uint32_t, uint32_t, int32_t>;  // type, group, weight
  struct bucket {
    int32_t weight = 1;
    std::set<ready_entry, dispatch_order> jobs;
  };

  void insert_ready(const ready_entry& e);

  std::map<bucket_key, bucket> buckets_;
  std::unordered_map<uint32_t, std::vector<bucket*>> by_type_;
  std::multimap<int64_t, ready_entry> waiting_;
  size_t ready_count_ = 0;
};

}  // namespace ergon::actors
