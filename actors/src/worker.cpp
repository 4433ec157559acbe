#include "ergon/actors/worker.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <unordered_map>

#include "ergon/storage/times.hpp"
#include "job_pool.hpp"

namespace ergon::actors {

// -- running_attempt ------------------------------------------------------------------

running_attempt::running_attempt(const job_assignment& a, caf::actor worker)
    : id_(id_from_wire(a.id)),
      type_(a.type),
      group_(a.group),
      payload_(a.payload),
      try_number_(a.try_number),
      row_(a.row),
      token_(a.token),
      weight_(a.weight),
      worker_(std::move(worker)) {}

status running_attempt::finish(bool succeeded, std::string text, bool wait) {
  if (finished_.exchange(true, std::memory_order_acq_rel))
    return {error::job_finished, "this attempt already reported its outcome"};
  if (!wait) {
    caf::anon_send(worker_,
                   attempt_finished{row_, token_, succeeded, std::move(text), std::nullopt});
    return {};
  }
  auto [to, from] = make_reply<status>();
  caf::anon_send(worker_,
                 attempt_finished{row_, token_, succeeded, std::move(text), std::move(to)});
  return from.wait();
}

status running_attempt::complete(std::string result) {
  return finish(true, std::move(result), true);
}

status running_attempt::fail(std::string message) {
  return finish(false, std::move(message), true);
}

void running_attempt::finish_async(bool succeeded, std::string text) {
  finish(succeeded, std::move(text), false);
}

void running_attempt::returned() {
  caf::anon_send(worker_, attempt_returned{token_});
}

status running_attempt::extend(std::optional<std::string> checkpoint) {
  if (finished())
    return {error::job_finished, "this attempt already reported its outcome"};
  auto [to, from] = make_reply<status>();
  caf::anon_send(worker_, attempt_extend{token_, std::move(checkpoint), std::move(to)});
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
  caf::actor writer;
  uint64_t worker_id = 0;
  bool registered = false;
  // Attempts whose code is running, by token.
  std::unordered_map<int64_t, std::shared_ptr<running_attempt>> running;
  int32_t running_weight = 0;
  size_t reports_in_flight = 0;  // sent to the writer, not yet committed
  int64_t received_weight = 0;  // every unit ever assigned to us
  // Attempts whose code returned, not yet told to the dispatcher.
  std::vector<int64_t> returned_rows;
  std::vector<int64_t> returned_tokens;
  // What the last request_jobs said, to skip sending the same thing twice.
  int32_t last_capacity = -1;
  int64_t last_received = -1;
  // Outcomes collected for the next report_outcomes.
  std::vector<outcome_report> reports;
  std::vector<std::optional<reply_to<status>>> report_replies;
  bool flush_scheduled = false;
  bool stopping = false;
  bool unregistered = false;  // the dispatcher confirmed: no more jobs coming
  std::vector<reply_to<status>> stop_replies;
  std::unique_ptr<job_pool> pool;
  int64_t next_auto_heartbeat = 0;
  uint64_t clock_subscription = 0;

  static inline const char* name = "ergon.worker";
};

using worker_ptr = worker_actor::stateful_pointer<worker_state>;

// Below the low-water mark, tells the dispatcher how much room there is.
// Repeating it as room grows is safe: the dispatcher nets out what is on its
// way (see request_jobs).
void maybe_request(worker_ptr self) {
  auto& st = self->state;
  if (!st.registered || st.stopping || st.running_weight >= st.cfg.min_capacity)
    return;
  auto room = st.cfg.max_capacity - st.running_weight;
  if (room <= 0 || (room == st.last_capacity && st.received_weight == st.last_received))
    return;
  st.last_capacity = room;
  st.last_received = st.received_weight;
  ++st.cfg.counters->requests_sent;
  caf::anon_send(caf::actor_cast<caf::actor>(st.cfg.dispatcher),
                 request_jobs{st.worker_id, room, st.received_weight,
                              std::move(st.returned_rows), std::move(st.returned_tokens)});
  st.returned_rows.clear();
  st.returned_tokens.clear();
}

void finish_stop_if_idle(worker_ptr self) {
  auto& st = self->state;
  if (!st.stopping || !st.unregistered || !st.running.empty() || !st.reports.empty()
      || st.reports_in_flight > 0)
    return;
  for (auto& r : st.stop_replies)
    r.deliver(status{});
  st.stop_replies.clear();
  self->quit();
}

void flush_reports(worker_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.reports.empty())
    return;
  auto replies = std::move(st.report_replies);
  auto n = st.reports.size();
  report_outcomes msg{std::move(st.reports)};
  st.reports.clear();
  st.report_replies.clear();
  st.reports_in_flight += n;
  auto done = [self, n, replies](const std::vector<status>& statuses) mutable {
    for (size_t i = 0; i < n; ++i)
      if (replies[i])
        replies[i]->deliver(statuses[i]);
    self->state.reports_in_flight -= n;
    self->state.cfg.counters->outcomes_committed += static_cast<int64_t>(n);
    finish_stop_if_idle(self);
  };
  self->request(st.writer, caf::infinite, std::move(msg))
    .then(
      [done](outcome_replies& r) mutable {
        std::vector<status> statuses;
        for (auto& w : r.statuses)
          statuses.push_back(from_wire(w));
        done(statuses);
      },
      [done, n](caf::error&) mutable {
        // The writer is gone (queue closed): the outcome was not recorded.
        done(std::vector<status>(n, status{error::closed, "the queue is closed"}));
      });
}

