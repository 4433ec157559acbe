// Helpers for tests that run jobs: an event log to wait on and a gate that
// holds job code until the test lets it go. Tests synchronise on these, never
// on sleeps; the real-time bound only turns a hang into a failure.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "ergon/queue.hpp"

namespace ergon::test {

/// How long a wait may take before the test fails instead of hanging.
inline constexpr std::chrono::seconds hang_guard{30};

/// Records every event of a queue.
class event_log {
 public:
  explicit event_log(queue& q)
      : sub_(q.subscribe([this](const event& e) {
          std::lock_guard<std::mutex> guard{mtx_};
          events_.push_back(e);
          cv_.notify_all();
        })) {}

  /// Waits until `pred(events)` holds; false after hang_guard.
  bool wait(const std::function<bool(const std::vector<event>&)>& pred) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, hang_guard, [&] { return pred(events_); });
  }

  /// Waits until at least `n` events of `kind` (for `id`, if given) arrived.
  bool wait_for(event_kind kind, size_t n = 1, const job_id* id = nullptr) {
    return wait([&](const std::vector<event>& es) { return count(es, kind, id) >= n; });
  }

  bool wait_for(event_kind kind, size_t n, const job_id& id) { return wait_for(kind, n, &id); }

  std::vector<event> snapshot() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return events_;
  }

  /// Events of `kind` (for `id`, if given), in order.
  std::vector<event> of(event_kind kind, const job_id* id = nullptr) const {
    std::vector<event> out;
    for (auto& e : snapshot())
      if (e.kind == kind && (id == nullptr || e.id == *id))
        out.push_back(e);
    return out;
  }

  static size_t count(const std::vector<event>& es, event_kind kind, const job_id* id) {
    return static_cast<size_t>(std::count_if(es.begin(), es.end(), [&](const event& e) {
      return e.kind == kind && (id == nullptr || e.id == *id);
    }));
  }

 private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<event> events_;
  subscription sub_;  // last: unsubscribed before the members it writes die
};

/// Holds job code until the test releases it. Job threads and the test wait
/// on separate condition variables: one kind of waiter per variable.
class gate {
 public:
  gate() = default;
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// Opens the gate and waits until no pass() is in progress: a job that a
  /// timed-out close abandoned may still be inside pass() when the test ends,
  /// and must not touch the gate after it dies (found by ThreadSanitizer).
  ~gate() {
    std::unique_lock<std::mutex> guard{mtx_};
    open_ = true;
    jobs_cv_.notify_all();
    test_cv_.wait_for(guard, hang_guard, [&] { return waiting_ == 0; });
  }

  /// Blocks until a permit is available (or the gate is open) and takes it.
  /// Returns false if the hang guard elapsed.
  bool pass() {
    std::unique_lock<std::mutex> guard{mtx_};
    ++waiting_;
    ++arrived_;
    test_cv_.notify_all();
    bool ok = jobs_cv_.wait_for(guard, hang_guard, [&] { return open_ || permits_ > 0; });
    --waiting_;
    test_cv_.notify_all();
    if (ok && !open_)
      --permits_;
    return ok;
  }

  /// Lets `n` waiting (or future) passes through.
  void release(int n = 1) {
    std::lock_guard<std::mutex> guard{mtx_};
    permits_ += n;
    jobs_cv_.notify_all();
  }

  /// Lets everything through from now on.
  void open() {
    std::lock_guard<std::mutex> guard{mtx_};
    open_ = true;
    jobs_cv_.notify_all();
  }

  /// Waits until `n` callers are blocked in pass().
  bool wait_for_waiting(int n) {
    std::unique_lock<std::mutex> guard{mtx_};
    return test_cv_.wait_for(guard, hang_guard, [&] { return waiting_ >= n; });
  }

  /// Waits until pass() has been called `n` times in all.
  bool wait_for_arrivals(int n) {
    std::unique_lock<std::mutex> guard{mtx_};
    return test_cv_.wait_for(guard, hang_guard, [&] { return arrived_ >= n; });
  }

  int waiting() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return waiting_;
  }

 private:
  mutable std::mutex mtx_;
  std::condition_variable jobs_cv_;
  std::condition_variable test_cv_;
  int permits_ = 0;
  int waiting_ = 0;
  int arrived_ = 0;
  bool open_ = false;
};

}  // namespace ergon::test
