#include "ergon/actors/dispatcher.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "ergon/actors/scheduling_policy.hpp"
#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/times.hpp"

namespace ergon::actors {
namespace {

constexpr int64_t never = storage::never_ms;
// After a storage error the dispatcher waits this long before it retries, so a
// full disk doesn't turn into a busy loop of failing claims.
constexpr int64_t storage_retry_ms = 1'000;

struct running_info {
  uint64_t worker = 0;
  int64_t token = 0;
  int64_t expires_at = 0;
  job_id id;
  uint32_t type = 0;
  uint32_t group = 0;
  int32_t weight = 1;
  bool code_returned = false;  // its slot was already released
};

// A retried job whose failed attempt's code is still running. It becomes
// ready when that code returns (or its worker goes), so that two attempts of
// one job never run at once.
struct parked_retry {
  caf::actor_addr worker;
  int64_t token = 0;
  storage::job_key key;
};

struct worker_info {
  caf::actor handle;
  std::vector<uint32_t> types;
  int32_t max_capacity = 0;
  int32_t prefetch = 0;
  // Credit: the worker's last request said it had `capacity` free after
  // receiving `received` units; `sent` counts every unit assigned to it.
  int32_t capacity = 0;
  int64_t received = 0;
  int64_t sent = 0;
  bool claiming = false;  // a claim for it is at the writer
  // The writer hands claimed jobs to the worker directly, so the worker may
  // report a job's code as returned before we process the claim: (row,
  // token) pairs kept until then.
  std::set<std::pair<int64_t, int64_t>> returned_early;
  bool leaving = false;   // unregistered while claiming: drop after the claim
  caf::typed_response_promise<unregistered_atom> left;  // answered when dropped
  std::vector<picked_job> claim_entries;

  /// Units the dispatcher may still assign: free capacity minus what is
  /// on its way to the worker.
  int32_t wanted() const {
    return static_cast<int32_t>(capacity - (sent - received));
  }
};

struct dispatcher_state {
  dispatcher_config cfg;
  std::unique_ptr<scheduling_policy> policy;
  std::unordered_map<int64_t, running_info> running;
  std::unordered_map<int64_t, parked_retry> parked;  // by row
  std::multimap<int64_t, std::pair<int64_t, int64_t>> expiries;  // at -> (row, token)
  std::multimap<int64_t, int64_t> deadlines;                     // at -> row
  std::unordered_map<uint64_t, worker_info> workers;
  std::deque<uint64_t> waiting;
  uint64_t next_worker = 1;
  std::mt19937_64 rng{std::random_device{}()};
  bool draining = false;
  int64_t hold_until = 0;  // no claims before this (after a storage error)
  int64_t armed_at = never;
  uint64_t clock_subscription = 0;
  std::vector<event> events;

