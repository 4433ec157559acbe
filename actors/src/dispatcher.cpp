#include "ergon/actors/dispatcher.hpp"
#include "ergon/actors/run_metrics.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "attempt_table.hpp"
#include "clock_ticks.hpp"
#include "disk_throughput.hpp"
#include "dispatcher_events.hpp"
#include "preemptions.hpp"
#include "pressure_gauge.hpp"
#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/scheduling_policy.hpp"
#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/times.hpp"
#include "ergon/wire.hpp"
#include "worker_registry.hpp"

namespace ergon::actors {
namespace {

constexpr int64_t never = storage::never_ms;
// After a storage error the dispatcher waits this long before it retries, so a
// full disk doesn't turn into a busy loop of failing claims.
constexpr int64_t storage_retry_ms = 1'000;

// The policy's in-memory key of a stored job; records the I/O it declared.
pending_job pending_of(scheduling_policy& policy, const storage::job_key& k) {
  pending_job e;
  e.row = k.row;
  e.run_at = k.run_at;
  e.ready_since = k.ready_since;
  e.added_at = k.added_at;
  e.priority = k.priority;
  e.weight = k.weight;
  e.type = policy.type_id(k.type);
  e.group = policy.group_id(k.group);
  if (k.io_read > 0 || k.io_write > 0) {
    e.flags |= pending_job::declares_io;
    policy.declare_io(k.row, io_estimate{k.io_read, k.io_write});
  }
  return e;
}

struct dispatcher_state {
  dispatcher_config cfg;
  // The sender of what it sends: gated actors, and the transport's rules
  // on remote workers, refuse messages without one.
  caf::actor me;
  // Pending jobs, kept current by the commit feeds.
  std::unique_ptr<scheduling_policy> policy;
  std::multimap<int64_t, int64_t> deadlines;  // at -> row
  // Claimed attempts, from their claim's feed until they end.
  attempt_table attempts;
  // Workers, kept current by the worker protocol.
  worker_registry workers;
  // Workers that unregistered while a claim was at the writer: answered
  // after it, so that its jobs reach them first.
  std::unordered_map<uint64_t, caf::typed_response_promise<unregistered_atom>> leaving;
  // A down message names only an address: the worker ids registered by it.
  std::multimap<caf::actor_addr, uint64_t> monitored;
  // Workers on other nodes: their attempts are lost when they go down.
  std::unordered_set<uint64_t> remote;
  // Remote workers that went down with a claim at the writer: its attempts
  // are lost as soon as it commits.
  std::unordered_set<uint64_t> lost_with_claim;
  std::mt19937_64 rng{std::random_device{}()};  // attempt tokens
  // Timers and control.
  bool draining = false;
  int64_t hold_until = 0;  // no claims before this (after a storage error)
  int64_t armed_at = never;
  // Published once per message (settle).
  std::vector<event> events;
  // Ended attempts, for metrics.
  run_stats runs;
  // Preemption (scheduling_options::preemption).
  preemptions preempting;
  int64_t preemptions_asked = 0;
  int64_t yields = 0;
  int64_t resumptions = 0;
  // Admission (scheduling_options::admission): pressure sources, and the
  // disk sampler of the I/O budget.
  std::unique_ptr<pressure_gauge> pressure;
  std::unique_ptr<disk_throughput> disk;

