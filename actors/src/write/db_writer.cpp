#include "ergon/actors/db_writer.hpp"

#include <caf/actor_system.hpp>
#include <caf/behavior.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>

#include <algorithm>
#include <functional>
#include <iostream>
#include <random>

#include <pthread.h>

#include "ergon/actors/protocol.hpp"
#include "ergon/actors/respond.hpp"
#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/op/add_finished_counts.hpp"
#include "ergon/storage/op/advance_low_mark.hpp"
#include "ergon/storage/op/cancel_job.hpp"
#include "ergon/storage/op/cancel_pending.hpp"
#include "ergon/storage/op/claim_jobs.hpp"
#include "ergon/storage/op/delete_finished.hpp"
#include "ergon/storage/op/meta.hpp"
#include "ergon/storage/op/delete_recurring.hpp"
#include "ergon/storage/op/expire_attempt.hpp"
#include "ergon/storage/op/expire_pending.hpp"
#include "ergon/storage/op/finish_attempts.hpp"
#include "ergon/storage/op/heartbeat.hpp"
#include "ergon/storage/op/insert_jobs.hpp"
#include "ergon/storage/op/lose_attempts.hpp"
#include "ergon/storage/op/put_recurring.hpp"
#include "ergon/storage/op/read_dependency_results.hpp"
#include "ergon/storage/op/record_logs.hpp"
#include "ergon/storage/op/record_progress.hpp"
#include "ergon/storage/op/release_claims.hpp"
#include "ergon/storage/op/retry_failed.hpp"
#include "ergon/storage/op/save_worker.hpp"
#include "ergon/storage/op/savepoint.hpp"
#include "ergon/storage/op/sweep_finished.hpp"
#include "ergon/storage/op/update_pending.hpp"
#include "ergon/storage/records.hpp"
#include "commit_release.hpp"

namespace ergon::actors {
namespace {

// A recurring job's pause lives in its own row, not in the dispatcher's
// control_table, so its event comes from the writer's commit.
event recurring_paused(const storage::pause_recurring_args& a,
                       const storage::pause_recurring_result& r, int64_t now) {
  event e;
  e.kind = event_kind::control_changed;
  e.at_ms = now;
  e.recurring_id = a.id;
  e.message = (a.pause ? "paused" : "resumed") + std::string{" recurring job \""} + a.id + "\"";
  if (a.pause && r.until) {
    e.message += " until " + std::to_string(*r.until);
    e.run_at_ms = *r.until;
  }
  return e;
}


job_assignment assignment_of(const storage::claimed_job& j) {
  job_assignment a;
  a.row = j.key.row;
  a.id = to_wire(j.key.id);
  a.type = j.key.type;
  a.group = j.key.group;
  a.payload = j.payload;
  a.try_number = j.try_number;
  a.token = j.token;
  a.weight = j.key.weight;
  return a;
}

// Calls `f(key, submitted)` with every job a feed leaves pending: added
// (submitted: true), requeued, given back, changed, and retried.
template <class F>
void each_pending_key(const commit_feed& feed, F f) {
  for (auto& k : feed.added)
    f(k, true);
  for (auto& k : feed.requeued)
    f(k, false);
  for (auto& r : feed.released)
    f(r.key, false);
  for (auto& c : feed.changed)
    f(c.after, false);
  for (auto& e : feed.ended)
    if (e.status == job_status::pending)
      f(e.key, false);
  for (auto& k : feed.unblocked)
    f(k, false);
}

}  // namespace

bool feed_channel::push(commit_feed f) {
  bool only_additions = f.cancelled.empty() && f.changed.empty() && f.claims.empty()
                        && f.ended.empty() && f.released.empty() && f.extended.empty()
                        && f.expired.empty() && f.failed.empty() && f.cancel_requests.empty()
                        && f.progress.empty() && f.requeued.empty()
                        && f.offers_ended.empty() && f.unblocked.empty()
                        && f.ended_waiting.empty() && f.children_cancelled.empty()
                        && f.controls.empty();
  std::lock_guard<std::mutex> guard{mtx_};
  deferred_jobs_ += f.added.size();
  feeds_.push_back(std::move(f));
  if (rung_)
    return false;
  if (only_additions && !hungry_.load(std::memory_order_relaxed)
      && deferred_jobs_ < defer_limit)
    return false;
  rung_ = true;
  return true;
}

bool feed_channel::ring_waiting() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (rung_ || feeds_.empty())
    return false;
  rung_ = true;
  return true;
}

std::vector<commit_feed> feed_channel::take() {
  std::lock_guard<std::mutex> guard{mtx_};
  rung_ = false;
  deferred_jobs_ = 0;
  return std::move(feeds_);
}

namespace {

// One transaction's worth of requests: what they changed and what each of
// them is told, all published only once COMMIT succeeded.
class writer {
 public:
  explicit writer(db_writer_config cfg)
      : cfg_(std::move(cfg)), rng_(std::random_device{}()) {}

