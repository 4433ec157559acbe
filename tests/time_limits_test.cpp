// Time arithmetic never overflows: every time field at 0, 1, max, min and -1
// is either rejected naming the field or accepted with its documented
// meaning, where a sum past the largest time saturates at never_ms.
#define BOOST_TEST_MODULE time_limits
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <functional>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

namespace {

const ms extremes[] = {ms{0}, ms{1}, ms::max(), ms::min(), ms{-1}};

// t0 + d, saturating as ergon does.
int64_t after_t0(ms d) {
  return d.count() > never_ms - t0 ? never_ms : t0 + d.count();
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(job_fields, queue_fixture)

BOOST_AUTO_TEST_CASE(every_job_time_field_at_the_extremes) {
  struct field {
    const char* name;
    int64_t smallest;  // the smallest valid value
    std::function<void(job_builder&, ms)> set;
    std::function<void(const job_info&, ms)> check;  // for accepted values
  };
  const field fields[] = {
    {"delay", 0, [](job_builder& b, ms v) { b.delay(v); },
     [](const job_info& i, ms v) { BOOST_TEST(i.run_at_ms == after_t0(v)); }},
    {"run_at", 0, [](job_builder& b, ms v) { b.run_at(v.count()); },
     [](const job_info& i, ms v) { BOOST_TEST(i.run_at_ms == v.count()); }},
    {"ttl", 1, [](job_builder& b, ms v) { b.ttl(v); },
     [](const job_info& i, ms v) {
       // A deadline that saturates at never is no deadline.
       if (after_t0(v) == never_ms)
         BOOST_TEST(!i.deadline_ms.has_value());
       else
         BOOST_TEST(*i.deadline_ms == after_t0(v));
     }},
    {"timeout", 1, [](job_builder& b, ms v) { b.timeout(v); },
     [](const job_info& i, ms v) { BOOST_TEST(i.timeout_ms == v.count()); }},
    {"heartbeat_increment", 1, [](job_builder& b, ms v) { b.heartbeat_increment(v); },
     [](const job_info& i, ms v) { BOOST_TEST(i.heartbeat_increment_ms == v.count()); }},
    {"backoff.initial", 0, [](job_builder& b, ms v) { b.backoff(v, 2.0, 0.0); },
     [](const job_info& i, ms v) { BOOST_TEST(i.backoff.initial_ms == v.count()); }},
  };
  for (auto& f : fields)
    for (auto v : extremes) {
      BOOST_TEST_CONTEXT(f.name << " = " << v.count()) {
        job_builder b{"work"};
        f.set(b, v);
        auto built = b.build();
        if (v.count() < f.smallest) {
          BOOST_REQUIRE(!built.has_value());
          BOOST_TEST(built.error().code() == error::invalid_argument);
          BOOST_TEST(built.error().field() == f.name);
          continue;
        }
        BOOST_REQUIRE_MESSAGE(built.has_value(), built.error().to_string());
        auto id = q->submit(*built);
        BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
        auto i = info(*id);
        BOOST_TEST(i.status == job_status::pending);
        f.check(i, v);
      }
    }
}

BOOST_AUTO_TEST_CASE(hand_filled_jobs_get_the_same_answers_from_submit) {
  job j;
  j.type = "work";
  j.delay_ms = ms::min().count();
  BOOST_TEST(q->submit(j).error().field() == "delay");
  j.delay_ms = 0;
  j.ttl_ms = 0;
  BOOST_TEST(q->submit(j).error().field() == "ttl");
  j.ttl_ms.reset();
  j.timeout_ms = ms::min().count();
  BOOST_TEST(q->submit(j).error().field() == "timeout");
  j.timeout_ms = ms::max().count();
  j.heartbeat_increment_ms = -1;
  BOOST_TEST(q->submit(j).error().field() == "heartbeat_increment");
  j.heartbeat_increment_ms = ms::max().count();
  j.run_at_ms = -1;
  BOOST_TEST(q->submit(j).error().field() == "run_at");
  j.run_at_ms = never_ms;
  BOOST_TEST(q->submit(j).has_value());
  BOOST_TEST(q->counts()[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(update_time_fields_at_the_extremes) {
  auto id = submit(*job_of("work").build());
  for (auto v : extremes) {
    BOOST_TEST_CONTEXT(v.count()) {
      job_update run_at;
      run_at.run_at_ms = v.count();
      auto st = q->update_pending(id, run_at);
      if (v.count() < 0)
        BOOST_TEST(st.field() == "run_at");
      else
        BOOST_TEST(st.ok(), st.to_string());
      job_update timeout;
      timeout.timeout_ms = v.count();
      st = q->update_pending(id, timeout);
      if (v.count() < 1)
        BOOST_TEST(st.field() == "timeout");
      else
        BOOST_TEST(st.ok(), st.to_string());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(meanings, queue_fixture)

// A job that would have to run is seen to stay pending by running a normal
// job after it: both are due, so the worker would have taken it first.
BOOST_AUTO_TEST_CASE(delay_max_never_comes_due_until_run_at_is_updated) {
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  auto wk = start(std::move(w));
  auto later = submit(*job_of("work").delay(ms::max()).priority(10).build());
  BOOST_TEST(info(later).run_at_ms == never_ms);
  advance(ms{int64_t{1} << 50});  // about 35,000 years
  auto probe = submit(*job_of("work").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, probe));
  BOOST_TEST(info(later).status == job_status::pending);
  job_update now;
  now.run_at_ms = clock->now_ms();
  BOOST_REQUIRE(q->update_pending(later, now).ok());
  BOOST_TEST(log->wait_for(event_kind::succeeded, 1, later));
}

BOOST_AUTO_TEST_CASE(ttl_max_is_no_deadline_and_the_job_runs) {
  // Used to wrap the deadline negative: the job ended expired unrun.
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  auto id = submit(*job_of("work").ttl(ms::max()).delay(24h).build());
  auto wk = start(std::move(w));
  advance(24h);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(info(id).tries == 1);
}

BOOST_AUTO_TEST_CASE(timeout_and_heartbeat_increment_max_never_expire) {
  gate g;
  std::atomic<bool> heartbeat_ok{false};
  worker_options w;
  // Boost.Test checks belong on the test's thread: the job only records.
  w.runners["work"] = [&](job_context& ctx) {
    heartbeat_ok = ctx.heartbeat().ok();
    g.pass();
  };
  auto id = submit(*job_of("work").timeout(ms::max()).heartbeat_increment(ms::max()).build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::heartbeat, 1, id));
  BOOST_TEST(log->of(event_kind::heartbeat, &id).at(0).expires_at_ms == never_ms);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(heartbeat_ok.load());
  advance(ms{int64_t{1} << 50});
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(log->of(event_kind::expired, &id).empty());
  BOOST_TEST(info(id).tries == 1);
}

BOOST_AUTO_TEST_CASE(backoff_initial_max_waits_a_hundred_years) {
  worker_options w;
  w.runners["work"] = [](job_context&) { throw std::runtime_error("no"); };
  auto id = submit(*job_of("work").backoff(ms::max(), 1000.0, 10.0).max_retries(1).build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  constexpr int64_t hundred_years = int64_t{100} * 365 * 24 * 3600 * 1000;
  BOOST_TEST(log->of(event_kind::retried, &id).at(0).run_at_ms == t0 + hundred_years);
}

BOOST_AUTO_TEST_CASE(a_pause_at_the_extremes_is_rejected_or_lasts_until_resumed) {
  for (auto v : extremes) {
    BOOST_TEST_CONTEXT(v.count()) {
      auto st = q->pause_group("g", v);
      if (v.count() <= 0) {
        BOOST_TEST(st.field() == "duration");
        BOOST_TEST(q->pause_type("t", v).field() == "duration");
      } else {
        BOOST_TEST(st.ok(), st.to_string());
        BOOST_TEST(q->pause_type("t", v).ok());
      }
    }
  }
  // The max pause ends only by resume_group.
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_REQUIRE(q->pause_group("g", ms::max()).ok());
  auto held = submit(*job_of("work").group("g").build());
  advance(ms{int64_t{1} << 50});
  auto probe = submit(*job_of("work").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, probe));
  BOOST_TEST(info(held).status == job_status::pending);
  BOOST_REQUIRE(q->resume_group("g").ok());
  BOOST_TEST(log->wait_for(event_kind::succeeded, 1, held));
}

BOOST_AUTO_TEST_CASE(close_and_stop_take_any_timeout) {
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  for (auto v : extremes) {
    BOOST_TEST_CONTEXT(v.count()) {
      auto wk = start(w);
      auto st = wk.stop(v);
      // A timeout of 0 or less doesn't wait for the worker to confirm, and
      // 1 ms may pass before it does on a busy machine; max waits for it.
      if (v == ms::max())
        BOOST_TEST(st.ok(), st.to_string());
      else
        BOOST_TEST((st.ok() || st.code() == error::timeout), st.to_string());
    }
  }
  BOOST_TEST(q->close(ms::max()).ok());
  BOOST_TEST(q->close(ms::min()).ok());  // closing twice is not an error
}

BOOST_AUTO_TEST_CASE(the_manual_clock_saturates_at_never) {
  manual_clock c{never_ms - 5};
  c.advance(ms::max());
  BOOST_TEST(c.now_ms() == never_ms);
  c.advance(ms::min());  // moving backwards by advance is ignored
  BOOST_TEST(c.now_ms() == never_ms);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(options_fields)

BOOST_AUTO_TEST_CASE(queue_and_worker_durations_at_the_extremes) {
  temp_dir dir;
  struct field {
    const char* name;
    int64_t smallest;
    int64_t largest;
    std::function<void(options&, ms)> set;
  };
  const field fields[] = {
    {"busy_timeout", 0, never_ms, [](options& o, ms v) { o.busy_timeout = v; }},
    {"scheduling.aging.grace_period", 0, never_ms,
     [](options& o, ms v) { o.scheduling.aging.emplace().grace_period = v; }},
    {"scheduling.aging.interval", 1, never_ms,
     [](options& o, ms v) { o.scheduling.aging.emplace().interval = v; }},
    {"writer_idle_spin", 0, 1'000'000,
     [](options& o, ms v) {
       // In us; milliseconds::max() doesn't fit, so the extremes are its own.
       o.writer_idle_spin = v == ms::max()   ? std::chrono::microseconds::max()
                            : v == ms::min() ? std::chrono::microseconds::min()
                                             : std::chrono::microseconds{v.count()};
     }},
  };
  for (auto& f : fields)
    for (auto v : extremes) {
      BOOST_TEST_CONTEXT(f.name << " = " << v.count()) {
        options o;
        f.set(o, v);
        auto q = queue::open(dir.file("q.db"), o);
        if (v.count() < f.smallest || (v == ms::max() && f.largest != never_ms)) {
          BOOST_REQUIRE(!q.has_value());
          BOOST_TEST(q.error().field() == f.name);
        } else {
          BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
          if (o.scheduling.aging)
            BOOST_TEST(q->max_wait(0)->count() >= 0);  // saturates, never wraps negative
        }
      }
    }
  options o;
  o.scheduling.aging.emplace().interval = ms::max();
  o.scheduling.aging->max_effective_priority = 100;
  auto q = queue::open(dir.file("q.db"), o);
  BOOST_REQUIRE(q.has_value());
  BOOST_TEST(q->max_wait(0)->count() == never_ms);
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  for (auto v : extremes) {
    BOOST_TEST_CONTEXT("auto_heartbeat = " << v.count()) {
      w.auto_heartbeat = v;
      auto wk = q->start_worker(w);
      if (v.count() < 1)
        BOOST_TEST(wk.error().field() == "auto_heartbeat");
      else
        BOOST_TEST(wk.has_value(), wk.error().to_string());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