  static inline const char* name = "ergon.dispatcher";
};

using dispatcher_ptr = gated<dispatcher_actor::stateful_base<dispatcher_state>>*;

bool wants_events(const dispatcher_state& st) {
  return st.cfg.subs && st.cfg.subs->any();
}

void add_events(dispatcher_state& st, std::vector<event> events) {
  st.events.insert(st.events.end(), std::make_move_iterator(events.begin()),
                   std::make_move_iterator(events.end()));
}

// Turns allocation changes into events, once per handler.
void emit_rebalance(dispatcher_state& st, int64_t now) {
  auto changes = st.policy->rebalance();
  if (wants_events(st))
    add_events(st, allocation_events(changes, now));
}

// Names pending jobs that no registered worker can take.
void emit_too_heavy(dispatcher_state& st, int64_t now) {
  auto jobs = st.policy->take_too_heavy();
  if (wants_events(st))
    add_events(st, too_heavy_events(jobs, *st.policy, st.cfg.id_tag, now));
}

void flush_events(dispatcher_state& st) {
  if (st.events.empty())
    return;
  if (st.cfg.events)
    caf::anon_send(st.cfg.events, event_batch{std::move(st.events)});
  st.events.clear();
}

// -- timers ----------------------------------------------------------------------------

int64_t next_wake(const dispatcher_state& st, int64_t now) {
  int64_t next = never;
  if (auto t = st.policy->next_wake(now))
    next = std::min(next, *t);
  if (auto t = st.attempts.next_expiry())
    next = std::min(next, *t);
  if (!st.deadlines.empty())
    next = std::min(next, storage::add_ms(st.deadlines.begin()->first, 1));  // expired once past
  if (st.hold_until > 0)
    next = std::min(next, st.hold_until);
  if (st.disk)
    next = std::min(next, st.disk->next_sample_at());
  // Deferred work is checked again on a timer, not only on the next event.
  if (st.policy->deferring() && st.policy->ready_count() > 0)
    next = std::min(next, storage::add_ms(
                            now, st.cfg.scheduling.admission->recheck_interval.count()));
  return next;
}

// With a real clock, arm one CAF timer for the earliest wake-up. A manual
// clock instead sends a tick after every advance (see start).
void arm_timer(dispatcher_ptr self) {
  auto& st = self->state;
  if (!st.cfg.clock->follows_real_time())
    return;
  auto now = st.cfg.clock->now_ms();
  auto next = next_wake(st, now);
  if (next == never || next >= st.armed_at)
    return;
  st.armed_at = next;
  self->delayed_send(self, storage::timer_delay(next - now),
                     tick_atom::value);
}

// Expires attempts and deadlines that are due, and ends timed pauses.
void on_timer(dispatcher_state& st) {
  auto now = st.cfg.clock->now_ms();
  if (st.hold_until != 0 && now >= st.hold_until)
    st.hold_until = 0;
  if (st.disk) {
    st.disk->sample(now);
    st.policy->set_io_rates(st.disk->read_rate(), st.disk->write_rate());
  }
  st.policy->expire_pauses(now);
  expire_batch expiring;
  for (auto& a : st.attempts.due(now))
    expiring.attempts.push_back({a.row, a.token, 0.0});
  if (!expiring.attempts.empty())
    caf::send_as(st.me, st.cfg.writer, std::move(expiring));
  expire_pending_batch overdue;
  while (!st.deadlines.empty() && st.deadlines.begin()->first < now) {
    overdue.rows.push_back(st.deadlines.begin()->second);
    st.deadlines.erase(st.deadlines.begin());
  }
  if (!overdue.rows.empty())
    caf::send_as(st.me, st.cfg.writer, std::move(overdue));
}

// -- pending jobs and slots -------------------------------------------------------------

void add_pending(dispatcher_state& st, const storage::job_key& k, int64_t now) {
  st.policy->add(pending_of(*st.policy, k), now);
}

void add_submitted(dispatcher_state& st, const storage::job_key& k, int64_t now) {
  add_pending(st, k, now);
  if (k.deadline)
    st.deadlines.emplace(*k.deadline, k.row);
}

// Returns picked jobs that were not claimed to the index.
void restore_picks(dispatcher_state& st, const std::vector<picked_job>& picks, int64_t now) {
  for (auto& p : picks) {
    st.policy->unpick(p.job, true);
    st.policy->add(p.job, now);
    st.preempting.started(p.job.row, false);
  }
}

// The attempt's code returned, or it ended first: its slot is free.
void free_slot(dispatcher_state& st, int64_t row, const attempt_table::attempt& a) {
  st.policy->finished(row, a.group, a.type, a.weight);
}

// -- preemption ---------------------------------------------------------------------------

// A yielded job made ready again, ahead of its priority's other jobs.
void resume(dispatcher_state& st, const storage::job_key& k, int64_t now) {
  auto e = pending_of(*st.policy, k);
  e.flags |= pending_job::resumed;
  st.policy->add(e, now);
  ++st.resumptions;
  if (wants_events(st))
    st.events.push_back(resumed_event(k, now));
}

void resume_all(dispatcher_state& st, std::vector<storage::job_key> keys, int64_t now) {
  for (auto& k : keys)
    resume(st, k, now);
}

// A job whose attempt ended (or whose parked retry was let go) may run
// again: a yielded one waits for its preemptor to end first.
void ready_again(dispatcher_state& st, const storage::job_key& k, int64_t now) {
  bool yielded = false;
  if (st.preempting.hold(k, yielded))
    return;
  if (yielded)
    resume(st, k, now);
  else
    add_pending(st, k, now);
}

// Whether a worker that is not leaving runs `j`'s type, is large enough for
// its weight, and has at least `room` units free (counting jobs on their way).
bool worker_for(const dispatcher_state& st, const picked_job& j, int32_t room) {
  bool found = false;
  st.workers.each([&](const worker_registry::worker& w) {
    if (!w.leaving && w.max_capacity >= j.job.weight && w.wanted() >= room
        && std::find(w.types.begin(), w.types.end(), j.job.type) != w.types.end())
      found = true;
  });
  return found;
}

// Asks running attempts to yield for `j`, the lowest priority first.
void preempt_for(dispatcher_state& st, const picked_job& j, int64_t now) {
  std::vector<preemptions::candidate> candidates;
  for (auto& [row, a] : st.attempts.running()) {
    if (a.code_returned || a.priority >= j.effective_priority || st.preempting.asked(row))
      continue;
    auto w = st.workers.find(a.worker);
    if (!w || w->leaving || w->max_capacity < j.job.weight
        || std::find(w->types.begin(), w->types.end(), j.job.type) == w->types.end())
      continue;
    candidates.push_back({row, a.token, a.worker, a.group, a.weight, a.priority, a.started_at});
  }
  auto victims = preemptions::choose(
    std::move(candidates), j.job.weight,
    [&](uint64_t wid) {
      auto w = st.workers.find(wid);
      return w ? w->wanted() : 0;
    },
    [&](uint32_t group, int32_t weight) {
      return st.policy->may_lose(group, weight + st.preempting.losing(group));
    });
  auto preemptor = storage::make_job_id(j.job.added_at, st.cfg.id_tag, j.job.row);
  for (auto& v : victims) {
    st.preempting.asked(v, j.job.row);
    ++st.preemptions_asked;
    caf::send_as(st.me, st.workers.find(v.worker)->handle, preempt_attempt{v.row, v.token});
    if (wants_events(st))
      st.events.push_back(preempted_event(*st.attempts.find(v.row), *st.policy, preemptor,
                                          j.effective_priority, now));
  }
}

// After dispatching: waiting jobs at or above the threshold that no worker
// has room for ask for slots, and held jobs whose preemptor no longer waits
// for one are let go. At most this many preemptors are looked at per pass,
// so a large urgent backlog doesn't cost a scan of every running attempt
// for each of its jobs.
constexpr size_t preemptors_per_pass = 16;

void preempt(dispatcher_state& st, int64_t now) {
  if (!st.cfg.scheduling.preemption)
    return;
  // A preemptor no worker can run does not wait for a slot: what yielded
  // for it need not wait either.
  auto waiting = st.policy->preemptors(now);
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [&](const picked_job& j) { return !worker_for(st, j, 0); }),
                waiting.end());
  std::unordered_set<int64_t> rows;
  for (auto& j : waiting)
    rows.insert(j.job.row);
  resume_all(st, st.preempting.release_stale(rows), now);
  size_t looked = 0;
  for (auto& j : waiting) {
    if (st.preempting.asking_for(j.job.row) || worker_for(st, j, j.job.weight))
      continue;
    if (++looked > preemptors_per_pass)
      break;
    preempt_for(st, j, now);
  }
}

