// dispatch_core with no actor system: input sequences, and the effects each
// one asks for. A small stand-in writer commits the core's writes into
// feeds, so each test can order commits, reports and losses as a real
// queue may see them: a claim that races its code's return, a worker that
// leaves or dies with a claim at the writer, a yield that commits after
// its slot was freed.
#define BOOST_TEST_MODULE dispatch_core
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "dispatch/dispatch_core.hpp"
#include "ergon/storage/job_ids.hpp"

using namespace ergon;
using namespace ergon::actors;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;
constexpr int64_t attempt_ms = 30'000;

using effects = dispatch_core::effects;

std::vector<worker_writes> writes_of(const effects& fx);

// The core, the writer's feeds it takes, and the jobs as the writer stores
// them. Tokens count up from 1000.
struct rig {
  std::deque<commit_feed> committed;  // waiting for the core to take them
  std::map<int64_t, storage::job_key> jobs;
  std::map<int64_t, int32_t> tries;
  int64_t now = t0;
  int64_t next_token = 1000;
  bool events = true;
  dispatch_core core;

  // Standing offers only where a test asks for them: the others claim
  // every job through the dispatcher, as their orderings need.
  explicit rig(scheduling_options s = {}, bool offers = false)
      : core(config_of(std::move(s), offers), {}, t0) {}

  // Remote workers that go down have `ms` to join again for their attempts.
  struct with_grace {
    int64_t ms = 0;
    scheduling_options scheduling{};
  };
  explicit rig(with_grace g) : core(config_with_grace(g), {}, t0) {}

  dispatch_core::config config_with_grace(with_grace g) {
    auto c = config_of(std::move(g.scheduling), false);
    c.remote_grace_ms = g.ms;
    return c;
  }

  // Opens after workers up to `first - 1` were recorded.
  struct first_worker {
    int64_t id = 1;
  };
  explicit rig(first_worker f) : core(config_with_first(f), {}, t0) {}

  dispatch_core::config config_with_first(first_worker f) {
    auto c = config_of({}, false);
    c.first_worker_id = f.id;
    return c;
  }

  // Opens with remote workers' attempts kept running: each job of `held`
  // was in its first try when the last owner died.
  explicit rig(held_attempts held) : core(config_of({}, false), {}, t0, held) {
    for (auto& a : held.attempts) {
      jobs[a.key.row] = a.key;
      tries[a.key.row] = 1;
    }
  }

  dispatch_core::config config_of(scheduling_options s, bool offers) {
    dispatch_core::config c;
    c.scheduling = std::move(s);
    c.offers = offers;
    c.wants_events = [this] { return events; };
    c.wants_finished = [] { return true; };
    c.new_token = [this] { return next_token++ << 32; };  // bases apart from rows
    c.take_feeds = [this] {
      std::vector<commit_feed> out(std::make_move_iterator(committed.begin()),
                                   std::make_move_iterator(committed.end()));
      committed.clear();
      return out;
    };
    return c;
  }

  // -- the writer's side ---------------------------------------------------------------

  storage::job_key submit(int64_t row, const std::string& type = "t", int32_t priority = 0,
                          const std::string& group = {}) {
    storage::job_key k;
    k.row = row;
    k.id = storage::make_job_id(t0, 0, row);
    k.type = type;
    k.group = group;
    k.priority = priority;
    k.run_at = k.added_at = k.ready_since = now;
    jobs[row] = k;
    commit_feed f;
    f.added.push_back(k);
    committed.push_back(std::move(f));
    return k;
  }

  // Commits a worker's writes as the writer would: its claims (each job
  // still pending), then nothing else. Returns the claimed attempts.
  std::vector<storage::attempt_ref> commit_claims(const worker_writes& w) {
    commit_feed f;
    claim_result c;
    c.worker_id = w.worker_id;
    for (auto& a : w.claims) {
      storage::claimed_job j;
      j.key = jobs.at(a.row);
      j.token = a.token;
      j.try_number = ++tries[a.row];
      j.started_at = now;
      j.expires_at = now + attempt_ms;
      c.claimed.push_back(std::move(j));
    }
    f.claims.push_back(std::move(c));
    committed.push_back(std::move(f));
    return w.claims;
  }

  // Commits a submit of job `row` that the writer claimed with `offer`, in
  // one transaction, as the writer does. Returns the attempt.
  storage::attempt_ref commit_offered(const job_offer& offer, int64_t row,
                                      const std::string& type = "t") {
    storage::job_key k;
    k.row = row;
    k.id = storage::make_job_id(t0, 0, row);
    k.type = type;
    k.run_at = k.added_at = k.ready_since = now;
    jobs[row] = k;
    storage::claimed_job j;
    j.key = k;
    j.token = 7'000 + row;
    j.try_number = ++tries[row];
    j.started_at = now;
    j.expires_at = now + attempt_ms;
    commit_feed f;
    f.added.push_back(k);
    f.claims.push_back({offer.worker_id, {j}, {}, offer.serial});
    committed.push_back(std::move(f));
    return {row, j.token};
  }

  // The writer gives offer `serial` back unused.
  void commit_offer_ended(uint64_t serial) {
    commit_feed f;
    f.offers_ended.push_back(serial);
    committed.push_back(std::move(f));
  }

  // Commits the end of attempt `a` with `outcome`; the job ends in `status`.
  void commit_end(const storage::attempt_ref& a, attempt_outcome outcome, job_status status) {
    storage::attempt_end end;
    end.row = a.row;
    end.id = jobs.at(a.row).id;
    end.type = jobs.at(a.row).type;
    end.group = jobs.at(a.row).group;
    end.try_number = tries[a.row];
    end.outcome = outcome;
    end.status = status;
    end.key = jobs.at(a.row);
    end.started_at = now;
    commit_feed f;
    f.ended.push_back(std::move(end));
    committed.push_back(std::move(f));
  }

  // -- the workers' side ---------------------------------------------------------------

  // Job 1, and a worker with room for one.
  uint64_t one_job_and_worker(bool remote = false) {
    submit(1);
    return add_worker(1, remote);
  }

  // What worker `worker` (room 1, nothing received) is given.
  worker_writes picked_for(uint64_t worker) { return writes_of(report(worker, 1, 0)).at(0); }

  uint64_t add_worker(int32_t capacity, bool remote = false,
                      std::vector<std::string> types = {"t"}) {
    effects fx;
    return core
      .register_worker({"w", "h", 1, types, capacity, 0, remote ? "node/1" : "", {}, {}}, now, fx)
      .id;
  }

  effects report(uint64_t worker, int32_t capacity, int64_t received,
                 std::vector<storage::attempt_ref> returned = {}) {
    effects fx;
    worker_report r;
    r.worker_id = worker;
    r.capacity = capacity;
    r.received_weight = received;
    r.returned = std::move(returned);
    core.report(std::move(r), now, fx);
    return fx;
  }

  effects catch_up() {
    effects fx;
    core.catch_up(now, fx);
    return fx;
  }

  effects tick_at(int64_t t) {
    now = t;
    effects fx;
    core.tick(now, fx);
    return fx;
  }

  // A remote worker of `holder` joins (again), listing what it kept.
  dispatch_core::joined join_again(const std::string& holder,
                                   std::vector<storage::attempt_ref> held,
                                   std::vector<storage::attempt_ref> returned, effects& fx) {
    return core.register_worker(
      {"w", "h", 1, {"t"}, 2, 0, holder, std::move(held), std::move(returned)}, now, fx);
  }

  effects gone(uint64_t worker) {
    effects fx;
    core.workers_gone({worker}, now, fx);
    return fx;
  }

  // Worker `worker` (room 1, nothing received) reports; the one job it is
  // given is claimed and started. Returns that attempt.
  storage::attempt_ref run_one(uint64_t worker) {
    auto fx = report(worker, 1, 0);
    auto claim = commit_claims(writes_of(fx).at(0)).at(0);
    catch_up();
    return claim;
  }

