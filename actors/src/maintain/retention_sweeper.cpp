#include "ergon/actors/retention_sweeper.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include <algorithm>
#include <chrono>

#include "ergon/storage/times.hpp"
#include "clock_ticks.hpp"
#include "writer_pause.hpp"

namespace ergon::actors {

retention_pass::retention_pass(const retention_options& opts, int64_t now_ms)
    : batch_(opts.batch) {
  // A worker's record goes once it left longer ago than the longest
  // retention (every status has one): the finished jobs it ran are gone by
  // then, but a job that ran on it and is still kept (pending for a retry,
  // or finished later on another worker) names its id alone.
  if (opts.succeeded && opts.failed && opts.cancelled && opts.expired) {
    auto longest = std::max({*opts.succeeded, *opts.failed, *opts.cancelled, *opts.expired});
    workers_cutoff_ = storage::add_ms(now_ms, -longest.count());
  }
  for (auto [status, keep] : {std::pair{job_status::succeeded, opts.succeeded},
                              std::pair{job_status::failed, opts.failed},
                              std::pair{job_status::cancelled, opts.cancelled},
                              std::pair{job_status::expired, opts.expired}}) {
    if (!keep)
      continue;
    storage::sweep_finished_args a;
    a.status = status;
    a.cutoff_ms = storage::add_ms(now_ms, -keep->count());
    a.limit = batch_;
    statuses_.push_back(a);
  }
}

std::optional<sweep_step> retention_pass::next() const {
  if (finished_)
    return std::nullopt;
  sweep_step step;
  if (current_ < statuses_.size())
    step.jobs = statuses_[current_];
  else if (!results_done_)
    step.results = batch_;
  else if (!keys_done_)
    step.keys = batch_;
  else
    step.workers = {*workers_cutoff_, batch_};
  return step;
}

void retention_pass::done(const sweep_reply& reply) {
  if (!reply.outcome) {
    finished_ = true;
    return;
  }
  deleted_ += reply.deleted;
  dropped_ += reply.results_dropped;
  keys_expired_ += reply.keys_expired;
  workers_deleted_ += reply.workers_deleted;
  auto full = static_cast<int64_t>(batch_);
  if (current_ < statuses_.size()) {
    if (reply.resume_after != 0)
      statuses_[current_].after_row = reply.resume_after;
    else
      ++current_;
  } else if (!results_done_) {
    results_done_ = reply.results_dropped < full;
  } else if (!keys_done_) {
    keys_done_ = reply.keys_expired < full;
    finished_ = keys_done_ && !workers_cutoff_;
  } else {
    finished_ = reply.workers_deleted < full;
  }
}

namespace {

struct sweeper_state {
  retention_sweeper_config cfg;
  std::optional<retention_pass> pass;
  int64_t next_pass_at = 0;
  bool timer_armed = false;

  static inline const char* name = "ergon.retention";
};

using sweeper_ptr = caf::stateful_actor<sweeper_state>*;

void arm_timer(sweeper_ptr self) {
  auto& st = self->state;
  if (st.timer_armed || !st.cfg.clock->follows_real_time())
    return;  // a manual clock ticks on every advance
  st.timer_armed = true;
  auto wait = std::max<int64_t>(0, st.next_pass_at - st.cfg.clock->now_ms());
  self->delayed_send(self, storage::timer_delay(wait), tick_atom::value);
}

void publish(sweeper_state& st, const retention_pass& pass) {
  if ((pass.deleted() == 0 && pass.results_dropped() == 0 && pass.keys_expired() == 0
       && pass.workers_deleted() == 0)
      || !st.cfg.subs
      || !st.cfg.subs->any() || !st.cfg.events)
    return;
  event e;
  e.kind = event_kind::swept;
  e.at_ms = st.cfg.clock->now_ms();
  e.jobs_deleted = pass.deleted();
  e.results_dropped = pass.results_dropped();
  e.keys_expired = pass.keys_expired();
  e.workers_deleted = pass.workers_deleted();
  caf::anon_send(st.cfg.events, event_batch{{std::move(e)}});
}

void on_tick(sweeper_ptr self);

void step(sweeper_ptr self) {
  auto& st = self->state;
  auto next = st.pass->next();
  if (!next) {
    publish(st, *st.pass);
    st.pass.reset();
    // A pass that ran past the next one's time (or a manual clock that
    // moved meanwhile) starts the next one now.
    on_tick(self);
    return;
  }
  self->request(st.cfg.writer, caf::infinite, std::move(*next))
    .then(
      [self](sweep_reply& r) {
        auto& st = self->state;
        st.pass->done(r);
        pace(self, st.pass->next().has_value(), r.busy_us, st.cfg.opts.writer_share, step);
      },
      [self](caf::error&) {
        // The writer is gone: the queue is closing.
        self->state.pass.reset();
      });
}

void on_tick(sweeper_ptr self) {
  auto& st = self->state;
  if (st.pass || st.cfg.clock->now_ms() < st.next_pass_at) {
    arm_timer(self);
    return;
  }
  auto now = st.cfg.clock->now_ms();
  st.pass.emplace(st.cfg.opts, now);
  st.next_pass_at = storage::add_ms(now, st.cfg.opts.interval.count());
  step(self);
}

}  // namespace

caf::actor spawn_retention_sweeper(caf::actor_system& sys, retention_sweeper_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  return sys.spawn(
    [](sweeper_ptr self, retention_sweeper_config cfg) -> caf::behavior {
      self->state.cfg = std::move(cfg);
      if (!self->state.cfg.clock->follows_real_time())
        tick_on_advance(self, self->state.cfg.clock);
      on_tick(self);
      return {
        [self](tick_atom) {
          self->state.timer_armed = false;
          on_tick(self);
        },
        [self](next_step_atom) {
          if (self->state.pass)
            step(self);
        },
      };
    },
    std::move(cfg));
}

}  // namespace ergon::actors
