// count_delta: how a transaction changes the number of jobs per type and
// status, and of unfinished jobs per group. The writer collects one per batch;
// `add_finished_counts` stores its finished statuses per type and
// `actors::job_counters` applies all of it in memory.
//
//   count_delta d;
//   d.add("email", "tenant-1", job_status::pending);                        // a submit
//   d.move("email", "tenant-1", job_status::pending, job_status::running);  // a claim
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "ergon/job_info.hpp"

namespace ergon::storage {

/// One count per job_status, indexed by its frozen value.
using per_status = std::array<int64_t, job_status_count>;

/// Count changes per type and status, and per group for pending and running
/// jobs (finished jobs are not counted by group: there are too many groups
/// over a file's life). A type or group stays listed once touched, even if
/// its changes cancel out (its entries are then zero).
class count_delta {
 public:
  /// Changes the count of `type` only: for finished jobs and seeds.
  void add(const std::string& type, job_status s, int64_t n = 1) {
    by_type_[type][static_cast<size_t>(s)] += n;
  }
  /// Changes the count of `type`, and of `group` ("" for none) if `s` is
  /// pending or running.
  void add(const std::string& type, const std::string& group, job_status s, int64_t n = 1) {
    add(type, s, n);
    add_group(group, s, n);
  }
  void move(const std::string& type, const std::string& group, job_status from,
            job_status to) {
    add(type, group, from, -1);
    add(type, group, to, 1);
  }
  /// Changes the count of `group` alone; ignored for finished statuses.
  void add_group(const std::string& group, job_status s, int64_t n = 1) {
    if (!is_final(s))
      by_group_[group][static_cast<size_t>(s)] += n;
  }
  bool empty() const noexcept { return by_type_.empty() && by_group_.empty(); }
  /// Jobs this delta finished (succeeded, failed, cancelled or expired).
  int64_t finished() const noexcept {
    int64_t n = 0;
    for (auto& [type, changes] : by_type_)
      for (size_t i = 0; i < changes.size(); ++i)
        if (is_final(static_cast<job_status>(i)))
          n += changes[i];
    return n;
  }
  void clear() noexcept {
    by_type_.clear();
    by_group_.clear();
  }
  const std::map<std::string, per_status>& by_type() const noexcept { return by_type_; }
  const std::map<std::string, per_status>& by_group() const noexcept { return by_group_; }

 private:
  std::map<std::string, per_status> by_type_;
  std::map<std::string, per_status> by_group_;
};

}  // namespace ergon::storage
