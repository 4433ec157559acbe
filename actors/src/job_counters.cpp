#include "ergon/actors/job_counters.hpp"

namespace ergon::actors {

namespace {

void add_to(per_status& mine, const per_status& changes) {
  for (size_t i = 0; i < changes.size(); ++i)
    mine[i] += changes[i];
}

}  // namespace

void job_counters::apply(const count_delta& d) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [type, counts] : d.by_type())
    add_to(by_type_[type], counts);
  // A group without unfinished jobs is dropped: groups come and go (one per
  // tenant, say), and an idle one must not cost memory until close.
  for (auto& [group, counts] : d.by_group()) {
    auto it = by_group_.try_emplace(group).first;
    add_to(it->second, counts);
    if (it->second == per_status{})
      by_group_.erase(it);
  }
}

status_counts job_counters::totals() const {
  std::lock_guard<std::mutex> guard{mtx_};
  status_counts out;
  for (auto& [type, counts] : by_type_)
    for (size_t i = 0; i < counts.size(); ++i)
      out.by_status[i] += counts[i];
  return out;
}

std::map<std::string, per_status> job_counters::by_type() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return by_type_;
}

std::map<std::string, per_status> job_counters::by_group() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return by_group_;
}

}  // namespace ergon::actors