  void run(caf::blocking_actor* self) {
    me_ = caf::actor_cast<caf::actor>(self);
    bool stopping = false;
    std::vector<reply_to<status>> on_closed;
    caf::behavior bhvr{
      [&](submit_call& c) {
        answer_requester(self, c.reply);
        on_submit(c);
      },
      [&](update_call& c) {
        answer_requester(self, c.reply);
        on_update(c);
      },
      [&](cancel_call& c) {
        answer_requester(self, c.reply);
        on_cancel(c);
      },
      [&](cancel_job_call& c) {
        answer_requester(self, c.reply);
        on_cancel_job(c);
      },
      [&](progress_batch& p) { on_progress(p); },
      [&](retry_failed_call& c) {
        answer_requester(self, c.reply);
        on_retry_failed(c);
      },
      [&](sweep_step& s) { on_sweep(self, s); },
      [&](bulk_step& s) { on_bulk(self, s); },
      [&](drain_step& s) { on_drain(self, s); },
      [&](put_recurring_call& c) {
        answer_requester(self, c.reply);
        on_put_recurring(c);
      },
      [&](delete_recurring_call& c) {
        answer_requester(self, c.reply);
        on_delete_recurring(c);
      },
      [&](pause_recurring_call& c) {
        answer_requester(self, c.reply);
        on_pause_recurring(c);
      },
      [&](worker_batch& b) { on_worker_batch(b); },
      [&](offer_batch& o) { on_offer(o); },
      [&](withdraw_offer& w) { on_withdraw(w); },
      [&](expire_batch& e) { on_expire(e); },
      [&](expire_pending_batch& e) { on_expire_pending(e); },
      [&](lose_batch& l) { on_lose(l); },
      [&](hold_batch& h) { on_hold(h); },
      [&](control_save& c) { on_control_save(c); },
      [&](worker_save& w) { on_worker_save(w); },
      [&](heartbeat_request& e) { on_heartbeat(self, e); },
      [&](results_request& e) { on_results(self, e); },
      [&](listen_to& l) { cfg_.listener = std::move(l.listener); },
      [&](after_writes& a) { release_.after_release(std::move(a.then)); },
      [&](close_call& c) {
        stopping = true;
        on_closed.push_back(std::move(c.reply));
        if (cfg_.listener && cfg_.feeds->ring_waiting())
          caf::send_as(me_, cfg_.listener, feed_ready_atom::value);
      },
      [&](caf::exit_msg&) { stopping = true; },
    };
    while (!stopping) {
      wait_for_mail(self);
      self->receive(bhvr);
      // The self-flush: everything already queued joins this commit.
      size_t n = 1;
      for (; n < cfg_.batch_limit && rows_in_batch_ < max_batch_rows && !stopping
             && !self->mailbox().empty();
           ++n)
        self->receive(bhvr);
      finish_batch(n);
    }
    // SQLite's file alone then holds every commit: users copy it, and a
    // reader still open keeps the last connection from folding the WAL in.
    // A failure loses nothing: the WAL stays beside the file.
    if (auto st = cfg_.db->settle(); !st)
      std::cerr << "ergon: " << cfg_.db->location() << ": the WAL stays beside the file: " << st
                << '\n';
    // Close the connection before acknowledging, so a caller may reopen the
    // file at once.
    cfg_.db.reset();
    for (auto& reply : on_closed)
      reply.deliver(status{});
  }

 private:
  // Spins briefly before receive() sleeps: the next request of a busy caller
  // usually arrives within microseconds, and waking costs ~25 us. Before it
  // sleeps it hands over any feeds it held back.
  void wait_for_mail(caf::blocking_actor* self) {
    auto until = std::chrono::steady_clock::now() + cfg_.idle_spin;
    for (unsigned i = 0; self->mailbox().empty(); ++i) {
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) {
        if (cfg_.listener && cfg_.feeds->ring_waiting())
          caf::send_as(me_, cfg_.listener, feed_ready_atom::value);
        return;  // receive() sleeps until mail arrives
      }
    }
  }

  // Runs `op` inside the batch transaction. On success `publish` records the
  // request's effects (feed, counts) for the commit. Each request but the
  // first gets a savepoint; the first one alone in the transaction can roll
  // the whole transaction back instead, which saves two statements for the
  // common single-request batch.
  template <class R, class Op, class Publish>
  result<R> in_request(Op&& op, Publish&& publish) {
    if (!open_) {
      begin_status_ = cfg_.db->begin_write();
      open_ = true;
      if (!begin_status_)
        return begin_status_;
      result<R> r = op();
      if (r) {
        publish(*r);
      } else {
        cfg_.db->rollback();
        open_ = false;
        next_row_ = 0;
      }
      return r;
    }
    if (!begin_status_)
      return begin_status_;
    result<R> r = status{error::internal, "request not run"};
    {
      storage::savepoint sp{*cfg_.db};
      if (!sp.begin_status()) {
        r = sp.begin_status();  // it may have ended the transaction: checked below
      } else {
        r = op();
        if (r)
          if (auto st = sp.release(); !st)
            r = st;
      }
    }
    if (r)
      publish(*r);
    else if (!cfg_.db->in_transaction())
      abort_batch(r.error());
    return r;
  }

  // SQLite rolled the whole transaction back (disk full, I/O error): the
  // earlier requests of this batch are gone too, so they must not be
  // acknowledged. They fail with the same error; later requests of the batch
  // start a new transaction.
  void abort_batch(const status& why) {
    release_.abort(why, sink_);
    open_ = false;
    next_row_ = 0;
    ++aborts_;
    last_abort_ = why;
  }

  // Every ~1,000 finished jobs the low mark moves past them, reading up to 4
  // rows per finished job: the cost per job stays constant, and the mark
  // catches up even behind a long-running job that finished late.
  status advance_low_mark() {
    finished_since_advance_ += release_.counts().finished();
    if (finished_since_advance_ < low_mark_every)
      return {};
    auto moved = storage::advance_low_mark(*cfg_.db, 4 * finished_since_advance_ + low_mark_every);
    finished_since_advance_ = 0;
    return moved ? status{} : moved.error();
  }

  // Registers what to do once the batch's fate is known: `f` gets the commit
  // status (ok, or why the transaction was lost).
  void after_commit(std::function<void(const status&)> f) {
    release_.after_commit(std::move(f));
  }

  // A blocking caller's reply: the request's own result if it committed.
  template <class V>
  void reply_after_commit(reply_to<V> to, V value) {
    after_commit([to = std::move(to), value = std::move(value)](const status& commit) mutable {
      if (commit)
        to.deliver(std::move(value));
      else
        to.deliver(V{commit});
    });
  }

  // Tells the dispatcher that one of its requests did not commit: it travels
  // in the feed, so it is seen in order with the commits around it.
  void fail_to_listener(write_failed msg) {
    release_.fail(std::move(msg));
  }

  double random() { return std::uniform_real_distribution<double>{0.0, 1.0}(rng_); }