  static inline const char* name = "ergon.dispatcher";
};

using dispatcher_ptr = dispatcher_actor::stateful_pointer<dispatcher_state>;

bool wants_events(const dispatcher_state& st) {
  return st.cfg.subs && st.cfg.subs->any();
}

event make_event(event_kind kind, int64_t now, const job_id& id, const std::string& type,
                 const std::string& group) {
  event e;
  e.kind = kind;
  e.at_ms = now;
  e.id = id;
  e.type = type;
  e.group = group;
  return e;
}

// Turns allocation changes into events, once per handler.
void emit_rebalance(dispatcher_ptr self, int64_t now) {
  auto& st = self->state;
  auto changes = st.policy->rebalance();
  if (!wants_events(st))
    return;
  for (auto& c : changes) {
    auto ev = make_event(event_kind::group_allocation_changed, now, job_id{}, {}, c.group);
    ev.previous_slots = c.before;
    ev.new_slots = c.after;
    ev.reason = c.reason;
    st.events.push_back(std::move(ev));
  }
}

void flush_events(dispatcher_ptr self) {
  auto& st = self->state;
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
  if (!st.expiries.empty())
    next = std::min(next, st.expiries.begin()->first);
  if (!st.deadlines.empty())
    next = std::min(next, storage::add_ms(st.deadlines.begin()->first, 1));  // expired once past
  if (st.hold_until > 0)
    next = std::min(next, st.hold_until);
  return next;
}

// With a real clock, arm one CAF timer for the earliest wake-up. A manual
// clock instead sends a tick after every advance (see spawn_dispatcher).
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

// -- dispatching --------------------------------------------------------------------------

// Tells the writer whether new jobs are wanted right away.
void publish_hunger(dispatcher_state& st) {
  if (st.cfg.feeds)
    st.cfg.feeds->set_hungry(!st.draining && !st.waiting.empty());
}

// Claims and outcomes go ahead of submissions waiting in the writer's
// mailbox: a worker's next job must not wait behind bulk inserts.
void send_batch(dispatcher_state& st, worker_batch batch) {
  caf::anon_send<caf::message_priority::high>(st.cfg.writer, std::move(batch));
}

// Picks jobs for the room a worker has, and records them as its claim.
std::vector<storage::attempt_ref> pick_for(dispatcher_state& st, worker_info& info,
                                             int64_t now) {
  std::vector<storage::attempt_ref> claims;
  if (info.claiming || info.leaving)
    return claims;
  std::vector<picked_job> picks;
  for (int32_t room = info.wanted(); room > 0;) {
    // Room beyond max_capacity is the worker's prefetch window: a job must
    // still fit the worker when it runs.
    auto p = st.policy->pick(info.types, std::min(room, info.max_capacity), now);
    if (!p)
      break;
    room -= p->job.weight;
    picks.push_back(*p);
  }
  for (auto& p : picks) {
    claims.push_back({p.job.row, static_cast<int64_t>(st.rng() >> 1)});
    // Counted as sent now: the writer hands claimed jobs to the worker
    // itself, possibly before we hear of the claim.
    info.sent += p.job.weight;
  }
  if (!picks.empty()) {
    info.claiming = true;
    info.claim_entries = std::move(picks);
  }
  return claims;
}

void dispatch(dispatcher_ptr self) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  st.policy->promote(now);
  if (st.draining || now < st.hold_until || st.policy->ready_count() == 0) {
    publish_hunger(st);
    return;
  }
  for (size_t n = st.waiting.size(); n > 0; --n) {
    auto wid = st.waiting.front();
    st.waiting.pop_front();
    auto w = st.workers.find(wid);
    if (w == st.workers.end() || w->second.claiming || w->second.leaving
        || w->second.wanted() <= 0)
      continue;
    worker_batch batch;
    batch.claims = pick_for(st, w->second, now);
    if (batch.claims.empty()) {
      st.waiting.push_back(wid);
      continue;
    }
    batch.worker_id = wid;
    batch.worker = w->second.handle;
    send_batch(st, std::move(batch));
    if (st.policy->ready_count() == 0)
      break;
  }
  publish_hunger(st);
}

// Returns picked jobs that were not claimed to the index.
void restore_picks(dispatcher_state& st, std::vector<picked_job>& picks, int64_t now) {
  for (auto& p : picks) {
    st.policy->unpick(p.job);
    st.policy->add(p.job, now);
  }
  picks.clear();
}

// -- commit feed ------------------------------------------------------------------------------

void on_claims(dispatcher_ptr self, std::vector<claim_result>& claims) {
  auto& st = self->state;
  for (auto& c : claims) {
    auto w = st.workers.find(c.worker_id);
    std::unordered_map<int64_t, picked_job> picked;
    if (w != st.workers.end()) {
      for (auto& p : w->second.claim_entries)
        picked.emplace(p.job.row, p);
      w->second.claiming = false;
      w->second.claim_entries.clear();
    }
    // Missed jobs never ran: they stop counting as running, and never
    // reached the worker. (They were cancelled or updated meanwhile; the
    // feed that did so already put them where they belong.)
    for (auto row : c.missed) {
      auto p = picked.find(row);
      if (p == picked.end())
        continue;
      st.policy->unpick(p->second.job);
      if (w != st.workers.end())
        w->second.sent -= p->second.job.weight;
    }
    for (auto& j : c.claimed) {
      auto e = st.policy->entry_of(j.key);
      st.policy->remove(e);  // re-added by an update that raced the claim
      auto p = picked.find(j.key.row);
      if (p == picked.end())
        st.policy->mark_running(e);  // its worker left and the pick was undone
      auto& run = st.running[j.key.row];
      run = running_info{c.worker_id, j.token, j.expires_at, j.id, e.type, e.group, e.weight};
      if (w != st.workers.end()
          && w->second.returned_early.erase(std::make_pair(j.key.row, j.token)) == 1) {
        run.code_returned = true;
        st.policy->finished(e.group, e.type, e.weight);
      }
      st.expiries.emplace(j.expires_at, std::make_pair(j.key.row, j.token));
      // Times are the claim's: this feed may be read a little later.
      auto wait = std::max<int64_t>(0, j.started_at - j.key.run_at);
      st.policy->record_wait(wait);
      if (wants_events(st)) {
        auto effective = p != picked.end() ? p->second.effective_priority : j.key.priority;
        if (effective > j.key.priority) {
          auto aged = make_event(event_kind::job_aged, j.started_at, j.id, j.key.type,
                                 j.key.group);
          aged.try_number = j.try_number;
          aged.base_priority = j.key.priority;
          aged.effective_priority = effective;
          aged.wait_ms = p->second.waited_ms;
          st.events.push_back(std::move(aged));
        }
        auto ev = make_event(event_kind::started, j.started_at, j.id, j.key.type,
                             j.key.group);
        ev.try_number = j.try_number;
        ev.base_priority = j.key.priority;
        ev.effective_priority = effective;
        ev.wait_ms = wait;
        st.events.push_back(std::move(ev));
      }
    }
    if (w == st.workers.end())
      continue;  // the worker died; its attempts expire and retry
    // The writer already sent the claimed jobs; a stopping worker runs them.
    if (w->second.leaving) {
      w->second.left.deliver(unregistered_atom::value);
      st.workers.erase(w);
    } else if (w->second.wanted() > 0) {
      st.waiting.push_back(c.worker_id);
    }
  }
}

// Makes a parked retry ready once the code of its attempt `token` returned.
bool release_parked(dispatcher_state& st, int64_t row, int64_t token, int64_t now) {
  auto p = st.parked.find(row);
  if (p == st.parked.end() || p->second.token != token)
    return false;
  st.policy->add(st.policy->entry_of(p->second.key), now);
  st.parked.erase(p);
  return true;
}

void on_ended(dispatcher_ptr self, std::vector<storage::attempt_end>& ended, int64_t now) {
  auto& st = self->state;
  for (auto& end : ended) {
    auto r = st.running.find(end.row);
    std::optional<parked_retry> park;
    if (r != st.running.end()) {
      auto w = st.workers.find(r->second.worker);
      if (end.outcome == attempt_outcome::expired && w != st.workers.end())
        caf::anon_send(w->second.handle, cancel_attempt{end.row, r->second.token, "expired"});
      // The code reported the failure itself and may still run. Not after an
      // expiry: that code may never return, and its late result is fenced.
      if (!r->second.code_returned && end.outcome == attempt_outcome::failed
          && w != st.workers.end())
        park = parked_retry{w->second.handle.address(), r->second.token, end.key};
      if (!r->second.code_returned)
        st.policy->finished(r->second.group, r->second.type, r->second.weight);
      st.running.erase(r);
    }
    if (end.status == job_status::pending && park)
      st.parked[end.row] = std::move(*park);
    else if (end.status == job_status::pending)
      st.policy->add(st.policy->entry_of(end.key), now);
    if (!wants_events(st))
      continue;
    auto emit = [&](event_kind kind) {
      auto ev = make_event(kind, now, end.id, end.type, end.group);
      ev.try_number = end.try_number;
      ev.base_priority = ev.effective_priority = end.key.priority;
      ev.message = end.message;
      if (kind == event_kind::retried)
        ev.run_at_ms = end.key.run_at;
      st.events.push_back(std::move(ev));
    };
    if (end.outcome == attempt_outcome::expired)
      emit(event_kind::expired);
    if (end.status == job_status::succeeded)
      emit(event_kind::succeeded);
    else if (end.status == job_status::pending)
      emit(event_kind::retried);
    else
      emit(event_kind::failed);
  }
}

void on_feed(dispatcher_ptr self, commit_feed& f) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  bool events = wants_events(st);
  for (auto& k : f.added) {
    st.policy->add(st.policy->entry_of(k), now);
    if (k.deadline)
      st.deadlines.emplace(*k.deadline, k.row);
    if (events) {
      auto ev = make_event(event_kind::submitted, now, k.id, k.type, k.group);
      ev.base_priority = ev.effective_priority = k.priority;
      ev.run_at_ms = k.run_at;
      st.events.push_back(std::move(ev));
    }
  }
  for (auto& k : f.cancelled) {
    st.parked.erase(k.row);
    st.policy->remove(st.policy->entry_of(k));
    if (events)
      st.events.push_back(make_event(event_kind::cancelled, now, k.id, k.type, k.group));
  }
  for (auto& c : f.changed) {
    if (auto p = st.parked.find(c.after.row); p != st.parked.end()) {
      p->second.key = c.after;  // still waits for its code
      continue;
    }
    st.policy->remove(st.policy->entry_of(c.before));
    st.policy->add(st.policy->entry_of(c.after), now);
  }
  for (auto& k : f.expired) {
    st.parked.erase(k.row);
    st.policy->remove(st.policy->entry_of(k));
    if (events) {
      auto ev = make_event(event_kind::expired, now, k.id, k.type, k.group);
      ev.message = "deadline passed before the job started";
      st.events.push_back(std::move(ev));
    }
  }
  on_claims(self, f.claims);
  on_ended(self, f.ended, now);
  for (auto& r : f.released) {
    auto run = st.running.find(r.key.row);
    if (run != st.running.end() && run->second.token == r.token) {
      if (!run->second.code_returned)
        st.policy->finished(run->second.group, run->second.type, run->second.weight);
      st.running.erase(run);
    }
    st.policy->add(st.policy->entry_of(r.key), now);
    if (events)
      st.events.push_back(make_event(event_kind::released, now, r.key.id, r.key.type,
                                     r.key.group));
  }
  for (auto& x : f.extended) {
    auto r = st.running.find(x.row);
    if (r == st.running.end() || r->second.token != x.token)
      continue;
    r->second.expires_at = x.expires_at;
    st.expiries.emplace(x.expires_at, std::make_pair(x.row, x.token));
    if (events && x.by_worker) {
      auto ev = make_event(event_kind::heartbeat, now, r->second.id,
                           st.policy->type_name(r->second.type),
                           st.policy->group_name(r->second.group));
      ev.expires_at_ms = x.expires_at;
      st.events.push_back(std::move(ev));
    }
  }
}

