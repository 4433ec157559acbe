// spawn_children: job code's children, its checkpoint and its wait for them
// in one transaction (storage/src/spawn_children.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/op/insert_jobs.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct spawn_children_args {
  int64_t row = 0;    ///< the parent's
  int64_t token = 0;  ///< its running attempt's
  std::vector<job> children;
  std::string checkpoint;  ///< the parent's payload when it runs again
  /// How the children are inserted (jobs, next_row and parent are set here).
  insert_jobs_args insert;
};

/// What spawning did.
struct spawn_children_result {
  /// The parent's attempt: ended `spawned`, the job waiting (or pending, if
  /// every child had ended already; cancelled if a cancel request came
  /// first, with no child inserted).
  attempt_end parent;
  /// The children as inserted.
  insert_jobs_result children;
};

/// Inserts `children` as children of the running attempt `token` of
/// `row`, stores `checkpoint` as its payload for the next attempt, and
/// ends the attempt: the job waits on every child (edges child to parent)
/// without spending a try (try_base moves up, as for a snooze), and its
/// deadline, if any, caps each child's (a child due after it is
/// invalid_argument "children[i].run_at"). A child that already ended
/// unsuccessfully (an id skipped to by its unique key) settles the parent
/// at once, by its policy. Returns nothing if the attempt is not running
/// (stale). Errors: those of insert_jobs, with "job i of n" naming the
/// child; the caller rolls back.
result<std::optional<spawn_children_result>> spawn_children(db& d, spawn_children_args args,
                                                            int64_t now_ms);

}  // namespace ergon::storage
