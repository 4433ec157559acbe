#include "ergon/actors/dispatcher.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <iostream>
#include <map>
#include <unordered_map>

#include "clock_ticks.hpp"
#include "dispatch_core.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/storage/times.hpp"

namespace ergon::actors {
namespace {

constexpr int64_t never = storage::never_ms;

// The dispatcher's actor: what CAF needs around dispatch_core, which decides.
struct dispatcher_state {
  dispatcher_config cfg;
  // The sender of what it sends: gated actors, and the transport's rules
  // on remote workers, refuse messages without one.
  caf::actor me;
  std::unique_ptr<dispatch_core> core;
  // Registered workers' actors, by worker id, until they go down.
  std::unordered_map<uint64_t, caf::actor> handles;
  // Workers that unregistered while a claim was at the writer: answered
  // after it, so that its jobs reach them first.
  std::unordered_map<uint64_t, caf::typed_response_promise<unregistered_atom>> leaving;
  // A down message names only an address: the worker ids registered by it.
  std::multimap<caf::actor_addr, uint64_t> monitored;
  int64_t armed_at = never;

  int64_t now() const { return cfg.clock->now_ms(); }

  static inline const char* name = "ergon.dispatcher";
};

using dispatcher_ptr = gated<dispatcher_actor::stateful_base<dispatcher_state>>*;
using effects = dispatch_core::effects;

// A worker protocol message that breaks its rules (it may come from another
// node): logged and counted, never applied.
void reject(dispatcher_ptr self, const std::string& what, const status& why) {
  if (self->state.cfg.gate)
    self->state.cfg.gate->count_rejected();
  auto& sender = self->current_sender();
  std::cerr << "ergon: dispatcher rejected " << what << " from "
            << (sender ? caf::to_string(sender->node()) : std::string{"an anonymous sender"})
            << ": " << why << '\n';
}

// With a real clock, arm one CAF timer for the earliest wake-up. A manual
// clock instead sends a tick after every advance (see start).
void arm_timer(dispatcher_ptr self, int64_t wake_at) {
  auto& st = self->state;
  if (!st.cfg.clock->follows_real_time() || wake_at == never || wake_at >= st.armed_at)
    return;
  st.armed_at = wake_at;
  self->delayed_send(self, storage::timer_delay(wake_at - st.now()), tick_atom::value);
}

// Who sent the report being handled: its writes go back to that sender (a
// stopping worker reports after it left), not to the registered handle.
struct reporter {
  uint64_t worker = 0;
  caf::actor handle;
};

caf::actor writes_handle(dispatcher_state& st, uint64_t worker, const reporter* from) {
  if (from && worker == from->worker)
    return from->handle;
  auto h = st.handles.find(worker);
  return h == st.handles.end() ? caf::actor{} : h->second;
}

// Sends what the core decided, in its order. Claims, outcomes and lost
// attempts go ahead of submissions waiting in the writer's mailbox: a
// worker's next job must not wait behind bulk inserts.
void perform(dispatcher_ptr self, effects& fx, const reporter* from = nullptr) {
  auto& st = self->state;
  for (auto& w : fx.writes) {
    if (auto* b = std::get_if<worker_writes>(&w)) {
      auto handle = writes_handle(st, b->worker_id, from);
      caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer,
                                                  worker_batch{std::move(handle), std::move(*b)});
    } else if (auto* o = std::get_if<job_offer>(&w)) {
      auto handle = writes_handle(st, o->worker_id, from);
      caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer,
                                                  offer_batch{std::move(handle), std::move(*o)});
    } else if (auto* back = std::get_if<withdraw_offer>(&w)) {
      caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer, *back);
    } else if (auto* lost = std::get_if<lose_batch>(&w)) {
      caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer, std::move(*lost));
    } else if (auto* held = std::get_if<hold_batch>(&w)) {
      caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer, std::move(*held));
    } else if (auto* save = std::get_if<control_save>(&w)) {
      caf::send_as(st.me, st.cfg.writer, std::move(*save));
    } else if (auto* row = std::get_if<worker_save>(&w)) {
      // In the claims' lane, ahead of them: no claim naming the worker
      // commits before its row, so the next open counts on past its id.
      caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer, std::move(*row));
    } else if (auto* expiring = std::get_if<expire_batch>(&w)) {
      caf::send_as(st.me, st.cfg.writer, std::move(*expiring));
    } else {
      caf::send_as(st.me, st.cfg.writer, std::move(std::get<expire_pending_batch>(w)));
    }
  }
  for (auto& r : fx.requests)
    if (auto h = st.handles.find(r.worker); h != st.handles.end())
      std::visit([&](auto& x) { caf::send_as(st.me, h->second, std::move(x)); }, r.request);
  for (auto row : fx.finished)
    st.cfg.watch->finished(row);
  for (auto id : fx.unregistered)
    if (auto p = st.leaving.find(id); p != st.leaving.end()) {
      p->second.deliver(unregistered_atom::value);
      st.leaving.erase(p);
    }
  for (auto& [what, why] : fx.rejected)
    reject(self, what, why);
  if (st.cfg.feeds && fx.hungry)
    st.cfg.feeds->set_hungry(*fx.hungry);
  arm_timer(self, fx.wake_at);
  if (!fx.events.empty() && st.cfg.events)
    caf::anon_send(st.cfg.events, event_batch{std::move(fx.events)});
}

