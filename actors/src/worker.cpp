#include "ergon/actors/worker.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/times.hpp"
#include "clock_ticks.hpp"
#include "job_runner.hpp"

namespace ergon::actors {

// -- running_attempt ------------------------------------------------------------------

running_attempt::running_attempt(const job_assignment& a, caf::actor worker,
                                 std::shared_ptr<job_runner> runner,
                                 std::shared_ptr<ergon::clock> clock)
    : id_(id_from_wire(a.id)),
      type_(a.type),
      group_(a.group),
      payload_(a.payload),
      try_number_(a.try_number),
      row_(a.row),
      token_(a.token),
      weight_(a.weight),
      worker_(std::move(worker)),
      runner_(std::move(runner)),
      clock_(std::move(clock)) {}

void running_attempt::cancel() noexcept {
  {
    // Under the lock, so a waiter can't check the flag, miss this, and sleep.
    std::lock_guard<std::mutex> guard{cancel_mtx_};
    cancelled_.store(true, std::memory_order_release);
  }
  cancel_cv_.notify_all();
}

void running_attempt::request_cancel() noexcept {
  cancel_requested_.store(true, std::memory_order_release);
  cancel();
}

void running_attempt::request_preempt() noexcept {
  {
    std::lock_guard<std::mutex> guard{cancel_mtx_};
    preempted_.store(true, std::memory_order_release);
  }
  cancel_cv_.notify_all();
}

namespace {

constexpr std::chrono::milliseconds max_wait = std::chrono::hours{24 * 365 * 200};

// Waits on `cv` until `flagged` or `timeout`: 0 or less doesn't wait, max()
// waits without limit.
template <class Flagged>
void wait_flag(std::condition_variable& cv, std::unique_lock<std::mutex>& guard,
               std::chrono::milliseconds timeout, Flagged flagged) {
  if (timeout == std::chrono::milliseconds::max())
    cv.wait(guard, flagged);
  else if (timeout > std::chrono::milliseconds::zero())
    // steady_clock counts in ns, which overflow past 292 years.
    cv.wait_for(guard, std::min<std::chrono::milliseconds>(timeout, max_wait), flagged);
}

}  // namespace

bool running_attempt::wait_cancelled(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{cancel_mtx_};
  wait_flag(cancel_cv_, guard, timeout, [this] { return cancelled(); });
  return cancelled();
}

bool running_attempt::wait_preempted(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> guard{cancel_mtx_};
  wait_flag(cancel_cv_, guard, timeout, [this] { return preempted() || cancelled(); });
  return preempted();
}

status running_attempt::yield() {
  if (!preempted())
    return {error::invalid_argument,
            "yield: the attempt was not asked to give up its slot (preempted() is false)",
            "yield"};
  return finish(storage::report_kind::yielded, {});
}

status running_attempt::finish(storage::report_kind kind, std::string text) {
  if (!mark_finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  auto [to, from] = make_reply<status>();
  runner_->report({row_, token_, kind, std::move(text)}, std::move(to));
  return from.wait();
}

status running_attempt::complete(std::string result) {
  return finish(storage::report_kind::succeeded, std::move(result));
}

status running_attempt::fail(std::string message) {
  return finish(storage::report_kind::failed, std::move(message));
}

status running_attempt::fail_permanently(std::string message) {
  return finish(storage::report_kind::failed_permanently, std::move(message));
}

status running_attempt::progress(int64_t done, int64_t total, std::string message) {
  if (finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  if (auto st = storage::check_progress(done, total, message); !st)
    return st;
  bool notify = false;
  {
    std::lock_guard<std::mutex> guard{progress_mtx_};
    auto now = clock_->now_ms();
    auto eta = eta_.add(now, done, total);
    unsent_progress_ = storage::progress_report{row_, token_, done, total, std::move(message),
                                                now, eta};
    notify = !std::exchange(worker_told_, true);
  }
  if (notify)
    tell(worker_, progress_atom::value, token_);
  return {};
}

std::optional<storage::progress_report> running_attempt::take_progress() {
  std::lock_guard<std::mutex> guard{progress_mtx_};
  worker_told_ = false;
  return std::exchange(unsent_progress_, std::nullopt);
}

status running_attempt::extend(std::optional<std::string> checkpoint) {
  if (finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  auto [to, from] = make_reply<status>();
  tell(worker_, heartbeat_call{token_, std::move(checkpoint), std::move(to)});
  return from.wait();
}

status running_attempt::checkpoint(std::string payload) {
  return extend(std::move(payload));
}

status running_attempt::heartbeat() {
  return extend(std::nullopt);
}

// -- worker actor ------------------------------------------------------------------------

namespace {

struct worker_state {
  worker_config cfg;
  caf::actor dispatcher;
  caf::actor writer;
  // Remote only: the connection dropped and the worker is not registered
  // again yet. The queue fails every attempt it handed out as "worker lost".
  bool disconnected = false;
  uint64_t worker_id = 0;
  bool registered = false;
  std::shared_ptr<job_runner> runner;
  // Attempts held (running or waiting), by token.
  std::unordered_map<int64_t, std::shared_ptr<running_attempt>> attempts;
  int64_t received_weight = 0;  // every unit ever assigned to us
  // A report with outcomes or releases is at the writer: the next waits.
  bool reporting = false;
  // Blocking callers of the report in flight, one per outcome.
  std::vector<std::optional<reply_to<status>>> report_replies;
  // Claims to give back in the next report (stopping).
  std::vector<storage::attempt_ref> to_release;
  // What the last report said, to skip sending the same room twice.
  int32_t last_capacity = -1;
  int64_t last_received = -1;
  bool stopping = false;
  bool unregistered = false;  // the dispatcher confirmed: no more jobs coming
  std::vector<reply_to<status>> stop_replies;
  int64_t next_auto_heartbeat = 0;
  // Attempts with a progress report to hand over, and when the next
  // hand-over may happen.
  std::vector<int64_t> progress_waiting;
  int64_t next_progress_flush = 0;
  bool progress_timer = false;  // a flush_progress_atom is on its way

  static inline const char* name = "ergon.worker";
};

using worker_ptr = gated<worker_actor::stateful_base<worker_state>>*;

void finish_stop_if_idle(worker_ptr self) {
  auto& st = self->state;
  if (!st.stopping || !st.unregistered || st.reporting || !st.attempts.empty()
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

// Hands progress reports to the writer; they join its next transaction. A
// worker without a connection drops them: they are only progress.
void send_progress(worker_ptr self, std::vector<storage::progress_report> reports) {
  auto& st = self->state;
  if (reports.empty() || !st.writer)
    return;
  caf::unsafe_send_as(self, st.writer, progress_batch{std::move(reports)});
}

// Hands over the waiting progress reports if the interval allows, else
// makes sure a flush comes when it does.
void flush_progress(worker_ptr self) {
  auto& st = self->state;
  if (st.progress_waiting.empty())
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
  std::vector<storage::progress_report> reports;
  for (auto token : st.progress_waiting)
    if (auto i = st.attempts.find(token); i != st.attempts.end())
      if (auto p = i->second->take_progress())
        reports.push_back(std::move(*p));
  st.progress_waiting.clear();
  st.next_progress_flush = storage::add_ms(now, st.cfg.progress_interval_ms);
  send_progress(self, std::move(reports));
}

// Sends what the job threads left, the claims to give back and the room
// there is, as one report. One report with outcomes at a time: whatever
// happens meanwhile joins the next one.
void report(worker_ptr self) {
  auto& st = self->state;
  if (st.disconnected && st.stopping) {
    answer_offline(self);
    return;
  }
  if (!st.registered || st.reporting)
    return;
  for (;;) {
    auto box = st.runner->take();
    std::vector<storage::progress_report> last_reports;
    for (auto& a : box.returned) {
      if (auto i = st.attempts.find(a.token); i != st.attempts.end())
        if (auto p = i->second->take_progress())
          last_reports.push_back(std::move(*p));
      st.attempts.erase(a.token);
    }
    send_progress(self, std::move(last_reports));
    int32_t room = 0;
    auto held = box.held_weight;
    if (!st.stopping && held < st.cfg.min_capacity + st.cfg.prefetch)
      room = st.cfg.max_capacity + st.cfg.prefetch - held;
    bool news = !box.outcomes.empty() || !st.to_release.empty();
    bool asks = room > 0 && (room != st.last_capacity || st.received_weight != st.last_received);
    if (news || asks || !box.returned.empty()) {
      worker_report r;
      r.worker_id = st.worker_id;
      r.capacity = room;
      r.received_weight = st.received_weight;
      r.outcomes = std::move(box.outcomes);
      r.returned = std::move(box.returned);
      r.released = std::move(st.to_release);
      st.to_release.clear();
      st.last_capacity = room;
      st.last_received = st.received_weight;
      ++st.cfg.counters->requests_sent;
      if (news) {
        st.reporting = true;
        st.report_replies = std::move(box.replies);
      }
      // Not anonymous: the dispatcher names the sender as the writer's
      // addressee. (send() can't go from a typed actor to an untyped handle.)
      caf::unsafe_send_as(self, st.dispatcher, std::move(r));
      if (news)
        return;  // the answer arms the next report
    }
    if (st.runner->arm_poke())
      return;
  }
}

void on_assign(worker_ptr self, assign_jobs& a) {
  auto& st = self->state;
  if (a.answers_report) {
    for (size_t i = 0; i < st.report_replies.size(); ++i) {
      auto ack = i < a.acks.size() ? from_wire(a.acks[i]) : status{};
      if (st.report_replies[i])
        st.report_replies[i]->deliver(ack);
    }
    st.cfg.counters->outcomes_committed += static_cast<int64_t>(a.acks.size());
    st.report_replies.clear();
    st.reporting = false;
  }
  if (!a.jobs.empty()) {
    ++st.cfg.counters->batches_received;
    st.cfg.counters->jobs_received += static_cast<int64_t>(a.jobs.size());
  }
  auto me = caf::actor_cast<caf::actor>(self);
  for (auto& j : a.jobs) {
    st.received_weight += j.weight;
    if (st.stopping) {  // it never starts: give it back
      st.to_release.push_back({j.row, j.token});
      continue;
    }
    auto attempt = std::make_shared<running_attempt>(j, me, st.runner, st.cfg.clock);
    st.attempts.emplace(j.token, attempt);
    auto code = st.cfg.runners.find(j.type);
    st.runner->add(std::move(attempt),
                   code != st.cfg.runners.end() ? code->second : job_runner::code{});
  }
  report(self);
  finish_stop_if_idle(self);
}

void extend_attempt_of(worker_ptr self, int64_t token, std::optional<std::string> checkpoint,
                       std::optional<reply_to<status>> reply) {
  auto& st = self->state;
  auto i = st.attempts.find(token);
  if (i == st.attempts.end()) {
    if (reply)
      reply->deliver(status{error::stale_attempt, "the attempt is no longer running"});
    return;
  }
  auto attempt = i->second;
  if (!st.writer) {
    if (reply)
      reply->deliver(status{error::unreachable, "the connection to the queue is down"});
    return;
  }
  heartbeat_request msg{attempt->row(), token, checkpoint.has_value(),
                     checkpoint ? std::move(*checkpoint) : std::string{}};
  self->request(st.writer, caf::infinite, std::move(msg))
    .then(
      [attempt, reply](heartbeat_reply& r) {
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
          reply->deliver(self->state.cfg.rejoin
                           ? status{error::unreachable, "the connection to the queue dropped"}
                           : queue_closed());
      });
}

// Leaves the dispatcher; stops once it confirms and held jobs are done.
void unregister(worker_ptr self) {
  auto& st = self->state;
  self->request(st.dispatcher, caf::infinite, unregister_worker{st.worker_id})
    .then(
      [self](unregistered_atom) {
        self->state.unregistered = true;
        finish_stop_if_idle(self);
      },
      [self](caf::error&) {
        // The dispatcher is gone: nothing more can arrive.
        self->state.unregistered = true;
        finish_stop_if_idle(self);
      });
}

// Takes no more jobs and gives back the ones that never started.
void on_stop(worker_ptr self, stop_worker& s) {
  auto& st = self->state;
  st.stop_replies.push_back(std::move(s.reply));
  if (!st.stopping) {
    st.stopping = true;
    for (auto& a : st.runner->take_waiting()) {
      st.to_release.push_back({a->row(), a->token()});
      st.attempts.erase(a->token());
    }
    if (st.registered) {
      report(self);
      unregister(self);
    } else if (st.disconnected) {
      st.unregistered = true;  // no queue to leave: it lost us already
      report(self);
    }
  }
  finish_stop_if_idle(self);
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
  auto now = st.cfg.clock->now_ms();
  if (st.cfg.auto_heartbeat_ms > 0 && now >= st.next_auto_heartbeat) {
    st.next_auto_heartbeat = storage::add_ms(now, st.cfg.auto_heartbeat_ms);
    for (auto& [token, attempt] : st.attempts)
      if (!attempt->finished())
        extend_attempt_of(self, token, std::nullopt, std::nullopt);
  }
}

void on_registered(worker_ptr self, worker_registered& r) {
  auto& st = self->state;
  st.worker_id = r.worker_id;
  st.writer = r.writer;
  st.registered = true;
  st.disconnected = false;
  if (st.cfg.rejoin)
    self->monitor(st.dispatcher);  // its node going away is the connection dropping
  report(self);
  if (st.stopping)
    unregister(self);
}

// The queue can't take us (it closed): nothing will ever arrive.
void give_up(worker_ptr self) {
  auto& st = self->state;
  st.unregistered = true;
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
  auto& st = self->state;
  if (st.stopping) {
    st.unregistered = true;
    report(self);
    finish_stop_if_idle(self);
    return;
  }
  self->request(st.cfg.rejoin, caf::infinite, rejoin_atom::value)
    .then(
      [self](caf::actor& dispatcher) {
        self->state.dispatcher = std::move(dispatcher);
        join(self);
      },
      [self](caf::error&) { give_up(self); });
}

// A remote worker's connection dropped. Its attempts are lost to the queue,
// which retries them: running code is told to stop, and claimed jobs that
// never started are dropped. What the code reports from now on is sent
// after it registers again, and the queue fences it.
void lost_connection(worker_ptr self) {
  auto& st = self->state;
  if (st.disconnected)
    return;
  st.disconnected = true;
  st.registered = false;
  st.writer = {};
  for (auto& r : st.report_replies)
    if (r)
      r->deliver(outcome_unacknowledged());
  st.report_replies.clear();
  st.reporting = false;
  for (auto& a : st.runner->take_waiting())
    st.attempts.erase(a->token());
  st.to_release.clear();
  for (auto& kv : st.attempts)
    kv.second->cancel();
  // Credit starts over with the next registration.
  st.received_weight = 0;
  st.last_capacity = -1;
  st.last_received = -1;
  rejoin(self);
}

// Registers with st.dispatcher.
void join(worker_ptr self) {
  auto& st = self->state;
  register_worker reg;
  reg.name = st.cfg.name;
  for (auto& kv : st.cfg.runners)
    reg.types.push_back(kv.first);
  reg.max_capacity = st.cfg.max_capacity;
  reg.prefetch = st.cfg.prefetch;
  reg.worker = caf::actor_cast<caf::actor>(self);
  self->request(st.dispatcher, caf::infinite, std::move(reg))
    .then([self](worker_registered& r) { on_registered(self, r); },
          [self](caf::error&) {
            auto& st = self->state;
            if (!st.cfg.rejoin) {
              give_up(self);
              return;
            }
            st.disconnected = false;  // lost_connection runs once per drop
            lost_connection(self);
          });
}

void on_down(worker_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  if (st.cfg.rejoin && st.registered && down.source == st.dispatcher.address())
    lost_connection(self);
}

}  // namespace

worker_actor spawn_worker(caf::actor_system& sys, worker_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  auto gate = cfg.gate;
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
    st.next_auto_heartbeat = storage::add_ms(st.cfg.clock->now_ms(), st.cfg.auto_heartbeat_ms);
    if (!st.cfg.clock->follows_real_time())
      tick_on_advance(self, st.cfg.clock);  // timers: heartbeats, progress
    arm_heartbeat(self);
    st.dispatcher = st.cfg.dispatcher;
    self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
    join(self);
    return {
      [self](assign_jobs& a) { on_assign(self, a); },
      [self](cancel_attempt& c) { on_cancel(self, c); },
      [self](preempt_attempt& p) { on_preempt(self, p); },
      [self](outbox_atom) {
        report(self);
        finish_stop_if_idle(self);
      },
      [self](heartbeat_call& e) {
        extend_attempt_of(self, e.token, std::move(e.checkpoint), std::move(e.reply));
      },
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