void extend_attempt_of(worker_ptr self, int64_t token, std::optional<std::string> checkpoint,
                       std::optional<reply_to<status>> reply) {
  auto& st = self->state;
  auto i = st.running.find(token);
  if (i == st.running.end()) {
    if (reply)
      reply->deliver(status{error::stale_attempt, "the attempt is no longer running"});
    return;
  }
  auto attempt = i->second;
  extend_attempt msg{attempt->row(), token, checkpoint.has_value(),
                     checkpoint ? std::move(*checkpoint) : std::string{}};
  self->request(st.writer, caf::infinite, std::move(msg))
    .then(
      [attempt, reply](extend_reply& r) {
        auto st = from_wire(r.status);
        if (st.code() == error::stale_attempt)
          attempt->cancel();  // it expired: tell the code to stop
        if (reply)
          reply->deliver(st);
      },
      [reply](caf::error&) {
        if (reply)
          reply->deliver(status{error::closed, "the queue is closed"});
      });
}

// Leaves the dispatcher; stops once it confirms and running jobs are done.
void unregister(worker_ptr self) {
  auto& st = self->state;
  self->request(caf::actor_cast<caf::actor>(st.cfg.dispatcher), caf::infinite,
                unregister_worker{st.worker_id})
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

void arm_heartbeat(worker_ptr self) {
  auto& st = self->state;
  if (st.cfg.auto_heartbeat_ms <= 0 || !st.cfg.clock->follows_real_time())
    return;
  self->delayed_send(self, storage::timer_delay(st.cfg.auto_heartbeat_ms),
                     tick_atom::value);
}

void on_tick(worker_ptr self) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  if (st.cfg.auto_heartbeat_ms > 0 && now >= st.next_auto_heartbeat) {
    st.next_auto_heartbeat = storage::add_ms(now, st.cfg.auto_heartbeat_ms);
    for (auto& [token, attempt] : st.running)
      if (!attempt->finished())
        extend_attempt_of(self, token, std::nullopt, std::nullopt);
  }
}

}  // namespace

