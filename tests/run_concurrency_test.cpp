// Every job handed to a worker runs at once: counted by the code that is
// actually executing, not by the worker's counters. Covers the job runner on
// its own and real workers, fresh and with idle threads left over.
#define BOOST_TEST_MODULE run_concurrency
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "ergon/actors/worker.hpp"
#include "run/job_runner.hpp"
#include "run/running_attempt.hpp"
#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;

BOOST_AUTO_TEST_SUITE(job_runner_threads)

std::shared_ptr<actors::job_runner> make_runner(int32_t max_weight) {
  return std::make_shared<actors::job_runner>(max_weight, [] {},
                                              std::make_shared<actors::worker_counters>());
}

int64_t next_token = 1;

// Queues an attempt of weight `w` whose code is `run`.
void add(actors::job_runner& r, std::function<void()> run, int32_t w = 1) {
  actors::job_assignment a;
  a.row = a.token = next_token++;
  a.weight = w;
  auto attempt = std::make_shared<actors::running_attempt>(a, caf::actor{},
                                                           r.shared_from_this(),
                                                           std::make_shared<manual_clock>());
  r.add(std::move(attempt), [run = std::move(run)](job_context&) {
    run();
    return std::string{};
  });
}

// Adds `k` attempts that block until released; true if all `k` are executing
// at the same time before the hang guard.
bool all_run_at_once(actors::job_runner& runner, int k) {
  // Shared with the tasks, which may still be unwinding when this returns.
  struct state {
    gate g;
    std::mutex mtx;
    std::condition_variable cv;
    int done = 0;
  };
  auto s = std::make_shared<state>();
  for (int i = 0; i < k; ++i)
    add(runner, [s] {
      s->g.pass();
      std::lock_guard<std::mutex> guard{s->mtx};
      ++s->done;
      s->cv.notify_all();
    });
  bool ok = s->g.wait_for_waiting(k);
  s->g.open();
  std::unique_lock<std::mutex> guard{s->mtx};
  return s->cv.wait_for(guard, hang_guard, [&] { return s->done == k; }) && ok;
}

BOOST_AUTO_TEST_CASE(a_batch_of_any_size_up_to_the_limit_runs_at_once) {
  constexpr int max = 6;
  for (int warm = 0; warm <= max; ++warm)
    for (int k = 1; k <= max; ++k) {
      auto runner = make_runner(max);
      // `warm` threads ran a task and now sit idle.
      if (warm > 0)
        BOOST_REQUIRE(all_run_at_once(*runner, warm));
      BOOST_TEST(all_run_at_once(*runner, k), "warm " << warm << ", batch " << k);
      runner->shut_down();
    }
}

BOOST_AUTO_TEST_CASE(jobs_beyond_the_limit_wait_and_a_freed_thread_takes_the_next) {
  auto g = std::make_shared<gate>();
  auto runner = make_runner(2);
  for (int i = 0; i < 3; ++i)
    add(*runner, [g] { g->pass(); });
  BOOST_REQUIRE(g->wait_for_waiting(2));
  BOOST_TEST(g->waiting() == 2);
  BOOST_TEST(runner->held_weight() == 3);
  g->release(1);
  // The freed thread takes the third job.
  BOOST_TEST(g->wait_for_arrivals(3));
  g->open();
  runner->shut_down();
}

BOOST_AUTO_TEST_CASE(a_resize_starts_waiting_jobs_at_once_and_a_lower_limit_holds_new_ones_back) {
  auto g = std::make_shared<gate>();
  auto counters = std::make_shared<actors::worker_counters>();
  auto runner = std::make_shared<actors::job_runner>(1, [] {}, counters);
  for (int i = 0; i < 3; ++i)
    add(*runner, [g] { g->pass(); });
  BOOST_REQUIRE(g->wait_for_waiting(1));
  runner->resize(3);  // the two waiting jobs start without another add()
  BOOST_REQUIRE(g->wait_for_waiting(3));
  runner->resize(1);
  for (int i = 0; i < 2; ++i)
    add(*runner, [g] { g->pass(); });
  BOOST_TEST(g->waiting() == 3);  // running ones carry on
  // Three jobs return; the fourth starts alone, and the fifth waits for it.
  g->release(3);
  BOOST_REQUIRE(g->wait_for_arrivals(4));
  BOOST_TEST(counters->running_jobs.load() == 1);
  BOOST_TEST(runner->held_weight() == 2);
  g->release(1);
  BOOST_TEST(g->wait_for_arrivals(5));
  runner->resize(0);  // at least one unit: the last job still runs
  g->open();
  runner->shut_down();
}

