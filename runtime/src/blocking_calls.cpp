#include "blocking_calls.hpp"

#include <caf/blocking_actor.hpp>

#include <chrono>
#include <utility>

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

// Holds the queue weakly: its owners are the queue actor's state and, for
// a listening queue::open, the queue handle; whichever goes last closes it.
void run(actors::gated<caf::blocking_actor>* self, std::weak_ptr<queue_impl> weak) {
  bool running = true;
  // The answer of f(queue) if the queue is still there, else `closed`.
  auto with = [&weak](auto f) -> decltype(answer(f(std::declval<queue_impl&>()))) {
    if (auto p = weak.lock())
      return answer(p->explain(f(*p)));
    return to_caf_error(actors::queue_closed());
  };
  self->receive_while(running)(
    [&](job_info_atom, const job_id& id) {
      return with([&](queue_impl& q) { return q.job_info(id); });
    },
    [&](jobs_by_name_atom, const std::string& name) {
      return with([&](queue_impl& q) { return q.jobs_by_name(name, max_page_size); });
    },
    [&](jobs_by_name_atom, const std::string& name, uint64_t limit) {
      return with([&](queue_impl& q) {
        return q.jobs_by_name(name, static_cast<size_t>(std::min<uint64_t>(limit, SIZE_MAX)));
      });
    },
    [&](list_jobs_atom, const job_filter& filter, const page_request& page) {
      return with([&](queue_impl& q) { return q.list_jobs(filter, page); });
    },
    [&](list_failed_atom, job_filter filter, const page_request& page) {
      filter.status = job_status::failed;
      return with([&](queue_impl& q) { return q.list_jobs(filter, page); });
    },
    [&](metrics_atom) {
      return with([&](queue_impl& q) { return q.metrics(); });
    },
    [&](recurring_info_atom, const std::string& id) {
      return with([&](queue_impl& q) { return q.recurring_info(id); });
    },
    [&](list_recurring_atom, const std::string& prefix) {
      return with([&](queue_impl& q) { return q.list_recurring(prefix); });
    },
    [&](group_weight_atom, const std::string& group, int32_t weight) {
      return with([&](queue_impl& q) { return q.set_group_weight(group, weight); });
    },
    [&](reset_weights_atom) {
      return with([&](queue_impl& q) { return q.reset_group_weights(); });
    },
    [&](pause_group_atom, const std::string& group) {
      return with([&](queue_impl& q) { return q.pause(scheduling_control::pause_group, group, std::nullopt); });
    },
    [&](pause_group_atom, const std::string& group, ms duration) {
      return with([&](queue_impl& q) { return q.pause(scheduling_control::pause_group, group, duration); });
    },
    [&](resume_group_atom, const std::string& group) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::resume_group, group); });
    },
    [&](pause_type_atom, const std::string& type) {
      return with([&](queue_impl& q) { return q.pause(scheduling_control::pause_type, type, std::nullopt); });
    },
    [&](pause_type_atom, const std::string& type, ms duration) {
      return with([&](queue_impl& q) { return q.pause(scheduling_control::pause_type, type, duration); });
    },
    [&](pause_recurring_atom, const std::string& id) {
      return with([&](queue_impl& q) { return q.pause_recurring(id, true, std::nullopt); });
    },
    [&](pause_recurring_atom, const std::string& id, ms duration) {
      return with([&](queue_impl& q) { return q.pause_recurring(id, true, duration); });
    },
    [&](resume_recurring_atom, const std::string& id) {
      return with([&](queue_impl& q) { return q.pause_recurring(id, false, std::nullopt); });
    },
    [&](resume_type_atom, const std::string& type) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::resume_type, type); });
    },
    [&](reset_breaker_atom, const std::string& type) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::reset_breaker, type); });
    },
    [&](resume_all_atom) {
      return with([&](queue_impl& q) { return q.resume_all(); });
    },
    [&](pause_queue_atom) {
      return with([&](queue_impl& q) { return q.pause(scheduling_control::pause_queue, {}, std::nullopt); });
    },
    [&](pause_queue_atom, ms duration) {
      return with([&](queue_impl& q) { return q.pause(scheduling_control::pause_queue, {}, duration); });
    },
    [&](resume_queue_atom) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::resume_queue, {}); });
    },
    [&](set_group_atom, const std::string& group, const settings_change& c) {
      return with([&](queue_impl& q) { return q.change(scheduling_control::change_group, group, c); });
    },
    [&](set_type_atom, const std::string& type, const settings_change& c) {
      return with([&](queue_impl& q) { return q.change(scheduling_control::change_type, type, c); });
    },
    [&](reset_group_atom, const std::string& group) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::reset_group, group); });
    },
    [&](reset_type_atom, const std::string& type) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::reset_type, type); });
    },
    [&](set_worker_atom, const std::string& name, const settings_change& c) {
      return with([&](queue_impl& q) { return q.change(scheduling_control::change_worker, name, c); });
    },
    [&](reset_worker_atom, const std::string& name) {
      return with([&](queue_impl& q) { return q.named_call(scheduling_control::reset_worker, name); });
    },
    [&](controls_atom) {
      return with([&](queue_impl& q) { return q.controls(); });
    },
    [&](workers_atom) {
      return with([&](queue_impl& q) { return q.list_workers(); });
    },
    [&](close_atom) -> caf::result<ok_atom> {
      running = false;
      auto p = weak.lock();  // gone: closed already
      if (!p)
        return caf::result<ok_atom>{ok_atom::value};
      // Closing already: waiting for it here could make this thread hold
      // the last reference, and destroy the queue's own actor system.
      if (p->closed.load(std::memory_order_acquire))
        return answer(p->closing_cause());
      return answer(p->stop(std::chrono::seconds(30)));
    });
}

}  // namespace

caf::actor spawn_blocking_calls(caf::actor_system& sys, std::shared_ptr<queue_impl> q) {
  auto gate = q->gate;
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  auto calls = sys.spawn(run, std::weak_ptr<queue_impl>{q});
  actors::set_gate<actors::gated<caf::blocking_actor>>(calls, std::move(gate));
  return calls;
}

}  // namespace ergon::runtime
