// Jobs through real workers: retries with backoff, final failure, thrown
// exceptions, checkpoints, and retries that touch only their own job.
#define BOOST_TEST_MODULE run_lifecycle
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

BOOST_FIXTURE_TEST_SUITE(retries, queue_fixture)

BOOST_AUTO_TEST_CASE(failing_twice_then_succeeding_waits_the_backoff_between_tries) {
  // max_retries 2: tries 1 and 2 fail, try 3 succeeds. Backoff 1 s, x2.
  auto id = submit(*job_of("flaky").max_retries(2).build());
  worker_options w;
  w.runners["flaky"] = [](job_context& ctx) {
    if (ctx.try_number() < 3)
      throw std::runtime_error("boom " + std::to_string(ctx.try_number()));
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  auto first_retry = log->of(event_kind::retried, &id).at(0);
  BOOST_TEST(first_retry.run_at_ms == t0 + 1'000);
  BOOST_TEST(first_retry.message == "boom 1");
  // One ms short of the delay: a start now would carry at_ms < run_at.
  advance(999ms);
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 2, id));
  auto second_retry = log->of(event_kind::retried, &id).at(1);
  BOOST_TEST(second_retry.run_at_ms == t0 + 1'000 + 2'000);
  advance(2'000ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  auto starts = log->of(event_kind::started, &id);
  BOOST_REQUIRE(starts.size() == 3u);
  BOOST_TEST(starts[0].at_ms == t0);
  BOOST_TEST(starts[1].at_ms - starts[0].at_ms >= 1'000);
  BOOST_TEST(starts[2].at_ms - starts[1].at_ms >= 2'000);
  auto i = info(id);
  BOOST_TEST(i.status == job_status::succeeded);
  BOOST_TEST(i.tries == 3);
  BOOST_REQUIRE(i.attempts.size() == 3u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::failed);
  BOOST_TEST(i.attempts[0].message == "boom 1");
  BOOST_TEST(i.attempts[1].message == "boom 2");
  BOOST_TEST(i.attempts[2].outcome == attempt_outcome::succeeded);
}

BOOST_AUTO_TEST_CASE(randomized_backoff_stays_within_its_bounds) {
  auto id = submit(*job_builder("flaky").max_retries(1).backoff(1'000ms, 2.0, 0.5).build());
  worker_options w;
  w.runners["flaky"] = [](job_context& ctx) {
    if (ctx.try_number() == 1)
      ctx.fail("first try fails");
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  auto delay = log->of(event_kind::retried, &id).at(0).run_at_ms - t0;
  BOOST_TEST(delay >= 1'000);
  BOOST_TEST(delay < 1'500);
  advance(1'500ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  auto starts = log->of(event_kind::started, &id);
  BOOST_TEST(starts.at(1).at_ms - starts.at(0).at_ms >= delay);
}

BOOST_AUTO_TEST_CASE(a_job_that_always_fails_ends_failed_with_one_entry_per_attempt) {
  auto id = submit(*job_of("doomed").max_retries(2).backoff(0ms).build());
  std::atomic<int> runs{0};
  worker_options w;
  w.runners["doomed"] = [&](job_context& ctx) {
    ++runs;
    ctx.fail("attempt " + std::to_string(ctx.try_number()) + " failed");
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  BOOST_TEST(runs == 3);
  auto i = info(id);
  BOOST_TEST(i.status == job_status::failed);
  BOOST_TEST(i.tries == 3);
  BOOST_REQUIRE(i.attempts.size() == 3u);
  for (int k = 0; k < 3; ++k) {
    BOOST_TEST(i.attempts[k].try_number == k + 1);
    BOOST_TEST(i.attempts[k].outcome == attempt_outcome::failed);
    BOOST_TEST(i.attempts[k].message == "attempt " + std::to_string(k + 1) + " failed");
    BOOST_TEST(i.attempts[k].finished_at_ms.has_value());
  }
  BOOST_TEST(i.finished_at_ms.has_value());
  BOOST_TEST(q->counts()[job_status::failed] == 1);
  BOOST_TEST(log->of(event_kind::retried, &id).size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_throwing_job_fails_with_the_exception_text_and_the_worker_goes_on) {
  auto bad = submit(*job_of("bad").max_retries(0).build());
  auto good = submit(*job_of("good").build());
  worker_options w;
  w.max_concurrency = 1;
  w.runners["bad"] = [](job_context&) { throw std::invalid_argument("malformed input"); };
  w.runners["good"] = [](job_context& ctx) { ctx.complete("done"); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, bad));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, good));
  BOOST_TEST(info(bad).attempts.at(0).message == "malformed input");
  BOOST_TEST(info(good).result.value_or("") == "done");
}

BOOST_AUTO_TEST_CASE(retries_change_only_their_own_job) {
  // Three jobs fail a different number of times, all retrying at once.
  // Effectum's unscoped UPDATE would have reset the others' try counts.
  std::map<std::string, int> failures{{"a", 1}, {"b", 2}, {"c", 0}, {"d", 3}};
  std::map<std::string, job_id> ids;
  for (auto& [name, n] : failures)
    ids[name] = submit(*job_of("t").payload(name).max_retries(5).backoff(0ms).build());
  worker_options w;
  w.max_concurrency = 4;
  w.runners["t"] = [&](job_context& ctx) {
    if (ctx.try_number() <= failures.at(ctx.payload()))
      ctx.fail("again");
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 4));
  for (auto& [name, n] : failures) {
    auto i = info(ids[name]);
    BOOST_TEST_CONTEXT("job " << name) {
      BOOST_TEST(i.status == job_status::succeeded);
      BOOST_TEST(i.tries == n + 1);
      BOOST_TEST(i.attempts.size() == static_cast<size_t>(n + 1));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_retry_waits_until_the_failed_attempts_code_returns) {
  // Code that goes on after fail() (cleanup, say) still runs when the retry
  // is due at once; the retry must not start beside it on a free slot.
  auto id = submit(*job_of("t").max_retries(1).backoff(0ms).build());
  gate after_fail;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  worker_options w;
  w.max_concurrency = 2;
  w.runners["t"] = [&](job_context& ctx) {
    if (++inside > 1)
      overlapped = true;
    if (ctx.try_number() == 1) {
      ctx.fail("first try fails");
      after_fail.pass();
    }
    --inside;
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(after_fail.wait_for_waiting(1));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  // A round trip through writer and dispatcher: had the retry been made
  // ready, it would have been claimed by now.
  BOOST_REQUIRE(q->metrics().has_value());
  BOOST_TEST(log->of(event_kind::started, &id).size() == 1u);
  after_fail.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(!overlapped);
  BOOST_TEST(info(id).tries == 2);
}

BOOST_AUTO_TEST_CASE(a_parked_retry_goes_when_its_worker_stops) {
  // The failed attempt's code returns only after its worker began to stop, so
  // the worker never reports it; the retry goes when the worker is gone.
  auto id = submit(*job_of("t").max_retries(1).backoff(0ms).build());
  gate after_fail;
  worker_options first;
  first.runners["t"] = [&](job_context& ctx) {
    ctx.fail("first try fails");
    after_fail.pass();
  };
  auto wk = start(std::move(first));
  BOOST_REQUIRE(after_fail.wait_for_waiting(1));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  auto stopped = std::async(std::launch::async, [&] { return wk.stop(); });
  // The dispatcher counts no capacity once the worker unregistered.
  auto until = std::chrono::steady_clock::now() + hang_guard;
  while (q->metrics()->capacity != 0)
    BOOST_REQUIRE(std::chrono::steady_clock::now() < until);
  after_fail.open();
  BOOST_REQUIRE(stopped.wait_for(hang_guard) == std::future_status::ready);
  BOOST_TEST(stopped.get().ok());
  worker_options second;
  second.runners["t"] = [](job_context&) {};
  auto other = start(std::move(second));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(info(id).tries == 2);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(checkpoints, queue_fixture)

BOOST_AUTO_TEST_CASE(each_try_sees_the_previous_checkpoint) {
  auto id = submit(*job_of("resume").payload("start").max_retries(3).backoff(0ms).build());
  std::mutex mtx;
  std::vector<std::string> seen;
  std::vector<status> checkpointed;
  worker_options w;
  w.runners["resume"] = [&](job_context& ctx) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      seen.push_back(ctx.payload());
    }
    if (ctx.try_number() < 3) {
      auto st = ctx.checkpoint("step-" + std::to_string(ctx.try_number()));
      {
        std::lock_guard<std::mutex> guard{mtx};
        checkpointed.push_back(st);
      }
      ctx.fail("crash after checkpoint");
    }
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_TEST(seen == (std::vector<std::string>{"start", "step-1", "step-2"}),
             boost::test_tools::per_element());
  BOOST_REQUIRE(checkpointed.size() == 2u);
  BOOST_TEST(checkpointed[0].ok());
  BOOST_TEST(checkpointed[1].ok());
  auto i = info(id);
  BOOST_TEST(i.payload == "start");  // the original is kept
  BOOST_TEST(i.checkpoint.value_or("") == "step-2");
}

BOOST_AUTO_TEST_CASE(a_new_payload_drops_the_checkpoint_unless_kept) {
  auto id = submit(*job_of("cp").payload("v1").max_retries(3).backoff(1h, 1.0, 0.0).build());
  std::mutex mtx;
  std::vector<std::string> seen;
  worker_options w;
  w.runners["cp"] = [&](job_context& ctx) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      seen.push_back(ctx.payload());
    }
    if (ctx.try_number() == 1)
      ctx.checkpoint("step-1");
    ctx.fail("stop here");
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  BOOST_TEST(info(id).checkpoint.value_or("") == "step-1");
  // Kept: the next attempt still resumes from the checkpoint.
  job_update keep;
  keep.payload = "v2";
  keep.keep_checkpoint = true;
  BOOST_REQUIRE(q->update_pending(id, keep).ok());
  BOOST_TEST(info(id).payload == "v2");
  BOOST_TEST(info(id).checkpoint.value_or("") == "step-1");
  advance(2h);
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 2, id));
  // Dropped (the default): the next attempt gets the new payload.
  job_update drop;
  drop.payload = "v3";
  BOOST_REQUIRE(q->update_pending(id, drop).ok());
  BOOST_TEST(!info(id).checkpoint.has_value());
  advance(5h);
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 3, id));
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_TEST(seen == (std::vector<std::string>{"v1", "step-1", "v3"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(keeping_a_checkpoint_needs_a_new_payload) {
  auto id = submit(*job_of("cp").payload("v1").build());
  job_update u;
  u.priority = 3;
  u.keep_checkpoint = true;
  auto st = q->update_pending(id, u);
  BOOST_TEST(st.code() == error::invalid_argument);
  BOOST_TEST(st.field() == "keep_checkpoint");
  BOOST_TEST(info(id).priority == 0);  // nothing changed
}

BOOST_AUTO_TEST_CASE(an_oversized_checkpoint_is_rejected) {
  reopen([] {
    options o;
    o.max_payload_bytes = 16;
    return o;
  }());
  auto id = submit(*job_of("cp").payload("x").build());
  status result;
  worker_options w;
  w.runners["cp"] = [&](job_context& ctx) { result = ctx.checkpoint(std::string(17, 'c')); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(result.code() == error::invalid_argument);
  BOOST_TEST(result.field() == "payload");
  BOOST_TEST(!info(id).checkpoint.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(workers, queue_fixture)

BOOST_AUTO_TEST_CASE(bad_worker_options_are_named) {
  worker_options none;
  BOOST_TEST(q->start_worker(none).error().field() == "runners");
  worker_options empty_type;
  empty_type.runners[""] = [](job_context&) {};
  BOOST_TEST(q->start_worker(empty_type).error().field() == "runners");
  worker_options null_handler;
  null_handler.runners["t"] = nullptr;
  BOOST_TEST(q->start_worker(null_handler).error().field() == "runners");
  worker_options zero;
  zero.runners["t"] = [](job_context&) {};
  zero.max_concurrency = 0;
  BOOST_TEST(q->start_worker(zero).error().field() == "max_concurrency");
  worker_options min_above_max;
  min_above_max.runners["t"] = [](job_context&) {};
  min_above_max.max_concurrency = 2;
  min_above_max.min_concurrency = 3;
  BOOST_TEST(q->start_worker(min_above_max).error().field() == "min_concurrency");
  worker_options bad_heartbeat;
  bad_heartbeat.runners["t"] = [](job_context&) {};
  bad_heartbeat.auto_heartbeat = 0ms;
  BOOST_TEST(q->start_worker(bad_heartbeat).error().field() == "auto_heartbeat");
  worker_options long_type;
  long_type.runners[std::string(max_type_bytes + 1, 't')] = [](job_context&) {};
  BOOST_TEST(q->start_worker(long_type).error().field() == "runners");
  worker_options too_wide;
  too_wide.runners["t"] = [](job_context&) {};
  too_wide.max_concurrency = max_weight + 1;
  BOOST_TEST(q->start_worker(too_wide).error().field() == "max_concurrency");
  worker_options min_zero;
  min_zero.runners["t"] = [](job_context&) {};
  min_zero.min_concurrency = 0;
  BOOST_TEST(q->start_worker(min_zero).error().field() == "min_concurrency");
  for (int32_t prefetch : {-1, max_weight + 1}) {
    worker_options bad_prefetch;
    bad_prefetch.runners["t"] = [](job_context&) {};
    bad_prefetch.prefetch = prefetch;
    BOOST_TEST(q->start_worker(bad_prefetch).error().field() == "prefetch");
  }
}

BOOST_AUTO_TEST_CASE(complete_twice_is_refused_and_the_first_outcome_stands) {
  auto id = submit(*job_of("t").build());
  std::promise<std::pair<status, status>> outcomes;
  worker_options w;
  w.runners["t"] = [&](job_context& ctx) {
    auto first = ctx.complete("one");
    auto second = ctx.fail("two");
    outcomes.set_value({first, second});
  };
  auto wk = start(std::move(w));
  auto done = outcomes.get_future();
  BOOST_REQUIRE(done.wait_for(hang_guard) == std::future_status::ready);
  auto [first, second] = done.get();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(first.ok());
  BOOST_TEST(second.code() == error::job_finished);
  BOOST_TEST(info(id).result.value_or("") == "one");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(subscriptions, queue_fixture)

BOOST_AUTO_TEST_CASE(after_cancel_returns_the_callback_never_runs_again) {
  gate in_callback;
  std::atomic<bool> delivery_done{false};
  std::atomic<bool> cancelled{false};
  std::atomic<bool> called_after_cancel{false};
  auto sub = std::make_unique<subscription>(q->subscribe([&](const event& e) {
    if (cancelled)
      called_after_cancel = true;
    if (e.kind == event_kind::submitted) {
      in_callback.pass();  // hold the delivery until the test lets go
      delivery_done = true;
    }
  }));
  submit(*job_of("t").build());
  BOOST_REQUIRE(in_callback.wait_for_waiting(1));
  auto canceller = std::async(std::launch::async, [&] {
    sub->cancel();
    cancelled = true;
    return delivery_done.load();  // cancel() waited for the delivery
  });
  in_callback.open();
  BOOST_REQUIRE(canceller.wait_for(hang_guard) == std::future_status::ready);
  BOOST_TEST(canceller.get());
  // Later events reach other subscribers but not the cancelled one.
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 1, id));
  BOOST_TEST(!called_after_cancel);
}

BOOST_AUTO_TEST_CASE(a_callback_may_cancel_its_own_subscription) {
  subscription sub;
  std::atomic<int> calls{0};
  sub = q->subscribe([&](const event&) {
    ++calls;
    sub.cancel();
  });
  // Each batch goes to subscribers in the order they subscribed, so once
  // `later` has an event, `sub` has had its turn at it. (The fixture's log
  // comes first: with both submits in one commit it saw them before `sub` ran.)
  event_log later{*q};
  submit(*job_of("t").build());
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(later.wait_for(event_kind::submitted, 1, id));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_SUITE_END()
