// The edges of the handles a program holds: subscribers whose callbacks
// throw, moved-from queues and workers, and clock listeners that go away
// while they run.
#define BOOST_TEST_MODULE queue_handles
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

BOOST_FIXTURE_TEST_SUITE(throwing_subscribers, queue_fixture)

BOOST_AUTO_TEST_CASE(a_throwing_subscriber_stops_nobody_and_is_reported) {
  std::atomic<int> thrower_calls{0};
  auto thrower = q->subscribe([&](const event& e) {
    ++thrower_calls;
    if (e.kind == event_kind::submitted)
      throw std::runtime_error("callback bug");
    if (e.kind == event_kind::succeeded)
      throw 42;  // not a std::exception
  });
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  auto wk = start(std::move(w));
  auto first = submit(*job_of("work").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  // Later events still reach everyone, the thrower included.
  auto second = submit(*job_of("work").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, second));
  BOOST_REQUIRE(log->wait_for(event_kind::subscriber_failed, 4));
  auto failures = log->of(event_kind::subscriber_failed);
  BOOST_TEST(failures[0].id == first);
  BOOST_TEST(failures[0].type == "work");
  BOOST_TEST(failures[0].message == "a subscriber threw on a submitted event: callback bug");
  BOOST_TEST(failures[1].message
             == "a subscriber threw on a succeeded event: an exception that is not a "
                "std::exception");
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->subscriber_errors == 4);
  // submitted, started, succeeded for each job; no subscriber_failed events.
  BOOST_TEST(thrower_calls.load() >= 6);
  for (auto& e : log->snapshot())
    BOOST_TEST((e.kind != event_kind::subscriber_failed || e.message.find("subscriber threw")
                                                              != std::string::npos));
}

BOOST_AUTO_TEST_CASE(two_subscribers_that_always_throw_do_not_feed_each_other) {
  std::atomic<int> a_calls{0};
  std::atomic<int> b_calls{0};
  auto a = q->subscribe([&](const event&) {
    ++a_calls;
    throw std::runtime_error("a");
  });
  auto b = q->subscribe([&](const event&) {
    ++b_calls;
    throw std::logic_error("b");
  });
  // Subscribed last, so it hears each failure after the throwers did.
  event_log last{*q};
  auto id = submit(*job_of("work").build());
  // Everyone else hears the submit and both failures; each thrower hears the
  // submit and the other's failure, throws again, and that is only counted.
  BOOST_REQUIRE(last.wait_for(event_kind::subscriber_failed, 2));
  BOOST_TEST(log->of(event_kind::submitted, &id).size() == 1u);
  BOOST_TEST(log->of(event_kind::subscriber_failed).size() == 2u);
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->subscriber_errors == 4);
  BOOST_TEST(a_calls.load() == 2);
  BOOST_TEST(b_calls.load() == 2);
}

