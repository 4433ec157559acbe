// final_watch: who waits for which job to reach a final status. The
// dispatcher calls finished() for every job a commit finished, in commit
// order; queue::wait and its asynchronous forms add a callback per wait.
// Thread-safe; no actors, so its unit tests call it directly.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ergon::actors {

class final_watch {
 public:
  using callback = std::function<void()>;

  /// Calls `f` once when the job at `row` reaches a final status (on the
  /// dispatcher's thread: `f` must only hand off, as by sending a message).
  /// Returns a handle for remove().
  uint64_t add(int64_t row, callback f);

  /// Forgets a callback. Once it returns, the callback is not running and
  /// is never called. Unknown handles (already called) are ignored.
  void remove(uint64_t handle);

  /// The job at `row` is final: calls and forgets its callbacks.
  void finished(int64_t row);

  /// Whether anyone waits; the dispatcher skips finished() otherwise.
  bool empty() const noexcept { return count_.load(std::memory_order_acquire) == 0; }

  /// How many callbacks wait.
  size_t size() const noexcept { return count_.load(std::memory_order_acquire); }

 private:
  struct waiter {
    uint64_t handle = 0;
    callback f;
  };
  // Held while callbacks run, so remove() never returns during one.
  mutable std::mutex mtx_;
  std::unordered_map<int64_t, std::vector<waiter>> by_row_;
  std::unordered_map<uint64_t, int64_t> row_of_;
  uint64_t next_ = 1;
  std::atomic<size_t> count_{0};
};

}  // namespace ergon::actors
