#include "ergon/actors/bulk_action.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <string>

#include "ergon/storage/times.hpp"
#include "writer_pause.hpp"
#include "ergon/wire.hpp"

namespace ergon::actors {

status check_bulk(bulk_kind kind, const job_filter& filter) {
  if (auto st = validate(filter); !st)
    return st;
  if (!filter.status)
    return {};
  auto s = *filter.status;
  auto named = std::string{to_string(s)};
  switch (kind) {
    case bulk_kind::cancel:
      if (is_final(s))
        return invalid_field("status", "a cancel takes unfinished jobs, not " + named + " ones");
      break;
    case bulk_kind::retry:
      if (s != job_status::failed)
        return invalid_field("status", "a retry takes failed jobs, not " + named + " ones");
      break;
    case bulk_kind::remove:
      if (!is_final(s))
        return invalid_field("status", "only finished jobs are deleted, not " + named
                                         + " ones: cancel them first");
      break;
  }
  return {};
}

bulk_pass::bulk_pass(bulk_kind kind, job_filter filter, size_t batch)
    : kind_(kind), batch_(batch) {
  if (kind == bulk_kind::retry)
    filter.status = job_status::failed;
  if (kind == bulk_kind::remove && !filter.status) {
    for (auto s : {job_status::succeeded, job_status::failed, job_status::cancelled,
                   job_status::expired}) {
      filters_.push_back(filter);
      filters_.back().status = s;
    }
    return;
  }
  filters_.push_back(std::move(filter));
}

std::optional<bulk_step> bulk_pass::next() const {
  if (!outcome_ || current_ >= filters_.size())
    return std::nullopt;
  bulk_step step;
  step.kind = kind_;
  step.filter = filters_[current_];
  step.after_row = after_;
  step.before_row = before_;
  step.limit = batch_;
  return step;
}

void bulk_pass::done(bulk_reply& reply) {
  ++steps_;
  if (!reply.outcome) {
    outcome_ = reply.outcome;
    if (steps_ > 1)
      outcome_ = status{outcome_.code(), outcome_.message() + " (the steps before stay done: "
                                           + done_so_far() + ")",
                        outcome_.field()};
    return;
  }
  cancelled_.cancelled += reply.cancelled;
  cancelled_.stop_requested += reply.stop_requested;
  retried_.retried += reply.retried;
  for (auto& id : reply.skipped)
    retried_.skipped.push_back(id);
  deleted_ += reply.deleted;
  before_ = reply.before_row;
  if (reply.resume_after != 0) {
    after_ = reply.resume_after;
    return;
  }
  ++current_;
  after_ = 0;
}

std::string bulk_pass::done_so_far() const {
  switch (kind_) {
    case bulk_kind::cancel:
      return std::to_string(cancelled_.cancelled) + " cancelled, "
             + std::to_string(cancelled_.stop_requested) + " asked to stop";
    case bulk_kind::retry:
      return std::to_string(retried_.retried) + " retried";
    case bulk_kind::remove:
      break;
  }
  return std::to_string(deleted_) + " deleted";
}

namespace {

struct action_state {
  bulk_action_config cfg;
  std::optional<bulk_pass> pass;
  caf::response_promise answer;

  static inline const char* name = "ergon.bulk";
};

using action_ptr = caf::stateful_actor<action_state>*;

void finish(action_ptr self) {
  auto& st = self->state;
  auto& pass = *st.pass;
  if (!pass.outcome())
    st.answer.deliver(to_caf_error(pass.outcome()));
  else if (pass.kind() == bulk_kind::cancel)
    st.answer.deliver(pass.cancelled());
  else if (pass.kind() == bulk_kind::retry)
    st.answer.deliver(pass.retried());
  else
    st.answer.deliver(pass.deleted());
  self->quit();
}

// What ends an action when the queue closes: the steps before stay.
bulk_reply closed_reply() {
  bulk_reply gone;
  gone.outcome = status{error::closed, "the queue closed during a bulk action"};
  return gone;
}

void step(action_ptr self) {
  auto& st = self->state;
  auto next = st.pass->next();
  if (next && st.cfg.closing && st.cfg.closing()) {
    auto gone = closed_reply();
    st.pass->done(gone);
    next.reset();
  }
  if (!next) {
    finish(self);
    return;
  }
  self->request(st.cfg.writer, caf::infinite, std::move(*next))
    .then(
      [self](bulk_reply& r) {
        auto& st = self->state;
        st.pass->done(r);
        pace(self, st.pass->next().has_value(), r.busy_us, st.cfg.opts.writer_share, step);
      },
      [self](caf::error&) {
        // The writer is gone: the queue is closing.
        auto gone = closed_reply();
        self->state.pass->done(gone);
        finish(self);
      });
}

}  // namespace

caf::actor spawn_bulk_action(caf::actor_system& sys, bulk_action_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  return sys.spawn(
    [](action_ptr self, bulk_action_config cfg) -> caf::behavior {
      self->state.pass.emplace(cfg.kind, cfg.filter, cfg.opts.batch);
      self->state.cfg = std::move(cfg);
      return {
        [self](bulk_run_atom) {
          auto& st = self->state;
          if (st.answer.pending())
            return;  // one run per action
          st.answer = self->make_response_promise();
          step(self);
        },
        [self](next_step_atom) {
          if (self->state.pass)
            step(self);
        },
        [self](bulk_stop_atom) {
          auto& st = self->state;
          if (!st.answer.pending())
            return;  // not started, or answered
          auto gone = closed_reply();
          st.pass->done(gone);
          finish(self);
        },
      };
    },
    std::move(cfg));
}

}  // namespace ergon::actors
