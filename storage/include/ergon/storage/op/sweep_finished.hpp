// sweep_finished: one step of the retention sweeper (storage/src/sweep_finished.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/op/delete_finished.hpp"

namespace ergon::storage {

struct sweep_finished_args {
  job_status status = job_status::succeeded;  ///< a final status
  int64_t cutoff_ms = 0;  ///< jobs that finished before this go
  int64_t after_row = 0;  ///< the previous step's resume_after
  size_t limit = 500;
};

/// One step of the retention sweeper: delete_finished for jobs of `status`
/// that finished before the cutoff, among the rows submitted before it
/// (first_row_submitted_at_or_after bounds the range, so a step never reads
/// the young end of the table).
result<delete_finished_result> sweep_finished(db& d, const sweep_finished_args& args);

}  // namespace ergon::storage
