// Dispatch order, concurrency limits, weights and refill batches, measured on
// real workers.
#define BOOST_TEST_MODULE run_scheduling
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <map>
#include <mutex>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// Records the payloads of jobs in the order they start.
struct start_order {
  std::mutex mtx;
  std::vector<std::string> order;
  job_handler handler() {
    return [this](job_context& ctx) {
      std::lock_guard<std::mutex> guard{mtx};
      order.push_back(ctx.payload());
    };
  }
};

// Tracks how many jobs (and weight units) run at once.
struct concurrency_probe {
  std::mutex mtx;
  int running = 0;
  int peak = 0;
  void enter() {
    std::lock_guard<std::mutex> guard{mtx};
    peak = std::max(peak, ++running);
  }
  void leave() {
    std::lock_guard<std::mutex> guard{mtx};
    --running;
  }
};

// Lets one job through at a time while `busy` stay blocked, until all `total`
// jobs have succeeded.
void drain_one_by_one(queue_fixture& f, gate& g, int busy, int total) {
  for (int done = 0; done < total; ++done) {
    BOOST_REQUIRE(g.wait_for_waiting(std::min(busy, total - done)));
    g.release(1);
    BOOST_REQUIRE(f.log->wait_for(event_kind::succeeded, static_cast<size_t>(done + 1)));
  }
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(order, queue_fixture)

BOOST_AUTO_TEST_CASE(higher_priority_runs_before_an_earlier_run_at) {
  submit(*job_of("t").payload("old-low").run_at(t0 - 10'000).build());
  submit(*job_of("t").payload("high-1").priority(5).build());
  submit(*job_of("t").payload("high-2").priority(5).build());
  submit(*job_of("t").payload("mid").priority(1).run_at(t0 - 20'000).build());
  start_order rec;
  worker_options w;
  w.max_concurrency = 1;
  w.runners["t"] = rec.handler();
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 4));
  // Equal priority and run_at: submission order decides.
  BOOST_TEST(rec.order == (std::vector<std::string>{"high-1", "high-2", "mid", "old-low"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(future_jobs_run_in_run_at_order_and_not_before) {
  submit(*job_of("t").payload("third").run_at(t0 + 3'000).build());
  submit(*job_of("t").payload("first").run_at(t0 + 1'000).build());
  submit(*job_of("t").payload("second").delay(2'000ms).build());
  start_order rec;
  worker_options w;
  w.max_concurrency = 1;
  w.runners["t"] = rec.handler();
  auto wk = start(std::move(w));
  advance(5'000ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 3));
  BOOST_TEST(rec.order == (std::vector<std::string>{"first", "second", "third"}),
             boost::test_tools::per_element());
  for (auto& e : log->of(event_kind::started))
    BOOST_TEST(e.at_ms == t0 + 5'000);
}

BOOST_AUTO_TEST_CASE(a_future_job_starts_when_its_time_comes) {
  auto id = submit(*job_of("t").delay(1'000ms).build());
  worker_options w;
  w.runners["t"] = [](job_context&) {};
  auto wk = start(std::move(w));
  advance(999ms);
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  // Had it started at the first advance, at_ms would be t0 + 999.
  BOOST_TEST(log->of(event_kind::started, &id).at(0).at_ms == t0 + 1'000);
}

BOOST_AUTO_TEST_CASE(a_worker_only_gets_its_own_types) {
  auto other = submit(*job_of("other").build());
  auto mine = submit(*job_of("mine").build());
  worker_options w;
  w.runners["mine"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, mine));
  BOOST_TEST(info(other).status == job_status::pending);
  BOOST_TEST(log->of(event_kind::started, &other).empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(concurrency, queue_fixture)

BOOST_AUTO_TEST_CASE(peak_concurrency_with_max_5_is_exactly_5) {
  for (int i = 0; i < 20; ++i)
    submit(*job_of("t").build());
  gate g;
  concurrency_probe probe;
  worker_options w;
  w.max_concurrency = 5;
  w.runners["t"] = [&](job_context&) {
    probe.enter();
    g.pass();
    probe.leave();
  };
  auto wk = start(std::move(w));
  drain_one_by_one(*this, g, 5, 20);
  BOOST_TEST(probe.peak == 5);
}

BOOST_AUTO_TEST_CASE(weight_3_with_max_10_runs_at_most_3_jobs) {
  for (int i = 0; i < 10; ++i)
    submit(*job_of("t").weight(3).build());
  gate g;
  concurrency_probe probe;
  worker_options w;
  w.max_concurrency = 10;
  w.runners["t"] = [&](job_context&) {
    probe.enter();
    g.pass();
    probe.leave();
  };
  auto wk = start(std::move(w));
  drain_one_by_one(*this, g, 3, 10);
  BOOST_TEST(probe.peak == 3);
}

BOOST_AUTO_TEST_CASE(a_heavy_job_at_the_head_does_not_block_lighter_ones_that_fit) {
  std::map<job_id, std::string> names;
  names[submit(*job_of("t").priority(20).build())] = "p1";
  names[submit(*job_of("t").priority(20).build())] = "p2";
  auto heavy = submit(*job_of("t").priority(10).weight(3).build());
  names[heavy] = "heavy";
  names[submit(*job_of("t").build())] = "l1";
  names[submit(*job_of("t").build())] = "l2";
  gate g;
  worker_options w;
  w.max_concurrency = 4;
  w.runners["t"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  // Two units are left after p1 and p2: the heavy job (3) waits, l1 and l2 run.
  BOOST_REQUIRE(g.wait_for_waiting(4));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 4));
  std::vector<std::string> started;
  for (auto& e : log->of(event_kind::started))
    started.push_back(names[e.id]);
  BOOST_TEST(started == (std::vector<std::string>{"p1", "p2", "l1", "l2"}),
             boost::test_tools::per_element());
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 5));
}

BOOST_AUTO_TEST_CASE(a_job_heavier_than_the_worker_is_never_given_to_it) {
  auto huge = submit(*job_of("t").weight(8).build());
  auto small = submit(*job_of("t").build());
  worker_options w;
  w.max_concurrency = 4;
  w.runners["t"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, small));
  BOOST_TEST(info(huge).status == job_status::pending);
}

BOOST_AUTO_TEST_CASE(min_6_max_10_refills_in_batches_of_10_5_and_5) {
  for (int i = 0; i < 20; ++i)
    submit(*job_of("t").build());
  gate g;
  worker_options w;
  w.max_concurrency = 10;
  w.min_concurrency = 6;
  w.runners["t"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(10));
  BOOST_TEST(wk.stats().batches_received == 1);
  BOOST_TEST(wk.stats().jobs_received == 10);
  // Finishing 4 leaves 6 running: at the low-water mark, so no request. The
  // 5th drops it to 5: the worker asks for 10 - 5 = 5, in one batch. A worker
  // that refilled on every completion would have had more batches by the
  // time 15 jobs arrived.
  for (int64_t wave = 1; wave <= 2; ++wave) {
    g.release(5);
    BOOST_REQUIRE(g.wait_for_arrivals(static_cast<int>(10 + 5 * wave)));
    auto stats = wk.stats();
    BOOST_TEST(stats.jobs_received == 10 + 5 * wave);
    BOOST_TEST(stats.batches_received == 1 + wave);
  }
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 20));
  BOOST_TEST(wk.stats().batches_received == 3);
}

// With a window the worker holds max + prefetch, and the low-water mark
// moves up by the window: min 6, max 10, prefetch 5 holds 15 and refills
// when fewer than 11 are held.
BOOST_AUTO_TEST_CASE(prefetch_holds_claims_beyond_max_and_runs_at_most_max) {
  for (int i = 0; i < 30; ++i)
    submit(*job_of("t").build());
  gate g;
  worker_options w;
  w.max_concurrency = 10;
  w.min_concurrency = 6;
  w.prefetch = 5;
  w.runners["t"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(10));
  BOOST_TEST(wk.stats().jobs_received == 15);
  BOOST_TEST(wk.stats().running_jobs == 10);
  BOOST_TEST(g.waiting() == 10);
  BOOST_TEST(q->counts()[job_status::running] == 15);
  // 5 return: the window's 5 start at once, without a round trip; 10 are
  // held, below 6 + 5, so the worker asks for 5 more.
  g.release(5);
  BOOST_REQUIRE(g.wait_for_arrivals(15));
  BOOST_REQUIRE(g.wait_for_waiting(10));
  BOOST_TEST(wk.stats().running_jobs == 10);
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 30));
  BOOST_TEST(wk.stats().jobs_received == 30);
}

BOOST_AUTO_TEST_SUITE_END()