  metrics_snapshot metrics() {
    metrics_snapshot m;
    core.fill_metrics(m, now);
    return m;
  }
};

// The writes of kind W the core asked for, in order.
template <class W>
std::vector<W> sent_of(const effects& fx) {
  std::vector<W> out;
  for (auto& w : fx.writes)
    if (auto* x = std::get_if<W>(&w))
      out.push_back(*x);
  return out;
}

std::vector<worker_writes> writes_of(const effects& fx) { return sent_of<worker_writes>(fx); }
std::vector<job_offer> offers_of(const effects& fx) { return sent_of<job_offer>(fx); }

std::vector<uint64_t> withdrawn_of(const effects& fx) {
  std::vector<uint64_t> out;
  for (auto& w : sent_of<withdraw_offer>(fx))
    out.push_back(w.serial);
  return out;
}

std::vector<storage::attempt_ref> claims_of(const effects& fx) {
  std::vector<storage::attempt_ref> out;
  for (auto& b : writes_of(fx))
    out.insert(out.end(), b.claims.begin(), b.claims.end());
  return out;
}

std::vector<storage::attempt_ref> lost_of(const effects& fx) {
  std::vector<storage::attempt_ref> out;
  for (auto& l : sent_of<lose_batch>(fx))
    out.insert(out.end(), l.args.attempts.begin(), l.args.attempts.end());
  return out;
}

std::vector<event_kind> kinds_of(const effects& fx) {
  std::vector<event_kind> out;
  for (auto& e : fx.events)
    out.push_back(e.kind);
  return out;
}

