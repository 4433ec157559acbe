// event_bus: delivers events to subscriber callbacks on an actor of its own,
// so a slow callback delays later events but never the dispatcher.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

#include "ergon/actors/listener_set.hpp"
#include "ergon/event.hpp"

namespace ergon::actors {

/// The registered callbacks. Thread-safe.
class subscribers {
 public:
  using callback = std::function<void(const event&)>;
  uint64_t add(callback f) { return set_.add(std::move(f)); }
  /// After remove returns, the callback is not running and is never called
  /// again, so its captures may be destroyed. (A callback may remove itself.)
  void remove(uint64_t handle) { set_.remove(handle); }
  /// Whether anyone listens; producers skip building events otherwise.
  bool any() const noexcept { return !set_.empty(); }
  /// Calls every callback for `events`, in order. A callback that throws is
  /// counted and reported to the others as subscriber_failed; nobody misses
  /// an event because of it.
  void deliver(const std::vector<event>& events);
  /// Exceptions thrown by callbacks so far.
  int64_t errors() const noexcept { return errors_.load(std::memory_order_relaxed); }

 private:
  listener_set<const event&> set_;
  std::atomic<int64_t> errors_{0};
};

/// Events of one commit, in order.
struct event_batch {
  std::vector<event> events;
};

/// Spawns the actor that calls `subs` for each event_batch it receives.
caf::actor spawn_event_bus(caf::actor_system& sys, std::shared_ptr<subscribers> subs);

}  // namespace ergon::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::event_batch)