// Admission: the pressure for the picks that follow.
void read_pressure(dispatcher_state& st) {
  if (st.cfg.scheduling.admission)
    st.policy->set_pressure(st.pressure ? st.pressure->read() : 0.0);
}

// After a worker came or went.
void update_capacity(dispatcher_state& st) {
  auto c = st.workers.capacity();
  st.policy->set_capacity(c.weight);
  st.policy->set_type_limits(c.largest_by_type);
}

// -- dispatching --------------------------------------------------------------------------

// Tells the writer whether new jobs are wanted right away.
void publish_hunger(dispatcher_state& st) {
  if (st.cfg.feeds)
    st.cfg.feeds->set_hungry(!st.draining && st.workers.anyone_waiting());
}

// Claims and outcomes go ahead of submissions waiting in the writer's
// mailbox: a worker's next job must not wait behind bulk inserts.
void send_batch(dispatcher_state& st, worker_batch batch) {
  caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer, std::move(batch));
}

// Picks jobs for the worker's room, each with a new attempt token.
std::vector<storage::attempt_ref> claim_for(dispatcher_state& st, uint64_t worker,
                                            int64_t now) {
  auto rows = st.workers.claim(worker, [&](const std::vector<uint32_t>& types, int32_t room) {
    return st.policy->pick(types, room, now);
  });
  std::vector<storage::attempt_ref> claims;
  claims.reserve(rows.size());
  for (auto row : rows) {
    claims.push_back({row, static_cast<int64_t>(st.rng() >> 1)});
    st.preempting.started(row, true);  // a preemptor that got its slot
  }
  return claims;
}

