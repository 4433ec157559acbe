#include "ergon/actors/event_bus.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

namespace ergon::actors {

uint64_t subscribers::add(callback f) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto handle = next_++;
  callbacks_.emplace(handle, std::make_shared<callback>(std::move(f)));
  count_.store(callbacks_.size(), std::memory_order_release);
  return handle;
}

void subscribers::remove(uint64_t handle) {
  std::lock_guard<std::mutex> guard{mtx_};
  callbacks_.erase(handle);
  count_.store(callbacks_.size(), std::memory_order_release);
}

void subscribers::deliver(const std::vector<event>& events) {
  // Call outside the lock: a callback may subscribe or unsubscribe.
  std::vector<std::shared_ptr<callback>> fs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : callbacks_)
      fs.push_back(kv.second);
  }
  for (auto& e : events)
    for (auto& f : fs)
      (*f)(e);
}

caf::actor spawn_event_bus(caf::actor_system& sys, std::shared_ptr<subscribers> subs) {
  return sys.spawn([subs](caf::event_based_actor*) -> caf::behavior {
    return {
      [subs](event_batch& b) { subs->deliver(b.events); },
    };
  });
}

}  // namespace ergon::actors
