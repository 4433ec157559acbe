#include "dispatch_core.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "attempt_table.hpp"
#include "control_table.hpp"
#include "disk_throughput.hpp"
#include "dispatcher_events.hpp"
#include "orphans.hpp"
#include "preemptions.hpp"
#include "type_breakers.hpp"
#include "pressure_gauge.hpp"
#include "ergon/actors/scheduling_policy.hpp"
#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/times.hpp"
#include "worker_registry.hpp"

namespace ergon::actors {
namespace {

// Early failures kept at most: past it they are forgotten, which at worst
// lets a job start beside the commit that opens its breaker.
constexpr size_t max_early_failures = 4'096;

constexpr int64_t never = storage::never_ms;
// After a storage error the dispatcher waits this long before it retries, so a
// full disk doesn't turn into a busy loop of failing claims.
constexpr int64_t storage_retry_ms = 1'000;

}  // namespace

struct dispatch_core::state {
  config cfg;
  // Pending jobs, kept current by the commit feeds.
  scheduling_policy policy;
  std::multimap<int64_t, int64_t> deadlines;  // at -> row
  // Claimed attempts, from their claim's feed until they end.
  attempt_table attempts;
  // Attempts of remote workers that are away, kept running for them (in
  // `attempts` too, under no worker).
  orphans orphaned;
  // Retries parked behind the code of a remote worker that is away (in
  // `attempts` too, under no worker): they wait for it until its grace ends.
  struct parked_away {
    std::string holder;
    int64_t token = 0;
    int64_t until = 0;
  };
  std::unordered_map<int64_t, parked_away> away;  // by row
  // Workers, kept current by the worker protocol.
  worker_registry workers;
  // Who each registered worker is, until it goes down (queue::workers, and
  // its row in the workers table).
  struct known_worker {
    storage::worker_row row;
    std::vector<std::string> types;
    std::optional<int64_t> last_report;
  };
  std::map<uint64_t, known_worker> known;
  // Workers on other nodes: their attempts are held or lost when they go
  // down.
  std::unordered_map<uint64_t, std::string> remote;  // worker id -> its holder name
  // Remote workers that unregistered: when they go down, nothing of theirs
  // waits for them.
  std::unordered_set<uint64_t> remote_left;
  // Remote workers that went down with claims at the writer, and how many:
  // their attempts are lost as soon as each commits.
  std::unordered_map<uint64_t, size_t> lost_with_claims;
  bool draining = false;
  int64_t hold_until = 0;  // no claims before this (after a storage error)
  // The standing offer at the writer (job_offer), until the writer answers.
  struct standing_offer {
    uint64_t serial = 0;
    uint64_t worker = 0;
    int64_t valid_until = 0;
    bool withdrawn = false;  // withdraw_offer sent
  };
  std::optional<standing_offer> offer;
  uint64_t next_offer = 1;
  uint64_t fed_through = 0;  // the last commit feed applied (commit_feed::seq)
  // Run-time controls, as stored (restored into the policy at open).
  control_table controls;
  // Ended attempts, for metrics.
  run_stats runs;
  // Circuit breakers per type (scheduling_options::breakers), and failures
  // reported for attempts whose claim the core has not seen yet (the
  // writer answers a worker before it feeds the claim): row -> token.
  type_breakers breakers;
  std::unordered_map<int64_t, int64_t> early_failures;
  // Preemption (scheduling_options::preemption).
  preemptions preempting;
  int64_t preemptions_asked = 0;
  int64_t yields = 0;
  int64_t resumptions = 0;
  // Admission (scheduling_options::admission): pressure sources, and the
  // disk sampler of the I/O budget.
  std::unique_ptr<pressure_gauge> pressure;
  std::unique_ptr<disk_throughput> disk;
  // The effects of the input at hand.
  effects* out = nullptr;

  explicit state(config c)
      : cfg(std::move(c)),
        policy(cfg.scheduling),
        workers(static_cast<uint64_t>(std::max<int64_t>(1, cfg.first_worker_id))),
        controls(policy, std::move(cfg.controls)),
        breakers(cfg.scheduling.breakers) {}

  bool wants_events() const { return cfg.wants_events && cfg.wants_events(); }

  void add_events(std::vector<event> events) {
    out->events.insert(out->events.end(), std::make_move_iterator(events.begin()),
                       std::make_move_iterator(events.end()));
  }

