// record_progress: storing running jobs' progress reports
// (storage/src/record_progress.cpp).
#pragma once

#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// Stores each report on its attempt's job, running or just ended (the
/// last report may commit after the outcome). A report of an attempt that
/// is not the job's latest is skipped. Returns the stored ones.
result<std::vector<progress_stored>> record_progress(db& d,
                                                     const std::vector<progress_report>& reports);

}  // namespace ergon::storage