bool has(const std::vector<event_kind>& kinds, event_kind k) {
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

int32_t running_slots(rig& r) {
  int32_t n = 0;
  for (auto& g : r.metrics().groups)
    n += g.running_slots;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_report_claims_a_job_that_runs_and_ends) {
  rig r;
  r.submit(1);
  auto w = r.add_worker(1);
  auto fx = r.report(w, 1, 0);
  auto claims = claims_of(fx);
  BOOST_REQUIRE_EQUAL(claims.size(), 1u);
  BOOST_TEST(claims[0].row == 1);
  BOOST_TEST(claims[0].token == ((int64_t{1000} << 32) ^ claims[0].row));  // base XOR row
  BOOST_TEST((fx.hungry == std::optional<bool>{false}));  // the worker's room is taken
  // Nothing runs before the claim commits; then the job starts.
  BOOST_TEST(running_slots(r) == 1);  // picked: its slot counts already
  r.commit_claims(writes_of(fx)[0]);
  fx = r.catch_up();
  BOOST_TEST(has(kinds_of(fx), event_kind::started));
  BOOST_TEST(fx.wake_at == t0 + attempt_ms);  // its expiry
  // The code returns; the end commits: the slot is free and waiters told.
  fx = r.report(w, 1, 1, {claims[0]});
  BOOST_TEST(running_slots(r) == 0);
  r.commit_end(claims[0], attempt_outcome::succeeded, job_status::succeeded);
  fx = r.catch_up();
  BOOST_TEST(has(kinds_of(fx), event_kind::succeeded));
  BOOST_TEST(fx.finished == std::vector<int64_t>{1});
  // Its expiry may still wake the core once; it expires nothing then.
  fx = r.tick_at(t0 + attempt_ms);
  BOOST_TEST(fx.writes.empty());
  BOOST_TEST(fx.wake_at == storage::never_ms);
}

BOOST_AUTO_TEST_CASE(an_attempt_past_its_expiry_is_expired_once_its_time_comes) {
  rig r;
  auto w = r.one_job_and_worker();
  auto claim = r.run_one(w);
  auto fx = r.tick_at(t0 + attempt_ms - 1);
  BOOST_TEST(fx.writes.empty());
  fx = r.tick_at(t0 + attempt_ms);
  BOOST_REQUIRE_EQUAL(fx.writes.size(), 1u);
  auto* expiring = std::get_if<expire_batch>(&fx.writes[0]);
  BOOST_REQUIRE(expiring);
  BOOST_TEST(expiring->attempts.at(0).row == claim.row);
  BOOST_TEST(expiring->attempts.at(0).token == claim.token);
  // When the expiry commits, the worker's code is told to stop.
  r.commit_end(claim, attempt_outcome::expired, job_status::pending);
  fx = r.catch_up();
  BOOST_REQUIRE_EQUAL(fx.requests.size(), 1u);
  BOOST_TEST(fx.requests[0].worker == w);
  auto* cancel = std::get_if<cancel_attempt>(&fx.requests[0].request);
  BOOST_REQUIRE(cancel);
  BOOST_TEST(cancel->reason == "expired");
  BOOST_TEST(cancel->token == claim.token);
}

// The writer may hold feeds back (feed_channel): a decision takes them
// first, so it sees every acknowledged submit.
BOOST_AUTO_TEST_CASE(a_reports_pick_sees_every_committed_submit) {
  rig r;
  r.submit(1, "t", 0);
  r.catch_up();
  r.submit(2, "t", 5);  // committed; its feed not yet taken
  auto w = r.add_worker(1);
  r.submit(3, "t", 9);
  auto claims = claims_of(r.report(w, 1, 0));
  BOOST_REQUIRE_EQUAL(claims.size(), 1u);
  BOOST_TEST(claims[0].row == 3);
}

// The writer hands claimed jobs to the worker before the dispatcher reads
// the claim's feed, so the worker may report the code returned first.
BOOST_AUTO_TEST_CASE(a_return_that_overtakes_its_claims_feed_frees_the_slot_at_the_claim) {
  rig r;
  r.submit(1);
  r.submit(2);
  auto w = r.add_worker(1);
  auto fx = r.report(w, 1, 0);
  auto batch = writes_of(fx).at(0);
  BOOST_REQUIRE_EQUAL(batch.claims.size(), 1u);
  r.commit_claims(batch);  // committed, not yet taken by the core
  // The worker ran it and says so, with room for one more. The core takes
  // the claim's feed first, so the report's room is not given twice.
  fx = r.report(w, 1, 1, {batch.claims[0]});
  auto next = claims_of(fx);
  BOOST_REQUIRE_EQUAL(next.size(), 1u);
  BOOST_TEST(next[0].row == 2);
  BOOST_TEST(running_slots(r) == 1);  // only the second job holds a slot
}

BOOST_AUTO_TEST_CASE(a_return_reported_before_its_claim_commits_is_kept_for_the_claim) {
  rig r;
  auto w = r.one_job_and_worker();
  auto batch = r.picked_for(w);
  // The return arrives while the claim is still at the writer.
  r.report(w, 0, 1, {batch.claims[0]});
  BOOST_TEST(running_slots(r) == 1);
  r.commit_claims(batch);
  r.catch_up();
  BOOST_TEST(running_slots(r) == 0);  // freed as the attempt starts
}

BOOST_AUTO_TEST_CASE(a_worker_that_leaves_with_a_claim_at_the_writer_is_answered_after_it) {
  rig r;
  auto w = r.one_job_and_worker();
  auto batch = r.picked_for(w);
  effects fx;
  BOOST_TEST((r.core.unregister_worker(w, r.now, fx) == dispatch_core::leaving::after_claim));
  BOOST_TEST(fx.unregistered.empty());
  BOOST_TEST(r.core.registered(w));  // until its claim commits
  r.commit_claims(batch);
  fx = r.catch_up();
  BOOST_TEST(fx.unregistered == std::vector<uint64_t>{w});
  BOOST_TEST(!r.core.registered(w));
  // A worker with no claim at the writer leaves at once; an unknown one too.
  auto v = r.add_worker(1);
  fx = effects{};
  BOOST_TEST((r.core.unregister_worker(v, r.now, fx) == dispatch_core::leaving::left));
  BOOST_TEST((r.core.unregister_worker(v, r.now, fx) == dispatch_core::leaving::unknown));
}

// Each registration is saved with the id it got, counting on from the
// first the open found free, and saved again with its end: when it
// unregisters (after its claims commit too) or goes down.
BOOST_AUTO_TEST_CASE(a_registration_and_its_end_are_saved_under_ids_that_count_on) {
  rig r{rig::first_worker{40}};
  effects fx;
  auto local = r.core.register_worker({"billing", "host-a", 4242, {"t"}, 2, 0, "", {}, {}}, r.now,
                                      fx);
  BOOST_TEST(local.id == 40u);
  auto saved = sent_of<worker_save>(fx);
  BOOST_REQUIRE(saved.size() == 1u);
  BOOST_TEST(saved[0].row.identity.id == 40);
  BOOST_TEST(saved[0].row.identity.name == "billing");
  BOOST_TEST(saved[0].row.identity.host == "host-a");
  BOOST_TEST(saved[0].row.identity.pid == 4242);
  BOOST_TEST(saved[0].row.identity.node == "");
  BOOST_TEST(saved[0].row.registered_at == r.now);
  BOOST_TEST(!saved[0].row.left_at.has_value());
  fx = effects{};
  r.now += 5;
  auto remote = r.core.register_worker({"far", "host-b", 77, {"t"}, 1, 0, "node/9", {}, {}},
                                       r.now, fx);
  BOOST_TEST(remote.id == 41u);
  BOOST_TEST(sent_of<worker_save>(fx).at(0).row.identity.node == "node/9");
  // Leaving with a claim at the writer: the end is saved at once, once.
  r.submit(1);
  auto batch = r.picked_for(local.id);
  r.now += 10;
  fx = effects{};
  BOOST_TEST((r.core.unregister_worker(local.id, r.now, fx) == dispatch_core::leaving::after_claim));
  saved = sent_of<worker_save>(fx);
  BOOST_REQUIRE(saved.size() == 1u);
  BOOST_TEST(saved[0].row.identity.id == 40);
  BOOST_TEST(saved[0].row.left_at.value_or(-1) == r.now);
  r.commit_claims(batch);
  BOOST_TEST(sent_of<worker_save>(r.catch_up()).empty());
  // Going down saves the end too.
  r.now += 10;
  BOOST_TEST(sent_of<worker_save>(r.gone(remote.id)).at(0).row.left_at.value_or(-1) == r.now);
  BOOST_TEST(sent_of<worker_save>(r.gone(remote.id)).empty());
  BOOST_TEST(r.add_worker(1) == 42u);
}

// The listing: who is registered, what runs on it, its room not yet given,
// and when it last reported.
BOOST_AUTO_TEST_CASE(the_worker_listing_shows_load_credit_and_last_report) {
  rig r;
  auto w = r.add_worker(3);
  auto v = r.add_worker(1, true);
  auto all = r.core.workers();
  BOOST_REQUIRE(all.size() == 2u);
  BOOST_TEST(all[0].identity.id == static_cast<int64_t>(w));
  BOOST_TEST(all[0].max_concurrency == 3);
  BOOST_TEST(all[0].types == std::vector<std::string>{"t"});
  BOOST_TEST(!all[0].last_report_ms.has_value());
  BOOST_TEST(all[1].identity.node == "node/1");
  r.submit(1);
  r.now += 100;
  r.run_one(w);
  r.now += 100;
  r.report(v, 1, 0);
  all = r.core.workers();
  BOOST_TEST(all[0].running == 1);
  BOOST_TEST(all[0].running_weight == 1);
  BOOST_TEST(all[0].last_report_ms.value_or(-1) == t0 + 100);
  BOOST_TEST(all[1].running == 0);
  BOOST_TEST(all[1].credit == 1);  // room reported, nothing ready to give
  BOOST_TEST(all[1].last_report_ms.value_or(-1) == t0 + 200);
  BOOST_TEST(!all[1].leaving);
  effects fx;
  r.core.unregister_worker(v, r.now, fx);
  all = r.core.workers();
  BOOST_REQUIRE(all.size() == 1u);
  BOOST_TEST(all[0].identity.id == static_cast<int64_t>(w));
}

BOOST_AUTO_TEST_CASE(a_remote_worker_that_goes_down_loses_its_attempts_at_once) {
  rig r;
  r.submit(1);
  r.submit(2);
  auto w = r.add_worker(1, true);
  auto claim = r.run_one(w);
  auto lost = lost_of(r.gone(w));
  BOOST_REQUIRE_EQUAL(lost.size(), 1u);
  BOOST_TEST(lost[0].row == claim.row);
  BOOST_TEST(lost[0].token == claim.token);
  BOOST_TEST(r.metrics().remote_workers == 0);
}

BOOST_AUTO_TEST_CASE(a_remote_worker_gone_with_a_claim_at_the_writer_loses_it_when_it_commits) {
  rig r;
  auto w = r.one_job_and_worker(true);
  auto batch = r.picked_for(w);
  BOOST_TEST(lost_of(r.gone(w)).empty());  // nothing committed yet
  r.commit_claims(batch);
  auto lost = lost_of(r.catch_up());
  BOOST_REQUIRE_EQUAL(lost.size(), 1u);
  BOOST_TEST(lost[0].row == 1);
  // A local worker's attempts are not lost: they expire.
  r.submit(2);
  auto local = r.add_worker(1);
  r.run_one(local);
  BOOST_TEST(lost_of(r.gone(local)).empty());
}

// A fast worker reports again while its claim commits: its next claim is
// picked at once, so the two can share a transaction; a third waits.
BOOST_AUTO_TEST_CASE(a_worker_gets_a_second_claim_while_its_first_commits) {
  rig r;
  for (int64_t row = 1; row <= 4; ++row)
    r.submit(row);
  auto w = r.add_worker(4);
  auto first = writes_of(r.report(w, 1, 0)).at(0);
  BOOST_REQUIRE_EQUAL(first.claims.size(), 1u);
  auto second = writes_of(r.report(w, 2, 0)).at(0);
  BOOST_REQUIRE_EQUAL(second.claims.size(), 1u);  // 2 free, 1 on its way
  BOOST_TEST(second.claims[0].row != first.claims[0].row);
  BOOST_TEST(claims_of(r.report(w, 4, 0)).empty());  // two claims at the writer
  // The second commits first; its feed lets the worker claim again.
  r.commit_claims(second);
  auto fx = r.catch_up();
  BOOST_TEST(claims_of(fx).size() == 2u);  // 4 free, 2 on their way
  r.commit_claims(first);
  r.catch_up();
  BOOST_TEST(running_slots(r) == 4);  // two started, two picked at the writer
}

// The return of a job whose claim's feed has not come frees its slot only at
// that feed. A second claim picked before it would see the job's group one
// job fuller than it is and hand the slot to a group beyond its share.
BOOST_AUTO_TEST_CASE(no_second_claim_while_a_return_waits_for_its_claims_feed) {
  scheduling_options s;
  s.groups["big"].weight = 1'000;  // "small" gets no share of 2 slots
  rig r{s};
  r.submit(1, "t", 5, "big");
  r.submit(2, "t", 5, "big");
  r.submit(3, "t", 5, "big");
  r.submit(4, "t", 5, "big");
  r.submit(9, "t", 9, "small");  // better priority, but no share
  auto w = r.add_worker(2);
  auto first = writes_of(r.report(w, 2, 0)).at(0);
  BOOST_REQUIRE_EQUAL(first.claims.size(), 2u);
  auto started = r.commit_claims(first);
  r.catch_up();
  // Job 1 ends; job 3 is claimed for its slot.
  auto one = started[0].row == 1 ? started[0] : started[1];
  auto fx = r.report(w, 1, 2, {one});
  auto second = writes_of(fx).at(0);
  BOOST_REQUIRE_EQUAL(second.claims.size(), 1u);
  BOOST_TEST(second.claims[0].row == 3);
  // The worker runs job 3 and it returns before the dispatcher reads its
  // claim's feed: no pick for the slot yet.
  BOOST_TEST(claims_of(r.report(w, 1, 3, {second.claims[0]})).empty());
  r.commit_claims(second);
  fx = r.catch_up();
  // Now the slot is free, and it is "big"'s.
  auto later = claims_of(fx);
  BOOST_REQUIRE_EQUAL(later.size(), 1u);
  BOOST_TEST(later[0].row == 4);
}

BOOST_AUTO_TEST_CASE(a_remote_worker_gone_with_two_claims_at_the_writer_loses_both) {
  rig r;
  r.submit(1);
  r.submit(2);
  auto w = r.add_worker(2, true);
  auto first = writes_of(r.report(w, 1, 0)).at(0);
  auto second = writes_of(r.report(w, 2, 0)).at(0);
  BOOST_TEST(lost_of(r.gone(w)).empty());  // nothing committed yet
  r.commit_claims(second);
  auto lost = lost_of(r.catch_up());
  BOOST_REQUIRE_EQUAL(lost.size(), 1u);
  BOOST_TEST(lost[0].row == second.claims[0].row);
  r.commit_claims(first);
  lost = lost_of(r.catch_up());
  BOOST_REQUIRE_EQUAL(lost.size(), 1u);
  BOOST_TEST(lost[0].row == first.claims[0].row);
}

BOOST_AUTO_TEST_CASE(a_failed_claim_puts_its_jobs_back_and_holds_claims_for_a_while) {
  rig r;
  auto w = r.one_job_and_worker();
  auto batch = r.picked_for(w);
  commit_feed f;
  write_failed failed;
  failed.worker_id = w;
  failed.claim_rows = {1};
  failed.why = status{error::storage_full, "disk full"};
  f.failed.push_back(failed);
  r.committed.push_back(std::move(f));
  auto fx = r.catch_up();
  BOOST_TEST(claims_of(fx).empty());  // held back after a storage error
  BOOST_TEST(fx.wake_at == t0 + 1'000);
  fx = r.tick_at(t0 + 1'000);
  auto again = claims_of(fx);
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].row == 1);
  BOOST_TEST(again[0].token != batch.claims[0].token);
}

// A HIGH job at full capacity asks the LOW one to yield; the yield may
// commit before or after the LOW code's return reaches the core, and
// either way the yielded job waits for its preemptor to end.
BOOST_AUTO_TEST_CASE(a_yielded_job_waits_for_its_preemptor_in_either_order) {
  for (bool return_first : {false, true}) {
    scheduling_options s;
    s.preemption = preemption_options{10};
    rig r{s};
    r.submit(1, "t", 0);
    auto w = r.add_worker(1);
    auto low = r.run_one(w);
    r.submit(2, "t", 10);
    auto fx = r.catch_up();
    BOOST_REQUIRE_EQUAL(fx.requests.size(), 1u);
    auto* ask = std::get_if<preempt_attempt>(&fx.requests[0].request);
    BOOST_REQUIRE(ask);
    BOOST_TEST(ask->row == 1);
    BOOST_TEST(has(kinds_of(fx), event_kind::preempted));
    BOOST_TEST(r.metrics().preemptions == 1);
    // The LOW code checkpoints, yields and returns; the worker reports.
    storage::attempt_ref high;
    if (return_first) {
      fx = r.report(w, 1, 1, {low});
      high = claims_of(fx).at(0);
      r.commit_end(low, attempt_outcome::yielded, job_status::pending);
    } else {
      r.commit_end(low, attempt_outcome::yielded, job_status::pending);
      r.catch_up();
      fx = r.report(w, 1, 1, {low});
      high = claims_of(fx).at(0);
    }
    BOOST_TEST(high.row == 2);
    r.commit_claims(writes_of(fx).at(0));
    fx = r.catch_up();
    BOOST_TEST(r.metrics().preempted_waiting == 1);
    BOOST_TEST(!has(kinds_of(fx), event_kind::resumed));
    // The preemptor's code returns: the yielded job is ready and takes the
    // slot at once, on the same try.
    fx = r.report(w, 1, 2, {high});
    BOOST_TEST(has(kinds_of(fx), event_kind::resumed));
    auto again = claims_of(fx);
    BOOST_REQUIRE_EQUAL(again.size(), 1u);
    BOOST_TEST(again[0].row == 1);
    BOOST_TEST(r.metrics().preempted_waiting == 0);
    BOOST_TEST(r.metrics().resumptions == 1);
  }
}

BOOST_AUTO_TEST_CASE(a_draining_core_hands_out_nothing_and_is_not_hungry) {
  rig r;
  auto w = r.add_worker(2);
  auto fx = r.report(w, 2, 0);
  BOOST_TEST((fx.hungry == std::optional<bool>{true}));  // waits for jobs
  fx = effects{};
  r.core.drain(r.now, fx);
  BOOST_TEST((fx.hungry == std::optional<bool>{false}));
  r.submit(1);
  fx = r.catch_up();
  BOOST_TEST(claims_of(fx).empty());
}

BOOST_AUTO_TEST_CASE(a_report_whose_room_is_impossible_is_rejected_but_its_outcomes_commit) {
  rig r;
  auto w = r.one_job_and_worker();
  auto claim = r.run_one(w);
  worker_report rep;
  rep.worker_id = w;
  rep.capacity = 50;  // more than it has
  rep.received_weight = 1;
  rep.outcomes.push_back({claim.row, claim.token, storage::report_kind::succeeded, {}});
  effects fx;
  r.core.report(std::move(rep), r.now, fx);
  BOOST_REQUIRE_EQUAL(fx.rejected.size(), 1u);
  BOOST_TEST(fx.rejected[0].first == "a report's room");
  auto writes = writes_of(fx);
  BOOST_REQUIRE_EQUAL(writes.size(), 1u);
  BOOST_TEST(writes[0].outcomes.size() == 1u);
  BOOST_TEST(writes[0].answers_report);
  BOOST_TEST(writes[0].claims.empty());
}

// queue::set_worker: the registered workers of the name are told, one that
// registers later hears it in its answer, and the room a report may claim
// follows the max the report carries, not the control alone.
BOOST_AUTO_TEST_CASE(a_worker_control_resizes_the_workers_of_its_name) {
  rig r;
  auto w = r.add_worker(1);
  effects fx;
  scheduling_control set;
  set.op = scheduling_control::change_worker;
  set.name = "w";
  set.settings.max_running = 3;
  r.core.control(set, r.now, fx);
  BOOST_REQUIRE_EQUAL(fx.requests.size(), 1u);
  BOOST_TEST(fx.requests[0].worker == w);
  auto* resize = std::get_if<resize_worker>(&fx.requests[0].request);
  BOOST_REQUIRE(resize != nullptr);
  BOOST_TEST(resize->max_capacity == 3);
  for (int64_t row = 1; row <= 3; ++row)
    r.submit(row);
  // Room past its old max is refused until a report carries the new one.
  fx = r.report(w, 3, 0);
  BOOST_REQUIRE_EQUAL(fx.rejected.size(), 1u);
  BOOST_TEST(claims_of(fx).empty());
  fx = effects{};
  worker_report resized;
  resized.worker_id = w;
  resized.capacity = 3;
  resized.max_capacity = 3;
  r.core.report(std::move(resized), r.now, fx);
  BOOST_TEST(fx.rejected.empty());
  BOOST_TEST(claims_of(fx).size() == 3u);
  BOOST_TEST(r.core.workers().at(0).max_concurrency == 3);
  // Registrations: the same name gets the control's value, another none.
  effects joins;
  auto later = r.core.register_worker({"w", "h", 2, {"t"}, 1, 0, "", {}, {}}, r.now, joins);
  BOOST_TEST(later.max_capacity == 3);
  auto other = r.core.register_worker({"x", "h", 3, {"t"}, 1, 0, "", {}, {}}, r.now, joins);
  BOOST_TEST(other.max_capacity == 0);
  // A reset tells each worker of the name to take its own again.
  fx = effects{};
  scheduling_control reset;
  reset.op = scheduling_control::reset_worker;
  reset.name = "w";
  r.core.control(reset, r.now, fx);
  BOOST_REQUIRE_EQUAL(fx.requests.size(), 2u);
  for (auto& told : fx.requests) {
    BOOST_TEST(told.worker != other.id);
    BOOST_TEST(std::get<resize_worker>(told.request).max_capacity == 0);
  }
  // A max no worker can have is refused by name, and credits nothing.
  fx = effects{};
  worker_report bad;
  bad.worker_id = other.id;
  bad.capacity = 1;
  bad.max_capacity = max_weight + 1;
  r.core.report(std::move(bad), r.now, fx);
  BOOST_REQUIRE_EQUAL(fx.rejected.size(), 1u);
  BOOST_TEST(fx.rejected[0].second.field() == "max_capacity");
  BOOST_TEST(claims_of(fx).empty());
}

BOOST_AUTO_TEST_CASE(events_are_built_only_for_listeners) {
  rig r;
  r.events = false;
  r.submit(1);
  auto fx = r.catch_up();
  BOOST_TEST(fx.events.empty());
  r.events = true;
  r.submit(2);
  fx = r.catch_up();
  BOOST_TEST(kinds_of(fx) == std::vector<event_kind>{event_kind::submitted});
}

BOOST_AUTO_TEST_CASE(a_pending_job_past_its_deadline_is_expired_by_a_tick) {
  rig r;
  auto k = r.submit(1);
  k.deadline = t0 + 500;
  r.committed.back().added.back().deadline = k.deadline;
  auto fx = r.catch_up();
  BOOST_TEST(fx.wake_at == t0 + 501);
  fx = r.tick_at(t0 + 501);
  BOOST_REQUIRE_EQUAL(fx.writes.size(), 1u);
  auto* overdue = std::get_if<expire_pending_batch>(&fx.writes[0]);
  BOOST_REQUIRE(overdue);
  BOOST_TEST(overdue->rows == std::vector<int64_t>{1});
}

// An input that changes nothing leaves the hunger flag and the timer as
// they were: a peer's unregistration of an unknown id must not make the
// writer hold feeds back from a waiting worker.
BOOST_AUTO_TEST_CASE(an_unknown_unregistration_changes_neither_hunger_nor_the_timer) {
  rig r;
  auto w = r.add_worker(1);
  auto fx = r.report(w, 1, 0);
  BOOST_TEST((fx.hungry == std::optional<bool>{true}));
  fx = effects{};
  BOOST_TEST((r.core.unregister_worker(w + 100, r.now, fx) == dispatch_core::leaving::unknown));
  BOOST_TEST(!fx.hungry.has_value());
  BOOST_TEST(fx.wake_at == storage::never_ms);
  BOOST_TEST(fx.writes.empty());
}

// One actor registered twice (a remote worker back before its old
// registration went down): when it goes down, no job goes to either id.
BOOST_AUTO_TEST_CASE(every_id_of_a_gone_actor_goes_before_anything_is_handed_out) {
  rig r;
  auto first = r.add_worker(1, true);
  auto second = r.add_worker(1, true);
  r.report(first, 1, 0);
  r.report(second, 1, 0);
  r.submit(1);  // committed; its feed is taken by the next input
  effects fx;
  r.core.workers_gone({first, second}, r.now, fx);
  BOOST_TEST(claims_of(fx).empty());
  BOOST_TEST(r.metrics().remote_workers == 0);
}

// -- standing offers -------------------------------------------------------------------

// A hungry worker with nothing ready gets one offer of its whole room; the
// writer claims a new job with it, and the job runs and counts as picked.
BOOST_AUTO_TEST_CASE(a_hungry_worker_with_nothing_ready_gets_an_offer_the_writer_claims_with) {
  rig r{{}, true};
  auto w = r.add_worker(2, false, {"t", "u"});
  auto fx = r.report(w, 2, 0);
  auto offers = offers_of(fx);
  BOOST_REQUIRE_EQUAL(offers.size(), 1u);
  BOOST_TEST(offers[0].worker_id == w);
  BOOST_TEST(offers[0].room == 2);
  BOOST_TEST((offers[0].types == std::vector<std::string>{"t", "u"}));
  BOOST_TEST(offers[0].valid_until == storage::never_ms);
  BOOST_TEST((fx.hungry == std::optional<bool>{true}));  // feeds ring at once
  // One offer at a time, however often the core looks.
  BOOST_TEST(offers_of(r.catch_up()).empty());
  auto a = r.commit_offered(offers[0], 1);
  fx = r.catch_up();
  BOOST_TEST(has(kinds_of(fx), event_kind::started));
  BOOST_TEST(running_slots(r) == 1);
  BOOST_TEST(fx.wake_at == t0 + attempt_ms);  // the attempt's expiry is watched
  // The rest of its room is offered again.
  offers = offers_of(fx);
  BOOST_REQUIRE_EQUAL(offers.size(), 1u);
  BOOST_TEST(offers[0].room == 1);
  // The attempt ends as any other.
  r.report(w, 1, 1, {a});
  BOOST_TEST(running_slots(r) == 0);
  r.commit_end(a, attempt_outcome::succeeded, job_status::succeeded);
  fx = r.catch_up();
  BOOST_TEST(fx.finished == std::vector<int64_t>{1});
}

// A job that is ready decides through the policy: the offer goes back
// first, and the worker's room is claimed only once it did (its room is
// held by the offer until then, so nothing is given twice).
BOOST_AUTO_TEST_CASE(an_offer_is_withdrawn_once_a_job_is_ready_and_the_job_claimed_after) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  r.submit(1);  // committed without the offer (the writer found it void)
  auto fx = r.catch_up();
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{offer.serial});
  BOOST_TEST(claims_of(fx).empty());
  BOOST_TEST(withdrawn_of(r.catch_up()).empty());  // once
  r.commit_offer_ended(offer.serial);
  fx = r.catch_up();
  auto claims = claims_of(fx);
  BOOST_REQUIRE_EQUAL(claims.size(), 1u);
  BOOST_TEST(claims[0].row == 1);
  BOOST_TEST(offers_of(fx).empty());
}

