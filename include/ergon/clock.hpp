// clock: the only source of time in ergon. Tests substitute manual_clock.
//
//   auto clk = std::make_shared<ergon::manual_clock>(1'700'000'000'000);
//   ergon::options opts;
//   opts.clock = clk;
//   ...
//   clk->advance(std::chrono::seconds(20));  // due retries and timeouts fire
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace ergon {

/// A source of wall-clock time in ms since the Unix epoch (UTC).
class clock {
 public:
  virtual ~clock() = default;

  /// The current time.
  virtual int64_t now_ms() const = 0;

  /// True if time passes by itself, so timers may be armed on real time.
  /// False for clocks that only move when told to (manual_clock); their
  /// subscribers are called after every move instead.
  virtual bool follows_real_time() const noexcept = 0;

  using listener = std::function<void()>;

  /// Calls `f` after every jump of a clock that doesn't follow real time.
  /// Returns a handle for `unsubscribe`. Real clocks never call `f`.
  virtual uint64_t subscribe(listener f) = 0;
  /// Once it returns, the listener is not running and is never called
  /// again, so what it captured may be destroyed. A listener may unsubscribe
  /// itself. Unknown handles are ignored.
  virtual void unsubscribe(uint64_t handle) = 0;
};

/// The system's real-time clock (std::chrono::system_clock).
class system_clock final : public clock {
 public:
  int64_t now_ms() const override;
  bool follows_real_time() const noexcept override { return true; }
  uint64_t subscribe(listener) override { return 0; }
  void unsubscribe(uint64_t) override {}
};

/// A clock that stands still until `advance` or `set`. Thread-safe.
class manual_clock final : public clock {
 public:
  explicit manual_clock(int64_t start_ms = 1'700'000'000'000);
  ~manual_clock() override;

  int64_t now_ms() const override;
  bool follows_real_time() const noexcept override { return false; }
  uint64_t subscribe(listener f) override;
  void unsubscribe(uint64_t handle) override;

  /// Moves time forward by `d` (which must not be negative) and notifies
  /// subscribers, which re-check their timers.
  void advance(std::chrono::milliseconds d);

  /// Jumps to `ms`; moving backwards is allowed (tests of clock skew).
  void set(int64_t ms);

 private:
  void notify();
  mutable std::mutex mtx_;
  int64_t now_;
  struct listeners;
  std::unique_ptr<listeners> listeners_;
};

/// A shared system_clock, the default for queues.
std::shared_ptr<clock> default_clock();

}  // namespace ergon