BOOST_AUTO_TEST_CASE(a_heavy_job_waits_until_its_weight_fits_and_lighter_ones_pass) {
  auto g = std::make_shared<gate>();
  auto runner = make_runner(3);
  std::mutex mtx;
  std::vector<int> order;
  auto job = [&, g](int n) {
    return [&, g, n] {
      {
        std::lock_guard<std::mutex> guard{mtx};
        order.push_back(n);
      }
      g->pass();
    };
  };
  add(*runner, job(1), 2);
  add(*runner, job(2), 2);  // 2 + 2 > 3: waits for the first
  add(*runner, job(3), 1);  // fits beside the first: passes the heavy one
  BOOST_REQUIRE(g->wait_for_waiting(2));
  BOOST_TEST(g->waiting() == 2);
  BOOST_TEST(runner->held_weight() == 5);
  g->release(2);
  BOOST_TEST(g->wait_for_arrivals(3));
  g->open();
  runner->shut_down();
  // 1 and 3 start at once, on two threads, in either order; the heavy one
  // starts after both.
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_REQUIRE(order.size() == 3u);
  BOOST_TEST(order[2] == 2);
  BOOST_TEST((std::set<int>{order[0], order[1]} == std::set<int>{1, 3}));
}

// The worker actor's side of the outbox: wait for a poke, take everything,
// re-arm; the poke comes once per arming, however many entries arrive.
// A runner whose pokes are counted, as the worker actor sees them.
struct poked_runner {
  std::mutex mtx;
  std::condition_variable cv;
  int pokes = 0;
  std::shared_ptr<actors::job_runner> runner;

  explicit poked_runner(int32_t max_weight)
      : runner(std::make_shared<actors::job_runner>(
          max_weight,
          [this] {
            std::lock_guard<std::mutex> guard{mtx};
            ++pokes;
            cv.notify_all();
          },
          std::make_shared<actors::worker_counters>())) {}

  // True once more than `seen` pokes came, before the hang guard.
  bool poked_past(int seen) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, hang_guard, [&] { return pokes > seen; });
  }
};

BOOST_AUTO_TEST_CASE(returns_and_outcomes_collect_in_the_outbox) {
  poked_runner p{4};
  auto& runner = p.runner;
  BOOST_TEST(runner->arm_poke());
  auto g = std::make_shared<gate>();
  for (int i = 0; i < 3; ++i)
    add(*runner, [g] { g->pass(); });
  BOOST_REQUIRE(g->wait_for_waiting(3));
  g->open();
  actors::job_runner::outbox box;
  int seen_pokes = 0;
  while (box.returned.size() < 3) {
    BOOST_REQUIRE(p.poked_past(seen_pokes));
    {
      std::lock_guard<std::mutex> guard{p.mtx};
      seen_pokes = p.pokes;
    }
    do {
      auto more = runner->take();
      box.returned.insert(box.returned.end(), more.returned.begin(), more.returned.end());
      box.outcomes.insert(box.outcomes.end(), more.outcomes.begin(), more.outcomes.end());
    } while (!runner->arm_poke());
  }
  BOOST_TEST(box.returned.size() == 3u);
  BOOST_TEST(box.outcomes.size() == 3u);
  for (auto& o : box.outcomes)
    BOOST_TEST((o.kind == storage::report_kind::succeeded));
  BOOST_TEST(seen_pokes <= 3);
  BOOST_TEST(runner->idle());
  runner->shut_down();
}

