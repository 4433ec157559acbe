// event_bus: delivers events to subscriber callbacks on an actor of its own,
// so a slow callback delays later events but never the dispatcher.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

#include "ergon/event.hpp"

namespace ergon::actors {

/// The registered callbacks. Thread-safe.
class subscribers {
 public:
  using callback = std::function<void(const event&)>;
  uint64_t add(callback f);
  /// After remove returns, the callback is not running and is never called
  /// again, so its captures may be destroyed. (A callback may remove itself.)
  void remove(uint64_t handle);
  /// Whether anyone listens; producers skip building events otherwise.
  bool any() const noexcept { return count_.load(std::memory_order_acquire) > 0; }
  void deliver(const std::vector<event>& events);

 private:
  struct entry {
    std::recursive_mutex running;  // held while the callback runs
    bool active = true;
    callback f;
  };
  mutable std::mutex mtx_;
  uint64_t next_ = 1;
  std::map<uint64_t, std::shared_ptr<entry>> callbacks_;
  std::atomic<size_t> count_{0};
};

/// Events of one commit, in order.
struct event_batch {
  std::vector<event> events;
};

/// Spawns the actor that calls `subs` for each event_batch it receives.
caf::actor spawn_event_bus(caf::actor_system& sys, std::shared_ptr<subscribers> subs);

}  // namespace ergon::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::event_batch)