void on_write_failed(dispatcher_ptr self, write_failed& w) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  st.hold_until = storage::add_ms(now, storage_retry_ms);
  if (!w.claim_rows.empty()) {
    auto i = st.workers.find(w.worker_id);
    if (i != st.workers.end()) {
      for (auto& p : i->second.claim_entries)
        i->second.sent -= p.job.weight;
      restore_picks(st, i->second.claim_entries, now);
      i->second.claiming = false;
      if (i->second.leaving) {
        i->second.left.deliver(unregistered_atom::value);
        st.workers.erase(i);
      } else {
        st.waiting.push_back(w.worker_id);
      }
    }
  }
  for (auto& a : w.expiries)
    st.expiries.emplace(storage::add_ms(now, storage_retry_ms), std::make_pair(a.row, a.token));
  for (auto row : w.deadline_rows)
    st.deadlines.emplace(storage::add_ms(now, storage_retry_ms), row);
}

// Expires attempts and deadlines that are due, and ends timed pauses.
void on_timer(dispatcher_ptr self) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  if (st.hold_until != 0 && now >= st.hold_until)
    st.hold_until = 0;
  st.policy->expire_pauses(now);
  expire_batch expiring;
  while (!st.expiries.empty() && st.expiries.begin()->first <= now) {
    auto [row, token] = st.expiries.begin()->second;
    st.expiries.erase(st.expiries.begin());
    auto r = st.running.find(row);
    // Skip stale entries: the attempt ended, or a heartbeat moved its expiry.
    if (r == st.running.end() || r->second.token != token || r->second.expires_at > now)
      continue;
    expiring.attempts.push_back({row, token, 0.0});
  }
  if (!expiring.attempts.empty())
    caf::anon_send(st.cfg.writer, std::move(expiring));
  expire_pending_batch overdue;
  while (!st.deadlines.empty() && st.deadlines.begin()->first < now) {
    overdue.rows.push_back(st.deadlines.begin()->second);
    st.deadlines.erase(st.deadlines.begin());
  }
  if (!overdue.rows.empty())
    caf::anon_send(st.cfg.writer, std::move(overdue));
}