// Gates the offer cannot see make it go back: a pause, for instance.
BOOST_AUTO_TEST_CASE(a_pause_withdraws_the_offer_and_no_offer_stands_while_it_lasts) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  effects fx;
  scheduling_control pause;
  pause.op = scheduling_control::pause_type;
  pause.name = "other";
  r.core.control(pause, r.now, fx);
  // The pause goes to the writer to be saved, which answers the call.
  std::vector<control_save*> saves;
  for (auto& w : fx.writes)
    if (auto* save = std::get_if<control_save>(&w))
      saves.push_back(save);
  BOOST_REQUIRE(saves.size() == 1u);
  BOOST_TEST(saves[0]->args.controls.at(0).name == "other");
  BOOST_TEST(saves[0]->args.controls.at(0).paused);
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{offer.serial});
  r.commit_offer_ended(offer.serial);
  fx = r.catch_up();
  BOOST_TEST(offers_of(fx).empty());
  BOOST_TEST((fx.hungry == std::optional<bool>{true}));  // it waits in line instead
  fx = effects{};
  scheduling_control resume;
  resume.op = scheduling_control::resume_all;
  r.core.control(resume, r.now, fx);
  BOOST_TEST(offers_of(fx).size() == 1u);
}

BOOST_AUTO_TEST_CASE(no_offer_with_a_rate_limit_or_a_cap) {
  scheduling_options limited;
  limited.type_rate_limits["t"] = rate_limit{10.0, 1};
  rig r{limited, true};
  auto w = r.add_worker(1);
  BOOST_TEST(offers_of(r.report(w, 1, 0)).empty());
  scheduling_options capped;
  capped.type_max_running["t"] = 1;
  rig c{capped, true};
  w = c.add_worker(1);
  BOOST_TEST(offers_of(c.report(w, 1, 0)).empty());
}