// ok if the current sender is the actor registered as worker `id`, or if no
// worker has that id (one that left may still report).
status check_sender(dispatcher_ptr self, uint64_t id) {
  auto& st = self->state;
  auto h = st.handles.find(id);
  if (!st.core->registered(id) || h == st.handles.end()
      || h->second.address() == caf::actor_cast<caf::actor_addr>(self->current_sender()))
    return {};
  return invalid_field("worker_id", "worker " + std::to_string(id)
                                      + " is registered by another actor");
}

caf::result<worker_registered> on_register(dispatcher_ptr self, const register_worker& r) {
  auto& st = self->state;
  if (auto why = validate(r); !why) {
    reject(self, "a registration", why);
    return to_caf_error(why);
  }
  effects fx;
  // A remote worker keeps its actor, and so this name, when it joins again.
  std::string holder;
  if (r.worker.node() != self->node())
    holder = to_string(r.worker.node()) + "/" + std::to_string(r.worker.id());
  // Only a worker registers itself: the name of its attempts is its own.
  if (auto& sender = self->current_sender(); sender && sender->node() != r.worker.node()) {
    auto why = invalid_field("worker", "the registration names an actor of another node");
    reject(self, "a registration", why);
    return to_caf_error(why);
  }
  auto done = st.core->register_worker(
    {r.name, r.host, r.pid, r.types, r.max_capacity, r.prefetch, std::move(holder), r.held,
     r.returned},
    st.now(), fx);
  auto wid = done.id;
  st.handles[wid] = r.worker;  // before perform: cancels of its attempts go to it
  st.monitored.emplace(r.worker.address(), wid);
  self->monitor(r.worker);
  perform(self, fx);
  return worker_registered{wid, st.cfg.writer, std::move(done.stale), st.cfg.remote_grace_ms,
                           done.max_capacity};
}

caf::result<unregistered_atom> on_unregister(dispatcher_ptr self, const unregister_worker& u) {
  auto& st = self->state;
  if (auto why = check_sender(self, u.worker_id); !why) {
    reject(self, "an unregistration", why);
    return to_caf_error(why);
  }
  effects fx;
  caf::result<unregistered_atom> answer = unregistered_atom::value;
  if (st.core->unregister_worker(u.worker_id, st.now(), fx)
      == dispatch_core::leaving::after_claim)
    answer = st.leaving[u.worker_id] = self->make_response_promise<unregistered_atom>();
  perform(self, fx);
  return answer;
}

void on_report(dispatcher_ptr self, worker_report& r) {
  auto& st = self->state;
  if (auto why = check_sender(self, r.worker_id); !why) {
    reject(self, "a report", why);
    return;
  }
  effects fx;
  reporter from{r.worker_id, caf::actor_cast<caf::actor>(self->current_sender())};
  st.core->report(std::move(r), st.now(), fx);
  perform(self, fx, &from);
}