  void send(write w) { out->writes.push_back(std::move(w)); }
  void tell(uint64_t worker, std::variant<cancel_attempt, preempt_attempt, resize_worker> request) {
    out->requests.push_back({worker, std::move(request)});
  }
};

namespace {

using state = dispatch_core::state;

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

// Sends what a control changed: its events, and its rows for the writer,
// which answers `reply` once they are committed. Nothing to save: answered now.
void save_controls(state& st, control_table::applied done,
                   const reply_to<result<int64_t>>& reply) {
  if (st.wants_events())
    st.add_events(std::move(done.events));
  if (done.changed.empty() && !done.end_all_pauses && !done.clear_group_weights) {
    reply.deliver(result<int64_t>{done.answer});
    return;
  }
  st.send(control_save{{std::move(done.changed), done.end_all_pauses, done.clear_group_weights},
                       done.answer, reply});
}

// Turns allocation changes into events, once per input.
void emit_rebalance(state& st, int64_t now) {
  auto changes = st.policy.rebalance();
  if (st.wants_events())
    st.add_events(allocation_events(changes, now));
}

// Names pending jobs that no registered worker can take.
void emit_too_heavy(state& st, int64_t now) {
  auto jobs = st.policy.take_too_heavy();
  if (st.wants_events())
    st.add_events(too_heavy_events(jobs, st.policy, st.cfg.id_tag, now));
}

// -- timers ----------------------------------------------------------------------------

// The attempts of a remote worker that went down (or did not come back in
// time) end as "worker lost" and retry at once, rather than wait for their
// expiry: the worker's node is gone, or cut off and fenced from now on.
void lose_attempts(state& st, std::vector<storage::attempt_ref> attempts) {
  if (!attempts.empty())
    st.send(lose_batch{{std::move(attempts)}});
}

void let_parked_go(state& st, int64_t row, int64_t now);
void breaker_changed(state& st, const type_breakers::change& c, int64_t now);

int64_t next_wake(const state& st, int64_t now) {
  int64_t next = never;
  if (auto t = st.policy.next_wake(now))
    next = std::min(next, *t);
  if (auto t = st.attempts.next_expiry())
    next = std::min(next, *t);
  if (auto t = st.orphaned.next_due())
    next = std::min(next, *t);
  for (auto& [row, p] : st.away)
    next = std::min(next, p.until);
  if (!st.deadlines.empty())
    next = std::min(next, storage::add_ms(st.deadlines.begin()->first, 1));  // expired once past
  if (st.hold_until > 0)
    next = std::min(next, st.hold_until);
  if (st.disk)
    next = std::min(next, st.disk->next_sample_at());
  if (auto t = st.breakers.next_wake())
    next = std::min(next, *t);
  // Deferred work is checked again on a timer, not only on the next event.
  if (st.policy.deferring() && st.policy.ready_count() > 0)
    next = std::min(next, storage::add_ms(
                            now, st.cfg.scheduling.admission->recheck_interval.count()));
  return next;
}

// Expires attempts and deadlines that are due, and ends timed pauses.
void on_timer(state& st, int64_t now) {
  if (st.hold_until != 0 && now >= st.hold_until)
    st.hold_until = 0;
  if (st.disk) {
    st.disk->sample(now);
    st.policy.set_io_rates(st.disk->read_rate(), st.disk->write_rate());
  }
  st.policy.expire_pauses(now);
  save_controls(st, st.controls.expire(now), {});
  for (auto& c : st.breakers.tick(now))
    breaker_changed(st, c, now);
  for (auto p = st.away.begin(); p != st.away.end();) {
    if (p->second.until <= now) {
      let_parked_go(st, p->first, now);
      p = st.away.erase(p);
    } else {
      ++p;
    }
  }
  // An orphan's grace ends no later than its expiry: it is lost, and its
  // expiry is checked again only if that loss does not commit.
  auto lost = st.orphaned.due(now);
  std::unordered_set<int64_t> losing;
  for (auto& a : lost)
    losing.insert(a.row);
  lose_attempts(st, std::move(lost));
  expire_batch expiring;
  for (auto& a : st.attempts.due(now)) {
    if (losing.count(a.row) == 1)
      st.attempts.recheck_at(storage::add_ms(now, storage_retry_ms), a.row, a.token);
    else
      expiring.attempts.push_back({a.row, a.token, 0.0});
  }
  if (!expiring.attempts.empty())
    st.send(std::move(expiring));
  expire_pending_batch overdue;
  while (!st.deadlines.empty() && st.deadlines.begin()->first < now) {
    overdue.rows.push_back(st.deadlines.begin()->second);
    st.deadlines.erase(st.deadlines.begin());
  }
  if (!overdue.rows.empty())
    st.send(std::move(overdue));
}
// -- pending jobs and slots -------------------------------------------------------------

// Watches `k`'s deadline, once per time and row. A stale entry is
// harmless: expire_pending checks the row.
void track_deadline(state& st, const storage::job_key& k) {
  if (!k.deadline)
    return;
  auto [first, last] = st.deadlines.equal_range(*k.deadline);
  if (std::none_of(first, last, [&](const auto& d) { return d.second == k.row; }))
    st.deadlines.emplace(*k.deadline, k.row);
}

// Every way a job becomes pending tracks its deadline: one from run_at is
// known at submit, one from the first attempt once a retry of it comes back.
void add_pending(state& st, const storage::job_key& k, int64_t now) {
  st.policy.add(pending_of(st.policy, k), now);
  track_deadline(st, k);
}

// Returns picked jobs that were not claimed to the index.
// The breaker of `type` changed, or its trial did: its jobs are held back
// while it lets none start.
void hold_by_breaker(state& st, const std::string& type) {
  st.policy.hold_type(type, !st.breakers.may_start(type));
}

void breaker_changed(state& st, const type_breakers::change& c, int64_t now) {
  hold_by_breaker(st, c.type);
  if (!st.wants_events())
    return;
  event e;
  e.kind = c.to == breaker_state::open        ? event_kind::breaker_opened
           : c.to == breaker_state::half_open ? event_kind::breaker_half_open
                                              : event_kind::breaker_closed;
  e.at_ms = now;
  e.type = c.type;
  e.message = c.why;
  e.run_at_ms = c.until.value_or(0);
  st.out->events.push_back(std::move(e));
}

// A job was picked to start (while its type's breaker is half-open, the
// trial), or, `picked` false, will not start after all (if it was the
// trial, another may be).
void breaker_pick(state& st, const pending_job& job, bool picked) {
  if (!st.breakers.any())
    return;
  auto type = st.policy.type_name(job.type);
  if (picked)
    st.breakers.picked(type, job.row);
  else
    st.breakers.trial_lost(type, job.row);
  hold_by_breaker(st, type);
}

void restore_picks(state& st, const std::vector<picked_job>& picks, int64_t now) {
  for (auto& p : picks) {
    breaker_pick(st, p.job, false);
    st.policy.unpick(p.job, true);
    st.policy.add(p.job, now);
    st.preempting.started(p.job.row, false);
  }
}

// The attempt's code returned, or it ended first: its slot is free.
void free_slot(state& st, int64_t row, const attempt_table::attempt& a) {
  st.policy.finished(row, a.group, a.type, a.weight);
}

// -- preemption ---------------------------------------------------------------------------

// A yielded job made ready again, ahead of its priority's other jobs.
void resume(state& st, const storage::job_key& k, int64_t now) {
  auto e = pending_of(st.policy, k);
  e.flags |= pending_job::resumed;
  st.policy.add(e, now);
  ++st.resumptions;
  if (st.wants_events())
    st.out->events.push_back(resumed_event(k, now));
}

void resume_all(state& st, std::vector<storage::job_key> keys, int64_t now) {
  for (auto& k : keys)
    resume(st, k, now);
}

// A job whose attempt ended (or whose parked retry was let go) may run
// again: a yielded one waits for its preemptor to end first.
void ready_again(state& st, const storage::job_key& k, int64_t now) {
  bool yielded = false;
  if (st.preempting.hold(k, yielded))
    return;
  if (yielded)
    resume(st, k, now);
  else
    add_pending(st, k, now);
}

// A retry parked behind the code of a worker that is away may run: that
// worker did not come back for it in time, or no longer runs that code.
void let_parked_go(state& st, int64_t row, int64_t now) {
  if (auto key = st.attempts.release_parked(row)) {
    st.preempting.slot_freed(row, std::nullopt);
    ready_again(st, *key, now);
  }
}

// Whether a worker that is not leaving runs `j`'s type, is large enough for
// its weight, and has at least `room` units free (counting jobs on their way).
bool worker_for(const state& st, const picked_job& j, int32_t room) {
  bool found = false;
  st.workers.each([&](const worker_registry::worker& w) {
    if (!w.leaving && w.max_capacity >= j.job.weight && w.wanted() >= room
        && std::find(w.types.begin(), w.types.end(), j.job.type) != w.types.end())
      found = true;
  });
  return found;
}

// Asks running attempts to yield for `j`, the lowest priority first.
void preempt_for(state& st, const picked_job& j, int64_t now) {
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
      return st.policy.may_lose(group, weight + st.preempting.losing(group));
    });
  auto preemptor = storage::make_job_id(j.job.added_at, st.cfg.id_tag, j.job.row);
  for (auto& v : victims) {
    st.preempting.asked(v, j.job.row);
    ++st.preemptions_asked;
    st.tell(v.worker, preempt_attempt{v.row, v.token});
    if (st.wants_events())
      st.out->events.push_back(preempted_event(*st.attempts.find(v.row), st.policy, preemptor,
                                          j.effective_priority, now));
  }
}