// After a worker came or went: the total capacity, and per type the largest
// worker, which decides what is too heavy to run. Shares are of the claims
// workers hold, prefetch windows included: the jobs in a window run next, in
// the order they were picked.
void update_capacity(dispatcher_state& st) {
  int32_t total = 0;
  std::unordered_map<uint32_t, int32_t> limits;
  for (auto& [id, w] : st.workers)
    if (!w.leaving) {
      total += w.max_capacity + w.prefetch;
      for (auto t : w.types)
        limits[t] = std::max(limits[t], w.max_capacity);
    }
  st.policy->set_capacity(total);
  st.policy->set_type_limits(limits);
}

// Names pending jobs that no registered worker can take.
void emit_too_heavy(dispatcher_ptr self, int64_t now) {
  auto& st = self->state;
  auto jobs = st.policy->take_too_heavy();
  if (!wants_events(st))
    return;
  for (auto& j : jobs) {
    auto id = storage::make_job_id(j.added_at, st.cfg.id_tag, j.row);
    auto& type = st.policy->type_name(j.type);
    auto ev = make_event(event_kind::job_too_heavy, now, id, type, st.policy->group_name(j.group));
    ev.base_priority = j.priority;
    ev.message = "weight " + std::to_string(j.weight)
                 + " is more than any registered worker of type '" + type + "' takes (max "
                 + std::to_string(st.policy->type_limit(j.type)) + ")";
    st.events.push_back(std::move(ev));
  }
}

