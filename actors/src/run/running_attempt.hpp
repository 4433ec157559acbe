// running_attempt: one claimed attempt as job code sees it (the
// job_context implementation). Thread-safe: job threads call it, and the
// worker actor flags it cancelled or preempted. Its blocking calls hand off
// to the worker or the runner and wait for the write to commit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/actor.hpp>

#include "ergon/actors/eta_estimate.hpp"
#include "ergon/actors/protocol_records.hpp"
#include "ergon/actors/worker.hpp"
#include "ergon/clock.hpp"
#include "ergon/job_context.hpp"

namespace ergon::actors {

class job_runner;

/// One attempt as job code sees it. Thread-safe; the blocking calls wait for
/// the write to commit.
class running_attempt final : public job_context {
 public:
  running_attempt(const job_assignment& a, caf::actor worker,
                  std::shared_ptr<job_runner> runner, std::shared_ptr<ergon::clock> clock,
                  log_bounds logs = {});

  job_id id() const override { return id_; }
  const std::string& type() const override { return type_; }
  const std::string& group() const override { return group_; }
  const std::string& payload() const override { return payload_; }
  int32_t try_number() const override { return try_number_; }
  int64_t row() const noexcept { return row_; }
  int64_t token() const noexcept { return token_; }
  int32_t weight() const noexcept { return weight_; }

  /// Set when the attempt expired, the worker is stopping, or a cancel was
  /// requested.
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  bool wait_cancelled(std::chrono::milliseconds timeout) override;
  void cancel() noexcept;
  /// queue::cancel asked the job to stop: cancelled() turns true, and code
  /// that returns reports report_kind::stopped.
  void request_cancel() noexcept;
  bool cancel_requested() const noexcept {
    return cancel_requested_.load(std::memory_order_acquire);
  }

  bool preempted() const override { return preempted_.load(std::memory_order_acquire); }
  bool wait_preempted(std::chrono::milliseconds timeout) override;
  /// The dispatcher asked for the slot: preempted() turns true.
  void request_preempt() noexcept;
  status yield() override;

  /// True once complete or fail was called (or the runner returned).
  bool finished() const noexcept { return finished_.load(std::memory_order_acquire); }
  /// Marks the outcome reported; true for the first call only.
  bool mark_finished() noexcept { return !finished_.exchange(true, std::memory_order_acq_rel); }

  status checkpoint(std::string payload) override;
  status heartbeat() override;
  status complete(std::string result) override;
  status fail(std::string message) override;
  status fail(std::string message, std::chrono::milliseconds retry_after) override;
  status snooze(std::chrono::milliseconds delay) override;
  status fail_permanently(std::string message) override;
  status progress(int64_t done, int64_t total, std::string message) override;
  status log(log_level level, std::string text) override;
  result<std::vector<dependency_result>> dependency_results() override;
  status submit_children(std::vector<job> children, std::string checkpoint) override;

  /// What waits for the writer: the latest progress report, and the log
  /// lines (with the count dropped, if it grew) not yet handed over.
  struct handover {
    std::optional<storage::progress_report> progress;
    std::optional<storage::attempt_logs> logs;
  };
  /// Takes what waits; the next progress() or log() call tells the worker
  /// again.
  handover take_handover();

 private:
  status finish(storage::report_kind kind, std::string text, int64_t after_ms = -1);
  status extend(std::optional<std::string> checkpoint);

  job_id id_;
  std::string type_;
  std::string group_;
  std::string payload_;
  int32_t try_number_;
  int64_t row_;
  int64_t token_;
  int32_t weight_;
  caf::actor worker_;
  std::shared_ptr<job_runner> runner_;
  std::shared_ptr<ergon::clock> clock_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> preempted_{false};
  log_bounds log_bounds_;
  std::mutex progress_mtx_;  ///< guards the members below, to worker_told_
  eta_estimate eta_;
  std::optional<storage::progress_report> unsent_progress_;
  std::vector<log_line> unsent_lines_;
  int32_t lines_kept_ = 0;
  int64_t bytes_kept_ = 0;
  int64_t lines_dropped_ = 0;
  bool dropped_unsent_ = false;  ///< lines_dropped_ grew since the last handover
  bool worker_told_ = false;  ///< the worker knows a report waits
  std::mutex cancel_mtx_;  ///< with cancel_cv_, wakes wait_cancelled and wait_preempted
  std::condition_variable cancel_cv_;
  std::atomic<bool> finished_{false};
};

}  // namespace ergon::actors
