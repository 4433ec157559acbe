// recover: restart recovery when a queue opens its database. Internal to runtime/.
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/actors/commit_feed.hpp"
#include "ergon/options.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::runtime {

/// What recovery leaves for the dispatcher.
struct recovered {
  /// The pending jobs, including the ones recovery put back.
  std::vector<storage::job_key> pending;
  /// Remote workers' attempts kept running (empty when `remote_grace` is 0).
  actors::held_attempts held;
  /// The run-time controls stored (queue::pause_queue, set_group, ...).
  std::vector<control_info> controls;
  /// The id the first worker registered gets (dispatch_core's config).
  int64_t first_worker_id = 1;
};

/// Jobs still marked running belong to a process that died: their attempts
/// fail as "process restart" and the jobs retry (timed by `mode`) or fail,
/// in one transaction on `d`, which no actor uses yet. With `remote_grace`
/// above 0, attempts held by workers in other processes keep running
/// instead, their expiry moved to at least now + remote_grace.
result<recovered> recover(storage::db& d, recovery_mode mode, int64_t remote_grace_ms,
                          int64_t now_ms);

}  // namespace ergon::runtime
