// next_report: what a worker's next report says, from what its job threads
// left in the outbox and the claims it gives back. No actors: the worker
// actor sends what this returns.
#pragma once

#include <chrono>
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
  int32_t max_capacity = -1;
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
/// no claim given back, no return, no room or the room of `last`, and the
/// max_capacity of `last`.
/// Updates `last` when it returns a report.
std::optional<report_plan> next_report(uint64_t worker_id, job_runner::outbox& box,
                                       std::vector<storage::attempt_ref>& to_release,
                                       bool stopping, int64_t received_weight,
                                       const report_room& room, last_room& last);

/// How long, in µs, a report of finished jobs may wait for the jobs the
/// worker holds besides (`others_held`), so that one report carries what
/// finishes together: an eighth of how long the last report took to be
/// answered (`answer_us`), and at most `longest_hold_us`. Where commits are
/// slow (PostgreSQL) one fuller report costs the store much less than two;
/// where they are fast (SQLite) the wait stays a few µs. 0: send it now.
inline constexpr int64_t longest_hold_us = 1'000;
int64_t report_hold_us(int64_t answer_us, bool others_held) noexcept;

/// The reports with writes (outcomes, claims given back) at the writer,
/// oldest first, and each one's blocking callers, one per outcome. The
/// writer answers them in the order they were sent: each goes to the
/// dispatcher, which sends its writes on in order, and a transaction's
/// answers go out in the order of its requests.
///
/// An outcome whose write failed for a passing cause (the store was
/// unreachable or timed out: a PostgreSQL restart, say) waits to be sent
/// again rather than fail its caller: its attempt is still running in the
/// store, and would otherwise stay so until it expires and the job runs
/// again. Resending is safe because each outcome is fenced by its token: a
/// success that did commit meanwhile answers ok again, and any other
/// outcome that committed, or whose attempt expired, answers stale_attempt.
class reports_in_flight {
 public:
  using replies = std::vector<std::optional<reply_to<status>>>;

  /// Reports at the writer at once. A second one carries what finished
  /// while the first commits, so the two can share a transaction.
  static constexpr size_t max = 2;
  /// The first wait before a resend, doubling per failed round up to
  /// `longest_wait_ms`.
  static constexpr int64_t first_wait_ms = 100;
  static constexpr int64_t longest_wait_ms = 5'000;

  bool empty() const noexcept { return sent_.empty() && resends_.outcomes.empty(); }
  /// No report with writes may go until an answer comes.
  bool full() const noexcept { return sent_.size() >= max; }
  /// How long the last answered report took to be answered, in µs of real
  /// time; 0 before the first answer.
  int64_t last_answer_us() const noexcept { return last_answer_us_; }

  /// A report with writes went, with its outcomes (kept until answered) and
  /// their callers.
  void sent(std::vector<storage::attempt_report> outcomes, replies callers);
  /// The oldest report was answered: its callers get their acks, in order
  /// (ok for a caller without one), except that with `resend`, outcomes
  /// whose ack is a passing failure wait for resend_into(). Returns how
  /// many outcomes the report had; 0 and nothing else if no report is at
  /// the writer.
  size_t answered(const std::vector<wire_status>& acks, bool resend);
  /// Whether outcomes wait to be sent again, and how long to wait first.
  size_t resends_waiting() const noexcept { return resends_.outcomes.size(); }
  int64_t resend_wait_ms() const noexcept;
  /// Moves the waiting outcomes and their callers into `box`, ahead of
  /// what it holds. Returns how many.
  size_t resend_into(job_runner::outbox& box);
  /// The connection dropped, or the worker stops: every caller, of a
  /// report at the writer or of an outcome waiting, gets `why`.
  void drop(const status& why);
  /// The connection dropped, and the queue keeps the attempts for the
  /// worker: the outcomes at the writer wait to be sent again, with their
  /// callers, as if their answers had failed for a passing cause.
  void keep_for_resend();
  /// The attempts of every outcome not yet acknowledged, oldest first.
  std::vector<storage::attempt_ref> unacknowledged() const;

 private:
  struct report {
    std::vector<storage::attempt_report> outcomes;
    replies callers;
    std::chrono::steady_clock::time_point sent_at{};
  };
  std::deque<report> sent_;
  report resends_;
  int64_t last_answer_us_ = 0;
  int failed_rounds_ = 0;  // answers in a row with passing failures
};

/// Whether a write that failed with `code` may succeed if sent again.
bool passing_failure(error code) noexcept;

}  // namespace ergon::actors
