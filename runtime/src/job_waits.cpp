#include "job_waits.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <map>
#include <set>

#include "blocking_calls.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/queue_actor.hpp"
#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/times.hpp"

namespace ergon::runtime {
namespace {

using fired_atom = caf::atom_constant<caf::atom("waitfired")>;
using wait_timeout_atom = caf::atom_constant<caf::atom("waittime")>;
using ms = std::chrono::milliseconds;

struct pending_wait {
  caf::response_promise rp;
  caf::actor_addr requester;  // empty for an anonymous request
  job_id id;
  uint64_t watch_handle = 0;
  ms timeout{0};
  std::chrono::steady_clock::time_point deadline;
  bool timer_armed = false;
};

// CAF timers are capped (storage::timer_delay): a long wait re-arms until
// its deadline.
void arm(caf::event_based_actor* self, uint64_t h, const pending_wait& w);

struct waits_state {
  std::shared_ptr<actors::final_watch> watch;
  caf::actor calls;
  std::map<uint64_t, pending_wait> waits;
  uint64_t next = 1;
  // Requesters we monitor: a client that disconnects or an actor that dies
  // while waiting has its waits dropped, not kept until the job finishes.
  std::set<caf::actor_addr> monitored;

  void drop_waits_of(const caf::actor_addr& requester) {
    monitored.erase(requester);
    for (auto i = waits.begin(); i != waits.end();) {
      if (i->second.requester == requester) {
        if (i->second.watch_handle != 0)
          watch->remove(i->second.watch_handle);
        i = waits.erase(i);
      } else {
        ++i;
      }
    }
  }

  // Whoever still waits when the queue stops hears `closed`, or the ergon
  // error the queue stopped for (a takeover: busy).
  void close_all(const caf::error& why = {}) {
    auto answer = why && why.category() == error_category ? why
                                                          : to_caf_error(actors::queue_closed());
    for (auto& [h, w] : waits) {
      watch->remove(w.watch_handle);
      w.rp.deliver(answer);
    }
    waits.clear();
  }

  ~waits_state() { close_all(); }

  static inline const char* name = "ergon.waits";
};

using waits_ptr = actors::gated<caf::stateful_actor<waits_state>>*;

void finish(waits_ptr self, uint64_t h, caf::error e, job_info info = {}) {
  auto& st = self->state;
  auto i = st.waits.find(h);
  if (i == st.waits.end())
    return;
  if (i->second.watch_handle != 0)
    st.watch->remove(i->second.watch_handle);
  if (e)
    i->second.rp.deliver(std::move(e));
  else
    i->second.rp.deliver(std::move(info));
  st.waits.erase(i);
}

void arm(caf::event_based_actor* self, uint64_t h, const pending_wait& w) {
  auto left = std::chrono::duration_cast<ms>(w.deadline - std::chrono::steady_clock::now());
  self->delayed_send(self, storage::timer_delay(std::max<int64_t>(left.count(), 0)),
                     wait_timeout_atom::value, h);
}

// Asks the watch to tell us when the job is final.
void watch_for(waits_ptr self, uint64_t h, pending_wait& w) {
  caf::actor_addr addr = self->address();
  w.watch_handle = self->state.watch->add(*storage::row_of(w.id), [addr, h] {
    if (auto hdl = caf::actor_cast<caf::actor>(addr))
      actors::tell(hdl, fired_atom::value, h);
  });
}

// Reads the job: final (or gone) answers the wait; otherwise the watch or
// the timer brings the next look.
void look(waits_ptr self, uint64_t h) {
  auto& st = self->state;
  auto i = st.waits.find(h);
  if (i == st.waits.end())
    return;
  self->request(st.calls, caf::infinite, job_info_atom::value, i->second.id)
    .then(
      [self, h](job_info& info) {
        auto& st = self->state;
        auto i = st.waits.find(h);
        if (i == st.waits.end())
          return;
        if (is_final(info.status)) {
          finish(self, h, {}, std::move(info));
          return;
        }
        auto& w = i->second;
        if (w.watch_handle == 0)  // finished, then put back by retry_failed
          watch_for(self, h, w);
        if (w.timeout <= ms::zero()) {
          finish(self, h,
                 to_caf_error({error::timeout, "job " + w.id.to_string() + " is still "
                                                 + to_string(info.status)}));
        } else if (!w.timer_armed && w.timeout != ms::max()) {
          w.timer_armed = true;
          // Capped in ms first: past about 292 years, nanoseconds overflow.
          w.deadline = std::chrono::steady_clock::now()
                       + std::min<ms>(w.timeout, std::chrono::hours{24 * 365 * 100});
          arm(self, h, w);
        }
      },
      [self, h](caf::error& e) { finish(self, h, std::move(e)); });
}

caf::behavior run(waits_ptr self, std::shared_ptr<actors::final_watch> watch, caf::actor calls) {
  self->state.watch = std::move(watch);
  self->state.calls = std::move(calls);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.close_all(msg.reason);
    self->quit(msg.reason);
  });
  self->set_down_handler([self](caf::down_msg& msg) { self->state.drop_waits_of(msg.source); });
  return {
    [self](wait_atom, const job_id& id, ms timeout) -> caf::result<job_info> {
      auto& st = self->state;
      auto row = storage::row_of(id);
      if (!row)
        return to_caf_error({error::not_found, "no job with id " + id.to_string()});
      auto h = st.next++;
      pending_wait w;
      w.rp = self->make_response_promise();
      if (auto source = w.rp.source()) {
        w.requester = source->address();
        if (st.monitored.insert(w.requester).second)
          self->monitor(source);
      }
      w.id = id;
      w.timeout = timeout;
      watch_for(self, h, w);
      auto rp = w.rp;
      st.waits.emplace(h, std::move(w));
      look(self, h);
      return rp;
    },
    [self](fired_atom, uint64_t h) {
      auto i = self->state.waits.find(h);
      if (i == self->state.waits.end())
        return;
      i->second.watch_handle = 0;  // a watch calls once
      look(self, h);
    },
    [self](wait_timeout_atom, uint64_t h) {
      auto i = self->state.waits.find(h);
      if (i == self->state.waits.end())
        return;
      auto& w = i->second;
      if (std::chrono::steady_clock::now() < w.deadline) {
        arm(self, h, w);
        return;
      }
      finish(self, h,
             to_caf_error({error::timeout, "job " + w.id.to_string() + " did not finish within "
                                             + std::to_string(w.timeout.count()) + " ms"}));
    },
  };
}

}  // namespace

caf::actor job_waits(const std::shared_ptr<queue_impl>& q) {
  std::lock_guard<std::mutex> guard{q->waits_mtx};
  if (q->closed.load(std::memory_order_acquire))
    return {};
  if (!q->waits) {
    q->waits_calls = spawn_blocking_calls(*q->sys, q);
    q->waits = q->sys->spawn(run, q->watch, q->waits_calls);
    // Its handle crosses the wire with every answer.
    actors::set_gate<std::remove_pointer_t<waits_ptr>>(q->waits, q->gate);
  }
  return q->waits;
}

}  // namespace ergon::runtime