// A worker that holds its report for the rest of a burst: with an outcome
// already in the outbox the ordinary poke can't be armed, and the idle poke
// comes once the last attempt held returns.
BOOST_AUTO_TEST_CASE(an_idle_poke_comes_once_the_last_attempt_held_returns) {
  poked_runner p{2};
  auto& runner = p.runner;
  BOOST_TEST(!runner->arm_idle_poke());  // nothing held
  BOOST_TEST(!runner->mail_may_wait());
  BOOST_TEST(runner->arm_poke());
  auto first = std::make_shared<gate>();
  auto second = std::make_shared<gate>();
  add(*runner, [first] { first->pass(); });
  add(*runner, [second] { second->pass(); });
  BOOST_REQUIRE(first->wait_for_waiting(1));
  BOOST_REQUIRE(second->wait_for_waiting(1));
  first->open();
  BOOST_REQUIRE(p.poked_past(0));
  BOOST_TEST(runner->mail_may_wait());
  BOOST_TEST(!runner->arm_poke());      // the first outcome waits in the outbox
  BOOST_TEST(runner->arm_idle_poke());  // the second attempt still runs
  second->open();
  BOOST_REQUIRE(p.poked_past(1));
  auto box = runner->take();
  BOOST_TEST(box.outcomes.size() == 2u);
  BOOST_TEST(box.held_weight == 0);
  BOOST_TEST(!runner->mail_may_wait());
  runner->shut_down();
}

// Job code that waits for its outcome's answer (complete(), fail()) ends a
// held report at once: its attempt still runs, so the idle poke would not.
BOOST_AUTO_TEST_CASE(an_outcome_whose_code_waits_for_its_answer_ends_a_hold) {
  poked_runner p{2};
  auto& runner = p.runner;
  auto g = std::make_shared<gate>();
  add(*runner, [g] { g->pass(); });
  BOOST_REQUIRE(g->wait_for_waiting(1));
  runner->report({1, 1, storage::report_kind::succeeded, ""}, std::nullopt);
  BOOST_TEST(runner->mail_may_wait());  // nobody waits for it
  BOOST_TEST(runner->arm_idle_poke());
  runner->report({2, 2, storage::report_kind::succeeded, ""},
                 actors::reply_to<status>::calling([](status) {}));
  BOOST_REQUIRE(p.poked_past(0));
  BOOST_TEST(!runner->mail_may_wait());
  auto box = runner->take();
  BOOST_TEST(box.outcomes.size() == 2u);
  g->open();
  runner->shut_down();
}

// The room a worker reports comes from the outbox's held weight: an attempt
// whose weight is free must be in that outbox's `returned`, or the
// dispatcher fills its slot while still counting it to its group.
BOOST_AUTO_TEST_CASE(weight_is_free_only_together_with_its_return) {
  constexpr int jobs = 3'000;
  auto runner = make_runner(8);
  std::map<int64_t, int32_t> weight_of;  // by token
  int32_t added = 0;
  for (int i = 0; i < jobs; ++i) {
    int32_t w = 1 + i % 3;
    weight_of[next_token] = w;
    added += w;
    add(*runner, [] {}, w);
  }
  int32_t returned = 0;
  size_t seen = 0;
  auto deadline = std::chrono::steady_clock::now() + hang_guard;
  while (seen < static_cast<size_t>(jobs) && std::chrono::steady_clock::now() < deadline) {
    auto box = runner->take();
    for (auto& r : box.returned)
      returned += weight_of.at(r.token);
    seen += box.returned.size();
    BOOST_REQUIRE_EQUAL(box.held_weight + returned, added);
  }
  BOOST_TEST(seen == static_cast<size_t>(jobs));
  runner->shut_down();
}

