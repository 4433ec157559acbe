#include "ergon/actors/worker.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <unordered_map>
#include <utility>

#include <unistd.h>

#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/ownership.hpp"
#include "ergon/storage/times.hpp"
#include "clock_ticks.hpp"
#include "job_runner.hpp"
#include "next_report.hpp"
#include "queue_link.hpp"
#include "running_attempt.hpp"

namespace ergon::actors {

// -- worker actor ------------------------------------------------------------------------

namespace {

struct worker_state {
  worker_config cfg;
  caf::actor dispatcher;
  worker_writer_actor writer;
  queue_link link{false};
  std::shared_ptr<job_runner> runner;
  // Attempts held (running or waiting), by token.
  std::unordered_map<int64_t, std::shared_ptr<running_attempt>> attempts;
  int64_t received_weight = 0;  // every unit ever assigned to us
  // Reports with outcomes or releases at the writer, and their callers.
  reports_in_flight reports;
  // Claims to give back in the next report (stopping).
  std::vector<storage::attempt_ref> to_release;
  // What the last report said, to skip sending the same room twice.
  last_room last;
  // The room it runs with now: its own (cfg), or a run-time control's
  // concurrency (resize_worker).
  report_room room;
  std::vector<reply_to<status>> stop_replies;
  int64_t next_auto_heartbeat = 0;
  // Attempts with a progress report to hand over, and when the next
  // hand-over may happen.
  std::vector<int64_t> progress_waiting;
  int64_t next_progress_flush = 0;
  bool progress_timer = false;  // a flush_progress_atom is on its way
  // When outcomes waiting in `reports` may be sent again, and the timer
  // armed for that (older timers are stale).
  int64_t resend_at = 0;
  uint64_t resend_timer = 0;
  // While a dropped connection's attempts are kept (queue_link::holding):
  // when the hold ends, and the timer armed for it.
  int64_t hold_end = 0;
  uint64_t hold_timer = 0;
  // A registration that lists kept attempts is on its way: a hold that ends
  // meanwhile waits for its answer (hold_over), which decides.
  bool listing = false;
  bool hold_over = false;
  // Kept attempts that the registration could not list: stopped once it
  // is answered, as the queue does not give them back.
  std::vector<storage::attempt_ref> left_off;
  // Until when finished jobs wait for the rest of their burst (hold());
  // the epoch while none wait. Fixed when the wait starts, with its timer.
  std::chrono::steady_clock::time_point hold_until{};