// Applies every commit the writer has made so far. Called before each
// decision, not only when rung: the writer may hold feeds back for a while
// (see feed_channel), and decisions must see every acknowledged submit.
void drain_feeds(dispatcher_ptr self) {
  auto& st = self->state;
  if (!st.cfg.feeds)
    return;
  auto feeds = st.cfg.feeds->take();
  if (feeds.empty())
    return;
  for (auto& f : feeds) {
    on_feed(self, f);
    for (auto& w : f.failed)
      on_write_failed(self, w);
  }
  // A manual clock's tick may have overtaken these feeds: check timers
  // against the current time, not only on the next tick.
  on_timer(self);
}

// Runs after every message: hand out work, publish allocation changes and
// events, and arm the next timer.
void settle(dispatcher_ptr self) {
  drain_feeds(self);
  auto now = self->state.cfg.clock->now_ms();
  emit_rebalance(self, now);
  dispatch(self);
  emit_rebalance(self, now);
  emit_too_heavy(self, now);
  arm_timer(self);
  flush_events(self);
}

void on_control(dispatcher_ptr self, scheduling_control& c) {
  auto& st = self->state;
  auto now = st.cfg.clock->now_ms();
  switch (c.op) {
    case scheduling_control::set_group_weight:
      st.policy->set_group_weight(c.name, c.weight);
      break;
    case scheduling_control::reset_group_weights:
      st.policy->reset_group_weights();
      break;
    case scheduling_control::pause_group:
      st.policy->pause_group(c.name, c.until, now);
      break;
    case scheduling_control::resume_group:
      st.policy->resume_group(c.name, now);
      break;
    case scheduling_control::pause_type:
      st.policy->pause_type(c.name, c.until, now);
      break;
    case scheduling_control::resume_type:
      st.policy->resume_type(c.name, now);
      break;
  }
}

// The code of these attempts returned: their slots are free.
void free_returned(dispatcher_state& st, worker_info* w,
                   const std::vector<storage::attempt_ref>& returned, int64_t now) {
  for (auto& a : returned) {
    auto run = st.running.find(a.row);
    if (run == st.running.end()) {
      if (release_parked(st, a.row, a.token, now))
        continue;
      // Its claim is still on the way to us (see returned_early).
      if (w)
        for (auto& p : w->claim_entries)
          if (p.job.row == a.row)
            w->returned_early.emplace(a.row, a.token);
      continue;
    }
    if (run->second.token != a.token || run->second.code_returned)
      continue;
    run->second.code_returned = true;
    st.policy->finished(run->second.group, run->second.type, run->second.weight);
  }
}

// A worker's report goes on to the writer with the jobs picked for its room,
// so its outcomes and its next claims commit together.
void on_report(dispatcher_ptr self, worker_report& r) {
  auto& st = self->state;
  drain_feeds(self);
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
  auto w = st.workers.find(r.worker_id);
  free_returned(st, w != st.workers.end() ? &w->second : nullptr, r.returned, now);
  if (w != st.workers.end()) {
    w->second.capacity = r.capacity;
    w->second.received = r.received_weight;
    st.policy->promote(now);
    emit_rebalance(self, now);  // picks follow shares that include new groups
    if (!st.draining && now >= st.hold_until && w->second.wanted() > 0)
      batch.claims = pick_for(st, w->second, now);
    if (!w->second.claiming && w->second.wanted() > 0)
      st.waiting.push_back(r.worker_id);
  }
  if (batch.answers_report || !batch.claims.empty())
    send_batch(st, std::move(batch));
  settle(self);
}

}  // namespace

dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_config cfg) {
  // Passed as a spawn argument, not captured: CAF 0.17.6 dereferences a null
  // argument tuple when a function actor takes no arguments (UBSan).
  return sys.spawn([](dispatcher_ptr self, dispatcher_config cfg)
                   -> dispatcher_actor::behavior_type {
    auto& st = self->state;
    st.cfg = std::move(cfg);
    st.policy = std::make_unique<scheduling_policy>(st.cfg.scheduling);
    auto now = st.cfg.clock->now_ms();
    for (auto& k : st.cfg.pending) {
      st.policy->add(st.policy->entry_of(k), now);
      if (k.deadline)
        st.deadlines.emplace(*k.deadline, k.row);
    }
    st.cfg.pending = {};
    if (!st.cfg.clock->follows_real_time()) {
      caf::actor_addr addr = self->address();
      st.clock_subscription = st.cfg.clock->subscribe([addr] {
        if (auto hdl = caf::actor_cast<caf::actor>(addr))
          caf::anon_send(hdl, tick_atom::value);
      });
      auto clock = st.cfg.clock;
      auto handle = st.clock_subscription;
      self->attach_functor([clock, handle] { clock->unsubscribe(handle); });
    }
    self->set_down_handler([self](caf::down_msg& down) {
      auto& st = self->state;
      // A gone worker runs no more code: its parked retries are free to go.
      std::vector<std::pair<int64_t, int64_t>> freed;
      for (auto& [row, p] : st.parked)
        if (p.worker == down.source)
          freed.emplace_back(row, p.token);
      for (auto [row, token] : freed)
        release_parked(st, row, token, st.cfg.clock->now_ms());
      for (auto i = st.workers.begin(); i != st.workers.end(); ++i) {
        if (i->second.handle.address() == down.source) {
          restore_picks(st, i->second.claim_entries, st.cfg.clock->now_ms());
          st.workers.erase(i);
          update_capacity(st);
          break;
        }
      }
      settle(self);
    });
    arm_timer(self);
    return {
      [self](register_worker& r) -> worker_registered {
        auto& st = self->state;
        auto wid = st.next_worker++;
        worker_info info;
        info.handle = r.worker;
        info.max_capacity = r.max_capacity;
        info.prefetch = r.prefetch;
        for (auto& t : r.types)
          info.types.push_back(st.policy->type_id(t));
        st.workers.emplace(wid, std::move(info));
        self->monitor(r.worker);
        update_capacity(st);
        settle(self);
        return {wid, st.cfg.writer};
      },
      [self](worker_report& r) { on_report(self, r); },
      [self](unregister_worker& u) -> caf::result<unregistered_atom> {
        auto& st = self->state;
        auto w = st.workers.find(u.worker_id);
        if (w == st.workers.end())
          return unregistered_atom::value;
        w->second.capacity = 0;
        caf::result<unregistered_atom> answer = unregistered_atom::value;
        if (!w->second.claiming) {
          st.workers.erase(w);
        } else {
          // Answer after the claim: its jobs reach the worker first.
          w->second.leaving = true;
          w->second.left = self->make_response_promise<unregistered_atom>();
          answer = w->second.left;
        }
        update_capacity(st);
        settle(self);
        return answer;
      },
      [self](feed_ready_atom) { settle(self); },
      [self](tick_atom) {
        self->state.armed_at = never;
        drain_feeds(self);
        on_timer(self);
        settle(self);
      },
      [self](drain_atom) { self->state.draining = true; },
      [self](scheduling_control& c) {
        drain_feeds(self);
        on_control(self, c);
        settle(self);
        c.reply.deliver(status{});
      },
      [self](metrics_request& m) {
        settle(self);  // the snapshot includes every commit so far
        auto& st = self->state;
        metrics_snapshot snap;
        st.policy->fill_metrics(snap, st.cfg.clock->now_ms());
        m.reply.deliver(result<metrics_snapshot>{std::move(snap)});
      },
      [self](pending_view_request& r) {
        auto& st = self->state;
        auto now = st.cfg.clock->now_ms();
        std::vector<pending_view> out;
        out.reserve(r.jobs.size());
        for (auto& j : r.jobs)
          out.push_back({st.policy->effective_now(j.type, j.group, j.priority, j.ready_since, now),
                         st.policy->too_heavy(j.type, j.weight)});
        r.reply.deliver(result<std::vector<pending_view>>{std::move(out)});
      },
    };
  }, std::move(cfg));
}

}  // namespace ergon::actors
