// load_unfinished: the pending and running jobs, at open
// (storage/src/load_unfinished.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// A job found running: its key and its attempt.
struct running_job {
  job_key key;
  int64_t token = 0;
  int64_t started_at = 0;
  int64_t expires_at = 0;
  bool cancel_requested = false;
  /// The worker in another process that holds the attempt (held_by);
  /// empty: the owner's own worker.
  std::string holder;
};

/// Jobs that are pending or running, found by scanning rows from the low
/// mark up (no status index: see schema.cpp).
struct unfinished_jobs {
  std::vector<job_key> pending;
  std::vector<running_job> running;
  /// The lowest unfinished row id, or one past the highest row if none.
  int64_t low_mark = 0;
};
result<unfinished_jobs> load_unfinished(db& d, int64_t from_row);

}  // namespace ergon::storage
