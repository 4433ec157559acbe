// job_counters: job counts per type and status, and of unfinished jobs per
// group, kept by db_writer.
//
// Seeded at open by count_jobs; the writer applies each commit's
// changes (the same delta it stores there), so reading counts never scans the
// table or waits behind a write.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "ergon/job_info.hpp"
#include "ergon/storage/count_delta.hpp"

namespace ergon::actors {

// The delta type is storage's, which also writes it to finished_counts.
using storage::count_delta;
using storage::per_status;

/// Thread-safe counts, written by the writer after each commit.
class job_counters {
 public:
  void apply(const count_delta& d);
  /// Totals per status over all types.
  status_counts totals() const;
  /// Counts per status for each type.
  std::map<std::string, per_status> by_type() const;
  /// Pending and running counts of each group that has such jobs.
  std::map<std::string, per_status> by_group() const;

 private:
  mutable std::mutex mtx_;
  std::map<std::string, per_status> by_type_;
  std::map<std::string, per_status> by_group_;
};

}  // namespace ergon::actors
