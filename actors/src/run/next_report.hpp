// next_report: what a worker's next report says, from what its job threads
// left in the outbox and the claims it gives back. No actors: the worker
// actor sends what this returns.
#pragma once

#include <cstdint>
#include <deque>
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

/// The reports with writes (outcomes, claims given back) at the writer,
/// oldest first, and each one's blocking callers, one per outcome. The
/// writer answers them in the order they were sent: each goes to the
/// dispatcher, which sends its writes on in order, and a transaction's
/// answers go out in the order of its requests.
class reports_in_flight {
 public:
  using replies = std::vector<std::optional<reply_to<status>>>;

  /// Reports at the writer at once. A second one carries what finished
  /// while the first commits, so the two can share a transaction.
  static constexpr size_t max = 2;

  bool empty() const noexcept { return sent_.empty(); }
  /// No report with writes may go until an answer comes.
  bool full() const noexcept { return sent_.size() >= max; }

  /// A report with writes went, with these callers.
  void sent(replies callers) { sent_.push_back(std::move(callers)); }
  /// The oldest report was answered: its callers get their acks, in order
  /// (ok for a caller without one). Returns how many callers there were;
  /// 0 and nothing else if no report is at the writer.
  size_t answered(const std::vector<wire_status>& acks);
  /// The connection dropped: every caller gets `why`.
  void drop(const status& why);

 private:
  std::deque<replies> sent_;
};

}  // namespace ergon::actors