BOOST_AUTO_TEST_CASE(unstarted_attempts_can_be_taken_back) {
  auto g = std::make_shared<gate>();
  auto runner = make_runner(1);
  add(*runner, [g] { g->pass(); });
  add(*runner, [g] { g->pass(); });
  add(*runner, [g] { g->pass(); });
  BOOST_REQUIRE(g->wait_for_waiting(1));
  auto waiting = runner->take_waiting();
  BOOST_TEST(waiting.size() == 2u);
  BOOST_TEST(runner->held_weight() == 1);
  g->open();
  runner->shut_down();
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(workers)

constexpr int max_slots = 4;

// A fresh queue with one worker of `max_slots` whose jobs block on a gate.
struct blocking_worker {
  queue_fixture f;
  gate g;
  worker wk = f.start([this] {
    worker_options w;
    w.max_concurrency = max_slots;
    w.runners["block"] = [this](job_context&) { g.pass(); };
    return w;
  }());
  int finished = 0;

  // Submits `k` blocking jobs in one batch and checks that the code of all
  // `k` is executing at once.
  void check_batch(int k) {
    std::vector<job> jobs;
    for (int i = 0; i < k; ++i)
      jobs.push_back(*job_of("block").build());
    auto ids = f.q->submit_batch(std::move(jobs));
    BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
    BOOST_TEST(g.wait_for_waiting(k), "batch of " << k);
    BOOST_TEST(g.waiting() == k);
    g.release(k);
    finished += k;
    BOOST_REQUIRE(f.log->wait_for(event_kind::succeeded, static_cast<size_t>(finished)));
  }
};

BOOST_AUTO_TEST_CASE(every_job_of_a_batch_runs_in_a_fresh_worker) {
  for (int k = 1; k <= max_slots; ++k)
    blocking_worker{}.check_batch(k);
}

BOOST_AUTO_TEST_CASE(every_job_of_a_batch_runs_in_a_warmed_up_worker) {
  // The reported case: one job runs to the end, leaving one idle thread;
  // then a batch arrives.
  for (int k = 1; k <= max_slots; ++k) {
    blocking_worker b;
    b.check_batch(1);
    b.check_batch(k);
    // And again with up to `k` idle threads.
    b.check_batch(max_slots);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(too_heavy_jobs, queue_fixture)

BOOST_AUTO_TEST_CASE(a_job_heavier_than_every_worker_is_visible_and_runs_once_one_fits) {
  worker_options small;
  small.max_concurrency = 4;
  small.runners["work"] = [](job_context&) {};
  auto w4 = start(small);
  auto heavy = submit(*job_of("work").weight(8).build());
  BOOST_REQUIRE(log->wait_for(event_kind::job_too_heavy, 1, heavy));
  auto ev = log->of(event_kind::job_too_heavy, &heavy).at(0);
  BOOST_TEST(ev.type == "work");
  BOOST_TEST(ev.message == "weight 8 is more than any registered worker of type 'work' takes (max 4)");
  BOOST_TEST(info(heavy).too_heavy);
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->too_heavy_jobs == 1);
  // Lighter jobs pass it by.
  auto light = submit(*job_of("work").weight(4).build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, light));
  BOOST_TEST(info(heavy).status == job_status::pending);
  // A worker that can take it arrives.
  worker_options big = small;
  big.max_concurrency = 8;
  auto w8 = start(big);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, heavy));
  BOOST_TEST(!info(heavy).too_heavy);
  BOOST_TEST(q->metrics()->too_heavy_jobs == 0);
}