void dispatch(dispatcher_state& st) {
  auto now = st.cfg.clock->now_ms();
  st.policy->promote(now);
  read_pressure(st);
  if (st.draining || now < st.hold_until || st.policy->ready_count() == 0) {
    publish_hunger(st);
    return;
  }
  for (size_t n = st.workers.waiting_count(); n > 0; --n) {
    auto wid = st.workers.pop_waiting();
    if (!wid)
      continue;
    worker_batch batch;
    batch.claims = claim_for(st, *wid, now);
    if (batch.claims.empty()) {
      st.workers.wait_for_jobs(*wid);
      continue;
    }
    batch.worker_id = *wid;
    batch.worker = st.workers.find(*wid)->handle;
    send_batch(st, std::move(batch));
    if (st.policy->ready_count() == 0)
      break;
  }
  preempt(st, now);
  publish_hunger(st);
}

// -- workers ------------------------------------------------------------------------------

void answer_unregister(dispatcher_state& st, uint64_t worker) {
  auto p = st.leaving.find(worker);
  if (p == st.leaving.end())
    return;
  p->second.deliver(unregistered_atom::value);
  st.leaving.erase(p);
}

// The attempts of a remote worker that went down end as "worker lost" and
// retry at once, rather than wait for their expiry: the worker's node is
// gone, or cut off and fenced from now on.
void lose_attempts(dispatcher_state& st, std::vector<storage::attempt_ref> attempts) {
  if (!attempts.empty())
    caf::send_as<caf::message_priority::high>(st.me, st.cfg.writer,
                                                lose_batch{{std::move(attempts)}});
}

// A gone worker runs no more code: its parked retries are free to go.
void worker_gone(dispatcher_state& st, uint64_t worker) {
  auto now = st.cfg.clock->now_ms();
  for (auto& key : st.attempts.worker_gone(worker)) {
    st.preempting.slot_freed(key.row, std::nullopt);  // its code runs no more
    ready_again(st, key, now);
  }
  bool remote = st.remote.erase(worker) == 1;
  if (remote)
    lose_attempts(st, st.attempts.running_on(worker));
  if (auto picks = st.workers.remove(worker)) {
    if (remote && !picks->empty())
      st.lost_with_claim.insert(worker);
    restore_picks(st, *picks, now);
    update_capacity(st);
  }
  st.leaving.erase(worker);
}

// The code of these attempts returned: their slots are free, and a parked
// retry may run. An attempt that does not run yet waits for its claim's feed.
void free_returned(dispatcher_state& st, uint64_t worker,
                   const std::vector<storage::attempt_ref>& returned, int64_t now) {
  for (auto& a : returned) {
    st.preempting.slot_freed(a.row, a.token);
    if (st.attempts.find(a.row)) {
      if (auto freed = st.attempts.code_returned(a.row, a.token))
        free_slot(st, a.row, *freed);
      // A preemptor's work is done once its code returns: the jobs that
      // yielded for it take the next slots, ahead of their priority's others.
      resume_all(st, st.preempting.ended(a.row), now);
    } else if (auto key = st.attempts.unpark(a.row, a.token)) {
      ready_again(st, *key, now);
    } else {
      st.workers.returned_before_claim(worker, a.row, a.token);
    }
  }
}