void on_down(dispatcher_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  // Addresses compare by node and actor id: a remote worker that joined
  // again over a new connection has a new proxy, which this down is not.
  auto [first, last] = st.monitored.equal_range(down.source);
  std::vector<uint64_t> gone;
  for (auto i = first; i != last;) {
    auto h = st.handles.find(i->second);
    if (h != st.handles.end()
        && caf::actor_cast<caf::actor_control_block*>(h->second) != down.source.get()) {
      ++i;
      continue;
    }
    gone.push_back(i->second);
    st.handles.erase(i->second);
    st.leaving.erase(i->second);
    i = st.monitored.erase(i);
  }
  if (gone.empty())
    return;
  effects fx;
  st.core->workers_gone(gone, st.now(), fx);
  perform(self, fx);
}

// Applies the commit feeds that wait and hands out work.
void catch_up(dispatcher_ptr self) {
  effects fx;
  self->state.core->catch_up(self->state.now(), fx);
  perform(self, fx);
}

// Loads the pending jobs found at open and subscribes to the clock.
void start(dispatcher_ptr self, dispatcher_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.me = caf::actor_cast<caf::actor>(self);
  dispatch_core::config core;
  core.scheduling = st.cfg.scheduling;
  core.id_tag = st.cfg.id_tag;
  core.remote_grace_ms = st.cfg.remote_grace_ms;
  core.controls = std::move(st.cfg.controls);
  core.first_worker_id = st.cfg.first_worker_id;
  if (auto subs = st.cfg.subs)
    core.wants_events = [subs] { return subs->any(); };
  core.wants_finished = [watch = st.cfg.watch] { return !watch->empty(); };
  if (auto feeds = st.cfg.feeds)
    core.take_feeds = [feeds] { return feeds->take(); };
  st.core = std::make_unique<dispatch_core>(std::move(core), std::move(st.cfg.pending), st.now(),
                                            std::move(st.cfg.held));
  st.cfg.pending = {};
  if (!st.cfg.clock->follows_real_time())
    tick_on_advance(self, st.cfg.clock);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  effects fx;
  st.core->catch_up(st.now(), fx);
  perform(self, fx);
}

}  // namespace

dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  auto gate = cfg.gate;
  auto d = sys.spawn([](dispatcher_ptr self, dispatcher_config cfg)
                   -> dispatcher_actor::behavior_type {
    start(self, std::move(cfg));
    return {
      [self](register_worker& r) { return on_register(self, r); },
      [self](worker_report& r) { on_report(self, r); },
      [self](unregister_worker& u) { return on_unregister(self, u); },
      [self](feed_ready_atom) { catch_up(self); },
      [self](tick_atom) {
        self->state.armed_at = never;
        effects fx;
        self->state.core->tick(self->state.now(), fx);
        perform(self, fx);
      },
      [self](drain_atom) {
        effects fx;
        self->state.core->drain(self->state.now(), fx);
        perform(self, fx);
      },
      [self](scheduling_control& c) {
        effects fx;
        self->state.core->control(c, self->state.now(), fx);
        perform(self, fx);
      },
      [self](metrics_request& m) {
        catch_up(self);  // the snapshot includes every commit so far
        metrics_snapshot snap;
        self->state.core->fill_metrics(snap, self->state.now());
        m.reply.deliver(result<metrics_snapshot>{std::move(snap)});
      },
      [self](controls_request& c) {
        c.reply.deliver(result<std::vector<control_info>>{
          self->state.core->controls(self->state.now())});
      },
      [self](workers_request& w) {
        w.reply.deliver(result<std::vector<worker_info>>{self->state.core->workers()});
      },
      [self](pending_view_request& r) {
        auto now = self->state.now();
        r.reply.deliver(result<std::vector<pending_view>>{self->state.core->view(r.jobs, now)});
      },
    };
  }, std::move(cfg));
  set_gate<std::remove_pointer_t<dispatcher_ptr>>(d, std::move(gate));
  return d;
}

}  // namespace ergon::actors
