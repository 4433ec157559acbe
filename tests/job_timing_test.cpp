// Job code that controls its own timing (issue 31, item 5): snooze and a
// failure's retry_after, on the manual clock, with exact times and tries.
#define BOOST_TEST_MODULE job_timing
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <vector>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// What job code's calls returned. Boost.Test's checks are for the main
// thread: job code records, and the test checks.
struct call_log {
  std::mutex mtx;
  std::vector<status> failed;

  void check(const status& st) {
    if (st.ok())
      return;
    std::lock_guard<std::mutex> lock{mtx};
    failed.push_back(st);
  }
  bool clean() {
    std::lock_guard<std::mutex> lock{mtx};
    return failed.empty();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(timing, queue_fixture)

BOOST_AUTO_TEST_CASE(a_snooze_runs_the_job_again_later_with_its_checkpoint_and_no_try_spent) {
  auto id = submit(*job_of("poll").payload("start").max_retries(0).build());
  call_log calls;
  worker_options w;
  w.runners["poll"] = [&calls](job_context& ctx) {
    if (ctx.payload() == "start") {
      calls.check(ctx.checkpoint("step 2"));
      calls.check(ctx.snooze(30s));
      return std::string{"snoozed"};
    }
    return "done after " + ctx.payload();
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::snoozed, 1, id));
  auto snoozed = log->of(event_kind::snoozed, &id).at(0);
  BOOST_TEST(snoozed.run_at_ms == t0 + 30'000);
  BOOST_TEST(snoozed.message == "snoozed for 30000 ms");
  auto waiting = info(id);
  BOOST_TEST(waiting.status == job_status::pending);
  BOOST_TEST(waiting.run_at_ms == t0 + 30'000);
  // Not due a millisecond early.
  advance(29'999ms);
  BOOST_TEST(log->of(event_kind::started, &id).size() == 1u);
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  auto done = info(id);
  BOOST_TEST(done.status == job_status::succeeded);
  BOOST_TEST(done.result.value_or("") == "done after step 2");
  // Two attempts with max_retries 0: the snooze spent no try.
  BOOST_TEST(done.tries == 2);
  BOOST_TEST(done.tries_before_retry == 1);
  BOOST_REQUIRE(done.attempts.size() == 2u);
  BOOST_TEST(done.attempts.at(0).outcome == attempt_outcome::snoozed);
  BOOST_TEST(done.attempts.at(0).message == "snoozed for 30000 ms");
  BOOST_TEST(done.attempts.at(0).finished_at_ms.value_or(0) == t0);
  BOOST_TEST(done.attempts.at(1).outcome == attempt_outcome::succeeded);
  BOOST_TEST(log->of(event_kind::retried, &id).empty());
  BOOST_TEST(calls.clean());
}

BOOST_AUTO_TEST_CASE(a_snooze_past_the_cap_is_a_failure_that_spends_a_try) {
  options o;
  o.max_snoozes = 2;
  reopen(o);
  auto id = submit(*job_of("poll").max_retries(1).backoff(5'000ms, 1.0, 0.0).build());
  call_log calls;
  worker_options w;
  w.runners["poll"] = [&calls](job_context& ctx) { calls.check(ctx.snooze(1s)); };
  auto wk = start(std::move(w));
  for (size_t n = 1; n <= 2; ++n) {
    BOOST_REQUIRE(log->wait_for(event_kind::snoozed, n, id));
    advance(1s);
  }
  // The third snooze is a failure: its try is spent, and the backoff applies.
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  auto retried = log->of(event_kind::retried, &id).at(0);
  BOOST_TEST(retried.run_at_ms == t0 + 2'000 + 5'000);
  BOOST_TEST(retried.message.find("snoozed 2 times") != std::string::npos);
  BOOST_TEST(retried.message.find("max_snoozes") != std::string::npos);
  // The retry snoozes too, past the cap again, with no retries left: failed.
  advance(5s);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto i = info(id);
  BOOST_TEST(i.status == job_status::failed);
  BOOST_TEST(i.tries == 4);
  BOOST_TEST(i.tries_before_retry == 2);
  BOOST_TEST(calls.clean());
}

BOOST_AUTO_TEST_CASE(a_failure_with_retry_after_replaces_the_backoff_and_spends_a_try) {
  auto id = submit(*job_of("call").max_retries(1).backoff(60'000ms, 2.0, 0.0).build());
  worker_options w;
  std::atomic<int> runs{0};
  call_log calls;
  w.runners["call"] = [&](job_context& ctx) {
    calls.check(ctx.fail(++runs == 1 ? "429 Too Many Requests" : "429 again", 7s));
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  auto retried = log->of(event_kind::retried, &id).at(0);
  BOOST_TEST(retried.run_at_ms == t0 + 7'000);  // the backoff would say 60 s
  BOOST_TEST(retried.message == "429 Too Many Requests");
  advance(6'999ms);
  BOOST_TEST(log->of(event_kind::started, &id).size() == 1u);
  advance(1ms);
  // Its second try was its last: retry_after does not add tries.
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto i = info(id);
  BOOST_TEST(i.tries == 2);
  BOOST_REQUIRE(i.attempts.size() == 2u);
  BOOST_TEST(i.attempts.at(0).outcome == attempt_outcome::failed);
  BOOST_TEST(i.attempts.at(0).finished_at_ms.value_or(0) == t0);
  BOOST_TEST(i.attempts.at(1).message == "429 again");
  BOOST_TEST(calls.clean());
}

BOOST_AUTO_TEST_CASE(negative_delays_are_refused_and_report_nothing) {
  auto id = submit(*job_of("odd").max_retries(0).build());
  std::promise<std::pair<status, status>> seen;
  worker_options w;
  w.runners["odd"] = [&seen](job_context& ctx) {
    auto snooze = ctx.snooze(-1ms);
    auto fail = ctx.fail("x", -1ms);
    seen.set_value({snooze, fail});
    return std::string{"fine"};
  };
  auto wk = start(std::move(w));
  auto [snooze, fail] = seen.get_future().get();
  BOOST_TEST(snooze.code() == error::invalid_argument);
  BOOST_TEST(snooze.field() == "delay");
  BOOST_TEST(fail.code() == error::invalid_argument);
  BOOST_TEST(fail.field() == "retry_after");
  // Neither was reported: the code's return completes the attempt.
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(info(id).result.value_or("") == "fine");
}

BOOST_AUTO_TEST_CASE(a_snooze_after_a_cancel_request_ends_the_job_cancelled) {
  auto id = submit(*job_of("poll").build());
  std::promise<status> snoozed;
  worker_options w;
  w.runners["poll"] = [&](job_context& ctx) {
    ctx.wait_cancelled(std::chrono::milliseconds::max());
    snoozed.set_value(ctx.snooze(1s));
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, id));
  BOOST_REQUIRE(q->cancel(id).ok());
  auto st = snoozed.get_future().get();
  BOOST_TEST(st.ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, id));
  BOOST_TEST(info(id).status == job_status::cancelled);
  BOOST_TEST(log->of(event_kind::snoozed, &id).empty());
}

BOOST_AUTO_TEST_SUITE_END()