// A waiting job due later bounds the offer: from then on the writer
// leaves it, and the core withdraws it when the job is ready.
BOOST_AUTO_TEST_CASE(an_offer_is_valid_until_a_waiting_job_is_due) {
  rig r{{}, true};
  auto k = r.submit(1);
  k.run_at = t0 + 5'000;
  r.committed.back().added.back() = k;
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  BOOST_TEST(offer.valid_until == t0 + 5'000);
  auto fx = r.tick_at(t0 + 5'000);
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{offer.serial});
}

// A worker leaving with an offer out goes when the offer comes back.
BOOST_AUTO_TEST_CASE(a_worker_that_leaves_with_an_offer_out_is_answered_after_it) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  effects fx;
  BOOST_TEST((r.core.unregister_worker(w, r.now, fx) == dispatch_core::leaving::after_claim));
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{offer.serial});
  BOOST_TEST(fx.unregistered.empty());
  // The writer had used it already: the job reaches the worker first.
  r.commit_offered(offer, 1);
  fx = r.catch_up();
  BOOST_TEST(fx.unregistered == std::vector<uint64_t>{w});
  BOOST_TEST(!r.core.registered(w));
  BOOST_TEST(running_slots(r) == 1);  // its attempt runs out as any other
}

// A remote worker lost with an offer out: a job the writer claimed with it
// is lost at once; an offer given back loses nothing.
BOOST_AUTO_TEST_CASE(a_remote_worker_gone_with_an_offer_out_loses_what_it_claimed) {
  rig r{{}, true};
  auto w = r.add_worker(1, true);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  auto fx = r.gone(w);
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{offer.serial});
  auto a = r.commit_offered(offer, 1);
  fx = r.catch_up();
  auto lost = lost_of(fx);
  BOOST_REQUIRE_EQUAL(lost.size(), 1u);
  BOOST_TEST(lost[0].row == a.row);
  BOOST_TEST(lost[0].token == a.token);
  auto v = r.add_worker(1, true);
  offer = offers_of(r.report(v, 1, 0)).at(0);
  r.gone(v);
  r.commit_offer_ended(offer.serial);
  BOOST_TEST(lost_of(r.catch_up()).empty());
}

