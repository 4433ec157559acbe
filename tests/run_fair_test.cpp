// Fair scheduling through real workers: shares, minimums, caps, lending,
// aging under a stream of higher-priority work, urgent bypass, rate limits,
// pauses, events and metrics. Running slots are counted in the job code.
#define BOOST_TEST_MODULE run_fair
#include <boost/test/unit_test.hpp>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// Holds job code per group: a test lets one job of a chosen group finish.
class group_gate {
 public:
  bool pass(const std::string& group) {
    std::unique_lock<std::mutex> guard{mtx_};
    ++waiting_[group];
    ++arrived_;
    test_cv_.notify_all();
    bool ok = jobs_cv_.wait_for(guard, hang_guard,
                                [&] { return open_ || permits_[group] > 0; });
    --waiting_[group];
    if (ok && !open_)
      --permits_[group];
    return ok;
  }
  void release(const std::string& group) {
    std::lock_guard<std::mutex> guard{mtx_};
    ++permits_[group];
    jobs_cv_.notify_all();
  }
  void open() {
    std::lock_guard<std::mutex> guard{mtx_};
    open_ = true;
    jobs_cv_.notify_all();
  }
  /// Waits until `n` jobs arrived in all and `blocked` of them wait.
  bool wait_for(int arrived, int blocked) {
    std::unique_lock<std::mutex> guard{mtx_};
    return test_cv_.wait_for(guard, hang_guard, [&] {
      int w = 0;
      for (auto& [g, n] : waiting_)
        w += n;
      return arrived_ >= arrived && w >= blocked;
    });
  }
  int arrived() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return arrived_;
  }

 private:
  mutable std::mutex mtx_;
  std::condition_variable jobs_cv_;
  std::condition_variable test_cv_;
  std::map<std::string, int> waiting_;
  std::map<std::string, int> permits_;
  int arrived_ = 0;
  bool open_ = false;
};

// Counts running jobs per group, in the job code, while they wait.
struct group_probe {
  std::mutex mtx;
  std::map<std::string, int> running;
  group_gate hold;

  job_handler handler() {
    return [this](job_context& ctx) {
      {
        std::lock_guard<std::mutex> guard{mtx};
        ++running[ctx.group()];
      }
      hold.pass(ctx.group());
      std::lock_guard<std::mutex> guard{mtx};
      --running[ctx.group()];
    };
  }

  std::map<std::string, int> now_running() {
    std::lock_guard<std::mutex> guard{mtx};
    return running;
  }
};

struct fair_fixture : queue_fixture {
  group_probe probe;

  void open_with(scheduling_options s) {
    options o;
    o.scheduling = std::move(s);
    reopen(o);
  }

  void submit_group(const std::string& group, int n, int32_t priority = 0) {
    std::vector<job> jobs;
    for (int i = 0; i < n; ++i) {
      auto b = job_of("t").priority(priority);
      if (!group.empty())  // "" is the group of jobs without one
        b.group(group);
      jobs.push_back(*b.build());
    }
    BOOST_REQUIRE(q->submit_batch(jobs).has_value());
  }

  worker start_probe(int32_t capacity) {
    worker_options w;
    w.max_concurrency = capacity;
    w.runners["t"] = probe.handler();
    return start(std::move(w));
  }

  // Lets one running job of `group` finish and waits until its slot is
  // refilled (by whichever group the policy chooses).
  void finish_one(const std::string& group, int capacity) {
    auto next = probe.hold.arrived() + 1;
    probe.hold.release(group);
    BOOST_REQUIRE(probe.hold.wait_for(next, capacity));
  }

