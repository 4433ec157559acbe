// count_delta: how a transaction changes the number of jobs per type and
// status. The writer collects one per batch; `add_finished_counts` stores its
// finished statuses and `actors::job_counters` applies all of it in memory.
//
//   count_delta d;
//   d.add("email", job_status::pending);                          // a submit
//   d.move("email", job_status::pending, job_status::running);    // a claim
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "ergon/job_info.hpp"

namespace ergon::storage {

/// One count per job_status, indexed by its frozen value.
using per_status = std::array<int64_t, job_status_count>;

/// Count changes per type and status. A type stays listed once touched, even
/// if its changes cancel out (its entries are then zero).
class count_delta {
 public:
  void add(const std::string& type, job_status s, int64_t n = 1) {
    by_type_[type][static_cast<size_t>(s)] += n;
  }
  void move(const std::string& type, job_status from, job_status to) {
    add(type, from, -1);
    add(type, to, 1);
  }
  bool empty() const noexcept { return by_type_.empty(); }
  /// Jobs this delta finished (succeeded, failed, cancelled or expired).
  int64_t finished() const noexcept {
    int64_t n = 0;
    for (auto& [type, changes] : by_type_)
      for (size_t i = static_cast<size_t>(job_status::succeeded); i < changes.size(); ++i)
        n += changes[i];
    return n;
  }
  void clear() noexcept { by_type_.clear(); }
  const std::map<std::string, per_status>& by_type() const noexcept { return by_type_; }

 private:
  std::map<std::string, per_status> by_type_;
};

}  // namespace ergon::storage