// The writer hands the job over before the dispatcher reads the feed: a
// return reported first is kept for the offer's claim and frees its slot.
BOOST_AUTO_TEST_CASE(a_return_that_overtakes_the_offers_feed_frees_the_slot_at_it) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  storage::attempt_ref a{1, 7'001};
  r.report(w, 0, 1, {a});  // before the writer even committed
  auto committed = r.commit_offered(offer, 1);
  BOOST_TEST(committed.token == a.token);
  r.catch_up();
  BOOST_TEST(running_slots(r) == 0);
  // Returns kept for an offer that comes back unused are dropped.
  offer = offers_of(r.report(w, 1, 1)).at(0);
  r.report(w, 1, 1, {{99, 1}});
  r.commit_offer_ended(offer.serial);
  BOOST_TEST(offers_of(r.catch_up()).size() == 1u);  // it may have jobs again
}

// The writer's use of an offer that did not commit comes back as a failed
// write: the offer ends. The failure was the submit's, so claims go on.
BOOST_AUTO_TEST_CASE(an_offer_whose_commit_failed_ends_and_claims_go_on) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  commit_feed f;
  f.failed.push_back({w, {}, {}, {}, status{error::internal, "disk I/O error"}, offer.serial});
  r.committed.push_back(std::move(f));
  auto fx = r.catch_up();
  auto again = offers_of(fx);
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].serial != offer.serial);
  r.commit_offer_ended(offer.serial);  // a stale answer changes nothing
  BOOST_TEST(withdrawn_of(r.catch_up()).empty());
  r.submit(1);
  fx = r.catch_up();
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{again[0].serial});
  r.commit_offer_ended(again[0].serial);
  BOOST_TEST(claims_of(r.catch_up()).size() == 1u);
}

// A return of an attempt that ended already, reported while an offer is
// out, is kept only until the offer comes back: the worker gets jobs after.
BOOST_AUTO_TEST_CASE(a_stale_return_reported_while_an_offer_is_out_blocks_nothing_after_it) {
  rig r{{}, true};
  auto w = r.add_worker(2);
  auto offer = offers_of(r.report(w, 2, 0)).at(0);
  r.report(w, 2, 0, {{99, 1}});
  r.commit_offered(offer, 1);
  auto again = offers_of(r.catch_up());
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].room == 1);
}

// A waiting job that arrives due sooner than the offer knows goes first:
// the offer goes back, and the next one is bounded by it.
BOOST_AUTO_TEST_CASE(an_offer_goes_back_when_a_job_due_sooner_arrives) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  auto offer = offers_of(r.report(w, 1, 0)).at(0);
  BOOST_TEST(offer.valid_until == storage::never_ms);
  auto k = r.submit(1);
  k.run_at = t0 + 5'000;
  r.committed.back().added.back() = k;
  auto fx = r.catch_up();
  BOOST_TEST(withdrawn_of(fx) == std::vector<uint64_t>{offer.serial});
  r.commit_offer_ended(offer.serial);
  auto again = offers_of(r.catch_up());
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].valid_until == t0 + 5'000);
}

// The writer checks that no feed after the ones the offer was made with
// made a job ready: the offer says which it had applied.
BOOST_AUTO_TEST_CASE(an_offer_names_the_last_feed_it_was_made_with) {
  rig r{{}, true};
  auto w = r.add_worker(1);
  r.submit(1, "other");
  r.committed.back().seq = 41;
  commit_feed idle;
  idle.seq = 42;
  r.committed.push_back(idle);
  auto offer = offers_of(r.report(w, 1, 0));
  BOOST_TEST(offer.empty());  // job 1 is ready (for nobody): no offer
  commit_feed gone;
  gone.cancelled.push_back(r.jobs.at(1));
  gone.seq = 43;
  r.committed.push_back(gone);
  offer = offers_of(r.catch_up());
  BOOST_REQUIRE_EQUAL(offer.size(), 1u);
  BOOST_TEST(offer[0].fed_through == 43u);
}

// A job that yielded for a preemptor resumes ahead of its priority when
// the preemptor ends, which the writer can't see: no offer meanwhile.
BOOST_AUTO_TEST_CASE(no_offer_while_a_yielded_job_waits_for_its_preemptor) {
  scheduling_options s;
  s.preemption = preemption_options{10};
  rig r{s, true};
  r.submit(1, "t", 0);
  auto w = r.add_worker(1);
  auto low = r.run_one(w);
  r.submit(2, "t", 10);
  r.catch_up();
  auto fx = r.report(w, 1, 1, {low});
  auto high = claims_of(fx).at(0);
  r.commit_end(low, attempt_outcome::yielded, job_status::pending);
  r.commit_claims(writes_of(fx).at(0));
  r.catch_up();
  BOOST_REQUIRE_EQUAL(r.metrics().preempted_waiting, 1);
  auto idle = r.add_worker(1);
  fx = r.report(idle, 1, 0);
  BOOST_TEST(offers_of(fx).empty());
  BOOST_TEST((fx.hungry == std::optional<bool>{true}));
  // The preemptor's code returns: the yielded job is claimed at once.
  fx = r.report(w, 1, 2, {high});
  auto again = claims_of(fx);
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].row == 1);
}

// -- attempts kept at open for remote workers (issue 30) ----------------------------------

namespace {

constexpr int64_t grace_ms = 20'000;

// Job `row` of `group`, found running at open under `holder`, expiring
// `expires_at` (recovery held it until the grace ends at least).
storage::running_job held_job(int64_t row, const std::string& holder, int64_t expires_at,
                              const std::string& group = {}) {
  storage::running_job r;
  r.key.row = row;
  r.key.id = storage::make_job_id(t0, 0, row);
  r.key.type = "t";
  r.key.group = group;
  r.key.run_at = r.key.added_at = r.key.ready_since = t0 - 60'000;
  r.token = 500 + row;
  r.started_at = t0 - 1'000;
  r.expires_at = expires_at;
  r.holder = holder;
  return r;
}

std::string rows_tokens(const std::vector<storage::attempt_ref>& attempts) {
  std::string out;
  for (auto& a : attempts)
    out += (out.empty() ? "" : " ") + std::to_string(a.row) + ":" + std::to_string(a.token);
  return out;
}

held_attempts held_until_grace(std::vector<storage::running_job> attempts) {
  return {std::move(attempts), t0 + grace_ms};
}

}  // namespace

