// recover: restart recovery when a queue opens its database. Internal to runtime/.
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/options.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::runtime {

/// Jobs still marked running belong to a process that died: their attempts
/// fail as "process restart" and the jobs retry (timed by `mode`) or fail,
/// in one transaction on `d`, which no actor uses yet. Returns the pending
/// jobs, including the ones recovery put back.
result<std::vector<storage::job_key>> recover(storage::db& d, recovery_mode mode,
                                              int64_t now_ms);

}  // namespace ergon::runtime
