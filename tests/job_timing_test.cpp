// Job code that controls its own timing (issue 31, item 5): snooze and a
// failure's retry_after, on the manual clock, with exact times and tries.
#define BOOST_TEST_MODULE job_timing
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <stdexcept>
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

// Workers for "poll" jobs submitted with payload "start": the first
// attempt checkpoints "step 2" and snoozes `delay`; the next one returns
// "done after step 2".
worker_options snoozing_once(call_log& calls, std::chrono::milliseconds delay) {
  worker_options w;
  w.runners["poll"] = [&calls, delay](job_context& ctx) {
    if (ctx.payload() == "start") {
      calls.check(ctx.checkpoint("step 2"));
      calls.check(ctx.snooze(delay));
      return std::string{"snoozed"};
    }
    return "done after " + ctx.payload();
  };
  return w;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(timing, queue_fixture)

BOOST_AUTO_TEST_CASE(a_snooze_runs_the_job_again_later_with_its_checkpoint_and_no_try_spent) {
  auto id = submit(*job_of("poll").payload("start").max_retries(0).build());
  call_log calls;
  auto wk = start(snoozing_once(calls, 30s));
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
  auto answers = seen.get_future();
  BOOST_REQUIRE(answers.wait_for(hang_guard) == std::future_status::ready);
  auto [snooze, fail] = answers.get();
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
  std::promise<void> running;
  std::promise<status> snoozed;
  worker_options w;
  w.runners["poll"] = [&](job_context& ctx) {
    running.set_value();
    ctx.wait_cancelled(std::chrono::milliseconds::max());
    snoozed.set_value(ctx.snooze(1s));
  };
  auto wk = start(std::move(w));
  // The code runs: a cancel before it starts would end the job unrun.
  BOOST_REQUIRE(running.get_future().wait_for(hang_guard) == std::future_status::ready);
  BOOST_REQUIRE(q->cancel(id).ok());
  auto answer = snoozed.get_future();
  BOOST_REQUIRE(answer.wait_for(hang_guard) == std::future_status::ready);
  BOOST_TEST(answer.get().ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, id));
  auto i = info(id);
  BOOST_TEST(i.status == job_status::cancelled);
  BOOST_REQUIRE(!i.attempts.empty());
  BOOST_TEST(i.attempts.back().outcome == attempt_outcome::cancelled);
  BOOST_TEST(i.attempts.back().message == "snoozed after a cancel request");
  BOOST_TEST(log->of(event_kind::snoozed, &id).empty());
}

BOOST_AUTO_TEST_CASE(a_job_that_started_in_time_may_snooze_past_its_deadline) {
  // It must start within 5 s of its run_at; it did, so a snooze of a
  // minute does not expire it.
  auto id = submit(*job_of("poll").payload("start").ttl(5s).build());
  call_log calls;
  auto wk = start(snoozing_once(calls, 60s));
  BOOST_REQUIRE(log->wait_for(event_kind::snoozed, 1, id));
  BOOST_TEST(!info(id).deadline_ms.has_value());
  advance(60s);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(log->of(event_kind::expired, &id).empty());
  BOOST_TEST(calls.clean());
}

BOOST_AUTO_TEST_CASE(a_ttl_from_the_first_attempt_lets_it_wait_and_expires_a_late_retry) {
  // From run_at, a job nobody takes for a minute expires at 10 s.
  auto from_run_at = submit(*job_of("flaky").ttl(10s).max_retries(5).build());
  auto id = submit(*job_of("flaky").ttl(10s).ttl_from(ttl_start::first_attempt).max_retries(5)
                      .backoff(4s, 2.0, 0.0).build());
  BOOST_TEST(!info(id).deadline_ms.has_value());
  advance(60s);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, from_run_at));
  BOOST_TEST(info(id).status == job_status::pending);
  // The first start, at t0 + 60 s, sets the deadline; retries due at +4 s
  // and +12 s: the first runs, the second is past the deadline.
  worker_options w;
  w.runners["flaky"] = [](job_context&) { throw std::runtime_error("down"); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  BOOST_TEST(info(id).deadline_ms.value_or(0) == t0 + 70'000);
  advance(4s);
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 2, id));
  BOOST_TEST(info(id).attempts.size() == 2u);
  advance(8s);  // t0 + 72 s: the retry due now is 2 s past the deadline
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, id));
  auto j = info(id);
  BOOST_TEST(j.status == job_status::expired);
  BOOST_TEST(j.tries == 2);
  // It needs a ttl; recurring jobs don't take it.
  auto bare = job_builder("t").ttl_from(ttl_start::first_attempt).build();
  BOOST_TEST(bare.error().field() == "ttl_from");
  recurring_job r;
  r.id = "r";
  r.schedule = "every 1m";
  r.job = *job_builder("t").ttl(5s).ttl_from(ttl_start::first_attempt).build();
  BOOST_TEST(q->add_recurring(r).error().field() == "job.ttl_from");
}

