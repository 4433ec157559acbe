// record_logs and read_logs: the lines job code writes to its attempts
// (job_context::log; storage/src/record_logs.cpp).
#pragma once

#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// Stores each attempt's lines (as log_text keeps them) and its count of
/// dropped ones on the job's current try and the attempt's token, while
/// the token is the job's: running, or just ended. Lines of an attempt
/// that is not the job's latest are skipped; a line stored before (sent
/// again) is kept as it was; a count lower than the stored one changes
/// nothing. The caller checks each line (check_log_line).
status record_logs(db& d, const std::vector<attempt_logs>& logs);

/// Fills the logs and logs_dropped of `attempts` (matched by try) from the
/// job at `row`: a yielded attempt's runs one after the other.
status read_logs(db& d, int64_t row, std::vector<attempt_info>& attempts);

}  // namespace ergon::storage
