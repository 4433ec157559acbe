#include "ergon/actors/run_metrics.hpp"

#include <algorithm>

namespace ergon::actors {

histogram_counter::histogram_counter(std::vector<int64_t> bounds) {
  h_.counts.assign(bounds.size() + 1, 0);
  h_.bounds = std::move(bounds);
}

void histogram_counter::record(int64_t value) {
  value = std::max<int64_t>(0, value);
  auto i = static_cast<size_t>(std::lower_bound(h_.bounds.begin(), h_.bounds.end(), value)
                               - h_.bounds.begin());
  ++h_.counts[i];
  ++h_.total;
  h_.sum = h_.sum > INT64_MAX - value ? INT64_MAX : h_.sum + value;
}

std::vector<int64_t> run_stats::bounds() {
  return {5, 10, 25, 50, 100, 250, 500, 1'000, 2'500, 5'000, 10'000, 30'000, 60'000, 300'000,
          1'800'000, 3'600'000};
}

void run_stats::ended(const std::string& type, attempt_outcome outcome, int64_t run_ms) {
  auto i = by_type_.find(type);
  if (i == by_type_.end())
    i = by_type_.emplace(type, histogram_counter{bounds()}).first;
  i->second.record(run_ms);
  auto o = static_cast<size_t>(outcome);
  if (outcomes_.size() <= o)
    outcomes_.resize(o + 1, 0);
  ++outcomes_[o];
}

void run_stats::fill(metrics_snapshot& m) const {
  for (auto& [type, h] : by_type_)
    m.run_ms_by_type[type] = h.snapshot();
  m.attempts_by_outcome = outcomes_;
  m.attempts_by_outcome.resize(
    std::max<size_t>(outcomes_.size(), static_cast<size_t>(attempt_outcome::spawned) + 1),
    0);
}

void writer_stats::committed(size_t requests, int64_t commit_us) {
  std::lock_guard<std::mutex> guard{mtx_};
  batch_.record(static_cast<int64_t>(requests));
  commit_.record(commit_us);
}

void writer_stats::fill(metrics_snapshot& m) const {
  std::lock_guard<std::mutex> guard{mtx_};
  m.writer_batch_requests = batch_.snapshot();
  m.commit_us = commit_.snapshot();
}

}  // namespace ergon::actors