// An attempt kept at open holds its slot while it waits for its worker; no
// one else is handed its job, and it is lost once its grace ends, at the
// grace's end exactly, under its own token.
BOOST_AUTO_TEST_CASE(a_held_attempt_waits_its_grace_then_is_lost_and_its_job_runs_again) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms)})};
  BOOST_TEST(r.metrics().orphaned_attempts == 1);
  BOOST_TEST(running_slots(r) == 1);
  auto w = r.add_worker(1);
  auto fx = r.report(w, 1, 0);
  BOOST_TEST(claims_of(fx).empty());  // its job is not pending
  BOOST_TEST(fx.wake_at == t0 + grace_ms);
  fx = r.tick_at(t0 + grace_ms - 1);
  BOOST_TEST(fx.writes.empty());
  fx = r.tick_at(t0 + grace_ms);
  // Lost, not expired: its expiry falls on the same ms.
  BOOST_TEST(rows_tokens(lost_of(fx)) == "1:501");
  BOOST_TEST(sent_of<expire_batch>(fx).empty());
  BOOST_TEST(r.metrics().orphaned_attempts == 0);
  // The loss commits: its slot is free, and the job goes to the worker
  // here, which waits for work.
  r.commit_end({1, 501}, attempt_outcome::worker_lost, job_status::pending);
  fx = r.catch_up();
  BOOST_REQUIRE_EQUAL(claims_of(fx).size(), 1u);
  BOOST_TEST(claims_of(fx)[0].row == 1);
  BOOST_TEST(writes_of(fx)[0].worker_id == w);
  BOOST_TEST(running_slots(r) == 1);  // its pick, not the lost attempt
}

// If that loss does not commit, the attempt is left to its expiry, which is
// checked again a little later, as a failed expiry is.
BOOST_AUTO_TEST_CASE(a_held_attempt_whose_loss_fails_is_left_to_its_expiry) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms)})};
  auto fx = r.tick_at(t0 + grace_ms);
  BOOST_REQUIRE_EQUAL(lost_of(fx).size(), 1u);
  commit_feed failed;
  failed.failed.push_back({0, {}, {}, {}, status{error::busy, "locked"}});
  r.committed.push_back(std::move(failed));
  r.catch_up();
  fx = r.tick_at(t0 + grace_ms + 1'000);
  auto expiring = sent_of<expire_batch>(fx);
  BOOST_REQUIRE_EQUAL(expiring.size(), 1u);
  BOOST_TEST(expiring[0].attempts.at(0).row == 1);
  BOOST_TEST(expiring[0].attempts.at(0).token == 501);
  BOOST_TEST(lost_of(fx).empty());
}

// Kept attempts count toward their group's share, and are neither
// preempted nor expired before their grace ends; one that ends otherwise
// meanwhile (expired, cancelled) waits no more and is never lost.
BOOST_AUTO_TEST_CASE(a_held_attempt_that_ends_meanwhile_is_not_lost_later) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms, "a"),
                          held_job(2, "node/8", t0 + grace_ms + 5'000, "a")})};
  bool found = false;
  for (auto& g : r.metrics().groups)
    if (g.group == "a") {
      found = true;
      BOOST_TEST(g.running_slots == 2);
    }
  BOOST_TEST(found);
  r.commit_end({1, 501}, attempt_outcome::cancelled, job_status::cancelled);
  r.catch_up();
  BOOST_TEST(r.metrics().orphaned_attempts == 1);
  auto fx = r.tick_at(t0 + grace_ms);
  BOOST_TEST(rows_tokens(lost_of(fx)) == "2:502");
  BOOST_TEST(fx.requests.empty());
}

// A cancel requested while an attempt waits for its worker reaches no
// worker now (there is none): it is kept for the worker's return.
BOOST_AUTO_TEST_CASE(a_cancel_of_a_held_attempt_is_kept_for_its_worker) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms)})};
  commit_feed f;
  f.cancel_requests.push_back({{1, 501}, r.jobs.at(1)});
  r.committed.push_back(std::move(f));
  auto fx = r.catch_up();
  BOOST_TEST(fx.requests.empty());
  BOOST_TEST(r.metrics().orphaned_attempts == 1);
}

// A worker that joins again gets back what it lists under its holder and
// token; what was kept for it and is not listed is lost at once, what is
// listed and not kept for it comes back stale, and the others' attempts
// wait on. Its outcome then ends the attempt as any worker's does.
BOOST_AUTO_TEST_CASE(a_worker_that_joins_again_takes_back_what_it_lists) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms),
                          held_job(2, "node/7", t0 + grace_ms),
                          held_job(3, "node/8", t0 + grace_ms)})};
  effects fx;
  auto joined = r.join_again("node/7", {{1, 501}, {9, 9}}, {}, fx);
  BOOST_TEST(rows_tokens(joined.stale) == "9:9");
  BOOST_TEST(rows_tokens(lost_of(fx)) == "2:502");
  BOOST_TEST(r.metrics().orphaned_attempts == 1);  // node/8's
  BOOST_TEST(running_slots(r) == 3);  // the lost one's until its loss commits
  r.commit_end({2, 502}, attempt_outcome::worker_lost, job_status::pending);
  r.commit_end({1, 501}, attempt_outcome::succeeded, job_status::succeeded);
  fx = r.report(joined.id, 2, 0, {{1, 501}});
  // Job 2 runs again on the worker that came back; 1 freed its slot.
  BOOST_TEST(rows_tokens(claims_of(fx)).find("2:") == 0u);
  fx = r.tick_at(t0 + grace_ms);
  BOOST_TEST(rows_tokens(lost_of(fx)) == "3:503");
}

// A listed attempt whose code returned frees its slot at once; a wrong
// token or another holder's attempt is stale, and leaves what was kept to
// be lost (its holder's code for it is gone) or to wait (another's).
BOOST_AUTO_TEST_CASE(returned_attempts_free_their_slot_and_wrong_ones_are_stale) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms),
                          held_job(2, "node/7", t0 + grace_ms),
                          held_job(3, "node/8", t0 + grace_ms)})};
  effects fx;
  auto joined = r.join_again("node/7", {{2, 999}, {3, 503}}, {{1, 501}}, fx);
  BOOST_TEST(rows_tokens(joined.stale) == "2:999 3:503");
  BOOST_TEST(rows_tokens(lost_of(fx)) == "2:502");
  BOOST_TEST(r.metrics().orphaned_attempts == 1);
  BOOST_TEST(running_slots(r) == 2);  // 1's code returned; 2 until its loss commits
  // Its outcome, sent again, ends it without freeing the slot twice.
  r.commit_end({1, 501}, attempt_outcome::succeeded, job_status::succeeded);
  r.catch_up();
  BOOST_TEST(running_slots(r) == 2);
  // A local worker keeps nothing across registrations.
  effects local;
  auto other = r.core.register_worker({"w", "h", 1, {"t"}, 1, 0, "", {{3, 503}}, {}}, r.now, local);
  BOOST_TEST(rows_tokens(other.stale) == "3:503");
  BOOST_TEST(r.metrics().orphaned_attempts == 1);
}

