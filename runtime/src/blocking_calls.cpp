#include "blocking_calls.hpp"

#include <caf/blocking_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include <chrono>

#include "ergon/actors/node_gate.hpp"
#include "ergon/queue_actor.hpp"

namespace ergon::runtime {
namespace {

using ms = std::chrono::milliseconds;
using actors::scheduling_control;

template <class T>
caf::result<T> answer(result<T> r) {
  if (r)
    return std::move(*r);
  return to_caf_error(r.error());
}

caf::result<ok_atom> answer(const status& st) {
  if (st)
    return ok_atom::value;
  return to_caf_error(st);
}

// Closes every port `queue` was published on, so no node connects to a
// closed queue. Not an error if it never was.
void unpublish(caf::blocking_actor* self, const caf::actor_addr& queue) {
  auto& sys = self->home_system();
  if (!queue || !sys.has_middleman())
    return;
  auto mm = sys.has_openssl_manager() ? sys.openssl_manager().actor_handle()
                                      : sys.middleman().actor_handle();
  self->request(mm, caf::infinite, caf::unpublish_atom::value, queue, uint16_t{0})
    .receive([] {}, [](caf::error&) {});
}

void run(actors::gated<caf::blocking_actor>* self, std::shared_ptr<queue::impl> q) {
  bool running = true;
  self->receive_while(running)(
    [&](job_info_atom, const job_id& id) { return answer(q->job_info(id)); },
    [&](jobs_by_name_atom, const std::string& name) { return answer(q->jobs_by_name(name)); },
    [&](metrics_atom) { return answer(q->metrics()); },
    [&](group_weight_atom, const std::string& group, int32_t weight) {
      return answer(q->set_group_weight(group, weight));
    },
    [&](reset_weights_atom) { return answer(q->reset_group_weights()); },
    [&](pause_group_atom, const std::string& group) {
      return answer(q->pause(scheduling_control::pause_group, group, std::nullopt));
    },
    [&](pause_group_atom, const std::string& group, ms duration) {
      return answer(q->pause(scheduling_control::pause_group, group, duration));
    },
    [&](resume_group_atom, const std::string& group) {
      return answer(q->resume(scheduling_control::resume_group, group));
    },
    [&](pause_type_atom, const std::string& type) {
      return answer(q->pause(scheduling_control::pause_type, type, std::nullopt));
    },
    [&](pause_type_atom, const std::string& type, ms duration) {
      return answer(q->pause(scheduling_control::pause_type, type, duration));
    },
    [&](resume_type_atom, const std::string& type) {
      return answer(q->resume(scheduling_control::resume_type, type));
    },
    [&](close_atom, const caf::actor_addr& queue) {
      running = false;
      unpublish(self, queue);
      return answer(q->stop(std::chrono::seconds(30)));
    });
}

}  // namespace

caf::actor spawn_blocking_calls(caf::actor_system& sys, std::shared_ptr<queue::impl> q) {
  auto gate = q->gate;
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  auto calls = sys.spawn(run, std::move(q));
  actors::set_gate<actors::gated<caf::blocking_actor>>(calls, std::move(gate));
  return calls;
}

}  // namespace ergon::runtime
