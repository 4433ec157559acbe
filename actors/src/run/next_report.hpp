// next_report: what a worker's next report says, from what its job threads
// left in the outbox and the claims it gives back. No actors: the worker
// actor sends what this returns.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ergon/actors/protocol_records.hpp"
#include "job_runner.hpp"

namespace ergon::actors {

/// The weight a worker runs and holds (worker_config's fields).
struct report_room {
  int32_t min_capacity = 1;
  int32_t max_capacity = 1;
  int32_t prefetch = 0;
};

/// What the last report said of the room, so the same room is not sent
/// twice. -1: nothing yet (or the credit starts over).
struct last_room {
  int32_t capacity = -1;
  int64_t received = -1;
};

/// A report to send. `carries_writes`: it has outcomes or claims given
/// back, so the writer answers it, and the next such report waits for that.
struct report_plan {
  worker_report report;
  bool carries_writes = false;
};

/// The report for the outcomes and returns in `box` (moved out; the
/// replies stay) and the claims in `to_release` (moved out), from worker
/// `worker_id` that has received `received_weight` units in all. A
/// stopping worker asks for nothing; one holding at least min_capacity +
/// prefetch units neither. Nothing if it would say nothing new: no outcome,
/// no claim given back, no return, and no room or the room of `last`.
/// Updates `last` when it returns a report.
std::optional<report_plan> next_report(uint64_t worker_id, job_runner::outbox& box,
                                       std::vector<storage::attempt_ref>& to_release,
                                       bool stopping, int64_t received_weight,
                                       const report_room& room, last_room& last);

}  // namespace ergon::actors