  void wait_full(int capacity) { BOOST_REQUIRE(probe.hold.wait_for(capacity, capacity)); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(shares, fair_fixture)

BOOST_AUTO_TEST_CASE(weights_3_to_1_give_12_and_4_running_slots_under_saturation) {
  scheduling_options s;
  s.groups["a"].weight = 3;
  s.groups["b"].weight = 1;
  open_with(s);
  submit_group("a", 60);
  submit_group("b", 60);
  auto w = start_probe(16);
  wait_full(16);
  auto r = probe.now_running();
  BOOST_TEST(r["a"] == 12);
  BOOST_TEST(r["b"] == 4);
  // It holds as jobs come and go.
  for (int i = 0; i < 20; ++i) {
    finish_one(i % 2 ? "a" : "b", 16);
    auto again = probe.now_running();
    BOOST_TEST(again["a"] == 12);
    BOOST_TEST(again["b"] == 4);
  }
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(minimum_slots_hold) {
  scheduling_options s;
  s.groups["big"].weight = 100;
  s.groups["small"].min_slots = 3;
  open_with(s);
  submit_group("big", 40);
  submit_group("small", 40);
  auto w = start_probe(8);
  wait_full(8);
  auto r = probe.now_running();
  BOOST_TEST(r["small"] == 3);
  BOOST_TEST(r["big"] == 5);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(caps_hold_and_the_rest_goes_to_others) {
  scheduling_options s;
  s.groups["a"].weight = 3;
  s.groups["a"].max_running = 5;
  open_with(s);
  submit_group("a", 40);
  submit_group("b", 40);
  auto w = start_probe(16);
  wait_full(16);
  auto r = probe.now_running();
  BOOST_TEST(r["a"] == 5);
  BOOST_TEST(r["b"] == 11);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(an_idle_groups_share_is_lent_and_taken_back) {
  open_with({});
  submit_group("a", 40);
  auto w = start_probe(4);
  wait_full(4);
  BOOST_TEST(probe.now_running()["a"] == 4);  // b has nothing: a uses its share
  submit_group("b", 40);
  // Each slot a frees goes to b until b has its half.
  finish_one("a", 4);
  BOOST_TEST(probe.now_running()["b"] == 1);
  finish_one("a", 4);
  BOOST_TEST(probe.now_running()["b"] == 2);
  finish_one("a", 4);
  auto r = probe.now_running();
  BOOST_TEST(r["a"] == 2);
  BOOST_TEST(r["b"] == 2);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(a_rate_limited_groups_slots_are_lent) {
  scheduling_options s;
  s.group_rate_limits["a"] = rate_limit{1.0, 1};
  open_with(s);
  submit_group("a", 20);
  submit_group("b", 20);
  auto w = start_probe(4);
  wait_full(4);
  auto r = probe.now_running();
  BOOST_TEST(r["a"] == 1);  // one token while the clock stands still
  BOOST_TEST(r["b"] == 3);  // a's other slot is lent to b
  advance(1'000ms);         // a earns a token
  finish_one("b", 4);       // a b job ends; a is below its share
  r = probe.now_running();
  BOOST_TEST(r["a"] == 2);
  BOOST_TEST(r["b"] == 2);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(a_paused_group_releases_its_share_and_gets_it_back) {
  open_with({});
  submit_group("a", 20);
  submit_group("b", 20);
  BOOST_REQUIRE(q->pause_group("a").ok());
  auto w = start_probe(4);
  wait_full(4);
  auto r = probe.now_running();
  BOOST_TEST(r["a"] == 0);
  BOOST_TEST(r["b"] == 4);
  BOOST_REQUIRE(q->resume_group("a").ok());
  finish_one("b", 4);
  finish_one("b", 4);
  r = probe.now_running();
  BOOST_TEST(r["a"] == 2);
  BOOST_TEST(r["b"] == 2);
  auto changes = log->of(event_kind::group_allocation_changed);
  bool b_got_all = false;
  bool a_back = false;
  for (auto& e : changes) {
    b_got_all = b_got_all || (e.group == "b" && e.new_slots == 4);
    a_back = a_back || (e.group == "a" && e.new_slots == 2);
  }
  BOOST_TEST(b_got_all);
  BOOST_TEST(a_back);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(a_timed_pause_of_a_type_ends_by_itself) {
  open_with({});
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(q->pause_type("t", 5'000ms).ok());
  worker_options w;
  w.runners["t"] = [](job_context&) {};
  auto wk = start(std::move(w));
  advance(4'999ms);
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(log->of(event_kind::started, &id).at(0).at_ms == t0 + 5'000);
}

BOOST_AUTO_TEST_CASE(changing_a_weight_rebalances_at_once) {
  open_with({});
  submit_group("a", 40);
  submit_group("b", 40);
  auto w = start_probe(8);
  wait_full(8);
  BOOST_TEST(probe.now_running()["a"] == 4);
  BOOST_REQUIRE(q->set_group_weight("a", 3).ok());
  finish_one("b", 8);
  finish_one("b", 8);
  auto r = probe.now_running();
  BOOST_TEST(r["a"] == 6);
  BOOST_TEST(r["b"] == 2);
  bool saw = false;
  for (auto& e : log->of(event_kind::group_allocation_changed))
    saw = saw || (e.reason == allocation_reason::weight_change && e.group == "a"
                  && e.previous_slots == 4 && e.new_slots == 6);
  BOOST_TEST(saw);
  BOOST_TEST(q->set_group_weight("a", 0).field() == "weight");
  BOOST_REQUIRE(q->reset_group_weights().ok());
  probe.hold.open();
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(aging, fair_fixture)

BOOST_AUTO_TEST_CASE(a_low_job_starts_within_max_wait_under_a_stream_of_high_jobs) {
  scheduling_options s;
  aging_options a;
  a.grace_period = 10'000ms;
  a.interval = 1'000ms;
  a.max_effective_priority = 8;
  s.aging = a;
  open_with(s);
  auto low = submit(*job_of("t").priority(0).build());
  submit_group("", 2, 5);
  auto bound = q->max_wait(0);
  BOOST_REQUIRE(bound.has_value());
  BOOST_TEST(bound->count() == 18'000);
  auto w = start_probe(1);
  // Every second a HIGH job finishes and a new one arrives: without aging,
  // the LOW job would never run.
  for (int second = 0; second < 30; ++second) {
    wait_full(1);
    if (!log->of(event_kind::started, &low).empty())
      break;
    submit_group("", 1, 5);
    advance(1'000ms);
    finish_one("", 1);
  }
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, low));
  auto started = log->of(event_kind::started, &low).at(0);
  BOOST_TEST(started.at_ms - t0 <= bound->count());
  // After 15 s it has aged to 5, equal to the HIGH jobs; the tie goes to the
  // earlier run_at: the LOW job's.
  BOOST_TEST(started.at_ms == t0 + 15'000);

  BOOST_TEST(started.effective_priority == 5);
  BOOST_TEST(started.base_priority == 0);
  auto aged = log->of(event_kind::job_aged, &low);
  BOOST_REQUIRE(aged.size() == 1u);
  BOOST_TEST(aged[0].effective_priority == 5);
  BOOST_TEST(aged[0].wait_ms == 15'000);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(an_urgent_job_borrows_a_slot_from_a_group_over_its_share) {
  scheduling_options s;
  aging_options a;
  a.grace_period = 10'000ms;
  a.interval = 1'000ms;
  a.max_effective_priority = 10;
  a.urgent_threshold = 8;
  s.aging = a;
  s.groups["big"].weight = 1'000;  // "small" gets no share of 2 slots
  open_with(s);
  submit_group("big", 40, 5);
  auto starved = submit(*job_of("t").group("small").build());
  auto w = start_probe(2);
  int64_t urgent_at = t0 + 18'000;
  for (int second = 0; second < 30; ++second) {
    wait_full(2);
    if (!log->of(event_kind::started, &starved).empty())
      break;
    advance(1'000ms);
    finish_one("big", 2);
  }
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, starved));
  auto started = log->of(event_kind::started, &starved).at(0);
  BOOST_TEST(started.at_ms == urgent_at);  // the first free slot once urgent
  BOOST_TEST(started.effective_priority == 8);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(job_info_shows_effective_beside_base_priority) {
  scheduling_options s;
  aging_options a;
  a.grace_period = 0ms;
  a.interval = 1'000ms;
  s.aging = a;
  open_with(s);
  auto id = submit(*job_of("t").priority(2).group("g").build());
  BOOST_TEST(info(id).effective_priority == 2);
  BOOST_TEST(info(id).ready_since_ms == t0);
  advance(3'000ms);
  BOOST_TEST(info(id).effective_priority == 5);
  // A paused group's jobs do not age.
  BOOST_REQUIRE(q->pause_group("g").ok());
  advance(10'000ms);
  BOOST_TEST(info(id).effective_priority == 5);
  BOOST_REQUIRE(q->resume_group("g").ok());
  advance(2'000ms);
  BOOST_TEST(info(id).effective_priority == 7);
  worker_options w;
  w.runners["t"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(info(id).priority == 2);  // aging is never written back
  BOOST_TEST(info(id).effective_priority == 2);  // only pending jobs age
  BOOST_TEST(log->of(event_kind::started, &id).at(0).effective_priority == 7);
  BOOST_TEST(log->of(event_kind::started, &id).at(0).base_priority == 2);
}

BOOST_AUTO_TEST_CASE(jobs_by_name_shows_effective_priorities) {
  scheduling_options s;
  aging_options a;
  a.grace_period = 1'000ms;
  a.interval = 1'000ms;
  s.aging = a;
  open_with(s);
  submit(*job_of("t").name("n").priority(1).build());
  advance(2'500ms);
  submit(*job_of("t").name("n").priority(1).build());
  auto jobs = q->jobs_by_name("n");
  BOOST_REQUIRE(jobs.has_value());
  BOOST_REQUIRE(jobs->size() == 2u);
  BOOST_TEST((*jobs)[0].effective_priority == 2);  // 1.5 s past grace: one step
  BOOST_TEST((*jobs)[1].effective_priority == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(observability, fair_fixture)

BOOST_AUTO_TEST_CASE(metrics_report_allocation_utilisation_waits_and_counts) {
  scheduling_options s;
  s.groups["a"].weight = 3;
  open_with(s);
  submit_group("a", 10);
  submit_group("b", 10);
  advance(50ms);  // they waited 50 ms before a worker came
  auto w = start_probe(4);
  wait_full(4);
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->capacity == 4);
  std::map<std::string, group_metrics> groups;
  for (auto& g : m->groups)
    groups[g.group] = g;
  BOOST_TEST(groups["a"].allocated_slots == 3);
  BOOST_TEST(groups["a"].share == 3.0);
  BOOST_TEST(groups["a"].running_slots == 3);
  BOOST_TEST(groups["a"].utilization == 1.0);
  BOOST_TEST(groups["b"].allocated_slots == 1);
  BOOST_TEST(groups["b"].ready_jobs == 9);
  BOOST_TEST(m->queue_wait_total == 4);
  BOOST_TEST(m->queue_wait_sum_ms == 4 * 50);
  BOOST_TEST(m->effective_priorities[0] == 16);
  BOOST_TEST(m->by_status[job_status::running] == 4);
  BOOST_TEST(m->by_type["t"][job_status::pending] == 16);
  probe.hold.open();
}

BOOST_AUTO_TEST_CASE(bad_scheduling_options_name_the_field) {
  scheduling_options s;
  s.groups["x"].weight = 0;
  options o;
  o.scheduling = s;
  auto r = queue::open(dir.file("bad.db"), o);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().field() == "scheduling.groups[x].weight");
  options o2;
  aging_options a;
  a.interval = 0ms;
  o2.scheduling.aging = a;
  BOOST_TEST(queue::open(dir.file("bad.db"), o2).error().field() == "scheduling.aging.interval");
  options o3;
  o3.scheduling.group_rate_limits["g"] = rate_limit{0, 1};
  BOOST_TEST(queue::open(dir.file("bad.db"), o3).error().field()
             == "scheduling.group_rate_limits[g].per_second");
  options o4;
  o4.scheduling.type_max_running["t"] = 0;
  BOOST_TEST(queue::open(dir.file("bad.db"), o4).error().field()
             == "scheduling.type_max_running[t]");
  BOOST_TEST(q->pause_group("g", 0ms).field() == "duration");
  BOOST_TEST(q->set_group_weight("g", 0).field() == "weight");
}

BOOST_AUTO_TEST_CASE(every_scheduling_field_has_its_bad_value_named) {
  struct bad {
    const char* field;
    std::function<void(scheduling_options&)> set;
  };
  const bad cases[] = {
    {"scheduling.aging.grace_period",
     [](scheduling_options& s) { s.aging.emplace().grace_period = -1ms; }},
    {"scheduling.default_group_weight", [](scheduling_options& s) { s.default_group_weight = 0; }},
    {"scheduling.default_group_weight",
     [](scheduling_options& s) { s.default_group_weight = max_weight + 1; }},
    {"scheduling.groups[x].weight",
     [](scheduling_options& s) { s.groups["x"].weight = max_weight + 1; }},
    {"scheduling.groups[x].min_slots", [](scheduling_options& s) { s.groups["x"].min_slots = -1; }},
    {"scheduling.groups[x].max_running",
     [](scheduling_options& s) { s.groups["x"].max_running = 0; }},
    {"scheduling.group_rate_limits[g].burst",
     [](scheduling_options& s) { s.group_rate_limits["g"] = rate_limit{1, 0}; }},
    {"scheduling.type_rate_limits[t].per_second",
     [](scheduling_options& s) { s.type_rate_limits["t"] = rate_limit{-1, 1}; }},
    {"scheduling.type_rate_limits[t].burst",
     [](scheduling_options& s) { s.type_rate_limits["t"] = rate_limit{1, 0}; }},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.field) {
      options o;
      c.set(o.scheduling);
      auto r = queue::open(dir.file("bad.db"), o);
      BOOST_REQUIRE(!r.has_value());
      BOOST_TEST(r.error().code() == error::invalid_argument);
      BOOST_TEST(r.error().field() == c.field);
    }
  }
}

BOOST_AUTO_TEST_CASE(scheduling_calls_refuse_names_longer_than_a_job_may_have) {
  const std::string longest(max_type_bytes, 'n');
  const std::string too_long(max_type_bytes + 1, 'n');
  BOOST_TEST(q->set_group_weight(too_long, 2).field() == "group");
  BOOST_TEST(q->set_group_weight("g", max_weight + 1).field() == "weight");
  BOOST_TEST(q->pause_group(too_long).field() == "group");
  BOOST_TEST(q->resume_group(too_long).field() == "group");
  BOOST_TEST(q->pause_type(too_long).field() == "type");
  BOOST_TEST(q->resume_type(too_long).field() == "type");
  BOOST_TEST(q->set_group_weight(longest, max_weight).ok());
  BOOST_TEST(q->pause_type(longest).ok());
  BOOST_TEST(q->resume_type(longest).ok());
  // "" is the group of jobs without one, so it may be paused.
  BOOST_TEST(q->pause_group("").ok());
  BOOST_TEST(q->resume_group("").ok());
}

BOOST_AUTO_TEST_SUITE_END()