// Fails every attempt of a job of `type` with max_retries 3 and `policy`,
// and checks that the n-th retry is due `delays[n-1]` after that failure.
void check_retry_delays(queue_fixture& f, const backoff_policy& policy,
                        const std::vector<int64_t>& delays) {
  auto id = f.submit(*job_builder("flaky").max_retries(3).backoff(policy).build());
  worker_options w;
  w.runners["flaky"] = [](job_context&) { throw std::runtime_error("down"); };
  auto wk = f.start(std::move(w));
  int64_t now = t0;
  for (size_t n = 1; n <= delays.size(); ++n) {
    BOOST_REQUIRE(f.log->wait_for(event_kind::retried, n, id));
    auto r = f.log->of(event_kind::retried, &id).at(n - 1);
    BOOST_TEST(r.run_at_ms - now == delays[n - 1], "retry " << n);
    f.advance(std::chrono::milliseconds{delays[n - 1]});
    now += delays[n - 1];
  }
  BOOST_REQUIRE(f.log->wait_for(event_kind::failed, 1, id));
  BOOST_TEST(f.info(id).backoff.kind == policy.kind);
  BOOST_TEST(f.info(id).backoff.max_ms == policy.max_ms);
}

BOOST_AUTO_TEST_CASE(a_constant_backoff_waits_the_same_each_time) {
  check_retry_delays(*this, {1'000, 2.0, 0.0, backoff_kind::constant, 0}, {1'000, 1'000, 1'000});
}

BOOST_AUTO_TEST_CASE(a_linear_backoff_grows_by_its_initial_delay) {
  check_retry_delays(*this, {1'000, 2.0, 0.0, backoff_kind::linear, 0}, {1'000, 2'000, 3'000});
}

BOOST_AUTO_TEST_CASE(an_exponential_backoff_stops_at_its_cap) {
  check_retry_delays(*this, {1'000, 2.0, 0.0, backoff_kind::exponential, 3'000},
                     {1'000, 2'000, 3'000});
}

BOOST_AUTO_TEST_CASE(jitter_stays_within_its_share_and_under_the_cap) {
  // 50% jitter on a constant 1 s, capped at 1.2 s: each delay in [1, 1.2] s.
  auto id = submit(*job_builder("flaky")
                      .max_retries(3)
                      .backoff({1'000, 2.0, 0.5, backoff_kind::constant, 1'200})
                      .build());
  worker_options w;
  w.runners["flaky"] = [](job_context&) { throw std::runtime_error("down"); };
  auto wk = start(std::move(w));
  int64_t now = t0;
  for (size_t n = 1; n <= 3; ++n) {
    BOOST_REQUIRE(log->wait_for(event_kind::retried, n, id));
    auto delay = log->of(event_kind::retried, &id).at(n - 1).run_at_ms - now;
    BOOST_TEST(delay >= 1'000);
    BOOST_TEST(delay <= 1'200);
    advance(std::chrono::milliseconds{delay});
    now += delay;
  }
}

BOOST_AUTO_TEST_CASE(a_type_s_retry_policy_applies_to_jobs_left_at_the_defaults) {
  options o;
  o.retry_policies["flaky"] = {500, 2.0, 0.0, backoff_kind::constant, 0};
  reopen(o);
  auto plain = submit(*job_builder("flaky").max_retries(1).build());
  auto own = submit(*job_builder("flaky").max_retries(1).backoff(2'000ms, 1.0, 0.0).build());
  auto other = submit(*job_builder("steady").build());
  BOOST_TEST(info(plain).backoff.kind == backoff_kind::constant);
  BOOST_TEST(info(plain).backoff.initial_ms == 500);
  BOOST_TEST(info(own).backoff.initial_ms == 2'000);
  BOOST_TEST((info(other).backoff == backoff_policy{}));
  worker_options w;
  w.runners["flaky"] = [](job_context&) { throw std::runtime_error("down"); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, plain));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, own));
  BOOST_TEST(log->of(event_kind::retried, &plain).at(0).run_at_ms == t0 + 500);
  BOOST_TEST(log->of(event_kind::retried, &own).at(0).run_at_ms == t0 + 2'000);
}

BOOST_AUTO_TEST_CASE(a_recurring_job_s_instances_take_its_type_s_retry_policy) {
  options o;
  o.retry_policies["tick"] = {500, 2.0, 0.0, backoff_kind::linear, 2'000};
  reopen(o);
  recurring_job r;
  r.id = "every minute";
  r.schedule = "every 60s";
  r.job = *job_builder("tick").build();
  auto first = q->add_recurring(r);
  BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
  auto b = info(*first).backoff;
  BOOST_TEST(b.kind == backoff_kind::linear);
  BOOST_TEST(b.initial_ms == 500);
  BOOST_TEST(b.max_ms == 2'000);
}

BOOST_AUTO_TEST_CASE(a_bad_retry_policy_is_refused_at_open_naming_its_type) {
  options o;
  o.retry_policies["flaky"] = {500, 0.5, 0.0, backoff_kind::exponential, 0};
  auto q2 = queue::open(test_location(dir), o);
  BOOST_REQUIRE(!q2.has_value());
  BOOST_TEST(q2.error().code() == error::invalid_argument);
  BOOST_TEST(q2.error().field() == "retry_policies.flaky.backoff.multiplier");
  o.retry_policies["flaky"] = {500, 2.0, 0.0, backoff_kind::constant, -1};
  auto q3 = queue::open(test_location(dir), o);
  BOOST_REQUIRE(!q3.has_value());
  BOOST_TEST(q3.error().field() == "retry_policies.flaky.backoff.max");
}

BOOST_AUTO_TEST_SUITE_END()