// -- commit feed ------------------------------------------------------------------------------

void start_attempt(dispatcher_state& st, uint64_t worker, const storage::claimed_job& j,
                   const worker_registry::committed_claim& claim) {
  auto e = pending_of(*st.policy, j.key);
  st.policy->remove(e);  // re-added by an update that raced the claim
  auto picked = claim.picked.find(j.key.row);
  if (picked == claim.picked.end())
    st.policy->mark_running(e);  // its worker left and the pick was undone
  st.policy->forget(j.key.row);  // no longer pending
  attempt_table::attempt a{worker,  j.token, j.expires_at, j.key.id,
                           e.type,  e.group, e.weight,     false,    j.key.recurring_id};
  a.priority = picked != claim.picked.end() ? picked->second.effective_priority : e.priority;
  a.started_at = j.started_at;
  a.code_returned = claim.returned_early.count({j.key.row, j.token}) == 1;
  if (a.code_returned)
    free_slot(st, j.key.row, a);
  st.attempts.claimed(j.key.row, a);
  // Times are the claim's: this feed may be read a little later.
  st.policy->record_wait(std::max<int64_t>(0, j.started_at - j.key.run_at));
}

// A worker's claim committed. Its missed jobs never ran: they were cancelled
// or updated meanwhile, and the feed that did so put them where they belong.
// If the worker died its claimed attempts expire and retry.
void on_claim(dispatcher_state& st, const claim_result& c,
              std::unordered_map<int64_t, picked_job>& picks) {
  auto claim = st.workers.claim_committed(c.worker_id, c.missed);
  for (auto& job : claim.missed) {
    st.policy->unpick(job, false);
    st.preempting.started(job.row, false);
  }
  for (auto& j : c.claimed)
    start_attempt(st, c.worker_id, j, claim);
  if (st.lost_with_claim.erase(c.worker_id) == 1) {
    std::vector<storage::attempt_ref> lost;
    for (auto& j : c.claimed)
      lost.push_back({j.key.row, j.token});
    lose_attempts(st, std::move(lost));
  }
  // The writer already sent the claimed jobs; a stopping worker runs them.
  if (claim.left)
    answer_unregister(st, c.worker_id);
  picks.merge(claim.picked);
}

void end_attempt(dispatcher_state& st, const storage::attempt_end& end, int64_t now) {
  auto run = st.attempts.find(end.row);
  auto w = run ? st.workers.find(run->worker) : nullptr;
  if (w && end.outcome == attempt_outcome::expired)
    caf::send_as(st.me, w->handle, cancel_attempt{end.row, run->token, "expired"});
  bool yielded = end.outcome == attempt_outcome::yielded;
  if (yielded)
    ++st.yields;
  // An outcome the code reported itself: the code still runs until it
  // returns, and its worker has no room before that.
  bool reported = end.outcome != attempt_outcome::expired
                  && end.outcome != attempt_outcome::worker_lost
                  && end.outcome != attempt_outcome::process_restart;
  if (run)
    st.preempting.attempt_ended(end.row, run->token, yielded,
                                !(!run->code_returned && w && reported));
  auto effect = st.attempts.ended(end, w != nullptr);
  if (effect.freed)
    free_slot(st, end.row, *effect.freed);
  if (effect.ready)
    ready_again(st, end.key, now);
  // A preemptor ended: the jobs that yielded for it resume.
  resume_all(st, st.preempting.ended(end.row), now);
}

// queue::cancel of a running job committed: tell its worker. A worker that
// is gone has its attempt failed as lost, which the request turns into
// `cancelled`.
void ask_to_stop(dispatcher_state& st, const storage::attempt_ref& attempt) {
  auto run = st.attempts.find(attempt.row);
  if (!run || run->token != attempt.token)
    return;  // it ended in the meantime
  if (auto w = st.workers.find(run->worker))
    caf::send_as(st.me, w->handle,
                   cancel_attempt{attempt.row, attempt.token, "cancel requested", true});
}