  // -- requests from the queue facade ----------------------------------------------

  void on_submit(submit_call& c) {
    auto now = cfg_.clock->now_ms();
    rows_in_batch_ += c.args.jobs.size();
    storage::insert_jobs_args args{std::move(c.args.jobs), cfg_.max_payload_bytes,
                                   cfg_.id_tag, next_row_, cfg_.idempotency_window_ms,
                                   &cfg_.retry_policies};
    std::vector<job_id> ids;
    auto r = in_request<storage::insert_jobs_result>(
      [&] { return storage::insert_jobs(*cfg_.db, args, now); },
      [&](storage::insert_jobs_result& done) {
        ids = std::move(done.ids);
        inserted(done);
      });
    if (r)
      reply_after_commit(std::move(c.reply), result<std::vector<job_id>>{std::move(ids)});
    else
      reply_after_commit(std::move(c.reply), result<std::vector<job_id>>{r.error()});
  }

  void on_update(update_call& c) {
    c.args.max_payload_bytes = cfg_.max_payload_bytes;
    auto r = in_request<storage::key_change>(
      [&] { return storage::update_pending(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::key_change& change) { release_.feed().changed.push_back(std::move(change)); });
    reply_after_commit(std::move(c.reply), r.error());
  }

  void on_cancel(cancel_call& c) {
    auto r = in_request<storage::cancelled_job>(
      [&] { return storage::cancel_pending(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::cancelled_job& done) { cancelled(done); });
    reply_after_commit(std::move(c.reply), r.error());
  }

  void on_cancel_job(cancel_job_call& c) {
    auto r = in_request<storage::cancel_job_result>(
      [&] { return storage::cancel_job(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::cancel_job_result& done) {
        if (done.pending) {
          cancelled(*done.pending);
        } else if (done.running) {
          release_.feed().cancel_requests.push_back({*done.running, std::move(done.key)});
        }
      });
    reply_after_commit(std::move(c.reply), r.error());
  }

  // Not answered: a report that can't be stored is only progress, and a
  // log line only a log. Bad values from a worker on another node are
  // dropped here: a report or line out of bounds, or an attempt's lines
  // past what one attempt keeps.
  void on_progress(progress_batch& p) {
    auto& reports = p.reports;
    reports.erase(std::remove_if(reports.begin(), reports.end(),
                                 [](const storage::progress_report& r) {
                                   return !storage::check_progress(r.done, r.total, r.message);
                                 }),
                  reports.end());
    auto& logs = p.logs;
    logs.erase(std::remove_if(logs.begin(), logs.end(),
                              [](const storage::attempt_logs& a) {
                                return a.dropped < 0
                                       || a.lines.size()
                                            > static_cast<size_t>(storage::max_log_lines)
                                       || std::any_of(a.lines.begin(), a.lines.end(),
                                                      [](const log_line& l) {
                                                        return !storage::check_log_line(l);
                                                      });
                              }),
               logs.end());
    if (reports.empty() && logs.empty())
      return;
    in_request<std::vector<storage::progress_stored>>(
      [&]() -> result<std::vector<storage::progress_stored>> {
        if (!logs.empty())
          if (auto st = storage::record_logs(*cfg_.db, logs); !st)
            return st;
        return storage::record_progress(*cfg_.db, reports);
      },
      [&](std::vector<storage::progress_stored>& stored) {
        for (auto& s : stored)
          release_.feed().progress.push_back(std::move(s));
      });
  }

  void on_retry_failed(retry_failed_call& c) {
    retry_summary summary;
    auto r = in_request<storage::retry_failed_result>(
      [&] { return storage::retry_failed(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::retry_failed_result& done) {
        summary.retried = static_cast<int64_t>(done.requeued.size() + done.waiting.size());
        summary.skipped = std::move(done.skipped);
        requeued(done);
      });
    if (r)
      reply_after_commit(std::move(c.reply), result<retry_summary>{std::move(summary)});
    else
      reply_after_commit(std::move(c.reply), result<retry_summary>{r.error()});
  }

  void requeued(storage::retry_failed_result& done) {
    for (auto& k : done.requeued) {
      release_.counts().move(k.type, k.group, done.from, job_status::pending);
      release_.feed().requeued.push_back(std::move(k));
    }
    for (auto& k : done.waiting) {
      release_.counts().move(k.type, k.group, done.from, job_status::waiting);
      release_.feed().requeued_waiting.push_back(std::move(k));
    }
  }

  void deleted(const std::vector<storage::deleted_job>& jobs) {
    for (auto& j : jobs)
      release_.counts().add(j.type, j.status, -1);
  }

  void on_sweep(caf::blocking_actor* self, sweep_step& step) {
    auto rp = self->make_response_promise();
    auto now = cfg_.clock->now_ms();
    auto started = std::chrono::steady_clock::now();
    storage::delete_finished_result swept;
    sweep_reply reply;
    auto r = in_request<bool>(
      [&]() -> result<bool> {
        if (step.jobs) {
          auto del = storage::sweep_finished(*cfg_.db, *step.jobs);
          if (!del)
            return del.error();
          swept = std::move(*del);
        }
        if (step.results > 0) {
          auto dropped = storage::drop_expired_results(*cfg_.db, now, step.results);
          if (!dropped)
            return dropped.error();
          reply.results_dropped = *dropped;
        }
        if (step.keys > 0) {
          auto expired = storage::expire_idempotency_keys(*cfg_.db, now, step.keys);
          if (!expired)
            return expired.error();
          reply.keys_expired = *expired;
        }
        if (step.workers) {
          auto gone = storage::delete_departed_workers(
            *cfg_.db, step.workers->first, static_cast<int64_t>(step.workers->second));
          if (!gone)
            return gone.error();
          reply.workers_deleted = *gone;
        }
        return true;
      },
      [&](bool) { deleted(swept.deleted); });
    reply.outcome = r.error();
    reply.deleted = static_cast<int64_t>(swept.deleted.size());
    reply.resume_after = swept.resume_after;
    reply.busy_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
    after_commit([rp, reply](const status& commit) mutable {
      if (!commit)
        reply = sweep_reply{commit};
      rp.deliver(reply);
    });
  }

  // Runs one step of a bulk action over the rows below `end` in the batch
  // transaction, recording into `reply` what it did.
  status bulk_in_request(bulk_step& step, int64_t end, int64_t now, bulk_reply& reply) {
    auto& db = *cfg_.db;
    switch (step.kind) {
      case bulk_kind::cancel: {
        storage::cancel_jobs_args args{std::move(step.filter), step.after_row, end, step.limit};
        return in_request<storage::cancel_jobs_result>(
                 [&] { return storage::cancel_jobs(db, args, now); },
                 [&](storage::cancel_jobs_result& done) {
                   reply.cancelled = static_cast<int64_t>(done.cancelled.size());
                   reply.stop_requested = static_cast<int64_t>(done.stop_requested.size());
                   reply.resume_after = done.resume_after;
                   for (auto& c : done.cancelled)
                     cancelled(c);
                   for (auto& [ref, key] : done.stop_requested)
                     release_.feed().cancel_requests.push_back({ref, std::move(key)});
                 })
                 .error();
      }
      case bulk_kind::retry: {
        storage::retry_failed_args args;
        args.filter = std::move(step.filter);
        args.after_row = step.after_row;
        args.before_row = end;
        args.limit = step.limit;
        return in_request<storage::retry_failed_result>(
                 [&] { return storage::retry_failed(db, args, now); },
                 [&](storage::retry_failed_result& done) {
                   reply.retried =
                     static_cast<int64_t>(done.requeued.size() + done.waiting.size());
                   reply.skipped = std::move(done.skipped);
                   reply.resume_after = done.resume_after;
                   requeued(done);
                 })
                 .error();
      }
      case bulk_kind::remove: {
        storage::delete_finished_args args;
        args.filter = std::move(step.filter);
        args.after_row = step.after_row;
        args.before_row = end;
        args.limit = step.limit;
        return in_request<storage::delete_finished_result>(
                 [&] { return storage::delete_finished(db, args); },
                 [&](storage::delete_finished_result& done) {
                   reply.deleted = static_cast<int64_t>(done.deleted.size());
                   reply.resume_after = done.resume_after;
                   deleted(done.deleted);
                 })
                 .error();
      }
    }
    return status{error::internal, "not a bulk kind"};
  }

  void on_bulk(caf::blocking_actor* self, bulk_step& step) {
    auto rp = self->make_response_promise();
    auto now = cfg_.clock->now_ms();
    auto started = std::chrono::steady_clock::now();
    bulk_reply reply;
    auto& db = *cfg_.db;
    // The first step sets where the action ends: at the rows there are now
    // (the writer is the only one that adds rows).
    auto end = step.before_row != 0 ? result<int64_t>{step.before_row} : storage::end_of_rows(db);
    if (end) {
      reply.before_row = *end;
      reply.outcome = bulk_in_request(step, *end, now, reply);
    } else {
      reply.outcome = end.error();
    }
    reply.busy_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
    after_commit([rp, reply = std::move(reply)](const status& commit) mutable {
      if (!commit) {
        reply = bulk_reply{};
        reply.outcome = commit;
      }
      rp.deliver(std::move(reply));
    });
  }

  void on_drain(caf::blocking_actor* self, const drain_step& step) {
    auto rp = self->make_response_promise();
    auto now = cfg_.clock->now_ms();
    storage::drain_inbox_args args{step.limit, cfg_.max_payload_bytes, cfg_.id_tag, next_row_,
                                   cfg_.idempotency_window_ms, 0, &cfg_.retry_policies};
    if (step.forget)
      args.forget_taken_before = std::max<int64_t>(1, now - cfg_.idempotency_window_ms);
    drain_reply reply;
    // Most sweeps find nothing: outside a batch, they cost a read, not a
    // fenced transaction.
    if (!open_) {
      auto work = storage::inbox_has_work(*cfg_.db, args.forget_taken_before);
      if (!work || !*work) {
        reply.outcome = work.error();
        rp.deliver(std::move(reply));
        return;
      }
    }
    auto r = in_request<storage::drain_inbox_result>(
      [&] { return storage::drain_inbox(*cfg_.db, args, now); },
      [&](storage::drain_inbox_result& done) {
        rows_in_batch_ += done.taken;
        inserted(done.inserted);
        reply.taken = done.taken;
        reply.more = done.more;
        reply.forgotten = done.forgotten;
        reply.refused = std::move(done.refused);
      });
    reply.outcome = r.error();
    after_commit([rp, reply = std::move(reply)](const status& commit) mutable {
      if (!commit)
        reply = drain_reply{commit, 0, false, 0, {}};
      rp.deliver(std::move(reply));
    });
  }

  void on_put_recurring(put_recurring_call& c) {
    c.args.max_payload_bytes = cfg_.max_payload_bytes;
    c.args.retry_policies = &cfg_.retry_policies;
    auto r = in_request<storage::put_recurring_result>(
      [&] { return storage::put_recurring(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](storage::put_recurring_result& done) {
        if (done.superseded)
          cancelled(std::move(*done.superseded));
        if (done.created)
          add_instance(std::move(*done.created));
        if (done.changed)
          release_.feed().changed.push_back(std::move(*done.changed));
        settled(done.dependents);
      });
    if (r)
      reply_after_commit(std::move(c.reply), result<job_id>{r->instance});
    else
      reply_after_commit(std::move(c.reply), result<job_id>{r.error()});
  }

  void on_delete_recurring(delete_recurring_call& c) {
    auto r = in_request<std::optional<storage::cancelled_job>>(
      [&] { return storage::delete_recurring(*cfg_.db, c.args, cfg_.clock->now_ms()); },
      [&](std::optional<storage::cancelled_job>& instance) {
        if (instance)
          cancelled(*instance);
      });
    reply_after_commit(std::move(c.reply), r.error());
  }

  void on_pause_recurring(pause_recurring_call& c) {
    auto now = cfg_.clock->now_ms();
    auto r = in_request<storage::pause_recurring_result>(
      [&] { return storage::pause_recurring(*cfg_.db, c.args, now); },
      [&](storage::pause_recurring_result& done) {
        if (done.cancelled)
          cancelled(*done.cancelled);
        if (done.moved)
          release_.feed().changed.push_back(std::move(*done.moved));
        if (done.created)
          add_instance(std::move(*done.created));
        if (done.changed)
          release_.feed().controls.push_back(recurring_paused(c.args, done, now));
      });
    reply_after_commit(std::move(c.reply), r.error());
  }

  void on_control_save(control_save& c) {
    auto r = in_request<int64_t>(
      [&]() -> result<int64_t> {
        if (auto st = storage::save_controls(*cfg_.db, c.args); !st)
          return st;
        return c.answer;
      },
      [](int64_t&) {});
    reply_after_commit(std::move(c.reply), std::move(r));
  }

  // A failed row is logged and not retried: it names who ran attempts, and
  // no job waits on it.
  void on_worker_save(worker_save& w) {
    auto r = in_request<bool>(
      [&]() -> result<bool> {
        if (auto st = storage::save_worker(*cfg_.db, w.row); !st)
          return st;
        return true;
      },
      [](bool&) {});
    if (!r)
      std::cerr << "ergon: " << cfg_.db->location() << ": recording worker "
                << w.row.identity.id << ": " << r.error() << "\n";
  }

  // -- what a commit publishes --------------------------------------------------------

  void add_pending(storage::job_key k) {
    release_.counts().add(k.type, k.group, job_status::pending);
    release_.feed().added.push_back(std::move(k));
  }

  // A recurring job's next instance, inserted by a write that is no submit:
  // the submit's cached next row id is stale now.
  void add_instance(storage::job_key k) {
    next_row_ = 0;
    add_pending(std::move(k));
  }

  void cancelled(storage::job_key k) {
    release_.counts().move(k.type, k.group, job_status::pending, job_status::cancelled);
    release_.feed().cancelled.push_back(std::move(k));
  }

  void cancelled(storage::cancelled_job& done) {
    if (!done.was_waiting)
      cancelled(std::move(done.key));  // a waiting job is the first of its dependents' ends
    if (done.next_instance)
      add_instance(std::move(*done.next_instance));
    settled(done.dependents);
  }

  // A submit's jobs: pending, waiting, and what they did to other jobs.
  void inserted(storage::insert_jobs_result& done) {
    if (done.next_row > 0)
      next_row_ = done.next_row;
    for (auto& k : done.added)
      add_pending(std::move(k));
    for (auto& k : done.waiting) {
      release_.counts().add(k.type, k.group, job_status::waiting);
      release_.feed().waiting.push_back(std::move(k));
    }
    for (auto& k : done.replaced)
      cancelled(std::move(k));
    for (auto& c : done.raised)
      release_.feed().changed.push_back(std::move(c));
    settled(done.dependents);
  }

  // Waiting jobs that the ends of their dependencies released or ended.
  void settled(storage::dependents_settled& d) {
    for (auto& k : d.released) {
      release_.counts().move(k.type, k.group, job_status::waiting, job_status::pending);
      release_.feed().unblocked.push_back(std::move(k));
    }
    for (auto& e : d.ended) {
      release_.counts().move(e.key.type, e.key.group, job_status::waiting, e.status);
      release_.feed().ended_waiting.push_back(std::move(e));
    }
    for (auto& c : d.cancelled) {
      release_.counts().move(c.key.type, c.key.group, job_status::pending, job_status::cancelled);
      release_.feed().children_cancelled.push_back(std::move(c));
    }
    for (auto& s : d.stopping)
      release_.feed().cancel_requests.push_back({s.attempt, std::move(s.key)});
    for (auto& k : d.next_instances)
      add_instance(std::move(k));
  }

  void ended(storage::attempt_end& end) {
    release_.counts().move(end.type, end.group, job_status::running, end.status);
    if (end.next_instance)
      add_instance(std::move(*end.next_instance));
    settled(end.dependents);
    release_.feed().ended.push_back(std::move(end));
  }

  // -- requests from the dispatcher -----------------------------------------------------

  // The claims go first: on PostgreSQL their rows come back with the
  // outcomes' statement, in one round trip.
  void on_worker_batch(worker_batch& b) {
    auto& w = b.writes;
    assign_jobs out;
    out.answers_report = w.answers_report;
    std::optional<claims_under_way> claims;
    if (!w.claims.empty())
      claims = start_claims(w);
    auto aborts = aborts_;
    if (!w.outcomes.empty())
      out.acks = record_outcomes(w.outcomes);
    if (!w.released.empty())
      release(w.released);
    status lost;
    if (claims)
      lost = finish_claims(*claims, out);
    // A later request lost the transaction the outcomes were written in.
    if (aborts_ != aborts)
      out.acks.assign(out.acks.size(), to_wire(last_abort_));
    if (out.answers_report || !out.jobs.empty())
      release_.assign(std::move(b.worker), std::move(out));
    if (!lost)
      abort_batch(lost);  // after the answer joined the batch: its acks fail too
  }

  // -- the standing offer (job_offer) -------------------------------------------------

  void on_offer(offer_batch& b) {
    if (offer_ && !offer_->taken)
      give_back_offer();  // one at a time: not sent before the last one ended
    offer_ = standing_offer{std::move(b.worker), std::move(b.offer), false};
    if (decided_without_a_ready_job())
      give_back_offer();
  }

  // A feed the dispatcher had not applied when it made the offer made a job
  // ready (a feed held back while no worker was hungry, say): that job may
  // be the one its pick would have chosen.
  bool decided_without_a_ready_job() const {
    return last_ready_feed_ > offer_->offer.fed_through;
  }

  void on_withdraw(const withdraw_offer& w) {
    if (offer_ && offer_->offer.serial == w.serial && !offer_->taken)
      give_back_offer();
  }

  // Answers the offer unused in this transaction's feed; if that does not
  // commit, as a failed write, so the dispatcher hears of it either way.
  void give_back_offer() {
    auto worker = offer_->offer.worker_id;
    auto serial = offer_->offer.serial;
    offer_.reset();
    release_.feed().offers_ended.push_back(serial);
    after_commit([this, worker, serial](const status& commit) {
      if (!commit)
        release_.fail({worker, {}, {}, {}, commit, serial});
    });
  }

  // Before COMMIT: the offer's job is the one due job of this transaction
  // that fits it, if the transaction makes no other fitting job ready. With
  // another one the dispatcher must choose, and the offer goes back.
  void use_offer() {
    if (decided_without_a_ready_job()) {
      give_back_offer();
      return;
    }
    auto& o = offer_->offer;
    auto now = cfg_.clock->now_ms();
    auto& f = release_.feed();
    auto fits = [&](const storage::job_key& k) {
      return k.run_at <= now && k.weight <= o.room
             && std::find(o.types.begin(), o.types.end(), k.type) != o.types.end();
    };
    std::optional<int64_t> row;
    size_t fitting = 0;
    each_pending_key(f, [&](const storage::job_key& k, bool submitted) {
      if (!fits(k))
        return;
      ++fitting;
      if (submitted)
        row = k.row;
    });
    if (fitting == 0)
      return;
    // A job updated or cancelled by this transaction: its key above is stale.
    auto touched = [&](int64_t r) {
      return std::any_of(f.changed.begin(), f.changed.end(),
                         [&](const storage::key_change& c) { return c.after.row == r; })
             || std::any_of(f.cancelled.begin(), f.cancelled.end(),
                            [&](const storage::job_key& k) { return k.row == r; });
    };
    if (fitting > 1 || !row || now >= o.valid_until || touched(*row)) {
      give_back_offer();
      return;
    }
    storage::claim_jobs_args args{{{*row, static_cast<int64_t>(rng_() >> 1)}}, o.holder,
                                  static_cast<int64_t>(o.worker_id)};
    assign_jobs out;
    auto r = in_request<storage::claim_jobs_result>(
      [&] { return storage::claim_jobs(*cfg_.db, args, now); },
      [&](storage::claim_jobs_result& claimed) {
        if (claimed.claimed.size() != 1)
          return;  // not pending (cancelled by this transaction): it stands
        auto& j = claimed.claimed.front();
        release_.counts().move(j.key.type, j.key.group, job_status::pending, job_status::running);
        out.jobs.push_back(assignment_of(j));
        j.payload.clear();
        release_.feed().claims.push_back(
          {o.worker_id, std::move(claimed.claimed), {}, o.serial});
      });
    if (!r || out.jobs.empty())
      return;  // it stands; a claim that failed wrote nothing
    offer_->taken = true;
    release_.assign(offer_->worker, std::move(out));
    after_commit([this, worker = o.worker_id, serial = o.serial](const status& commit) {
      if (offer_ && offer_->offer.serial == serial)
        offer_.reset();
      if (!commit)
        release_.fail({worker, {}, {}, {}, commit, serial});
    });
  }

  // The statuses are final unless the commit fails (see finish_batch).
  std::vector<wire_status> record_outcomes(std::vector<storage::attempt_report>& reports) {
    storage::finish_attempts_args args;
    args.reports = std::move(reports);
    for (size_t i = 0; i < args.reports.size(); ++i)
      args.randoms.push_back(random());
    args.max_result_bytes = cfg_.max_payload_bytes;
    args.max_snoozes = cfg_.max_snoozes;
    args.children = {{}, cfg_.max_payload_bytes, cfg_.id_tag, 0, cfg_.idempotency_window_ms,
                     &cfg_.retry_policies};
    auto r = in_request<storage::finish_attempts_result>(
      [&] { return storage::finish_attempts(*cfg_.db, args, cfg_.clock->now_ms()); },
      [&](storage::finish_attempts_result& done) {
        for (auto& children : done.spawned)
          inserted(children);
        for (auto& end : done.ended)
          ended(end);
      });
    std::vector<wire_status> acks;
    if (r)
      for (auto& st : r->statuses)
        acks.push_back(to_wire(st));
    else
      acks.assign(args.reports.size(), to_wire(r.error()));
    return acks;
  }

  // A release that fails leaves the attempts running: they expire and retry.
  void release(std::vector<storage::attempt_ref>& attempts) {
    storage::release_claims_args args{std::move(attempts)};
    in_request<storage::release_claims_result>(
      [&] { return storage::release_claims(*cfg_.db, args, cfg_.clock->now_ms()); },
      [&](storage::release_claims_result& done) {
        for (auto& r : done.released) {
          release_.counts().move(r.key.type, r.key.group, job_status::running, job_status::pending);
          release_.feed().released.push_back(std::move(r));
        }
        for (auto& end : done.cancelled)
          ended(end);
      });
  }

  // A worker's claims between start_claims and finish_claims.
  struct claims_under_way {
    storage::started_claim claim;
    uint64_t worker_id = 0;
    std::shared_ptr<status> read;  // how reading them went, for after_commit
    uint64_t aborts = 0;  // aborts_ when they started
  };

  // A claim that fails (at its start or when read) wrote nothing: the
  // dispatcher hears of it after the transaction.
  std::optional<claims_under_way> start_claims(worker_writes& b) {
    std::vector<int64_t> rows;
    for (auto& claim : b.claims)
      rows.push_back(claim.row);
    auto read = std::make_shared<status>();
    auto r = in_request<storage::started_claim>(
      [&] {
        return storage::start_claim(
          *cfg_.db, {std::move(b.claims), b.holder, static_cast<int64_t>(b.worker_id)},
          cfg_.clock->now_ms());
      },
      [](storage::started_claim&) {});
    if (!r)
      *read = r.error();
    after_commit([this, read, wid = b.worker_id, rows = std::move(rows)](
                   const status& commit) mutable {
      if (!*read || !commit)
        fail_to_listener({wid, std::move(rows), {}, {}, *read ? commit : *read});
    });
    if (!r)
      return std::nullopt;
    return claims_under_way{std::move(*r), b.worker_id, std::move(read), aborts_};
  }

  // Returns why the transaction was lost, if reading the claims found that
  // and nothing before had. Claims whose transaction a later request lost
  // publish nothing: their rows, read or claimed already, were rolled
  // back, and the abort told the dispatcher.
  status finish_claims(claims_under_way& c, assign_jobs& out) {
    auto claimed = storage::finish_claim(c.claim);
    if (aborts_ != c.aborts)
      return {};
    if (!claimed) {
      *c.read = claimed.error();
      return open_ && !cfg_.db->in_transaction() ? claimed.error() : status{};
    }
    for (auto& j : claimed->claimed) {
      release_.counts().move(j.key.type, j.key.group, job_status::pending, job_status::running);
      out.jobs.push_back(assignment_of(j));
      j.payload.clear();  // the dispatcher doesn't need it
    }
    release_.feed().claims.push_back(
      {c.worker_id, std::move(claimed->claimed), std::move(claimed->missed)});
    return {};
  }

  void on_expire(expire_batch& e) {
    auto now = cfg_.clock->now_ms();
    for (auto& a : e.attempts)
      a.random = random();
    auto r = in_request<bool>(
      [&]() -> result<bool> {
        for (auto& a : e.attempts) {
          auto x = storage::expire_attempt(*cfg_.db, a, now);
          if (!x)
            return x.error();
          pending_expiries_.push_back(std::move(*x));
          pending_expiry_tokens_.push_back(a.token);
        }
        return true;
      },
      [&](bool) {
        for (size_t i = 0; i < pending_expiries_.size(); ++i) {
          auto& x = pending_expiries_[i];
          if (x.what == storage::expire_attempt_result::expired) {
            ended(x.ended);
          } else if (x.what == storage::expire_attempt_result::still_running) {
            release_.feed().extended.push_back({e.attempts[i].row, pending_expiry_tokens_[i],
                                      x.expires_at, false});
          }
        }
      });
    pending_expiries_.clear();
    pending_expiry_tokens_.clear();
    after_commit([this, ok = r.has_value(), err = r.error(),
                  attempts = std::move(e.attempts)](const status& commit) mutable {
      if (!ok || !commit)
        fail_to_listener({0, {}, std::move(attempts), {}, ok ? commit : err});
    });
  }

  // If this does not commit, the attempts are left to expire: the
  // dispatcher checks them again like a failed expiry.
  void on_lose(lose_batch& l) {
    auto r = in_request<std::vector<storage::attempt_end>>(
      [&] { return storage::lose_attempts(*cfg_.db, l.args, cfg_.clock->now_ms()); },
      [&](std::vector<storage::attempt_end>& lost) {
        for (auto& end : lost)
          ended(end);
      });
    after_commit([this, ok = r.has_value(), err = r.error(),
                  attempts = std::move(l.args.attempts)](const status& commit) mutable {
      if (ok && commit)
        return;
      std::vector<storage::expire_attempt_args> recheck;
      for (auto& a : attempts)
        recheck.push_back({a.row, a.token, 0.0});
      fail_to_listener({0, {}, std::move(recheck), {}, ok ? commit : err});
    });
  }

  // If this does not commit, the attempts keep their expiry, and expire
  // then if their worker is not back.
  void on_hold(hold_batch& h) {
    in_request<std::vector<std::optional<int64_t>>>(
      [&] { return storage::hold_attempts(*cfg_.db, h.args); },
      [&](std::vector<std::optional<int64_t>>& held) {
        for (size_t i = 0; i < held.size(); ++i)
          if (held[i])
            release_.feed().extended.push_back(
              {h.args.attempts[i].row, h.args.attempts[i].token, *held[i], false});
      });
  }

  void on_expire_pending(expire_pending_batch& e) {
    storage::expire_pending_args args{std::move(e.rows)};
    auto r = in_request<storage::expire_pending_result>(
      [&] { return storage::expire_pending(*cfg_.db, args, cfg_.clock->now_ms()); },
      [&](storage::expire_pending_result& done) {
        for (auto& k : done.expired) {
          release_.counts().move(k.type, k.group, job_status::pending, job_status::expired);
          release_.feed().expired.push_back(std::move(k));
        }
        for (auto& k : done.next_instances)
          add_instance(std::move(k));
        settled(done.dependents);
      });
    after_commit([this, ok = r.has_value(), err = r.error(),
                  rows = std::move(args.rows)](const status& commit) mutable {
      if (!ok || !commit)
        fail_to_listener({0, {}, {}, std::move(rows), ok ? commit : err});
    });
  }

  // -- requests from workers (serializable; answered after commit) ---------------------

  void on_heartbeat(caf::blocking_actor* self, heartbeat_request& msg) {
    auto rp = self->make_response_promise();
    storage::heartbeat_args args{msg.row, msg.token, std::nullopt, cfg_.max_payload_bytes};
    if (msg.has_checkpoint)
      args.checkpoint = std::move(msg.checkpoint);
    auto r = in_request<int64_t>(
      [&] { return storage::heartbeat(*cfg_.db, args, cfg_.clock->now_ms()); },
      [&](int64_t expires_at) {
        release_.feed().extended.push_back({msg.row, msg.token, expires_at, true});
      });
    heartbeat_reply reply{to_wire(r.error()), r ? *r : 0};
    after_commit([rp, reply = std::move(reply)](const status& commit) mutable {
      if (!commit)
        reply = heartbeat_reply{to_wire(commit), 0};
      rp.deliver(std::move(reply));
    });
  }

  // A read, answered once what the batch wrote so far committed: the
  // attempt it checks may end in it.
  void on_results(caf::blocking_actor* self, const results_request& msg) {
    auto rp = self->make_response_promise();
    // In a savepoint like a write: on PostgreSQL a failed statement would
    // end the batch's transaction, and its writes with it.
    auto r = in_request<storage::read_dependency_results_result>(
      [&] { return storage::read_dependency_results(*cfg_.db, {msg.row, msg.token, msg.after}); },
      [](storage::read_dependency_results_result&) {});
    results_reply reply{to_wire(r.error()), {}, 0};
    if (r) {
      reply.results = std::move(r->results);
      reply.next_after = r->next_after;
    }
    if (!open_) {
      rp.deliver(std::move(reply));
      return;
    }
    after_commit([rp, reply = std::move(reply)](const status& commit) mutable {
      if (!commit)
        reply = results_reply{to_wire(commit), {}, 0};
      rp.deliver(std::move(reply));
    });
  }

  // -- commit -------------------------------------------------------------------------

  // `requests`: the messages this batch took.
  void finish_batch(size_t requests) {
    if (open_ && begin_status_ && offer_ && !offer_->taken)
      use_offer();
    if (open_)
      cfg_.db->end_reads();  // COMMIT would leave them holding a snapshot
    status commit;
    if (open_ && begin_status_) {
      // The durable counts join the batch's transaction. If they can't be
      // written the batch fails as a failed COMMIT does: nobody is told ok.
      if (!release_.counts().empty())
        commit = storage::add_finished_counts(*cfg_.db, release_.counts());
      if (commit)
        commit = advance_low_mark();
      if (commit) {
        auto started = std::chrono::steady_clock::now();
        commit = cfg_.db->commit();
        auto took = std::chrono::steady_clock::now() - started;
        if (commit)
          cfg_.stats->committed(
            requests, std::chrono::duration_cast<std::chrono::microseconds>(took).count());
      }
      if (!commit)
        cfg_.db->rollback();
    } else if (open_) {
      commit = begin_status_;  // BEGIN failed: nothing was written
    }
    release_.release(commit, sink_);
    open_ = false;
    // The writer is the only one that adds rows: its next row stays good
    // across commits, and a lost batch's rows start again from the table.
    if (!commit)
      next_row_ = 0;
    rows_in_batch_ = 0;
    begin_status_ = {};
  }

  // Sends what a commit releases: counts to the counters, answers to
  // workers, feeds to the dispatcher's channel (only while one listens).
  struct release_sink final : commit_release<caf::actor>::sink {
    writer& w;
    explicit release_sink(writer& of) : w(of) {}
    void apply_counts(const count_delta& counts) override { w.cfg_.counters->apply(counts); }
    void assign(const caf::actor& worker, assign_jobs out) override {
      caf::send_as(w.me_, worker, std::move(out));
    }
    bool push(commit_feed feed) override {
      if (!w.cfg_.listener)
        return false;
      feed.seq = ++w.last_feed_;
      if (w.makes_ready(feed))
        w.last_ready_feed_ = feed.seq;
      return w.cfg_.feeds->push(std::move(feed));
    }
    void ring() override { caf::send_as(w.me_, w.cfg_.listener, feed_ready_atom::value); }
  };

  db_writer_config cfg_;
  // After cfg_: it watches cfg_.db's commits, so it goes first.
  // What it sends carries it as the sender: gated actors, and the
  // transport's rules on remote workers, refuse messages without one.
  caf::actor me_;
  std::mt19937_64 rng_;
  bool open_ = false;  // a transaction is open
  uint64_t aborts_ = 0;  // transactions lost mid-batch (abort_batch), and the last one's cause
  status last_abort_;
  // Next free row id within the open transaction (0: unknown). Only valid
  // while we hold the write lock, so it is forgotten at every commit.
  int64_t next_row_ = 0;
  // Jobs inserted by this transaction so far. Past max_batch_rows it
  // commits: a claim behind it waits for a few ms of inserts, not for 1,024
  // bulk requests.
  size_t rows_in_batch_ = 0;
  static constexpr size_t max_batch_rows = 2'048;
  status begin_status_;
  int64_t finished_since_advance_ = 0;
  static constexpr int64_t low_mark_every = 1'024;
  // Whether the dispatcher may find a job ready after `f`: one added,
  // requeued, given back, changed or retried that is due, or a failed claim
  // whose picks it puts back.
  bool makes_ready(const commit_feed& f) const {
    auto now = cfg_.clock->now_ms();
    bool ready = !f.failed.empty();
    each_pending_key(f, [&](const storage::job_key& k, bool) { ready = ready || k.run_at <= now; });
    return ready;
  }

  // Feeds sent so far, and the last of them that made a job ready.
  uint64_t last_feed_ = 0;
  uint64_t last_ready_feed_ = 0;
  // The dispatcher's standing offer; taken: used by the open transaction.
  struct standing_offer {
    caf::actor worker;
    job_offer offer;
    bool taken = false;
  };
  std::optional<standing_offer> offer_;
  // What the open transaction releases when it ends, and where to.
  commit_release<caf::actor> release_;
  release_sink sink_{*this};
  // Scratch for on_expire, kept to reuse capacity.
  std::vector<storage::expire_attempt_result> pending_expiries_;
  std::vector<int64_t> pending_expiry_tokens_;
};

}  // namespace

db_writer_actor spawn_db_writer(caf::actor_system& sys, db_writer_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  auto gate = cfg.gate;
  auto w = sys.spawn(
    [](gated<caf::blocking_actor>* self, db_writer_config cfg) {
      ::pthread_setname_np(::pthread_self(), "ergon.writer");  // for profiles
      writer w{std::move(cfg)};
      w.run(self);
    },
    std::move(cfg));
  set_gate<gated<caf::blocking_actor>>(w, std::move(gate));
  return caf::actor_cast<db_writer_actor>(std::move(w));
}

}  // namespace ergon::actors