BOOST_AUTO_TEST_CASE(the_owner_cancel_waits_for_a_callback_that_cancelled_itself) {
  gate g;
  std::atomic<bool> finished{false};
  std::atomic<int> calls{0};
  subscription sub;
  sub = q->subscribe([&](const event& e) {
    if (e.kind != event_kind::submitted)
      return;
    ++calls;
    sub.cancel();  // from inside: returns at once
    g.pass();
    finished = true;
  });
  submit(*job_of("work").build());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  std::atomic<bool> cancelling{false};
  auto returned_after_callback = std::async(std::launch::async, [&] {
    cancelling = true;
    sub.cancel();
    return finished.load();
  });
  while (!cancelling.load())
    std::this_thread::yield();
  g.open();
  BOOST_TEST(returned_after_callback.get());
  auto later = submit(*job_of("work").build());
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 1, later));
  BOOST_TEST(calls.load() == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(moved_from_handles, queue_fixture)

BOOST_AUTO_TEST_CASE(a_moved_from_queue_answers_closed) {
  queue live = std::move(*q);
  auto& dead = *q;
  auto j = *job_of("work").build();
  BOOST_TEST(dead.submit(j).error().code() == error::closed);
  BOOST_TEST(dead.submit_batch({j}).error().code() == error::closed);
  BOOST_TEST(dead.job_info(job_id{}).error().code() == error::closed);
  BOOST_TEST(dead.jobs_by_name("x").error().code() == error::closed);
  BOOST_TEST(dead.update_pending(job_id{}, job_update{}).code() == error::closed);
  BOOST_TEST(dead.cancel_pending(job_id{}).code() == error::closed);
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  BOOST_TEST(dead.start_worker(w).error().code() == error::closed);
  BOOST_TEST(dead.set_group_weight("g", 2).code() == error::closed);
  BOOST_TEST(dead.reset_group_weights().code() == error::closed);
  BOOST_TEST(dead.pause_group("g").code() == error::closed);
  BOOST_TEST(dead.resume_group("g").code() == error::closed);
  BOOST_TEST(dead.pause_type("t").code() == error::closed);
  BOOST_TEST(dead.resume_type("t").code() == error::closed);
  BOOST_TEST(dead.resume_all().error().code() == error::closed);
  BOOST_TEST(dead.metrics().error().code() == error::closed);
  BOOST_TEST(live.pause_group("ahead").ok());  // the live one takes them
  BOOST_TEST(live.metrics()->pauses.size() == 1u);
  BOOST_TEST(*live.resume_all() == 1);
  BOOST_TEST(dead.counts().total() == 0);
  BOOST_TEST(!dead.max_wait(0).has_value());
  auto sub = dead.subscribe([](const event&) {});
  sub.cancel();
  BOOST_CHECK_THROW(dead.clock(), std::logic_error);
  BOOST_TEST(dead.close().code() == error::closed);
  // The live handle works as before.
  BOOST_TEST(live.submit(j).has_value());
  BOOST_TEST(live.counts()[job_status::pending] == 1);
  log.reset();  // subscribed through the old handle's queue, which `live` closes
  BOOST_TEST(live.close().ok());
  BOOST_TEST(live.resume_all().error().code() == error::closed);
}

BOOST_AUTO_TEST_CASE(a_moved_from_worker_answers_closed) {
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  auto wk = start(std::move(w));
  worker other = std::move(wk);
  BOOST_TEST(wk.stop().code() == error::closed);
  BOOST_TEST(wk.stats().jobs_received == 0);
  BOOST_TEST(other.stop().ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(clock_listeners)

BOOST_AUTO_TEST_CASE(unsubscribe_waits_for_a_running_listener_and_ends_its_calls) {
  manual_clock clk;
  gate g;
  std::atomic<int> calls{0};
  std::atomic<bool> finished{false};
  auto handle = clk.subscribe([&] {
    ++calls;
    g.pass();
    finished = true;
  });
  std::thread advancing{[&] { clk.advance(1ms); }};
  BOOST_REQUIRE(g.wait_for_waiting(1));
  std::atomic<bool> unsubscribing{false};
  auto returned_after_listener = std::async(std::launch::async, [&] {
    unsubscribing = true;
    clk.unsubscribe(handle);
    return finished.load();
  });
  while (!unsubscribing.load())
    std::this_thread::yield();
  g.open();
  BOOST_TEST(returned_after_listener.get());
  advancing.join();
  clk.advance(1ms);
  BOOST_TEST(calls.load() == 1);
}

BOOST_AUTO_TEST_CASE(a_listener_may_unsubscribe_itself) {
  manual_clock clk;
  int calls = 0;
  uint64_t handle = 0;
  handle = clk.subscribe([&] {
    ++calls;
    clk.unsubscribe(handle);
  });
  clk.advance(1ms);
  clk.advance(1ms);
  BOOST_TEST(calls == 1);
  clk.unsubscribe(12345);  // unknown handles are ignored
}

BOOST_AUTO_TEST_SUITE_END()