BOOST_AUTO_TEST_CASE(a_job_becomes_too_heavy_when_the_largest_worker_stops) {
  BOOST_REQUIRE(q->pause_type("work").ok());
  auto job6 = submit(*job_of("work").weight(6).build());
  BOOST_TEST(!info(job6).too_heavy);  // no worker at all is not "too heavy"
  // Workers register asynchronously: wait until the dispatcher counts each,
  // so the 4-slot one never stands alone.
  auto registered = [&](int32_t capacity) {
    auto until = std::chrono::steady_clock::now() + hang_guard;
    for (auto m = q->metrics(); m && m->capacity != capacity; m = q->metrics())
      if (std::chrono::steady_clock::now() > until)
        return false;
    return true;
  };
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  w.max_concurrency = 8;
  auto w8 = start(w);
  BOOST_REQUIRE(registered(8));
  w.max_concurrency = 4;
  auto w4 = start(w);
  BOOST_REQUIRE(registered(12));
  BOOST_TEST(!info(job6).too_heavy);
  BOOST_REQUIRE(w8.stop().ok());
  BOOST_REQUIRE(log->wait_for(event_kind::job_too_heavy, 1, job6));
  BOOST_TEST(info(job6).too_heavy);
  BOOST_TEST(log->of(event_kind::job_too_heavy).size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// queue::set_worker: every worker of a name takes the concurrency a
// run-time control sets, up or down, and one that registers later too; a
// reset gives each its own back. Counted by the code that executes.
BOOST_FIXTURE_TEST_SUITE(run_time_concurrency, queue_fixture)

struct peak_counter {
  std::mutex mtx;
  int now = 0;
  int peak = 0;
  void enter() {
    std::lock_guard<std::mutex> guard{mtx};
    peak = std::max(peak, ++now);
  }
  void leave() {
    std::lock_guard<std::mutex> guard{mtx};
    --now;
  }
  // The most running at once as one of them started, since the last take.
  int take_peak() {
    std::lock_guard<std::mutex> guard{mtx};
    return std::exchange(peak, 0);
  }
};

settings_change concurrency(int32_t n) {
  settings_change c;
  c.max_running = n;
  return c;
}

BOOST_AUTO_TEST_CASE(a_worker_s_concurrency_changes_while_it_runs_and_a_later_worker_takes_it) {
  gate g;
  peak_counter running;
  worker_options w;
  w.name = "resizable";
  w.max_concurrency = 1;
  w.runners["block"] = [&](job_context&) {
    running.enter();
    g.pass();
    running.leave();
  };
  auto first = start(w);
  BOOST_TEST(first.stats().max_concurrency == 1);
  std::vector<job> jobs;
  for (int i = 0; i < 5; ++i)
    jobs.push_back(*job_of("block").build());
  BOOST_REQUIRE(q->submit_batch(jobs).has_value());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  // Up: two more start at once in the same worker.
  BOOST_REQUIRE(q->set_worker("resizable", concurrency(3)).ok());
  BOOST_REQUIRE(g.wait_for_waiting(3));
  BOOST_TEST(first.stats().max_concurrency == 3);
  auto listed = q->workers();
  BOOST_REQUIRE(listed.has_value());
  BOOST_REQUIRE_EQUAL(listed->size(), 1u);
  BOOST_TEST(listed->at(0).max_concurrency == 3);  // the dispatcher took it from the report
  auto controls = q->controls();
  BOOST_REQUIRE(controls.has_value());
  BOOST_REQUIRE_EQUAL(controls->size(), 1u);
  BOOST_TEST((controls->at(0).scope == control_scope::worker));
  BOOST_TEST(controls->at(0).name == "resizable");
  BOOST_TEST(controls->at(0).settings.max_running.value_or(0) == 3);
  auto changed = log->of(event_kind::control_changed);
  BOOST_REQUIRE_EQUAL(changed.size(), 1u);
  BOOST_TEST(changed[0].message == "set worker \"resizable\": max_running 3");
  // Down: the three running carry on; the last two then run one at a time.
  BOOST_REQUIRE(q->set_worker("resizable", concurrency(1)).ok());
  BOOST_TEST(running.take_peak() == 3);
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 5));
  BOOST_TEST(running.take_peak() == 1);
  BOOST_TEST(first.stats().max_concurrency == 1);
  BOOST_REQUIRE(first.stop().ok());

  // A worker of that name registering later takes the control, not its own 1.
  gate g2;
  w.runners["block"] = [&](job_context&) {
    running.enter();
    g2.pass();
    running.leave();
  };
  BOOST_REQUIRE(q->set_worker("resizable", concurrency(2)).ok());
  auto second = start(w);
  BOOST_REQUIRE(q->submit_batch(jobs).has_value());
  BOOST_REQUIRE(g2.wait_for_waiting(2));
  BOOST_TEST(second.stats().max_concurrency == 2);
  // Reset: its own max_concurrency again.
  BOOST_REQUIRE(q->reset_worker("resizable").ok());
  BOOST_TEST(q->controls()->empty());
  g2.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 10));
  BOOST_TEST(running.take_peak() == 2);
  BOOST_TEST(second.stats().max_concurrency == 1);
  BOOST_TEST(q->metrics()->control_changes == 4);
}

