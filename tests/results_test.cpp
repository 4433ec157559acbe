// Results and waiting: job code returns result bytes or passes them to
// complete(); queue::wait, wait_async and the actor's wait_atom resolve when
// the job reaches a final status, at once for a finished job, and with
// not_found, timeout or closed otherwise.
#define BOOST_TEST_MODULE results
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <atomic>
#include <future>
#include <thread>

#include "ergon/queue_actor.hpp"
#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

constexpr auto forever = std::chrono::milliseconds::max();

}  // namespace

BOOST_AUTO_TEST_SUITE(results)

BOOST_FIXTURE_TEST_CASE(a_returned_or_completed_result_is_stored, queue_fixture) {
  worker_options w;
  w.runners["returns"] = [](job_context& ctx) { return "sum=" + ctx.payload(); };
  w.runners["completes"] = [](job_context& ctx) { ctx.complete("explicit"); };
  w.runners["nothing"] = [](job_context&) {};
  auto wk = start(std::move(w));
  auto a = submit(*job_of("returns").payload("42").build());
  auto b = submit(*job_of("completes").build());
  auto c = submit(*job_of("nothing").build());
  for (auto& [id, expected] : {std::pair{a, std::optional<std::string>{"sum=42"}},
                               std::pair{b, std::optional<std::string>{"explicit"}},
                               std::pair{c, std::optional<std::string>{}}}) {
    auto r = q->wait(id, hang_guard);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    BOOST_TEST(r->status == job_status::succeeded);
    BOOST_TEST((r->result == expected));
    BOOST_TEST(!r->result_expires_at_ms.has_value());
  }
}

BOOST_FIXTURE_TEST_CASE(a_result_ttl_sets_the_expiry_and_zero_stores_none, queue_fixture) {
  worker_options w;
  w.runners["t"] = [](job_context&) { return std::string{"bytes"}; };
  auto wk = start(std::move(w));
  auto kept = submit(*job_of("t").result_ttl(1h).build());
  auto none = submit(*job_of("t").result_ttl(0ms).build());
  auto forever_kept = submit(*job_of("t").result_ttl(forever).build());
  auto r = q->wait(kept, hang_guard);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST((r->result == std::optional<std::string>{"bytes"}));
  BOOST_TEST((r->result_expires_at_ms == std::optional<int64_t>{t0 + 3'600'000}));
  r = q->wait(none, hang_guard);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == job_status::succeeded);
  BOOST_TEST(!r->result.has_value());
  r = q->wait(forever_kept, hang_guard);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST((r->result_expires_at_ms == std::optional<int64_t>{never_ms}));
  auto bad = job_of("t").result_ttl(-1ms).build();
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().field() == "result_ttl");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(waiting)

BOOST_FIXTURE_TEST_CASE(resolves_on_every_final_status, queue_fixture) {
  gate g;
  worker_options w;
  w.runners["ok"] = [&](job_context&) {
    g.pass();
    return std::string{"fine"};
  };
  w.runners["bad"] = [&](job_context&) {
    g.pass();
    throw std::runtime_error("broken");
  };
  auto wk = start(std::move(w));
  auto ok = submit(*job_of("ok").build());
  auto bad = submit(*job_of("bad").max_retries(0).build());
  auto cancelled = submit(*job_of("idle").build());
  auto expired = submit(*job_of("idle").ttl(1s).build());
  auto waiting = [&](const job_id& id) {
    return std::async(std::launch::async, [&, id] { return q->wait(id, hang_guard); });
  };
  auto w_ok = waiting(ok);
  auto w_bad = waiting(bad);
  auto w_cancelled = waiting(cancelled);
  auto w_expired = waiting(expired);
  BOOST_REQUIRE(g.wait_for_waiting(2));
  g.open();
  BOOST_TEST(q->cancel(cancelled).ok());
  advance(2s);
  auto r = w_ok.get();
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_TEST(r->status == job_status::succeeded);
  BOOST_TEST((r->result == std::optional<std::string>{"fine"}));
  r = w_bad.get();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == job_status::failed);
  BOOST_TEST(r->attempts.back().message == "broken");
  r = w_cancelled.get();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == job_status::cancelled);
  r = w_expired.get();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->status == job_status::expired);
}

