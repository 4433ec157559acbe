// job_counters: job counts per type and status, kept by db_writer.
//
// The writer applies each commit's changes, so reading counts never scans the
// table or waits behind a write.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <string>

#include "ergon/job_info.hpp"

namespace ergon::actors {

using per_status = std::array<int64_t, job_status_count>;

/// Count changes accumulated during one commit.
class count_delta {
 public:
  void add(const std::string& type, job_status s, int64_t n = 1) {
    by_type_[type][static_cast<size_t>(s)] += n;
  }
  void move(const std::string& type, job_status from, job_status to) {
    add(type, from, -1);
    add(type, to, 1);
  }
  void merge(const count_delta& other);
  bool empty() const noexcept { return by_type_.empty(); }
  void clear() noexcept { by_type_.clear(); }
  const std::map<std::string, per_status>& by_type() const noexcept { return by_type_; }

 private:
  std::map<std::string, per_status> by_type_;
};

/// Thread-safe counts, written by the writer after each commit.
class job_counters {
 public:
  void apply(const count_delta& d);
  /// Totals per status over all types.
  status_counts totals() const;
  /// Counts per status for each type.
  std::map<std::string, per_status> by_type() const;

 private:
  mutable std::mutex mtx_;
  std::map<std::string, per_status> by_type_;
};

}  // namespace ergon::actors