  static inline const char* name = "ergon.worker";
};

using worker_ptr = gated<worker_actor::stateful_base<worker_state>>*;

void finish_stop_if_idle(worker_ptr self) {
  auto& st = self->state;
  if (!st.link.unregistered() || !st.reports.empty() || !st.attempts.empty()
      || !st.to_release.empty())
    return;
  for (auto& r : st.stop_replies)
    r.deliver(status{});
  st.stop_replies.clear();
  st.runner->shut_down();
  self->quit();
}

status outcome_unacknowledged() {
  return {error::unreachable,
          "the connection to the queue dropped before this outcome was acknowledged; if it "
          "did not commit, the queue retries the job (worker lost)"};
}

// Stopping with no connection: outcomes can't be sent, so their callers
// learn it now rather than wait for a reconnect that won't be awaited.
void answer_offline(worker_ptr self) {
  auto& st = self->state;
  st.to_release.clear();
  do {
    auto box = st.runner->take();
    for (auto& a : box.returned)
      st.attempts.erase(a.token);
    for (auto& r : box.replies)
      if (r)
        r->deliver(outcome_unacknowledged());
  } while (!st.runner->arm_poke());
}

// Takes what the attempt of `token` has for the writer into `batch`.
void take_handover(worker_state& st, int64_t token, progress_batch& batch) {
  auto i = st.attempts.find(token);
  if (i == st.attempts.end())
    return;
  auto h = i->second->take_handover();
  if (h.progress)
    batch.reports.push_back(std::move(*h.progress));
  if (h.logs)
    batch.logs.push_back(std::move(*h.logs));
}

// Hands progress reports and log lines to the writer; they join its next
// transaction. They go in the lane of the reports (high priority), behind
// which an outcome reaches the writer through the dispatcher: they commit
// before it, while the attempt's token still names the job's try, and one
// batch never overtakes an earlier one.
void send_progress(worker_ptr self, progress_batch batch) {
  auto& st = self->state;
  if ((batch.reports.empty() && batch.logs.empty()) || !st.writer)
    return;
  self->send<caf::message_priority::high>(st.writer, std::move(batch));
}

// Hands over the waiting progress reports if the interval allows, else
// makes sure a flush comes when it does.
void flush_progress(worker_ptr self) {
  auto& st = self->state;
  // Without a connection, what waits stays in the attempts until it is back.
  if (st.progress_waiting.empty() || !st.writer)
    return;
  auto now = st.cfg.clock->now_ms();
  if (now < st.next_progress_flush) {
    if (!st.progress_timer && st.cfg.clock->follows_real_time()) {
      st.progress_timer = true;
      self->delayed_send(self, storage::timer_delay(st.next_progress_flush - now),
                         flush_progress_atom::value);
    }
    return;  // a manual clock's tick flushes
  }
  progress_batch batch;
  for (auto token : st.progress_waiting)
    take_handover(st, token, batch);
  st.progress_waiting.clear();
  st.next_progress_flush = storage::add_ms(now, st.cfg.progress_interval_ms);
  send_progress(self, std::move(batch));
}

// Whether the outcomes waiting to be sent again go with the next report: a
// stopping worker does not wait out the backoff.
bool resend_due(worker_ptr self) {
  auto& st = self->state;
  return st.reports.resends_waiting() > 0
         && (st.link.stopping() || st.cfg.clock->now_ms() >= st.resend_at);
}

// Whether finished jobs wait for the others the worker holds, so that one
// report carries the burst (report_hold_us). The wait's end is fixed when
// it starts, with a timer for it; the runner's idle poke, or job code that
// waits for its own outcome's answer, ends it sooner. Claims to give back
// never wait. Only in real time: a manual clock's tests see every report.
bool hold(worker_ptr self) {
  auto& st = self->state;
  using std::chrono::steady_clock;
  auto stop_holding = [&] {
    st.hold_until = {};
    return false;
  };
  if (!st.cfg.clock->follows_real_time() || st.link.stopping() || resend_due(self)
      || !st.to_release.empty() || !st.runner->mail_may_wait())
    return stop_holding();
  auto now = steady_clock::now();
  if (st.hold_until == steady_clock::time_point{}) {
    auto left = report_hold_us(st.reports.last_answer_us(), st.runner->held_weight() > 0);
    if (left <= 0)
      return stop_holding();
    st.hold_until = now + std::chrono::microseconds{left};
    self->delayed_send(self, std::chrono::microseconds{left}, outbox_atom::value);
  } else if (now + std::chrono::microseconds{10} >= st.hold_until) {
    return stop_holding();  // the timer, or about its time: nothing else would end it
  }
  return st.runner->arm_idle_poke() || stop_holding();
}

// Sends what the job threads left, the claims to give back and the room
// there is, as one report. At most reports_in_flight::max reports with
// outcomes at a time: whatever happens meanwhile joins the next one.
void report(worker_ptr self) {
  auto& st = self->state;
  if (st.link.phase() == worker_phase::left_offline) {
    answer_offline(self);
    return;
  }
  if (!st.link.registered() || st.reports.full() || hold(self))
    return;
  auto& room = st.room;
  for (;;) {
    auto box = st.runner->take();
    if (resend_due(self))
      st.cfg.counters->outcomes_resent += static_cast<int64_t>(st.reports.resend_into(box));
    // The last progress and lines of each attempt with an outcome here, or
    // whose code returned, go ahead of the report.
    progress_batch last;
    for (auto& o : box.outcomes)
      take_handover(st, o.token, last);
    for (auto& a : box.returned) {
      take_handover(st, a.token, last);
      st.attempts.erase(a.token);
    }
    send_progress(self, std::move(last));
    if (auto next = next_report(st.link.worker_id(), box, st.to_release, st.link.stopping(),
                                st.received_weight, room, st.last)) {
      ++st.cfg.counters->requests_sent;
      if (next->carries_writes)
        st.reports.sent(next->report.outcomes, std::move(box.replies));
      // Not anonymous: the dispatcher names the sender as the writer's
      // addressee. (send() can't go from a typed actor to an untyped handle.)
      caf::unsafe_send_as(self, st.dispatcher, std::move(next->report));
      if (st.reports.full())
        return;  // an answer arms the next report
    }
    if (st.runner->arm_poke())
      return;
  }
}

// Outcomes whose write failed for a passing cause go out again after a
// wait that grows while the failures go on.
void arm_resend(worker_ptr self) {
  auto& st = self->state;
  auto wait = st.reports.resend_wait_ms();
  st.resend_at = storage::add_ms(st.cfg.clock->now_ms(), wait);
  if (!st.cfg.clock->follows_real_time())
    return;  // a manual clock's tick sends them
  self->delayed_send(self, storage::timer_delay(wait), resend_atom::value, ++st.resend_timer);
}

void on_resend_timer(worker_ptr self, uint64_t timer) {
  if (timer != self->state.resend_timer)
    return;  // armed for an earlier round
  report(self);
  finish_stop_if_idle(self);
}

void on_assign(worker_ptr self, assign_jobs& a) {
  auto& st = self->state;
  if (a.answers_report) {
    auto waiting = st.reports.resends_waiting();
    // A stopping worker tells the callers instead: its stop must end.
    st.reports.answered(a.acks, !st.link.stopping());
    auto again = st.reports.resends_waiting() - waiting;
    st.cfg.counters->outcomes_committed += static_cast<int64_t>(a.acks.size() - again);
    if (again > 0)
      arm_resend(self);
  }
  if (!a.jobs.empty()) {
    ++st.cfg.counters->batches_received;
    st.cfg.counters->jobs_received += static_cast<int64_t>(a.jobs.size());
  }
  auto me = caf::actor_cast<caf::actor>(self);
  for (auto& j : a.jobs) {
    st.received_weight += j.weight;
    if (st.link.stopping()) {  // it never starts: give it back
      st.to_release.push_back({j.row, j.token});
      continue;
    }
    auto attempt = std::make_shared<running_attempt>(j, me, st.runner, st.cfg.clock,
                                                      st.cfg.logs);
    st.attempts.emplace(j.token, attempt);
    auto code = st.cfg.runners.find(j.type);
    st.runner->add(std::move(attempt),
                   code != st.cfg.runners.end() ? code->second : job_runner::code{});
  }
  report(self);
  finish_stop_if_idle(self);
}

// The running attempt `token` that job code asks the writer about, or why
// the writer can't be asked.
result<std::shared_ptr<running_attempt>> asking_writer(worker_ptr self, int64_t token) {
  auto& st = self->state;
  auto i = st.attempts.find(token);
  if (i == st.attempts.end())
    return status{error::stale_attempt, "the attempt is no longer running"};
  if (!st.writer)
    return status{error::unreachable, "the connection to the queue is down"};
  return i->second;
}

// What a request to the writer answers when its connection is gone.
status writer_gone(worker_ptr self) {
  return self->state.cfg.rejoin ? status{error::unreachable, "the connection to the queue dropped"}
                                : queue_closed();
}

void extend_attempt_of(worker_ptr self, int64_t token, std::optional<std::string> checkpoint,
                       std::optional<reply_to<status>> reply) {
  auto attempt = asking_writer(self, token);
  if (!attempt) {
    if (reply)
      reply->deliver(attempt.error());
    return;
  }
  heartbeat_request msg{(*attempt)->row(), token, checkpoint.has_value(),
                        checkpoint ? std::move(*checkpoint) : std::string{}};
  self->request(self->state.writer, caf::infinite, std::move(msg))
    .then(
      [attempt = *attempt, reply](heartbeat_reply& r) {
        auto st = from_wire(r.status);
        if (st.code() == error::stale_attempt)
          attempt->cancel();  // it expired: tell the code to stop
        else if (st.code() == error::cancelled)
          attempt->request_cancel();  // in case the cancel_attempt was lost
        if (reply)
          reply->deliver(st);
      },
      [self, reply](caf::error&) {
        if (reply)
          reply->deliver(writer_gone(self));
      });
}

// A page of dependency results for job code, read by the writer.
void results_of(worker_ptr self, results_call& e) {
  auto attempt = asking_writer(self, e.token);
  if (!attempt)
    return e.reply.deliver(attempt.error());
  self->request(self->state.writer, caf::infinite,
                results_request{(*attempt)->row(), e.token, e.after})
    .then(
      [reply = e.reply](results_reply& r) {
        if (auto st = from_wire(r.status); !st)
          reply.deliver(std::move(st));
        else
          reply.deliver(std::move(r));
      },
      [self, reply = e.reply](caf::error&) { reply.deliver(writer_gone(self)); });
}

void follow(worker_ptr self, const link_steps& steps);
void end_hold(worker_ptr self);

// Leaves the dispatcher; stops once it confirms and held jobs are done.
void unregister(worker_ptr self) {
  auto& st = self->state;
  self->request(st.dispatcher, caf::infinite, unregister_worker{st.link.worker_id()})
    .then(
      [self](unregistered_atom) { follow(self, self->state.link.left()); },
      // The dispatcher is gone: nothing more can arrive.
      [self](caf::error&) { follow(self, self->state.link.left()); });
}

// Takes no more jobs and gives back the ones that never started.
void on_stop(worker_ptr self, stop_worker& s) {
  self->state.stop_replies.push_back(std::move(s.reply));
  follow(self, self->state.link.stop());
}

void on_cancel(worker_ptr self, const cancel_attempt& c) {
  auto& st = self->state;
  auto i = st.attempts.find(c.token);
  if (i == st.attempts.end())
    return;
  if (!c.requested) {
    // One that has not started yet still runs, with its flag set, as it
    // would have if its thread had started a moment earlier: its code
    // decides.
    i->second->cancel();
    return;
  }
  // Asked to stop: one that has not started never does.
  if (st.runner->cancel_waiting(c.token))
    report(self);
  else
    i->second->request_cancel();
}

// The dispatcher wants the slot: running code is asked to yield, and a
// claim that has not started goes back unstarted (its try not spent).
void on_preempt(worker_ptr self, const preempt_attempt& p) {
  auto& st = self->state;
  auto i = st.attempts.find(p.token);
  if (i == st.attempts.end())
    return;
  if (st.runner->take_waiting(p.token)) {
    st.to_release.push_back({i->second->row(), p.token});
    st.attempts.erase(i);
    report(self);
    return;
  }
  i->second->request_preempt();
}

void arm_heartbeat(worker_ptr self) {
  auto& st = self->state;
  if (st.cfg.auto_heartbeat_ms <= 0 || !st.cfg.clock->follows_real_time())
    return;
  self->delayed_send(self, storage::timer_delay(st.cfg.auto_heartbeat_ms),
                     tick_atom::value);
}

void on_tick(worker_ptr self) {
  auto& st = self->state;
  flush_progress(self);
  if (resend_due(self))
    report(self);
  auto now = st.cfg.clock->now_ms();
  if (!st.cfg.clock->follows_real_time() && st.link.holding() && now >= st.hold_end)
    end_hold(self);  // a manual clock's tick ends the hold
  if (st.cfg.auto_heartbeat_ms > 0 && now >= st.next_auto_heartbeat) {
    st.next_auto_heartbeat = storage::add_ms(now, st.cfg.auto_heartbeat_ms);
    for (auto& [token, attempt] : st.attempts)
      if (!attempt->finished())
        extend_attempt_of(self, token, std::nullopt, std::nullopt);
  }
}

// Attempts the queue did not give back stop: one that never started is
// dropped, running code is told to stop (its outcome is fenced).
void drop_stale(worker_ptr self, const std::vector<storage::attempt_ref>& stale) {
  auto& st = self->state;
  for (auto& a : stale) {
    st.to_release.erase(std::remove_if(st.to_release.begin(), st.to_release.end(),
                                       [&](const storage::attempt_ref& r) {
                                         return r.token == a.token;
                                       }),
                        st.to_release.end());
    auto i = st.attempts.find(a.token);
    if (i == st.attempts.end())
      continue;
    if (st.runner->take_waiting(a.token))
      st.attempts.erase(i);
    else
      i->second->cancel();
  }
}

// A run-time control set our concurrency (0: our own again). A min below
// our own max keeps its place under the new max; running jobs carry on.
// Claims heavier than the new max would never start: they go back
// unstarted, without spending their try.
void resize(worker_ptr self, int32_t max_capacity) {
  auto& st = self->state;
  auto max = max_capacity > 0 ? max_capacity : st.cfg.max_capacity;
  auto min = st.cfg.min_capacity < st.cfg.max_capacity ? std::min(st.cfg.min_capacity, max) : max;
  st.room.max_capacity = max;
  st.room.min_capacity = min;
  st.cfg.counters->max_capacity = max;
  st.runner->resize(max);
  for (auto i = st.attempts.begin(); i != st.attempts.end();) {
    if (i->second->weight() > max && st.runner->take_waiting(i->first)) {
      st.to_release.push_back({i->second->row(), i->first});
      i = st.attempts.erase(i);
    } else {
      ++i;
    }
  }
  report(self);
}

void on_registered(worker_ptr self, worker_registered& r) {
  auto& st = self->state;
  resize(self, r.max_capacity);
  st.writer = r.writer;
  st.listing = st.hold_over = false;
  drop_stale(self, r.stale);
  drop_stale(self, std::exchange(st.left_off, {}));
  st.resend_at = 0;  // kept outcomes go with the first report
  follow(self, st.link.joined(r.worker_id, r.hold_ms));
  flush_progress(self);  // what waited while the connection was down
}

// The queue can't take us (it closed): nothing will ever arrive.
void give_up(worker_ptr self) {
  auto& st = self->state;
  for (auto& r : st.stop_replies)
    r.deliver(queue_closed());
  st.stop_replies.clear();
  st.runner->shut_down();
  self->quit();
}

void join(worker_ptr self);

// Asks the connection for the dispatcher; it answers once the queue is
// reachable again, however long that takes.
void rejoin(worker_ptr self) {
  self->request(self->state.cfg.rejoin, caf::infinite, rejoin_atom::value)
    .then(
      [self](caf::actor& dispatcher) {
        self->state.dispatcher = std::move(dispatcher);
        join(self);
      },
      [self](caf::error&) { give_up(self); });
}

// What every dropped connection ends: the writer's handle, a burst's wait,
// and the credit, which starts over with the next registration.
void drop_connection(worker_state& st) {
  st.writer = worker_writer_actor{};
  st.hold_until = {};
  st.received_weight = 0;
  st.last = {};
}

// The connection dropped: the queue retries the attempts it handed out, so
// running code is told to stop and claims that never started are dropped.
void forget_connection(worker_ptr self) {
  auto& st = self->state;
  drop_connection(st);
  st.reports.drop(outcome_unacknowledged());
  for (auto& a : st.runner->take_waiting())
    st.attempts.erase(a->token());
  st.to_release.clear();
  for (auto& kv : st.attempts)
    kv.second->cancel();
}

// The connection dropped, and the queue keeps what it handed out for
// hold_ms: code runs on, claims wait to start, outcomes wait to be sent
// again, and the next registration lists them. Only the credit starts over.
void hold_connection(worker_ptr self) {
  auto& st = self->state;
  drop_connection(st);
  st.reports.keep_for_resend();
  st.hold_end = storage::add_ms(st.cfg.clock->now_ms(), st.link.hold_ms());
  ++st.hold_timer;
  if (st.cfg.clock->follows_real_time())
    self->delayed_send(self, storage::timer_delay(st.link.hold_ms()), hold_atom::value,
                       st.hold_timer);
}

void end_hold(worker_ptr self) {
  auto& st = self->state;
  if (st.listing)
    st.hold_over = true;
  else
    follow(self, st.link.hold_expired());
}

void on_hold_timer(worker_ptr self, uint64_t timer) {
  if (timer == self->state.hold_timer)
    end_hold(self);
}

// Does what a turn of the link asks, in link_steps' order.
void follow(worker_ptr self, const link_steps& steps) {
  auto& st = self->state;
  if (steps.give_back_waiting)
    for (auto& a : st.runner->take_waiting()) {
      st.to_release.push_back({a->row(), a->token()});
      st.attempts.erase(a->token());
    }
  if (steps.forget_connection)
    forget_connection(self);
  if (steps.hold_connection)
    hold_connection(self);
  if (steps.watch_queue)
    self->monitor(st.dispatcher);
  if (steps.report)
    report(self);
  if (steps.unregister)
    unregister(self);
  if (steps.rejoin)
    rejoin(self);
  if (steps.give_up)
    give_up(self);
  else if (steps.stop_if_idle)
    finish_stop_if_idle(self);
}

// What a worker that held its attempts across a dropped connection lists
// when it joins again: each row once, within what validate() takes. What
// does not fit is lost by the queue, and its outcome fenced. An attempt
// whose code waits for its outcome's answer is listed once, as held.
void list_kept(worker_state& st, register_worker& reg) {
  auto most = listed_per_unit * static_cast<size_t>(reg.max_capacity + reg.prefetch);
  std::unordered_map<int64_t, int64_t> listed;  // row -> token
  st.left_off.clear();
  auto add = [&](std::vector<storage::attempt_ref>& to, storage::attempt_ref a) {
    if (auto same = listed.find(a.row); same != listed.end() && same->second == a.token)
      return;
    if (listed.size() < most && listed.emplace(a.row, a.token).second)
      to.push_back(a);
    else
      st.left_off.push_back(a);
  };
  for (auto& [token, attempt] : st.attempts)
    add(reg.held, {attempt->row(), token});
  for (auto& a : st.to_release)
    add(reg.held, a);
  for (auto& a : st.reports.unacknowledged())
    add(reg.returned, a);
}

// Registers with st.dispatcher.
void join(worker_ptr self) {
  auto& st = self->state;
  register_worker reg;
  reg.name = st.cfg.name;
  reg.host = storage::host_name();
  reg.pid = ::getpid();
  for (auto& kv : st.cfg.runners)
    reg.types.push_back(kv.first);
  // The larger of its own and a control's: the attempts it lists are bounded
  // by it, and a worker lowered while it runs may hold more than the
  // control's value. The answer brings the control's value back.
  reg.max_capacity = std::max(st.cfg.max_capacity, st.room.max_capacity);
  reg.prefetch = st.cfg.prefetch;
  reg.worker = caf::actor_cast<caf::actor>(self);
  st.listing = st.link.holding();
  if (st.listing)
    list_kept(st, reg);
  self->request(st.dispatcher, caf::infinite, std::move(reg))
    .then([self](worker_registered& r) { on_registered(self, r); },
          [self](caf::error&) {
            auto& st = self->state;
            st.listing = false;
            if (std::exchange(st.hold_over, false))
              follow(self, st.link.hold_expired());
            follow(self, st.link.join_failed());
          });
}

void on_down(worker_ptr self, const caf::down_msg& down) {
  if (down.source == self->state.dispatcher.address())
    follow(self, self->state.link.queue_down());
}

}  // namespace

worker_actor spawn_worker(caf::actor_system& sys, worker_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  auto gate = cfg.gate;
  cfg.counters->max_capacity = cfg.max_capacity;  // stats() may come before the actor starts
  auto w = sys.spawn([](worker_ptr self, worker_config cfg)
                   -> worker_actor::behavior_type {
    auto& st = self->state;
    st.cfg = std::move(cfg);
    caf::actor_addr addr = self->address();
    auto poke = [addr] {
      if (auto hdl = caf::actor_cast<caf::actor>(addr))
        tell(hdl, outbox_atom::value);
    };
    st.runner = std::make_shared<job_runner>(st.cfg.max_capacity, poke, st.cfg.counters);
    st.room = {st.cfg.min_capacity, st.cfg.max_capacity, st.cfg.prefetch};
    st.next_auto_heartbeat = storage::add_ms(st.cfg.clock->now_ms(), st.cfg.auto_heartbeat_ms);
    if (!st.cfg.clock->follows_real_time())
      tick_on_advance(self, st.cfg.clock);  // timers: heartbeats, progress
    arm_heartbeat(self);
    st.dispatcher = st.cfg.dispatcher;
    st.link = queue_link{static_cast<bool>(st.cfg.rejoin)};
    self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
    join(self);
    return {
      [self](assign_jobs& a) { on_assign(self, a); },
      [self](cancel_attempt& c) { on_cancel(self, c); },
      [self](preempt_attempt& p) { on_preempt(self, p); },
      [self](resize_worker& r) {
        if (r.max_capacity >= 0 && r.max_capacity <= max_weight)
          resize(self, r.max_capacity);
      },
      [self](outbox_atom) {
        report(self);
        finish_stop_if_idle(self);
      },
      [self](heartbeat_call& e) {
        extend_attempt_of(self, e.token, std::move(e.checkpoint), std::move(e.reply));
      },
      [self](results_call& e) { results_of(self, e); },
      [self](tick_atom) {
        on_tick(self);
        arm_heartbeat(self);
      },
      [self](progress_atom, int64_t token) {
        self->state.progress_waiting.push_back(token);
        flush_progress(self);
      },
      [self](flush_progress_atom) {
        self->state.progress_timer = false;
        flush_progress(self);
      },
      [self](resend_atom, uint64_t timer) { on_resend_timer(self, timer); },
      [self](hold_atom, uint64_t timer) { on_hold_timer(self, timer); },
      [self](stop_worker& s) { on_stop(self, s); },
      [self](abandon_atom) {
        auto& st = self->state;
        for (auto& kv : st.attempts)
          kv.second->cancel();
        for (auto& r : st.stop_replies)
          r.deliver(status{error::timeout, "running jobs did not finish in time"});
        st.stop_replies.clear();
        st.runner->shut_down();
        self->quit();
      },
    };
  }, std::move(cfg));
  set_gate<std::remove_pointer_t<worker_ptr>>(w, std::move(gate));
  return w;
}

}  // namespace ergon::actors
