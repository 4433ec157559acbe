// recover_running: ending, at open, the attempts of a dead process
// (storage/src/recover_running.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct recover_running_args {
  std::vector<int64_t> rows;  ///< jobs found running at open
  retry_timing timing = retry_timing::backoff;
  std::vector<double> randoms;  ///< one per row
};

/// At open, every running job belongs to a dead process: its attempt ends as
/// "process restart", and the job is retried (immediately or with backoff) or
/// ends `failed` if it has no retries left.
result<std::vector<attempt_end>> recover_running(db& d, const recover_running_args& args,
                                                 int64_t now_ms);

}  // namespace ergon::storage
