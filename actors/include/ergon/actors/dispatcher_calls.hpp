// dispatcher_calls: the local calls a queue makes to its dispatcher, with
// no actors: scheduling changes, metrics and the scheduling view of pending
// jobs. Each carries its reply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/actors/reply.hpp"
#include "ergon/error.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/storage/op/save_controls.hpp"
#include "ergon/worker.hpp"

namespace ergon::actors {

/// Changes to how the dispatcher shares capacity (local only).
struct scheduling_control {
  enum op_type : uint8_t {
    set_group_weight,
    reset_group_weights,
    pause_group,
    resume_group,
    pause_type,
    resume_type,
    resume_all,
    reset_breaker,
    pause_queue,
    resume_queue,
    change_group,
    change_type,
    reset_group,
    reset_type,
    change_worker,
    reset_worker,
  };
  op_type op = set_group_weight;
  std::string name;
  int32_t weight = 0;
  std::optional<int64_t> until;  ///< pause deadline (queue clock)
  settings_change settings;      ///< change_group, change_type, change_worker
  /// Answered once the change applies and, for a run-time control, is
  /// committed: no job starts against it afterwards, and it survives a
  /// crash. resume_all answers how many pauses it ended; the others 0.
  reply_to<result<int64_t>> reply;
};

/// Run-time controls for the writer to save (the dispatcher's
/// control_table decided them), answered with `answer` once committed. A
/// control call's reply travels here; a pause that ended by itself has none.
struct control_save {
  storage::save_controls_args args;
  int64_t answer = 0;
  reply_to<result<int64_t>> reply;
};

/// Asks for a metrics snapshot (local only).
struct metrics_request {
  reply_to<result<metrics_snapshot>> reply;
};

/// Asks for the run-time controls in force (local only): what a reopen
/// would restore, without building a whole metrics snapshot.
struct controls_request {
  reply_to<result<std::vector<control_info>>> reply;
};

/// Asks for the registered workers (local only).
struct workers_request {
  reply_to<result<std::vector<worker_info>>> reply;
};

/// A pending job whose scheduling view `job_info` reports.
struct pending_query {
  std::string type;
  std::string group;
  int32_t priority = 0;
  int32_t weight = 1;
  int64_t ready_since = 0;
};

/// What the dispatcher sees of a pending job now.
struct pending_view {
  int32_t effective_priority = 0;
  bool too_heavy = false;
};

/// Asks for the scheduling view of pending jobs now, in order (local only).
struct pending_view_request {
  std::vector<pending_query> jobs;
  reply_to<result<std::vector<pending_view>>> reply;
};

}  // namespace ergon::actors