BOOST_FIXTURE_TEST_CASE(a_finished_job_returns_at_once_even_with_no_time_to_wait,
                        queue_fixture) {
  auto id = submit(*job_of("idle").build());
  BOOST_TEST(q->cancel(id).ok());
  for (auto t : {0ms, -5ms, forever}) {
    auto r = q->wait(id, t);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    BOOST_TEST(r->status == job_status::cancelled);
  }
}

BOOST_FIXTURE_TEST_CASE(an_unfinished_job_times_out_and_is_unaffected, queue_fixture) {
  auto id = submit(*job_of("idle").build());
  auto r = q->wait(id, 0ms);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().code() == error::timeout);
  BOOST_TEST(r.error().message().find("pending") != std::string::npos, r.error().to_string());
  r = q->wait(id, 20ms);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().code() == error::timeout);
  BOOST_TEST(info(id).status == job_status::pending);
  // The timed-out waits left nothing behind: a later wait still resolves.
  auto later = std::async(std::launch::async, [&] { return q->wait(id, forever); });
  BOOST_TEST(q->cancel(id).ok());
  BOOST_TEST(later.get()->status == job_status::cancelled);
}

BOOST_FIXTURE_TEST_CASE(unknown_ids_are_not_found, queue_fixture) {
  BOOST_TEST(q->wait(job_id{}, 1s).error().code() == error::not_found);
  auto id = submit(*job_of("idle").build());
  auto bytes = id.bytes();
  bytes[15] ^= 0x40;  // another row of this database, never used
  BOOST_TEST(q->wait(job_id{bytes}, 1s).error().code() == error::not_found);
  BOOST_TEST(q->wait(*job_id::parse("00000000-0000-7000-8000-000000000000"), 0ms).error().code()
             == error::not_found);
}

BOOST_FIXTURE_TEST_CASE(many_threads_wait_on_many_jobs, queue_fixture) {
  constexpr int jobs = 16;
  constexpr int threads = 8;
  gate g;
  worker_options w;
  w.max_concurrency = 4;
  w.runners["t"] = [&](job_context& ctx) {
    g.pass();
    return ctx.payload();
  };
  auto wk = start(std::move(w));
  std::vector<job_id> ids;
  for (int i = 0; i < jobs; ++i)
    ids.push_back(submit(*job_of("t").payload(std::to_string(i)).build()));
  std::vector<std::future<int>> waiters;
  for (int t = 0; t < threads; ++t)
    waiters.push_back(std::async(std::launch::async, [&, t] {
      int right = 0;
      for (int i = t % 2; i < jobs; i += 2) {  // each job has four waiters
        auto r = q->wait(ids[i], hang_guard);
        if (r && r->status == job_status::succeeded
            && r->result == std::optional<std::string>{std::to_string(i)})
          ++right;
      }
      return right;
    }));
  g.open();
  int right = 0;
  for (auto& f : waiters)
    right += f.get();
  BOOST_TEST(right == threads * jobs / 2);
}

BOOST_FIXTURE_TEST_CASE(wait_async_calls_back_once_and_survives_a_throwing_callback,
                        queue_fixture) {
  gate g;
  worker_options w;
  w.runners["t"] = [&](job_context&) {
    g.pass();
    return std::string{"async"};
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("t").build());
  std::promise<result<job_info>> got;
  std::atomic<int> calls{0};
  q->wait_async(id, hang_guard, [&](result<job_info> r) {
    ++calls;
    got.set_value(std::move(r));
  });
  std::promise<void> thrown;
  q->wait_async(id, hang_guard, [&](result<job_info>) {
    thrown.set_value();
    throw std::runtime_error("callback bug");
  });
  std::promise<status> timed_out;
  q->wait_async(id, 0ms, [&](result<job_info> r) { timed_out.set_value(r.error()); });
  BOOST_TEST(timed_out.get_future().get().code() == error::timeout);
  g.open();
  auto r = got.get_future().get();
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST((r->result == std::optional<std::string>{"async"}));
  thrown.get_future().get();
  // The queue still answers after the throw.
  BOOST_TEST(q->wait(id, 0ms)->status == job_status::succeeded);
  BOOST_TEST(calls.load() == 1);
  std::promise<status> unknown;
  q->wait_async(job_id{}, 1s, [&](result<job_info> r) { unknown.set_value(r.error()); });
  BOOST_TEST(unknown.get_future().get().code() == error::not_found);
}