// After the dispatcher's own bookkeeping, so a waiter's next request sees
// the job as every other caller does.
void tell_waiters(final_watch& watch, const commit_feed& f) {
  if (watch.empty())
    return;
  for (auto& k : f.cancelled)
    watch.finished(k.row);
  for (auto& k : f.expired)
    watch.finished(k.row);
  for (auto& end : f.ended)
    if (is_final(end.status))
      watch.finished(end.row);
}

// A pending job was cancelled or passed its deadline: gone from the index,
// from the parked retries and from preemption, and what yielded for it runs.
void left_queue(dispatcher_state& st, const storage::job_key& k, int64_t now) {
  st.attempts.drop_parked(k.row);
  st.policy->remove(pending_of(*st.policy, k));
  st.policy->forget(k.row);
  st.preempting.forget(k.row);
  resume_all(st, st.preempting.ended(k.row), now);
}

void on_feed(dispatcher_state& st, const commit_feed& f) {
  auto now = st.cfg.clock->now_ms();
  // Events of this feed's commit go before those its handling caused (a
  // resumed job after the end of its preemptor).
  auto caused_from = st.events.size();
  for (auto& k : f.added)
    add_submitted(st, k, now);
  for (auto& k : f.requeued)
    add_submitted(st, k, now);
  for (auto& k : f.cancelled)
    left_queue(st, k, now);
  for (auto& c : f.changed) {
    // A parked retry still waits for its code; a held job for its preemptor.
    if (!st.attempts.update_parked(c.after) && !st.preempting.update_held(c.after)) {
      st.policy->remove(pending_of(*st.policy, c.before));
      add_pending(st, c.after, now);
    }
    // update_recurring gives an instance a new deadline; a stale entry is
    // harmless (expire_pending checks the row).
    if (c.after.deadline && c.after.deadline != c.before.deadline)
      st.deadlines.emplace(*c.after.deadline, c.after.row);
  }
  for (auto& k : f.expired)
    left_queue(st, k, now);
  std::unordered_map<int64_t, picked_job> picks;
  for (auto& c : f.claims)
    on_claim(st, c, picks);
  for (auto& end : f.ended) {
    st.runs.ended(end.type, end.outcome, now - end.started_at);
    end_attempt(st, end, now);
  }
  for (auto& r : f.released) {
    if (auto freed = st.attempts.released(r.key.row, r.token))
      free_slot(st, r.key.row, *freed);
    st.preempting.attempt_ended(r.key.row, r.token, false, true);
    st.preempting.started(r.key.row, false);
    add_pending(st, r.key, now);
  }
  for (auto& x : f.extended)
    st.attempts.extended(x.row, x.token, x.expires_at);
  for (auto& c : f.cancel_requests)
    ask_to_stop(st, c.attempt);
  tell_waiters(*st.cfg.watch, f);
  if (wants_events(st)) {
    auto committed = feed_events(f, now, picks, st.attempts, *st.policy);
    st.events.insert(st.events.begin() + static_cast<std::ptrdiff_t>(caused_from),
                     std::make_move_iterator(committed.begin()),
                     std::make_move_iterator(committed.end()));
  }
}

void on_write_failed(dispatcher_state& st, const write_failed& w) {
  auto now = st.cfg.clock->now_ms();
  auto retry_at = storage::add_ms(now, storage_retry_ms);
  st.hold_until = retry_at;
  if (!w.claim_rows.empty()) {
    st.lost_with_claim.erase(w.worker_id);
    auto claim = st.workers.claim_failed(w.worker_id);
    restore_picks(st, claim.picks, now);
    if (claim.left)
      answer_unregister(st, w.worker_id);
  }
  for (auto& a : w.expiries)
    st.attempts.recheck_at(retry_at, a.row, a.token);
  for (auto row : w.deadline_rows)
    st.deadlines.emplace(retry_at, row);
}

// Applies every commit the writer has made so far. Called before each
// decision, not only when rung: the writer may hold feeds back for a while
// (see feed_channel), and decisions must see every acknowledged submit.
void drain_feeds(dispatcher_state& st) {
  if (!st.cfg.feeds)
    return;
  auto feeds = st.cfg.feeds->take();
  if (feeds.empty())
    return;
  for (auto& f : feeds) {
    on_feed(st, f);
    for (auto& w : f.failed)
      on_write_failed(st, w);
  }
  // A manual clock's tick may have overtaken these feeds: check timers
  // against the current time, not only on the next tick.
  on_timer(st);
}

