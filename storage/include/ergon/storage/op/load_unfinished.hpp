// load_unfinished: the pending and running jobs, at open
// (storage/src/load_unfinished.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// Jobs that are pending or running, found by scanning rows from the low
/// mark up (no status index: see schema.cpp).
struct unfinished_jobs {
  std::vector<job_key> pending;
  std::vector<job_key> running;
  /// The lowest unfinished row id, or one past the highest row if none.
  int64_t low_mark = 0;
};
result<unfinished_jobs> load_unfinished(db& d, int64_t from_row);

}  // namespace ergon::storage