// After dispatching: waiting jobs at or above the threshold that no worker
// has room for ask for slots, and held jobs whose preemptor no longer waits
// for one are let go. At most this many preemptors are looked at per pass,
// so a large urgent backlog doesn't cost a scan of every running attempt
// for each of its jobs.
constexpr size_t preemptors_per_pass = 16;

void preempt(state& st, int64_t now) {
  if (!st.cfg.scheduling.preemption)
    return;
  // A preemptor no worker can run does not wait for a slot: what yielded
  // for it need not wait either.
  auto waiting = st.policy.preemptors(now);
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
void read_pressure(state& st) {
  if (st.cfg.scheduling.admission)
    st.policy.set_pressure(st.pressure ? st.pressure->read() : 0.0);
}

// After a worker came or went.
void update_capacity(state& st) {
  auto c = st.workers.capacity();
  st.policy.set_capacity(c.weight);
  st.policy.set_type_limits(c.largest_by_type);
}

// -- dispatching --------------------------------------------------------------------------

// What the claims of worker `id` record as their holder: empty for a local one.
std::string holder_of(const state& st, uint64_t id) {
  auto r = st.remote.find(id);
  return r == st.remote.end() ? std::string{} : r->second;
}

// Tells the writer whether new jobs are wanted right away.
void publish_hunger(state& st) {
  st.out->hungry = !st.draining
                   && (st.workers.anyone_waiting() || (st.offer && !st.offer->withdrawn));
}

// While nothing is ready, the first worker in line gets a standing offer:
// the writer may claim the next new job for it in the transaction that
// inserts it, one commit and two wake-ups before a claim of ours could. The
// pick is the same as ours only while nothing else could decide it, so the
// offer is withdrawn as soon as a job is ready, a gate or pause stands, its
// worker leaves, the queue drains, or claims are held after a failed write.
void keep_offer(state& st, int64_t now) {
  // A yielded job held for its preemptor resumes when the preemptor ends,
  // ahead of its priority: the writer can't see that.
  bool open = st.cfg.offers && !st.draining && now >= st.hold_until
              && st.policy.ready_count() == 0 && st.policy.ungated()
              && st.preempting.held() == 0;
  // A waiting job due sooner than the offer knows (added since) goes first.
  auto due = st.policy.next_wake(now).value_or(storage::never_ms);
  if (st.offer) {
    auto* w = st.workers.find(st.offer->worker);
    if (!st.offer->withdrawn && !(open && w && !w->leaving && due >= st.offer->valid_until)) {
      st.offer->withdrawn = true;
      st.send(withdraw_offer{st.offer->serial});
    }
    return;
  }
  if (!open)
    return;
  auto id = st.workers.offer();
  if (!id)
    return;
  auto* w = st.workers.find(*id);
  job_offer o{st.next_offer++, *id, {}, w->offered, due, st.fed_through, holder_of(st, *id)};
  for (auto t : w->types)
    o.types.push_back(st.policy.type_name(t));
  st.offer = state::standing_offer{o.serial, *id, o.valid_until, false};
  st.send(std::move(o));
}

// Picks jobs for the worker's room, each with a new attempt token: one new
// base XOR the row, so that PostgreSQL computes each row's token from the
// base rather than search for it (storage::shared_token_base).
std::vector<storage::attempt_ref> claim_for(state& st, uint64_t worker, int64_t now) {
  auto rows = st.workers.claim(worker, [&](const std::vector<uint32_t>& types, int32_t room) {
    auto p = st.policy.pick(types, room, now);
    if (p)
      breaker_pick(st, p->job, true);
    return p;
  });
  std::vector<storage::attempt_ref> claims;
  claims.reserve(rows.size());
  auto base = rows.empty() ? 0 : st.cfg.new_token();
  for (auto row : rows) {
    claims.push_back({row, base ^ row});
    st.preempting.started(row, true);  // a preemptor that got its slot
  }
  return claims;
}

// Claims ready jobs for the waiting workers, in line order.
void hand_out(state& st, int64_t now) {
  for (size_t n = st.workers.waiting_count(); n > 0; --n) {
    auto wid = st.workers.pop_waiting();
    if (!wid)
      continue;
    worker_writes batch;
    batch.claims = claim_for(st, *wid, now);
    if (batch.claims.empty()) {
      st.workers.wait_for_jobs(*wid);
      continue;
    }
    batch.worker_id = *wid;
    batch.holder = holder_of(st, *wid);
    st.send(std::move(batch));
    if (st.policy.ready_count() == 0)
      break;
  }
  preempt(st, now);
}

void dispatch(state& st, int64_t now) {
  st.policy.promote(now);
  read_pressure(st);
  if (!st.draining && now >= st.hold_until && st.policy.ready_count() > 0)
    hand_out(st, now);
  keep_offer(st, now);
  publish_hunger(st);
}

// -- workers ------------------------------------------------------------------------------

// A worker that unregistered with a claim at the writer is gone now.
void answer_unregister(state& st, uint64_t worker) {
  st.out->unregistered.push_back(worker);
}

// The running attempts of a remote worker that went down wait for it to
// join again, as those found at open do: its connection may only have
// dropped, and then it keeps running them (worker_registered::hold_ms).
void hold_for(state& st, const std::string& holder,
              std::vector<storage::attempt_ref> attempts, int64_t now) {
  if (attempts.empty())
    return;
  auto until = storage::add_ms(now, st.cfg.remote_grace_ms);
  for (auto& a : attempts) {
    st.attempts.move_to(a.row, 0);
    st.orphaned.hold(holder, a, until);
  }
  st.send(hold_batch{{std::move(attempts), until}});
}

// The worker unregistered or went down: its row records when, once.
void record_leaving(state& st, uint64_t worker, int64_t now) {
  auto k = st.known.find(worker);
  if (k == st.known.end() || k->second.row.left_at)
    return;
  k->second.row.left_at = now;
  st.send(worker_save{k->second.row});
}

// A gone worker runs no more code here: its parked retries are free to go.
// A remote one's attempts are lost, or held for its return with a grace,
// and so are its parked retries, as its code may run on.
void worker_gone(state& st, uint64_t worker, int64_t now) {
  record_leaving(st, worker, now);
  st.known.erase(worker);
  auto holder = holder_of(st, worker);
  bool remote = st.remote.erase(worker) == 1;
  bool left = st.remote_left.erase(worker) == 1;
  bool held = remote && !left && st.cfg.remote_grace_ms > 0;
  if (held) {
    auto until = storage::add_ms(now, st.cfg.remote_grace_ms);
    for (auto& a : st.attempts.move_parked(worker, 0))
      st.away[a.row] = {holder, a.token, until};
  }
  for (auto& key : st.attempts.worker_gone(worker)) {
    st.preempting.slot_freed(key.row, std::nullopt);  // its code runs no more
    ready_again(st, key, now);
  }
  if (held)
    hold_for(st, holder, st.attempts.running_on(worker), now);
  else if (remote)
    lose_attempts(st, st.attempts.running_on(worker));
  if (auto gone = st.workers.remove(worker)) {
    if (remote && gone->claims > 0)
      st.lost_with_claims[worker] = gone->claims;
    restore_picks(st, gone->picks, now);
    update_capacity(st);
  }
}

// The code of these attempts returned: their slots are free, and a parked
// retry may run. An attempt that does not run yet waits for its claim's feed.
void free_returned(state& st, uint64_t worker,
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

// Worker `id` joined again listing the attempts it kept: it gets back
// those kept for it under their tokens, orphaned or still under an earlier
// registration of its own (its loss not yet seen), and the orphans it did
// not list are lost. Returns the listed attempts it does not get back.
std::vector<storage::attempt_ref> take_back(state& st, uint64_t id,
                                            const dispatch_core::joining& w, int64_t now) {
  std::vector<storage::attempt_ref> listed = w.held;
  listed.insert(listed.end(), w.returned.begin(), w.returned.end());
  if (w.holder.empty())
    return listed;  // a local worker keeps nothing across registrations
  auto found = st.orphaned.adopt(w.holder, listed);
  std::vector<storage::attempt_ref> mine;
  for (auto& [a, cancel] : found.adopted) {
    mine.push_back(a);
    if (cancel)
      st.tell(id, cancel_attempt{a.row, a.token, "cancel requested", true});
  }
  std::vector<storage::attempt_ref> stale;
  for (auto& a : found.stale) {
    auto run = st.attempts.find(a.row);
    if (run && run->token == a.token && run->worker != id && run->worker != 0
        && holder_of(st, run->worker) == w.holder)
      mine.push_back(a);
    else
      stale.push_back(a);
  }
  std::unordered_set<int64_t> rows_returned;
  for (auto& a : w.returned)
    rows_returned.insert(a.row);
  std::vector<storage::attempt_ref> returned;
  for (auto& a : mine) {
    st.attempts.move_to(a.row, id);
    if (rows_returned.count(a.row) == 1)
      returned.push_back(a);
    else if (st.preempting.asked(a.row))
      st.tell(id, preempt_attempt{a.row, a.token});  // the ask may have been lost with it
  }
  free_returned(st, id, returned, now);
  lose_attempts(st, std::move(found.lost));
  // Retries parked behind its code: they wait on if it still runs it (the
  // worker stops that code, as its attempt ended), and go otherwise.
  std::unordered_set<int64_t> rows_held;
  for (auto& a : w.held)
    rows_held.insert(a.row);
  for (auto p = st.away.begin(); p != st.away.end();) {
    if (p->second.holder != w.holder) {
      ++p;
      continue;
    }
    if (rows_held.count(p->first) == 1)
      st.attempts.move_parked_row(p->first, id);
    else
      let_parked_go(st, p->first, now);
    p = st.away.erase(p);
  }
  return stale;
}

// -- commit feed ------------------------------------------------------------------------------

void start_attempt(state& st, uint64_t worker, const storage::claimed_job& j,
                   const worker_registry::committed_claim& claim) {
  auto e = pending_of(st.policy, j.key);
  st.policy.remove(e);  // re-added by an update that raced the claim
  auto picked = claim.picked.find(j.key.row);
  if (picked == claim.picked.end())
    st.policy.mark_running(e);  // its worker left and the pick was undone
  st.policy.forget(j.key.row);  // no longer pending
  attempt_table::attempt a{worker,  j.token, j.expires_at, j.key.id,
                           e.type,  e.group, e.weight,     false,    j.key.recurring_id};
  a.priority = picked != claim.picked.end() ? picked->second.effective_priority : e.priority;
  a.started_at = j.started_at;
  a.code_returned = claim.returned_early.count({j.key.row, j.token}) == 1;
  if (a.code_returned)
    free_slot(st, j.key.row, a);
  st.attempts.claimed(j.key.row, a);
  if (auto f = st.early_failures.find(j.key.row); f != st.early_failures.end()) {
    if (f->second == j.token) {
      st.breakers.reported_failure(j.key.type, j.key.row, j.started_at);
      hold_by_breaker(st, j.key.type);
    }
    st.early_failures.erase(f);
  }
  // Times are the claim's: this feed may be read a little later.
  st.policy.record_wait(std::max<int64_t>(0, j.started_at - j.key.run_at));
}

// A remote worker's attempt found running at open: it runs on, under no
// worker, until its holder comes back for it or its grace ends. It holds
// its slot in its group and type meanwhile, as its code may well run.
void reinstate(state& st, const storage::running_job& r, int64_t until) {
  auto e = pending_of(st.policy, r.key);
  st.policy.mark_running(e);
  st.policy.forget(r.key.row);
  attempt_table::attempt a{0,       r.token, r.expires_at, r.key.id,
                           e.type,  e.group, e.weight,     false,    r.key.recurring_id};
  a.priority = e.priority;
  a.started_at = r.started_at;
  st.attempts.claimed(r.key.row, a);
  st.orphaned.hold(r.holder, {r.key.row, r.token}, until);
  if (r.cancel_requested)
    st.orphaned.request_cancel(r.key.row);
}

// One claim of `worker` committed or failed; true if the worker was lost
// with it at the writer.
bool claim_of_lost_worker_ended(state& st, uint64_t worker) {
  auto lost = st.lost_with_claims.find(worker);
  if (lost == st.lost_with_claims.end())
    return false;
  if (--lost->second == 0)
    st.lost_with_claims.erase(lost);
  return true;
}

// The writer gave offer `serial` back unused (or could not commit its use).
void offer_ended(state& st, uint64_t serial) {
  if (!st.offer || st.offer->serial != serial)
    return;
  auto worker = st.offer->worker;
  st.offer.reset();
  claim_of_lost_worker_ended(st, worker);
  if (st.workers.offer_ended(worker))
    answer_unregister(st, worker);
}

// The writer claimed a new job with the worker's offer. Nothing else was
// ready, so the policy picks that job now as it would have: shares and
// turns count it as usual. A pick that differs (a job made ready here while
// the offer was on its way) goes back; the offer's job runs all the same.
worker_registry::committed_claim offer_claimed(state& st, const claim_result& c, int64_t now) {
  if (st.offer && st.offer->serial == c.offer)
    st.offer.reset();
  auto& key = c.claimed.front().key;
  std::optional<picked_job> pick;
  if (auto* w = st.workers.find(c.worker_id); w && w->offered > 0) {
    pick = st.policy.pick(w->types, w->offered, now);
    if (pick && pick->job.row != key.row) {
      restore_picks(st, {*pick}, now);
      pick.reset();
    }
  }
  st.preempting.started(key.row, true);
  if (st.breakers.any()) {
    st.breakers.picked(key.type, key.row);
    hold_by_breaker(st, key.type);
  }
  return st.workers.offer_taken(c.worker_id, key.row, key.weight, pick);
}

// A worker's claim committed. Its missed jobs never ran: they were cancelled
// or updated meanwhile, and the feed that did so put them where they belong.
// If the worker died its claimed attempts expire and retry.
void on_claim(state& st, const claim_result& c,
              std::unordered_map<int64_t, picked_job>& picks, int64_t now) {
  if (c.offer && c.claimed.empty()) {
    offer_ended(st, c.offer);
    return;
  }
  auto row = !c.claimed.empty() ? c.claimed.front().key.row
             : !c.missed.empty() ? c.missed.front()
                                 : 0;
  auto claim = c.offer ? offer_claimed(st, c, now)
                       : st.workers.claim_committed(c.worker_id, row, c.missed);
  for (auto& job : claim.missed) {
    breaker_pick(st, job, false);
    st.policy.unpick(job, false);
    st.preempting.started(job.row, false);
  }
  for (auto& j : c.claimed)
    start_attempt(st, c.worker_id, j, claim);
  if (claim_of_lost_worker_ended(st, c.worker_id)) {
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

void end_attempt(state& st, const storage::attempt_end& end, int64_t now) {
  st.orphaned.ended(end.row);
  auto run = st.attempts.find(end.row);
  auto w = run ? st.workers.find(run->worker) : nullptr;
  if (w && end.outcome == attempt_outcome::expired)
    st.tell(run->worker, cancel_attempt{end.row, run->token, "expired"});
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
void ask_to_stop(state& st, const storage::attempt_ref& attempt) {
  auto run = st.attempts.find(attempt.row);
  if (!run || run->token != attempt.token)
    return;  // it ended in the meantime
  if (st.workers.find(run->worker))
    st.tell(run->worker, cancel_attempt{attempt.row, attempt.token, "cancel requested", true});
  else
    st.orphaned.request_cancel(attempt.row);  // told when its worker is back
}

// After the dispatcher's own bookkeeping, so a waiter's next request sees
// the job as every other caller does.
void tell_waiters(state& st, const commit_feed& f) {
  if (!st.cfg.wants_finished || !st.cfg.wants_finished())
    return;
  auto& rows = st.out->finished;
  for (auto& k : f.cancelled)
    rows.push_back(k.row);
  for (auto& k : f.expired)
    rows.push_back(k.row);
  for (auto& end : f.ended)
    if (is_final(end.status))
      rows.push_back(end.row);
  for (auto& e : f.ended_waiting)
    rows.push_back(e.key.row);
  for (auto& c : f.children_cancelled)
    rows.push_back(c.key.row);
}

// A pending job was cancelled or passed its deadline: gone from the index,
// from the parked retries and from preemption, and what yielded for it runs.
void left_queue(state& st, const storage::job_key& k, int64_t now) {
  st.attempts.drop_parked(k.row);
  st.policy.remove(pending_of(st.policy, k));
  st.policy.forget(k.row);
  st.preempting.forget(k.row);
  resume_all(st, st.preempting.ended(k.row), now);
}

void on_feed(state& st, const commit_feed& f, int64_t now) {
  // Events of this feed's commit go before those its handling caused (a
  // resumed job after the end of its preemptor).
  auto caused_from = st.out->events.size();
  for (auto& k : f.added)
    add_pending(st, k, now);
  for (auto& k : f.requeued)
    add_pending(st, k, now);
  for (auto& k : f.unblocked)
    add_pending(st, k, now);
  for (auto& k : f.cancelled)
    left_queue(st, k, now);
  for (auto& c : f.children_cancelled)
    left_queue(st, c.key, now);
  for (auto& c : f.changed) {
    // A parked retry still waits for its code; a held job for its preemptor.
    if (!st.attempts.update_parked(c.after) && !st.preempting.update_held(c.after)) {
      st.policy.remove(pending_of(st.policy, c.before));
      add_pending(st, c.after, now);
    }
    // update_recurring gives an instance a new deadline.
    track_deadline(st, c.after);
  }
  for (auto& k : f.expired)
    left_queue(st, k, now);
  std::unordered_map<int64_t, picked_job> picks;
  for (auto& c : f.claims)
    on_claim(st, c, picks, now);
  for (auto serial : f.offers_ended)
    offer_ended(st, serial);
  for (auto& end : f.ended) {
    st.runs.ended(end.type, end.outcome, now - end.started_at);
    end_attempt(st, end, now);
    if (st.breakers.any()) {
      st.early_failures.erase(end.row);
      if (auto c = st.breakers.ended(end.type, end.row, end.outcome, now))
        breaker_changed(st, *c, now);
      else
        hold_by_breaker(st, end.type);  // a reported failure committed, or not
    }
  }
  for (auto& r : f.released) {
    if (st.breakers.any()) {
      st.breakers.trial_lost(r.key.type, r.key.row);  // given back unstarted
      hold_by_breaker(st, r.key.type);
    }
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
  st.controls.count(static_cast<int64_t>(f.controls.size()));
  tell_waiters(st, f);
  if (st.wants_events()) {
    auto committed = feed_events(f, now, picks, st.attempts, st.policy);
    st.out->events.insert(st.out->events.begin() + static_cast<std::ptrdiff_t>(caused_from),
                          std::make_move_iterator(committed.begin()),
                          std::make_move_iterator(committed.end()));
  }
}

void on_write_failed(state& st, const write_failed& w, int64_t now) {
  // An offer costs no write until a submit uses it: its failure (that
  // submit's) is no reason to hold claims back.
  if (w.offer) {
    offer_ended(st, w.offer);
    return;
  }
  auto retry_at = storage::add_ms(now, storage_retry_ms);
  st.hold_until = retry_at;
  if (!w.claim_rows.empty()) {
    claim_of_lost_worker_ended(st, w.worker_id);
    auto claim = st.workers.claim_failed(w.worker_id, w.claim_rows.front());
    restore_picks(st, claim.picks, now);
    if (claim.left)
      answer_unregister(st, w.worker_id);
  }
  for (auto& a : w.expiries)
    st.attempts.recheck_at(retry_at, a.row, a.token);
  for (auto row : w.deadline_rows)
    st.deadlines.emplace(retry_at, row);
}

// Tells every registered worker named `name` the concurrency its control
// sets now; each one's next report carries it back.
void resize_workers(state& st, const std::string& name) {
  resize_worker r{st.controls.worker_concurrency(name).value_or(0)};
  for (auto& [id, k] : st.known)
    if (k.row.identity.name == name && st.workers.find(id) != nullptr) {
      if (r.max_capacity > 0)
        st.workers.shrink_room(id, r.max_capacity);
      st.tell(id, r);
    }
}

void on_control(state& st, const scheduling_control& c, int64_t now) {
  if (c.op != scheduling_control::reset_breaker) {
    auto done = st.controls.apply(c, now);
    if (!done) {
      c.reply.deliver(result<int64_t>{done.error()});
      return;
    }
    save_controls(st, std::move(*done), c.reply);
    if (c.op == scheduling_control::change_worker || c.op == scheduling_control::reset_worker)
      resize_workers(st, c.name);
    return;
  }
  auto changed = st.breakers.reset(c.name);
  if (!changed) {
    c.reply.deliver(result<int64_t>{changed.error()});
    return;
  }
  if (*changed)
    breaker_changed(st, **changed, now);
  c.reply.deliver(result<int64_t>{int64_t{0}});
}

// Applies every commit the writer has made so far. Called before each
// decision, not only when rung: the writer may hold feeds back for a while
// (see feed_channel), and decisions must see every acknowledged submit.
void drain_feeds(state& st, int64_t now) {
  if (!st.cfg.take_feeds)
    return;
  auto feeds = st.cfg.take_feeds();
  if (feeds.empty())
    return;
  for (auto& f : feeds) {
    st.fed_through = std::max(st.fed_through, f.seq);
    on_feed(st, f, now);
    for (auto& w : f.failed)
      on_write_failed(st, w, now);
  }
  // A manual clock's tick may have overtaken these feeds: check timers
  // against the current time, not only on the next tick.
  on_timer(st, now);
}

}  // namespace

// -- inputs --------------------------------------------------------------------------

dispatch_core::dispatch_core(config cfg, std::vector<storage::job_key> pending, int64_t now,
                             held_attempts held)
    : st_(std::make_unique<state>(std::move(cfg))) {
  auto& st = *st_;
  if (!st.cfg.new_token)
    st.cfg.new_token = [rng = std::make_shared<std::mt19937_64>(std::random_device{}())] {
      return static_cast<int64_t>((*rng)() >> 1);
    };
  if (auto& admission = st.cfg.scheduling.admission) {
    if (!admission->sources.empty())
      st.pressure = std::make_unique<pressure_gauge>(admission->sources);
    if (admission->io_budget)
      st.disk = std::make_unique<disk_throughput>(*admission->io_budget);
  }
  for (auto& k : pending)
    add_pending(st, k, now);
  for (auto& r : held.attempts)
    reinstate(st, r, held.until);
}

dispatch_core::~dispatch_core() = default;

// Runs after every input: hand out work, publish allocation changes, and
// say when to wake next.
void dispatch_core::settle(int64_t now, effects& out) {
  auto& st = *st_;
  drain_feeds(st, now);
  emit_rebalance(st, now);
  dispatch(st, now);
  emit_rebalance(st, now);
  emit_too_heavy(st, now);
  out.wake_at = next_wake(st, now);
  st.out = nullptr;
}

dispatch_core::joined dispatch_core::register_worker(joining w, int64_t now, effects& out) {
  auto& st = *st_;
  st.out = &out;
  std::vector<uint32_t> ids;
  for (auto& t : w.types)
    ids.push_back(st.policy.type_id(t));
  joined done;
  done.id = st.workers.add(std::move(ids), w.max_capacity, w.prefetch);
  if (!w.holder.empty())
    st.remote.emplace(done.id, w.holder);
  auto& known = st.known[done.id];
  known.row.identity = {static_cast<int64_t>(done.id), std::move(w.name), std::move(w.host),
                        w.pid, w.holder};
  known.row.registered_at = now;
  known.types = w.types;
  st.send(worker_save{known.row});
  drain_feeds(st, now);  // what ended meanwhile is not given back
  done.stale = take_back(st, done.id, w, now);
  done.max_capacity = st.controls.worker_concurrency(known.row.identity.name).value_or(0);
  update_capacity(st);
  settle(now, out);
  return done;
}

bool dispatch_core::registered(uint64_t id) const {
  return st_->workers.find(id) != nullptr;
}

dispatch_core::leaving dispatch_core::unregister_worker(uint64_t id, int64_t now,
                                                        effects& out) {
  auto& st = *st_;
  st.out = &out;
  auto how = leaving::unknown;
  switch (st.workers.leave(id)) {
    case worker_registry::leave_result::unknown:
      st.out = nullptr;
      return how;
    case worker_registry::leave_result::left:
      how = leaving::left;
      break;
    case worker_registry::leave_result::after_claim:
      how = leaving::after_claim;
      break;
  }
  if (st.remote.count(id) == 1)
    st.remote_left.insert(id);
  record_leaving(st, id, now);
  if (how == leaving::left)
    st.known.erase(id);
  update_capacity(st);
  settle(now, out);
  return how;
}

// A worker's report goes on to the writer with the jobs picked for its room,
// so its outcomes and its next claims commit together. One whose room is out
// of range still has its outcomes committed (each is fenced by its token),
// but credits nothing.
void dispatch_core::report(worker_report r, int64_t now, effects& out) {
  auto& st = *st_;
  st.out = &out;
  if (auto k = st.known.find(r.worker_id); k != st.known.end())
    k->second.last_report = now;
  bool credits = true;
  if (auto* w = st.workers.find(r.worker_id);
      w != nullptr && r.max_capacity != 0 && r.max_capacity != w->max_capacity) {
    if (r.max_capacity < 1 || r.max_capacity > max_weight) {
      out.rejected.emplace_back("a report's room",
                                invalid_field("max_capacity", "must be 1 to "
                                                                + std::to_string(max_weight)
                                                                + ", got "
                                                                + std::to_string(r.max_capacity)));
      credits = false;
    } else {
      st.workers.resize(r.worker_id, r.max_capacity);
      update_capacity(st);
    }
  }
  if (auto why = st.workers.check_credit(r.worker_id, r.capacity, r.received_weight);
      credits && !why) {
    out.rejected.emplace_back("a report's room", why);
    credits = false;
  }
  drain_feeds(st, now);
  worker_writes batch;
  batch.worker_id = r.worker_id;
  batch.outcomes = std::move(r.outcomes);
  batch.released = std::move(r.released);
  // Reports that carry writes get an answer; the worker sends the next such
  // report only then.
  batch.answers_report = !batch.outcomes.empty() || !batch.released.empty();
  free_returned(st, r.worker_id, r.returned, now);
  // A failure not yet committed may open a breaker: its type's jobs wait
  // for the commit rather than be claimed alongside it.
  if (st.breakers.any())
    for (auto& o : batch.outcomes) {
      if (o.kind != storage::report_kind::failed
          && o.kind != storage::report_kind::failed_permanently)
        continue;
      auto a = st.attempts.find(o.row);
      if (!a) {
        // Its claim's feed is on its way; a stale report's never comes.
        if (st.early_failures.size() >= max_early_failures)
          st.early_failures.clear();
        st.early_failures[o.row] = o.token;
      } else if (a->token == o.token) {
        auto type = st.policy.type_name(a->type);
        st.breakers.reported_failure(type, o.row, now);
        hold_by_breaker(st, type);
      }
    }
  if (credits && st.workers.credit(r.worker_id, r.capacity, r.received_weight)) {
    st.policy.promote(now);
    read_pressure(st);
    emit_rebalance(st, now);  // picks follow shares that include new groups
    if (!st.draining && now >= st.hold_until) {
      batch.claims = claim_for(st, r.worker_id, now);
      if (!batch.claims.empty())
        batch.holder = holder_of(st, r.worker_id);  // only claims record it
    }
    st.workers.wait_for_jobs(r.worker_id);
  }
  if (batch.answers_report || !batch.claims.empty())
    st.send(std::move(batch));
  settle(now, out);
}

void dispatch_core::workers_gone(const std::vector<uint64_t>& ids, int64_t now,
                                 effects& out) {
  auto& st = *st_;
  st.out = &out;
  drain_feeds(st, now);  // claims that committed are held or lost as running
  for (auto id : ids)
    worker_gone(st, id, now);
  settle(now, out);
}

void dispatch_core::catch_up(int64_t now, effects& out) {
  st_->out = &out;
  settle(now, out);
}

void dispatch_core::tick(int64_t now, effects& out) {
  auto& st = *st_;
  st.out = &out;
  drain_feeds(st, now);
  on_timer(st, now);
  settle(now, out);
}

void dispatch_core::drain(int64_t now, effects& out) {
  auto& st = *st_;
  st.out = &out;
  st.draining = true;
  settle(now, out);
}

void dispatch_core::control(const scheduling_control& c, int64_t now, effects& out) {
  auto& st = *st_;
  st.out = &out;
  drain_feeds(st, now);
  on_control(st, c, now);
  settle(now, out);
}

std::vector<worker_info> dispatch_core::workers() const {
  auto& st = *st_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> running;  // count, weight
  for (auto& [row, a] : st.attempts.running())
    if (a.worker != 0 && !a.code_returned) {
      auto& r = running[a.worker];
      r.first += 1;
      r.second += a.weight;
    }
  std::vector<worker_info> out;
  for (auto& [id, k] : st.known) {
    auto* w = st.workers.find(id);
    if (w == nullptr)
      continue;  // it left after its claims, and only its down is still to come
    worker_info i;
    i.identity = k.row.identity;
    i.types = k.types;
    i.max_concurrency = w->max_capacity;
    i.prefetch = w->prefetch;
    if (auto r = running.find(id); r != running.end())
      std::tie(i.running, i.running_weight) = r->second;
    i.credit = std::max(0, w->wanted());
    i.registered_at_ms = k.row.registered_at;
    i.last_report_ms = k.last_report;
    i.leaving = w->leaving;
    out.push_back(std::move(i));
  }
  return out;
}

std::vector<control_info> dispatch_core::controls(int64_t now) const {
  return st_->controls.list(now);
}

void dispatch_core::fill_metrics(metrics_snapshot& snap, int64_t now) const {
  auto& st = *st_;
  st.policy.fill_metrics(snap, now);
  st.runs.fill(snap);
  snap.breakers = st.breakers.snapshot();
  snap.controls = controls(now);
  snap.control_changes = st.controls.changes();
  snap.preemptions = st.preemptions_asked;
  snap.yields = st.yields;
  snap.resumptions = st.resumptions;
  snap.preempted_waiting = static_cast<int64_t>(st.preempting.held());
  snap.orphaned_attempts = static_cast<int64_t>(st.orphaned.size());
  if (st.pressure) {
    snap.pressure_by_source = st.pressure->readings();
    snap.pressure_errors = st.pressure->errors();
  }
  auto remote = static_cast<int32_t>(st.remote.size());
  snap.remote_workers = remote;
  snap.local_workers = static_cast<int32_t>(st.workers.size()) - remote;
}

std::vector<pending_view> dispatch_core::view(const std::vector<pending_query>& jobs,
                                              int64_t now) const {
  std::vector<pending_view> out;
  out.reserve(jobs.size());
  for (auto& j : jobs)
    out.push_back({st_->policy.effective_now(j.type, j.group, j.priority, j.ready_since, now),
                   st_->policy.too_heavy(j.type, j.weight)});
  return out;
}

}  // namespace ergon::actors