// Runs after every message: hand out work, publish allocation changes and
// events, and arm the next timer.
void settle(dispatcher_ptr self) {
  auto& st = self->state;
  drain_feeds(st);
  auto now = st.cfg.clock->now_ms();
  emit_rebalance(st, now);
  dispatch(st);
  emit_rebalance(st, now);
  emit_too_heavy(st, now);
  arm_timer(self);
  flush_events(st);
}

// -- messages -----------------------------------------------------------------------------

// A worker protocol message that breaks its rules (it may come from another
// node): logged and counted, never applied.
void reject(dispatcher_ptr self, const char* what, const status& why) {
  if (self->state.cfg.gate)
    self->state.cfg.gate->count_rejected();
  auto& sender = self->current_sender();
  std::cerr << "ergon: dispatcher rejected " << what << " from "
            << (sender ? caf::to_string(sender->node()) : std::string{"an anonymous sender"})
            << ": " << why << '\n';
}

// ok if the current sender is the actor registered as worker `id`, or if no
// worker has that id (one that left may still report).
status check_sender(dispatcher_ptr self, uint64_t id) {
  auto w = self->state.workers.find(id);
  if (!w || w->handle.address() == caf::actor_cast<caf::actor_addr>(self->current_sender()))
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
  std::vector<uint32_t> types;
  for (auto& t : r.types)
    types.push_back(st.policy->type_id(t));
  auto wid = st.workers.add(r.worker, std::move(types), r.max_capacity, r.prefetch);
  st.monitored.emplace(r.worker.address(), wid);
  if (r.worker.node() != self->node())
    st.remote.insert(wid);
  self->monitor(r.worker);
  update_capacity(st);
  settle(self);
  return worker_registered{wid, st.cfg.writer};
}

caf::result<unregistered_atom> on_unregister(dispatcher_ptr self, const unregister_worker& u) {
  auto& st = self->state;
  if (auto why = check_sender(self, u.worker_id); !why) {
    reject(self, "an unregistration", why);
    return to_caf_error(why);
  }
  caf::result<unregistered_atom> answer = unregistered_atom::value;
  switch (st.workers.leave(u.worker_id)) {
    case worker_registry::leave_result::unknown:
      return answer;
    case worker_registry::leave_result::left:
      break;
    case worker_registry::leave_result::after_claim:
      answer = st.leaving[u.worker_id] = self->make_response_promise<unregistered_atom>();
      break;
  }
  update_capacity(st);
  settle(self);
  return answer;
}

// A worker's report goes on to the writer with the jobs picked for its room,
// so its outcomes and its next claims commit together. A report from an
// actor other than its worker is dropped; one whose room is out of range
// still has its outcomes committed (each is fenced by its token), but
// credits nothing.
void on_report(dispatcher_ptr self, worker_report& r) {
  auto& st = self->state;
  if (auto why = check_sender(self, r.worker_id); !why) {
    reject(self, "a report", why);
    return;
  }
  bool credits = true;
  if (auto why = st.workers.check_credit(r.worker_id, r.capacity, r.received_weight); !why) {
    reject(self, "a report's room", why);
    credits = false;
  }
  drain_feeds(st);
  auto now = st.cfg.clock->now_ms();
  worker_batch batch;
  batch.worker_id = r.worker_id;
  // The sender, not the registry: a stopping worker reports after it left.
  batch.worker = caf::actor_cast<caf::actor>(self->current_sender());
  batch.outcomes = std::move(r.outcomes);
  batch.released = std::move(r.released);
  // Reports that carry writes get an answer; the worker sends the next such
  // report only then.
  batch.answers_report = !batch.outcomes.empty() || !batch.released.empty();
  free_returned(st, r.worker_id, r.returned, now);
  if (credits && st.workers.credit(r.worker_id, r.capacity, r.received_weight)) {
    st.policy->promote(now);
    read_pressure(st);
    emit_rebalance(st, now);  // picks follow shares that include new groups
    if (!st.draining && now >= st.hold_until)
      batch.claims = claim_for(st, r.worker_id, now);
    st.workers.wait_for_jobs(r.worker_id);
  }
  if (batch.answers_report || !batch.claims.empty())
    send_batch(st, std::move(batch));
  settle(self);
}

