#include "ergon/actors/event_bus.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

namespace ergon::actors {

uint64_t subscribers::add(callback f) {
  auto e = std::make_shared<entry>();
  e->f = std::move(f);
  std::lock_guard<std::mutex> guard{mtx_};
  auto handle = next_++;
  callbacks_.emplace(handle, std::move(e));
  count_.store(callbacks_.size(), std::memory_order_release);
  return handle;
}

void subscribers::remove(uint64_t handle) {
  std::shared_ptr<entry> e;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = callbacks_.find(handle);
    if (i == callbacks_.end())
      return;
    e = std::move(i->second);
    callbacks_.erase(i);
    count_.store(callbacks_.size(), std::memory_order_release);
  }
  // Waits for a delivery in progress (the lock is recursive, so a callback
  // removing itself doesn't deadlock).
  std::lock_guard<std::recursive_mutex> running{e->running};
  e->active = false;
}

void subscribers::deliver(const std::vector<event>& events) {
  // Call outside the registry lock: a callback may subscribe or unsubscribe.
  std::vector<std::shared_ptr<entry>> targets;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : callbacks_)
      targets.push_back(kv.second);
  }
  for (auto& t : targets) {
    std::lock_guard<std::recursive_mutex> running{t->running};
    for (auto& e : events) {
      if (!t->active)
        break;
      t->f(e);
    }
  }
}

caf::actor spawn_event_bus(caf::actor_system& sys, std::shared_ptr<subscribers> subs) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  return sys.spawn(
    [](caf::event_based_actor*, std::shared_ptr<subscribers> subs) -> caf::behavior {
      return {
        [subs](event_batch& b) { subs->deliver(b.events); },
      };
    },
    std::move(subs));
}

}  // namespace ergon::actors
