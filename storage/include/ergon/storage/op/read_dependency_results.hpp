// read_dependency_results: how the jobs a running job depends on ended
// (storage/src/read_dependency_results.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

struct read_dependency_results_args {
  int64_t row = 0;    ///< the dependent's
  int64_t token = 0;  ///< its running attempt's
  int64_t after = 0;  ///< the last dependency row of the previous page; 0: from the start
  /// A page ends before the row that would start past this many bytes
  /// (its results, and 64 bytes a row), or after `max_rows` rows; it
  /// holds one row at least.
  size_t max_bytes = size_t{4} << 20;
  size_t max_rows = 4'096;
};

struct read_dependency_results_result {
  std::vector<dependency_result> results;
  int64_t next_after = 0;  ///< the next page's `after`; 0: this was the last
};

/// One page of the dependencies of `row`, oldest first, each with its
/// status and result. Error: stale_attempt if `token` is not the running
/// attempt of `row`.
result<read_dependency_results_result> read_dependency_results(
  db& d, const read_dependency_results_args& args);

}  // namespace ergon::storage
