// Timeouts, heartbeats, fencing of late results, and deadlines, on the
// manual clock.
#define BOOST_TEST_MODULE run_expiry
#include <boost/test/unit_test.hpp>

#include <future>
#include <mutex>

#include "support/queue_fixture.hpp"

using ergon::test::engine_probe;
using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// Job code that runs until its attempt is flagged cancelled.
void run_until_cancelled(job_context& ctx) {
  ctx.wait_cancelled(std::chrono::milliseconds::max());
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(timeouts, queue_fixture)

BOOST_AUTO_TEST_CASE(a_job_past_its_timeout_fails_with_every_attempt_expired) {
  auto id = submit(*job_of("slow").timeout(1'000ms).max_retries(1).backoff(0ms).build());
  worker_options w;
  w.runners["slow"] = run_until_cancelled;
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, id));
  advance(999ms);
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, id));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 2, id));
  advance(1'000ms);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto expiries = log->of(event_kind::expired, &id);
  BOOST_TEST(expiries.at(0).at_ms == t0 + 1'000);  // not at the first advance
  auto i = info(id);
  BOOST_TEST(i.status == job_status::failed);
  BOOST_TEST(i.tries == 2);
  BOOST_REQUIRE(i.attempts.size() == 2u);
  for (auto& a : i.attempts) {
    BOOST_TEST(a.outcome == attempt_outcome::expired);
    BOOST_TEST(a.message == "expired");
  }
}

BOOST_AUTO_TEST_CASE(wait_cancelled_returns_at_once_or_when_the_attempt_expires) {
  submit(*job_of("wait").timeout(1'000ms).max_retries(0).build());
  std::promise<void> waiting;
  std::promise<std::vector<bool>> seen;
  worker_options w;
  w.runners["wait"] = [&](job_context& ctx) {
    std::vector<bool> r;
    r.push_back(ctx.wait_cancelled(0ms));   // doesn't wait
    r.push_back(ctx.wait_cancelled(-5ms));  // doesn't wait
    waiting.set_value();
    r.push_back(ctx.wait_cancelled(std::chrono::milliseconds::max()));
    seen.set_value(r);
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(waiting.get_future().wait_for(hang_guard) == std::future_status::ready);
  advance(1'000ms);
  auto result = seen.get_future();
  BOOST_REQUIRE(result.wait_for(hang_guard) == std::future_status::ready);
  BOOST_TEST(result.get() == (std::vector<bool>{false, false, true}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(manual_heartbeats_keep_a_job_alive_past_its_timeout) {
  auto id = submit(*job_of("long").timeout(1'000ms).heartbeat_increment(1'000ms).build());
  gate g;
  std::mutex mtx;
  std::vector<status> beats;
  worker_options w;
  w.runners["long"] = [&](job_context& ctx) {
    for (int i = 0; i < 4; ++i) {
      g.pass();
      auto st = ctx.heartbeat();
      std::lock_guard<std::mutex> guard{mtx};
      beats.push_back(st);
    }
    g.pass();
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, id));
  for (size_t i = 1; i <= 4; ++i) {
    advance(600ms);
    g.release();
    BOOST_REQUIRE(log->wait_for(event_kind::heartbeat, i, id));
    BOOST_TEST(log->of(event_kind::heartbeat, &id).back().expires_at_ms
               == t0 + 600 * static_cast<int64_t>(i) + 1'000);
  }
  advance(600ms);  // 3 s in: three times the timeout
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(log->of(event_kind::expired, &id).empty());
  auto i = info(id);
  BOOST_REQUIRE(i.attempts.size() == 1u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::succeeded);
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_REQUIRE(beats.size() == 4u);
  for (auto& st : beats)
    BOOST_TEST(st.ok());
}

BOOST_AUTO_TEST_CASE(the_automatic_heartbeat_keeps_a_job_alive_past_its_timeout) {
  auto id = submit(*job_of("long").timeout(1'000ms).heartbeat_increment(1'000ms).build());
  gate g;
  worker_options w;
  w.auto_heartbeat = 400ms;
  w.runners["long"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, id));
  for (size_t i = 1; i <= 6; ++i) {
    advance(400ms);
    BOOST_REQUIRE(log->wait_for(event_kind::heartbeat, i, id));
  }
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(log->of(event_kind::expired, &id).empty());
  BOOST_TEST(info(id).attempts.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_late_complete_from_an_expired_attempt_is_rejected_and_changes_nothing) {
  auto id = submit(*job_of("slow").timeout(1'000ms).max_retries(0).build());
  std::promise<std::vector<status>> late;
  gate after_expiry;
  worker_options w;
  w.runners["slow"] = [&](job_context& ctx) {
    run_until_cancelled(ctx);
    after_expiry.pass();
    std::vector<status> results;
    results.push_back(ctx.heartbeat());
    results.push_back(ctx.checkpoint("late checkpoint"));
    results.push_back(ctx.complete("late result"));
    late.set_value(results);
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, id));
  advance(1'000ms);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto before = engine_probe{location}.dump();
  after_expiry.release();
  auto f = late.get_future();
  BOOST_REQUIRE(f.wait_for(hang_guard) == std::future_status::ready);
  auto results = f.get();
  for (auto& st : results) {
    BOOST_TEST(st.code() == error::stale_attempt);
    BOOST_TEST(!st.message().empty());
  }
  BOOST_TEST(engine_probe{location}.dump() == before);
  auto i = info(id);
  BOOST_TEST(i.status == job_status::failed);
  BOOST_TEST(!i.result.has_value());
  BOOST_TEST(!i.checkpoint.has_value());
  BOOST_REQUIRE(i.attempts.size() == 1u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::expired);
}

BOOST_AUTO_TEST_CASE(a_pending_job_past_its_deadline_expires_without_running) {
  auto id = submit(*job_of("nobody").ttl(1'000ms).build());
  advance(1'000ms);
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, id));
  auto i = info(id);
  BOOST_TEST(i.status == job_status::expired);
  BOOST_TEST(i.tries == 0);
  // A worker arriving later finds nothing to run.
  worker_options w;
  w.runners["nobody"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_TEST(wk.stop(5s).ok());
  BOOST_TEST(info(id).status == job_status::expired);
}

BOOST_AUTO_TEST_SUITE_END()
