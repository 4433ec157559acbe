// A one-shot reply channel from an actor to a thread that waits for it.
//
// A thread waking from a condition variable costs about 24 us on the 2-core
// VMs we measure on, more than an SQLite commit. So the waiter first spins for
// a short, bounded time and only then sleeps. Spinning is a latency device,
// not a timing source: nothing here decides job semantics by wall time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "ergon/storage/times.hpp"
#include "ergon/error.hpp"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ergon::actors {

/// How long a waiter spins before sleeping. Long enough to cover a commit.
inline constexpr std::chrono::microseconds reply_spin{200};

/// What every request to a closed (or closing) queue gets.
inline status queue_closed() {
  return {error::closed, "the queue is closed"};
}

namespace detail {

// Threads waiting for a reply right now. Spinning pays only for a lone
// waiter: with several, the spinner takes the core that the woken waiters and
// the replying actor need (measured: 16 submitters on 2 cores ran half as
// fast with one spinner as with none).
inline std::atomic<unsigned> active_waiters{0};

template <class V>
class reply_state {
 public:
  reply_state() = default;
  explicit reply_state(std::function<void(V)> sink) : sink_(std::move(sink)) {}

  /// Sets the value; only the first call counts. With a sink, hands the
  /// value to it on the calling thread instead of waking a waiter.
  void set(V value) {
    if (claimed_.exchange(true, std::memory_order_acq_rel))
      return;
    if (sink_) {
      sink_(std::move(value));
      return;
    }
    value_.emplace(std::move(value));
    if (state_.exchange(ready, std::memory_order_acq_rel) == sleeping)
      wake();
  }

  bool is_set() const noexcept {
    return claimed_.load(std::memory_order_acquire);
  }

  /// Waits at most `limit` (real time; this bounds a caller's wait, it
  /// decides nothing about jobs). Empty if the value did not arrive in time.
  std::optional<V> wait_for(std::chrono::milliseconds limit) {
    auto until = storage::steady_deadline(limit);
    int expected = empty;
    if (state_.compare_exchange_strong(expected, sleeping, std::memory_order_acq_rel))
      if (!sleep_until(until))
        return std::nullopt;
    return std::move(*value_);
  }

  V wait() {
    if (active_waiters.fetch_add(1, std::memory_order_relaxed) == 0) {
      auto until = std::chrono::steady_clock::now() + reply_spin;
      for (unsigned i = 0; state_.load(std::memory_order_acquire) != ready; ++i)
        if ((i & 63) == 63
            && (active_waiters.load(std::memory_order_relaxed) > 1
                || std::chrono::steady_clock::now() > until))
          break;
    }
    int expected = empty;
    if (state_.compare_exchange_strong(expected, sleeping, std::memory_order_acq_rel))
      sleep_until_ready();
    active_waiters.fetch_sub(1, std::memory_order_relaxed);
    return std::move(*value_);
  }

 private:
#ifdef __linux__
  // A bare futex on the state word: one syscall to sleep and one to wake.
  // (A condition variable notified under its mutex wakes the waiter only for
  // it to block on the mutex again: two wake-ups per reply.)
  int* futex_word() { return reinterpret_cast<int*>(&state_); }
  void wake() {
    syscall(SYS_futex, futex_word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  void sleep_until_ready() {
    while (state_.load(std::memory_order_acquire) != ready)
      syscall(SYS_futex, futex_word(), FUTEX_WAIT_PRIVATE, sleeping, nullptr, nullptr, 0);
  }
  bool sleep_until(std::chrono::steady_clock::time_point until) {
    while (state_.load(std::memory_order_acquire) != ready) {
      auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero())
        return false;
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      syscall(SYS_futex, futex_word(), FUTEX_WAIT_PRIVATE, sleeping, &ts, nullptr, 0);
    }
    return true;
  }
#else
  void wake() {
    { std::lock_guard<std::mutex> guard{mtx_}; }
    cv_.notify_one();
  }
  void sleep_until_ready() {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait(guard, [this] { return state_.load() == ready; });
  }
  bool sleep_until(std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_until(guard, until, [this] { return state_.load() == ready; });
  }
  std::mutex mtx_;
  std::condition_variable cv_;
#endif

  static constexpr int empty = 0;
  static constexpr int sleeping = 1;
  static constexpr int ready = 2;
  std::atomic<bool> claimed_{false};
  std::atomic<int> state_{empty};
  static_assert(sizeof(std::atomic<int>) == sizeof(int), "futex word must be an int");
  std::optional<V> value_;
  std::function<void(V)> sink_;
};

// Completes the state with `closed` if nobody replied, e.g. because the
// message carrying it was dropped by an actor that had already stopped.
template <class V>
struct reply_guard {
  explicit reply_guard(std::shared_ptr<reply_state<V>> s) : state(std::move(s)) {}
  reply_guard(const reply_guard&) = delete;
  reply_guard& operator=(const reply_guard&) = delete;
  ~reply_guard() {
    if (!state->is_set())
      state->set(V{queue_closed()});
  }
  std::shared_ptr<reply_state<V>> state;
};

}  // namespace detail

/// The sending end. Copyable (CAF messages must be); all copies share one
/// slot, and only the first `deliver` counts.
template <class V>
class reply_to {
 public:
  reply_to() = default;
  explicit reply_to(std::shared_ptr<detail::reply_state<V>> state)
      : guard_(std::make_shared<detail::reply_guard<V>>(std::move(state))) {}

  /// A channel whose value goes to `sink`, called on the delivering thread
  /// (or with `closed` where the message carrying it is dropped).
  static reply_to calling(std::function<void(V)> sink) {
    return reply_to{std::make_shared<detail::reply_state<V>>(std::move(sink))};
  }

  void deliver(V value) const {
    if (guard_)
      guard_->state->set(std::move(value));
  }

  /// False for a default-constructed channel, which delivers nowhere.
  explicit operator bool() const noexcept { return guard_ != nullptr; }

 private:
  std::shared_ptr<detail::reply_guard<V>> guard_;
};

/// The receiving end: `wait()` blocks until the value arrives.
template <class V>
class reply_from {
 public:
  explicit reply_from(std::shared_ptr<detail::reply_state<V>> state)
      : state_(std::move(state)) {}

  V wait() { return state_->wait(); }
  /// Waits at most `limit` of real time; empty if no value came in time.
  std::optional<V> wait_for(std::chrono::milliseconds limit) {
    return state_->wait_for(limit);
  }

 private:
  std::shared_ptr<detail::reply_state<V>> state_;
};

/// Makes a connected pair.
template <class V>
std::pair<reply_to<V>, reply_from<V>> make_reply() {
  auto state = std::make_shared<detail::reply_state<V>>();
  return {reply_to<V>{state}, reply_from<V>{state}};
}

}  // namespace ergon::actors