// A finite timeout of any length saturates, as every duration does: past
// about 292 years a nanosecond deadline would overflow and time out at once.
BOOST_FIXTURE_TEST_CASE(a_wait_of_centuries_is_no_timeout, queue_fixture) {
  auto id = submit(*job_of("idle").build());
  std::vector<std::chrono::milliseconds> spans{std::chrono::hours{24 * 365 * 300},
                                               std::chrono::milliseconds{INT64_MAX / 2},
                                               std::chrono::milliseconds::max() - 1ms};
  std::vector<std::promise<status>> answers(spans.size());
  for (size_t i = 0; i < spans.size(); ++i)
    q->wait_async(id, spans[i], [&, i](result<job_info> r) { answers[i].set_value(r.error()); });
  // The waits are registered once a zero wait was answered after them.
  BOOST_TEST(q->wait(id, 0ms).error().code() == error::timeout);
  BOOST_TEST(q->close().ok());
  for (auto& a : answers)
    BOOST_TEST(a.get_future().get().code() == error::closed);
}

BOOST_FIXTURE_TEST_CASE(closing_answers_every_wait_with_closed, queue_fixture) {
  auto id = submit(*job_of("idle").build());
  auto waiting = std::async(std::launch::async, [&] { return q->wait(id, forever); });
  std::promise<status> async_closed;
  q->wait_async(id, forever, [&](result<job_info> r) { async_closed.set_value(r.error()); });
  // The waits are registered once a zero wait was answered after them.
  BOOST_TEST(q->wait(id, 0ms).error().code() == error::timeout);
  BOOST_TEST(q->close().ok());
  BOOST_TEST(waiting.get().error().code() == error::closed);
  BOOST_TEST(async_closed.get_future().get().code() == error::closed);
  BOOST_TEST(q->wait(id, 1s).error().code() == error::closed);
  queue moved = std::move(*q);
  BOOST_TEST(q->wait(id, 1s).error().code() == error::closed);
}

BOOST_AUTO_TEST_CASE(the_actor_interface_waits_without_blocking) {
  temp_dir dir;
  caf::actor_system_config cfg;
  queue::register_types(cfg);
  caf::actor_system sys{cfg};
  auto qa = spawn_queue(sys, dir.file("q.db"));
  BOOST_REQUIRE_MESSAGE(qa.has_value(), qa.error().to_string());
  caf::scoped_actor self{sys};
  job_id id;
  self->request(*qa, caf::infinite, submit_atom::value, *job_of("idle").build())
    .receive([&](const job_id& got) { id = got; }, [](caf::error&) { BOOST_FAIL("submit"); });
  // A wait in flight, then the cancel that ends it.
  auto waiter = std::async(std::launch::async, [&] {
    caf::scoped_actor other{sys};
    job_status seen = job_status::pending;
    other->request(*qa, caf::infinite, wait_atom::value, id, forever)
      .receive([&](const job_info& info) { seen = info.status; },
               [&](caf::error&) { seen = job_status::running; });
    return seen;
  });
  self->request(*qa, caf::infinite, wait_atom::value, id, 0ms)
    .receive([](const job_info&) { BOOST_FAIL("not finished yet"); },
             [](caf::error& e) { BOOST_TEST(to_status(e).code() == error::timeout); });
  self->request(*qa, caf::infinite, cancel_job_atom::value, id)
    .receive([](ok_atom) {}, [](caf::error& e) { BOOST_FAIL(to_status(e).to_string()); });
  BOOST_TEST(waiter.get() == job_status::cancelled);
  self->request(*qa, caf::infinite, wait_atom::value, job_id{}, 0ms)
    .receive([](const job_info&) { BOOST_FAIL("found a nil id"); },
             [](caf::error& e) { BOOST_TEST(to_status(e).code() == error::not_found); });
  self->request(*qa, caf::infinite, close_atom::value).receive([](ok_atom) {}, [](caf::error&) {});
}

BOOST_AUTO_TEST_SUITE_END()
