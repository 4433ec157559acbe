// cancel_jobs: one step of a bulk cancel (storage/src/cancel_jobs.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/listing.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct cancel_jobs_args {
  /// Unfinished jobs it matches: filter.status empty, pending, waiting or
  /// running.
  job_filter filter;
  /// Only rows with ids after this one (the previous step's resume_after).
  int64_t after_row = 0;
  /// Only rows below this one (end_of_rows at the first step; 0: find it
  /// now). A bulk cancel thus leaves the jobs submitted after it began,
  /// such as the next instance of a recurring job it cancelled.
  int64_t before_row = 0;
  size_t limit = 500;
};

struct cancel_jobs_result {
  std::vector<cancelled_job> cancelled;  ///< pending or waiting jobs, now cancelled
  /// Running jobs whose attempt is asked to stop, with their keys; one
  /// asked before is not asked (nor counted) again.
  std::vector<std::pair<attempt_ref, job_key>> stop_requested;
  /// The highest row this step looked at if it found `limit` jobs, for the
  /// next step's after_row; 0 when it found fewer (the bulk is done).
  int64_t resume_after = 0;
  /// The before_row the step used.
  int64_t before_row = 0;
};

/// Cancels up to `limit` unfinished jobs that `filter` matches, lowest ids
/// first, each as cancel_job does. Starts no lower than the unfinished low
/// mark. Error: invalid_argument (a final status, or a filter field);
/// nothing changes then.
result<cancel_jobs_result> cancel_jobs(db& d, const cancel_jobs_args& args, int64_t now_ms);

}  // namespace ergon::storage
