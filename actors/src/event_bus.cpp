#include "ergon/actors/event_bus.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <optional>
#include <string>

namespace ergon::actors {

namespace {

// Calls `f`; on a throw, returns what was thrown as text.
std::optional<std::string> call(const subscribers::callback& f, const event& e) noexcept {
  try {
    f(e);
    return std::nullopt;
  } catch (const std::exception& ex) {
    return std::string{ex.what()};
  } catch (...) {
    return std::string{"an exception that is not a std::exception"};
  }
}

event failure_event(const event& failed, const std::string& what) {
  event out;
  out.kind = event_kind::subscriber_failed;
  out.at_ms = failed.at_ms;
  out.id = failed.id;
  out.type = failed.type;
  out.group = failed.group;
  out.recurring_id = failed.recurring_id;
  out.try_number = failed.try_number;
  out.message = std::string{"a subscriber threw on a "} + to_string(failed.kind)
                + " event: " + what;
  return out;
}

}  // namespace

void subscribers::deliver(const std::vector<event>& events) {
  auto targets = set_.take_snapshot();
  // Failures, each with the subscriber that threw (who doesn't hear of it).
  std::vector<std::pair<uint64_t, event>> failures;
  targets.each([&](uint64_t handle, const callback& f, const bool& active) {
    for (auto& e : events)
      if (!active)
        break;
      else if (auto what = call(f, e)) {
        errors_.fetch_add(1, std::memory_order_relaxed);
        failures.emplace_back(handle, failure_event(e, *what));
      }
  });
  // A throw while handling a failure is counted but not reported again, so
  // two subscribers that always throw can't feed each other forever.
  // (No structured bindings here: clang 14 can't capture them.)
  for (auto& failed : failures)
    targets.each([&](uint64_t handle, const callback& f, const bool&) {
      if (handle != failed.first && call(f, failed.second))
        errors_.fetch_add(1, std::memory_order_relaxed);
    });
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