// A cancel requested while the attempt waited reaches its worker when it
// takes the attempt back.
BOOST_AUTO_TEST_CASE(a_cancel_kept_for_an_attempt_reaches_the_worker_that_takes_it_back) {
  rig r{held_until_grace({held_job(1, "node/7", t0 + grace_ms)})};
  commit_feed f;
  f.cancel_requests.push_back({{1, 501}, r.jobs.at(1)});
  r.committed.push_back(std::move(f));
  r.catch_up();
  effects fx;
  auto joined = r.join_again("node/7", {{1, 501}}, {}, fx);
  BOOST_REQUIRE_EQUAL(fx.requests.size(), 1u);
  BOOST_TEST(fx.requests[0].worker == joined.id);
  auto* cancel = std::get_if<cancel_attempt>(&fx.requests[0].request);
  BOOST_REQUIRE(cancel);
  BOOST_TEST(cancel->token == 501);
  BOOST_TEST(cancel->requested);
}

// A remote worker back before its old registration's loss was seen takes
// its attempts over from it: that loss then loses nothing.
BOOST_AUTO_TEST_CASE(a_worker_back_before_its_loss_was_seen_keeps_its_attempts) {
  rig r;
  auto first = r.one_job_and_worker(true);
  auto claim = r.run_one(first);
  effects fx;
  auto joined = r.join_again("node/1", {claim}, {}, fx);
  BOOST_TEST(joined.stale.empty());
  fx = r.gone(first);
  BOOST_TEST(lost_of(fx).empty());
  // The attempt is the new registration's: its outcome frees that slot.
  r.commit_end(claim, attempt_outcome::succeeded, job_status::succeeded);
  r.submit(2);
  fx = r.report(joined.id, 2, 0, {claim});
  BOOST_TEST(rows_tokens(claims_of(fx)).find("2:") == 0u);
}

// With a grace, a remote worker that goes down (its connection dropped, or
// its process died) has its running attempts held for its return, their
// expiry moved durably; back in time, it takes them back and nothing runs
// twice. Without one they are lost at once (the tests above).
BOOST_AUTO_TEST_CASE(a_remote_worker_that_went_down_has_its_attempts_held_for_its_return) {
  rig r{rig::with_grace{20'000}};
  auto w = r.one_job_and_worker(true);
  auto claim = r.run_one(w);
  auto fx = r.gone(w);
  BOOST_TEST(lost_of(fx).empty());
  auto held = sent_of<hold_batch>(fx);
  BOOST_REQUIRE_EQUAL(held.size(), 1u);
  BOOST_TEST(rows_tokens(held[0].args.attempts) == rows_tokens({claim}));
  BOOST_TEST(held[0].args.until == t0 + 20'000);
  BOOST_TEST(r.metrics().orphaned_attempts == 1);
  BOOST_TEST(running_slots(r) == 1);
  effects back;
  auto joined = r.join_again("node/1", {claim}, {}, back);
  BOOST_TEST(joined.stale.empty());
  BOOST_TEST(lost_of(back).empty());
  BOOST_TEST(r.metrics().orphaned_attempts == 0);
  fx = r.tick_at(t0 + 20'000);
  BOOST_TEST(lost_of(fx).empty());
}

// One that does not come back has them lost when the grace ends; its
// claims still at the writer when it went down are lost as they commit
// (their jobs never reached it).
BOOST_AUTO_TEST_CASE(a_remote_worker_that_stays_away_loses_its_attempts_after_the_grace) {
  rig r{rig::with_grace{20'000}};
  r.submit(1);
  r.submit(2);
  auto w = r.add_worker(2, true);
  auto first = r.report(w, 1, 0);
  auto running = r.commit_claims(writes_of(first).at(0)).at(0);
  r.catch_up();
  auto second = r.report(w, 2, 1);  // a claim on its way
  auto fx = r.gone(w);
  BOOST_TEST(rows_tokens(sent_of<hold_batch>(fx).at(0).args.attempts) == rows_tokens({running}));
  auto late = r.commit_claims(writes_of(second).at(0)).at(0);
  fx = r.catch_up();
  BOOST_TEST(rows_tokens(lost_of(fx)) == rows_tokens({late}));
  fx = r.tick_at(t0 + 20'000);
  BOOST_TEST(rows_tokens(lost_of(fx)) == rows_tokens({running}));
}

// A claim that committed before the worker went down, its feed not yet
// taken, is running: with a grace it is held with the rest, not lost as a
// claim that never reached the worker.
BOOST_AUTO_TEST_CASE(a_claim_committed_before_the_down_is_held_not_lost) {
  rig r{rig::with_grace{20'000}};
  auto w = r.one_job_and_worker(true);
  auto claim = r.commit_claims(writes_of(r.report(w, 1, 0)).at(0)).at(0);
  auto fx = r.gone(w);  // the claim's feed waits
  BOOST_TEST(lost_of(fx).empty());
  auto held = sent_of<hold_batch>(fx);
  BOOST_REQUIRE_EQUAL(held.size(), 1u);
  BOOST_TEST(rows_tokens(held[0].args.attempts) == rows_tokens({claim}));
  BOOST_TEST(lost_of(r.catch_up()).empty());
}

// A failure the code reported while it kept running parks the retry
// behind that code. With a grace, a worker that goes down keeps it parked:
// its code may run on. Back and still running it, the retry waits for
// that code to return; not back, the retry goes when the grace ends.
BOOST_AUTO_TEST_CASE(a_retry_parked_behind_an_away_workers_code_waits_for_it) {
  for (bool back : {true, false}) {
    rig r{rig::with_grace{20'000}};
    auto w = r.one_job_and_worker(true);
    auto claim = r.run_one(w);
    r.commit_end(claim, attempt_outcome::failed, job_status::pending);  // code runs on
    r.catch_up();
    auto other = r.add_worker(1);
    auto fx = r.gone(w);
    fx = r.report(other, 1, 0);
    BOOST_TEST(claims_of(fx).empty(), "a retry ran beside its code");
    if (back) {
      effects joined_fx;
      auto joined = r.join_again("node/1", {claim}, {}, joined_fx);
      BOOST_TEST(rows_tokens(joined.stale) == rows_tokens({claim}));  // its code stops
      BOOST_TEST(claims_of(joined_fx).empty());
      fx = r.report(joined.id, 2, 0, {claim});  // the code returned
    } else {
      fx = r.tick_at(t0 + 20'000);
    }
    BOOST_REQUIRE_EQUAL(claims_of(fx).size(), 1u);
    BOOST_TEST(claims_of(fx)[0].row == claim.row);
  }
}

// A remote worker that unregistered and then went down with attempts still
// running (its stop timed out) is not coming back: they are lost at once.
BOOST_AUTO_TEST_CASE(a_remote_worker_that_left_and_went_down_has_nothing_held) {
  rig r{rig::with_grace{20'000}};
  auto w = r.one_job_and_worker(true);
  auto claim = r.run_one(w);
  effects fx;
  BOOST_TEST((r.core.unregister_worker(w, r.now, fx) == dispatch_core::leaving::left));
  fx = r.gone(w);
  BOOST_TEST(rows_tokens(lost_of(fx)) == rows_tokens({claim}));
  BOOST_TEST(sent_of<hold_batch>(fx).empty());
  BOOST_TEST(r.metrics().orphaned_attempts == 0);
}

// A preemption asked of an attempt whose worker went away is asked again
// when the worker takes the attempt back: the first ask may have been lost.
BOOST_AUTO_TEST_CASE(a_preemption_asked_before_a_drop_is_asked_again_on_return) {
  scheduling_options s;
  s.preemption = preemption_options{5};
  rig r{rig::with_grace{20'000, s}};
  auto w = r.one_job_and_worker(true);
  auto claim = r.run_one(w);
  r.submit(2, "t", 9);
  auto fx = r.catch_up();
  BOOST_REQUIRE_EQUAL(fx.requests.size(), 1u);
  BOOST_REQUIRE(std::get_if<preempt_attempt>(&fx.requests[0].request));
  r.gone(w);
  effects back;
  auto joined = r.join_again("node/1", {claim}, {}, back);
  BOOST_REQUIRE_EQUAL(back.requests.size(), 1u);
  BOOST_TEST(back.requests[0].worker == joined.id);
  auto* again = std::get_if<preempt_attempt>(&back.requests[0].request);
  BOOST_REQUIRE(again);
  BOOST_TEST(again->token == claim.token);
}
