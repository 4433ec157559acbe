// count_jobs and count_unfinished_by_group: job counts (storage/src/count_jobs.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// Job counts per (type, status).
struct type_status_count {
  std::string type;
  job_status status = job_status::pending;
  int64_t count = 0;
};

/// Pending and running jobs per (group, status), jobs without a group under
/// "": a range scan from the unfinished low mark.
struct group_status_count {
  std::string group;
  job_status status = job_status::pending;
  int64_t count = 0;
};
result<std::vector<group_status_count>> count_unfinished_by_group(db& d);

/// Where count_jobs gets its numbers.
enum class count_source : uint8_t {
  /// The finished_counts table (schema version 2) plus a range scan of the
  /// unfinished jobs from the low mark: the cost grows with the jobs added
  /// since the last open, not with the finished history.
  table,
  /// A GROUP BY over every job: about 1.3 ms per 1,000 jobs. For files older
  /// than version 2, and for checking the table.
  scan,
};

/// Job counts per (type, status), ordered by type then status, leaving out
/// pairs with no jobs; both sources give the same answer. Fails only with
/// storage errors, including when asked for the table of a version-1 file (it
/// has none: use `scan`).
result<std::vector<type_status_count>> count_jobs(db& d,
                                                  count_source from = count_source::table);

}  // namespace ergon::storage
