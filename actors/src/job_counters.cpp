#include "ergon/actors/job_counters.hpp"

namespace ergon::actors {

void job_counters::apply(const count_delta& d) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [type, counts] : d.by_type()) {
    auto& mine = by_type_[type];
    for (size_t i = 0; i < counts.size(); ++i)
      mine[i] += counts[i];
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

}  // namespace ergon::actors