worker_actor spawn_worker(caf::actor_system& sys, worker_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  return sys.spawn([](worker_ptr self, worker_config cfg)
                   -> worker_actor::behavior_type {
    auto& st = self->state;
    st.cfg = std::move(cfg);
    st.pool = std::make_unique<job_pool>(static_cast<size_t>(st.cfg.max_capacity));
    st.next_auto_heartbeat = storage::add_ms(st.cfg.clock->now_ms(), st.cfg.auto_heartbeat_ms);
    if (st.cfg.auto_heartbeat_ms > 0 && !st.cfg.clock->follows_real_time()) {
      caf::actor_addr addr = self->address();
      st.clock_subscription = st.cfg.clock->subscribe([addr] {
        if (auto hdl = caf::actor_cast<caf::actor>(addr))
          caf::anon_send(hdl, tick_atom::value);
      });
      auto clock = st.cfg.clock;
      auto handle = st.clock_subscription;
      self->attach_functor([clock, handle] { clock->unsubscribe(handle); });
    }
    arm_heartbeat(self);
    register_worker reg;
    reg.name = st.cfg.name;
    for (auto& kv : st.cfg.runners)
      reg.types.push_back(kv.first);
    reg.max_capacity = st.cfg.max_capacity;
    reg.worker = caf::actor_cast<caf::actor>(self);
    self->request(caf::actor_cast<caf::actor>(st.cfg.dispatcher), caf::infinite, std::move(reg))
      .then(
        [self](worker_registered& r) {
          auto& st = self->state;
          st.worker_id = r.worker_id;
          st.writer = r.writer;
          st.registered = true;
          if (st.stopping)
            unregister(self);
          else
            maybe_request(self);
        },
        [self](caf::error&) {
          self->state.unregistered = true;
          for (auto& r : self->state.stop_replies)
            r.deliver(status{error::closed, "the queue is closed"});
          self->quit();
        });
    return {
      [self](assign_jobs& a) {
        auto& st = self->state;
        auto me = caf::actor_cast<caf::actor>(self);
        ++st.cfg.counters->batches_received;
        st.cfg.counters->jobs_received += static_cast<int64_t>(a.jobs.size());
        for (auto& j : a.jobs) {
          auto attempt = std::make_shared<running_attempt>(j, me);
          st.running.emplace(j.token, attempt);
          st.running_weight += j.weight;
          st.received_weight += j.weight;
          ++st.cfg.counters->running_jobs;
          st.cfg.counters->running_weight += j.weight;
          auto code = st.cfg.runners.find(j.type);
          runner run = code != st.cfg.runners.end() ? code->second : runner{};
          st.pool->post([attempt, run] {
            std::string failure;
            bool threw = false;
            try {
              if (!run)
                throw std::runtime_error("no runner for job type '" + attempt->type() + "'");
              run(*attempt);
            } catch (const std::exception& e) {
              threw = true;
              failure = e.what();
            } catch (...) {
              threw = true;
              failure = "job code threw an exception that is not a std::exception";
            }
            if (!attempt->finished())
              attempt->finish_async(!threw, std::move(failure));
            attempt->returned();
          });
        }
        maybe_request(self);
      },
      [self](cancel_attempt& c) {
        auto& st = self->state;
        auto i = st.running.find(c.token);
        if (i != st.running.end())
          i->second->cancel();
      },
      [self](attempt_finished& f) {
        auto& st = self->state;
        st.reports.push_back({f.row, f.token, f.succeeded, std::move(f.text)});
        st.report_replies.push_back(std::move(f.reply));
        // Collect what is already queued into one write (self-flush).
        if (!st.flush_scheduled) {
          st.flush_scheduled = true;
          self->send(self, flush_atom::value);
        }
      },
      [self](attempt_returned& r) {
        auto& st = self->state;
        auto i = st.running.find(r.token);
        if (i != st.running.end()) {
          st.running_weight -= i->second->weight();
          --st.cfg.counters->running_jobs;
          st.cfg.counters->running_weight -= i->second->weight();
          st.returned_rows.push_back(i->second->row());
          st.returned_tokens.push_back(r.token);
          st.running.erase(i);
        }
        maybe_request(self);
        finish_stop_if_idle(self);
      },
      [self](attempt_extend& e) {
        extend_attempt_of(self, e.token, std::move(e.checkpoint), std::move(e.reply));
      },
      [self](flush_atom) { flush_reports(self); },
      [self](tick_atom) {
        on_tick(self);
        arm_heartbeat(self);
      },
      [self](stop_worker& s) {
        auto& st = self->state;
        st.stop_replies.push_back(std::move(s.reply));
        if (!st.stopping) {
          st.stopping = true;
          if (st.registered)
            unregister(self);
        }
        finish_stop_if_idle(self);
      },
      [self](abandon_atom) {
        auto& st = self->state;
        for (auto& kv : st.running)
          kv.second->cancel();
        for (auto& r : st.stop_replies)
          r.deliver(status{error::timeout, "running jobs did not finish in time"});
        st.stop_replies.clear();
        self->quit();
      },
    };
  }, std::move(cfg));
}

}  // namespace ergon::actors
