// run_metrics: the counters behind metrics_snapshot's histograms. Plain
// classes: histogram_counter (fixed bounds), run_stats (the dispatcher's:
// run times per type and attempts per outcome) and writer_stats (the
// writer's batches and commits, read from other threads).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ergon/job_info.hpp"
#include "ergon/scheduling.hpp"

namespace ergon::actors {

/// Counts values into buckets with fixed upper bounds (inclusive), plus one
/// for values above the last. Negative values count as 0.
class histogram_counter {
 public:
  explicit histogram_counter(std::vector<int64_t> bounds);
  void record(int64_t value);
  histogram snapshot() const { return h_; }

 private:
  histogram h_;
};

/// Ended attempts, as the dispatcher sees them in commit feeds.
class run_stats {
 public:
  /// Run-time bounds, in ms.
  static std::vector<int64_t> bounds();
  void ended(const std::string& type, attempt_outcome outcome, int64_t run_ms);
  void fill(metrics_snapshot& m) const;

 private:
  std::map<std::string, histogram_counter> by_type_;
  std::vector<int64_t> outcomes_;
};

/// The writer's transactions. Thread-safe: the writer records, metrics read.
class writer_stats {
 public:
  /// A transaction that committed `requests` requests; COMMIT took `commit_us`.
  void committed(size_t requests, int64_t commit_us);
  void fill(metrics_snapshot& m) const;

 private:
  mutable std::mutex mtx_;
  histogram_counter batch_{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1'024}};
  histogram_counter commit_{{50, 100, 250, 500, 1'000, 2'500, 5'000, 10'000, 25'000, 50'000,
                             100'000, 1'000'000}};
};

}  // namespace ergon::actors