BOOST_AUTO_TEST_CASE(a_job_too_heavy_for_a_worker_runs_once_its_concurrency_is_raised) {
  worker_options w;
  w.name = "small";
  w.max_concurrency = 2;
  w.runners["work"] = [](job_context&) {};
  auto small = start(w);
  auto heavy = submit(*job_of("work").weight(5).build());
  BOOST_REQUIRE(log->wait_for(event_kind::job_too_heavy, 1, heavy));
  BOOST_REQUIRE(q->set_worker("small", concurrency(5)).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, heavy));
  BOOST_TEST(!info(heavy).too_heavy);
}

// Lowered below a claim's weight, a worker gives the claim back unstarted:
// it would never start there.
BOOST_AUTO_TEST_CASE(a_lowered_worker_gives_back_claims_heavier_than_its_new_max) {
  gate g;
  worker_options w;
  w.name = "shrinking";
  w.max_concurrency = 2;
  w.prefetch = 2;
  w.runners["block"] = [&](job_context&) { g.pass(); };
  auto shrinking = start(w);
  auto running = submit(*job_of("block").weight(2).build());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto waiting = submit(*job_of("block").weight(2).build());  // claimed into the window
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, waiting));
  BOOST_REQUIRE(q->set_worker("shrinking", concurrency(1)).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::released, 1, waiting));
  BOOST_TEST(info(waiting).status == job_status::pending);
  BOOST_TEST(info(waiting).tries == 0);  // the give-back spent no try
  BOOST_TEST(info(waiting).attempts.empty());
  BOOST_TEST(info(running).status == job_status::running);  // carries on
  BOOST_REQUIRE(q->reset_worker("shrinking").ok());
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, waiting));
  BOOST_TEST(info(waiting).tries == 1);
}

BOOST_AUTO_TEST_CASE(a_worker_setting_is_checked_by_field_and_a_refusal_writes_nothing) {
  auto field_of = [&](const std::string& name, const settings_change& c) {
    auto st = q->set_worker(name, c);
    BOOST_TEST(st.code() == error::invalid_argument);
    return st.field();
  };
  BOOST_TEST(field_of("", concurrency(2)) == "worker");
  BOOST_TEST(field_of(std::string(300, 'w'), concurrency(2)) == "worker");
  BOOST_TEST(field_of("w", concurrency(0)) == "max_running");
  BOOST_TEST(field_of("w", concurrency(-1)) == "max_running");
  BOOST_TEST(field_of("w", concurrency(max_weight + 1)) == "max_running");
  BOOST_TEST(field_of("w", settings_change{}) == "max_running");
  settings_change weighted = concurrency(2);
  weighted.weight = 3;
  BOOST_TEST(field_of("w", weighted) == "weight");
  settings_change limited = concurrency(2);
  limited.rate = rate_limit{1, 1};
  BOOST_TEST(field_of("w", limited) == "rate");
  BOOST_TEST(q->reset_worker("").field() == "worker");
  BOOST_TEST(q->controls()->empty());
  BOOST_TEST(q->metrics()->control_changes == 0);
  BOOST_TEST(q->set_worker("w", concurrency(max_weight)).ok());
  BOOST_TEST(q->reset_worker("never-registered").ok());  // nothing to reset is not an error
  queue moved = std::move(*q);
  BOOST_TEST(q->set_worker("w", concurrency(2)).code() == error::closed);
  BOOST_TEST(moved.close().ok());
  BOOST_TEST(moved.set_worker("w", concurrency(2)).code() == error::closed);
}

BOOST_AUTO_TEST_SUITE_END()