result<int64_t> on_control(dispatcher_state& st, scheduling_control& c) {
  auto now = st.cfg.clock->now_ms();
  auto& policy = *st.policy;
  switch (c.op) {
    case scheduling_control::set_group_weight:
      policy.set_group_weight(c.name, c.weight);
      break;
    case scheduling_control::reset_group_weights:
      policy.reset_group_weights();
      break;
    case scheduling_control::pause_group:
      if (auto done = policy.pause_group(c.name, c.until, now); !done)
        return done;
      break;
    case scheduling_control::resume_group:
      policy.resume_group(c.name, now);
      break;
    case scheduling_control::pause_type:
      if (auto done = policy.pause_type(c.name, c.until, now); !done)
        return done;
      break;
    case scheduling_control::resume_type:
      policy.resume_type(c.name, now);
      break;
    case scheduling_control::resume_all:
      return policy.resume_all(now);
  }
  return int64_t{0};
}

std::vector<pending_view> view_of(const dispatcher_state& st,
                                  const std::vector<pending_query>& jobs) {
  auto now = st.cfg.clock->now_ms();
  std::vector<pending_view> out;
  out.reserve(jobs.size());
  for (auto& j : jobs)
    out.push_back({st.policy->effective_now(j.type, j.group, j.priority, j.ready_since, now),
                   st.policy->too_heavy(j.type, j.weight)});
  return out;
}

void on_down(dispatcher_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  auto [first, last] = st.monitored.equal_range(down.source);
  for (auto i = first; i != last; ++i)
    worker_gone(st, i->second);
  st.monitored.erase(first, last);
  settle(self);
}

// Loads the pending jobs found at open and subscribes to the clock.
void start(dispatcher_ptr self, dispatcher_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.me = caf::actor_cast<caf::actor>(self);
  st.policy = std::make_unique<scheduling_policy>(st.cfg.scheduling);
  if (auto& admission = st.cfg.scheduling.admission) {
    if (!admission->sources.empty())
      st.pressure = std::make_unique<pressure_gauge>(admission->sources);
    if (admission->io_budget)
      st.disk = std::make_unique<disk_throughput>(*admission->io_budget);
  }
  auto now = st.cfg.clock->now_ms();
  for (auto& k : st.cfg.pending)
    add_submitted(st, k, now);
  st.cfg.pending = {};
  if (!st.cfg.clock->follows_real_time())
    tick_on_advance(self, st.cfg.clock);
  self->set_down_handler([self](caf::down_msg& down) { on_down(self, down); });
  arm_timer(self);
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
      [self](feed_ready_atom) { settle(self); },
      [self](tick_atom) {
        self->state.armed_at = never;
        drain_feeds(self->state);
        on_timer(self->state);
        settle(self);
      },
      [self](drain_atom) { self->state.draining = true; },
      [self](scheduling_control& c) {
        drain_feeds(self->state);
        auto done = on_control(self->state, c);
        settle(self);
        c.reply.deliver(std::move(done));
      },
      [self](metrics_request& m) {
        settle(self);  // the snapshot includes every commit so far
        metrics_snapshot snap;
        auto& st = self->state;
        st.policy->fill_metrics(snap, st.cfg.clock->now_ms());
        st.runs.fill(snap);
        snap.preemptions = st.preemptions_asked;
        snap.yields = st.yields;
        snap.resumptions = st.resumptions;
        snap.preempted_waiting = static_cast<int64_t>(st.preempting.held());
        if (st.pressure) {
          snap.pressure_by_source = st.pressure->readings();
          snap.pressure_errors = st.pressure->errors();
        }
        auto remote = static_cast<int32_t>(st.remote.size());
        snap.remote_workers = remote;
        snap.local_workers = static_cast<int32_t>(st.workers.size()) - remote;
        m.reply.deliver(result<metrics_snapshot>{std::move(snap)});
      },
      [self](pending_view_request& r) {
        r.reply.deliver(result<std::vector<pending_view>>{view_of(self->state, r.jobs)});
      },
    };
  }, std::move(cfg));
  set_gate<std::remove_pointer_t<dispatcher_ptr>>(d, std::move(gate));
  return d;
}

}  // namespace ergon::actors
