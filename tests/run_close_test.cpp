// Closing, stopping workers, recovery at open, and real crashes: a child
// process killed with SIGKILL in the middle of its work.
#define BOOST_TEST_MODULE run_close
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "support/child_process.hpp"
#include "support/queue_fixture.hpp"

using ergon::test::engine_probe;
using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

BOOST_FIXTURE_TEST_SUITE(closing, queue_fixture)

BOOST_AUTO_TEST_CASE(after_close_jobs_are_only_succeeded_or_pending) {
  for (int i = 0; i < 10; ++i)
    submit(*job_of("t").build());
  gate g;
  worker_options w;
  w.max_concurrency = 2;
  w.runners["t"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(2));
  auto closing = std::async(std::launch::async, [this] { return q->close(30s); });
  g.open();
  BOOST_REQUIRE(closing.wait_for(hang_guard) == std::future_status::ready);
  BOOST_TEST(closing.get().ok());
  engine_probe probe{location};
  auto succeeded = probe.number("SELECT count(*) FROM jobs WHERE status = 2");
  auto pending = probe.number("SELECT count(*) FROM jobs WHERE status = 0");
  BOOST_TEST(succeeded >= 2);
  BOOST_TEST(succeeded + pending == 10);
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE status NOT IN (0, 2)") == 0);
}

BOOST_AUTO_TEST_CASE(close_with_zero_timeout_times_out_and_the_job_retries_after_reopen) {
  auto id = submit(*job_of("t").build());
  gate g;
  worker_options w;
  w.runners["t"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto st = q->close(0ms);
  BOOST_TEST(st.code() == error::timeout);
  BOOST_TEST(engine_probe{location}.number("SELECT status FROM jobs") == 1);
  reopen();
  auto i = info(id);
  BOOST_TEST(i.status == job_status::pending);
  BOOST_TEST(i.tries == 1);
  BOOST_REQUIRE(i.attempts.size() == 1u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::process_restart);
  BOOST_TEST(i.attempts[0].message == "process restart");
  // Default recovery waits the job's backoff delay (1 s for job_of).
  BOOST_TEST(i.run_at_ms == t0 + 1'000);
  g.open();  // the abandoned attempt ends; its outcome can no longer be written
}

BOOST_AUTO_TEST_CASE(recovery_can_retry_immediately) {
  auto id = submit(*job_of("t").build());
  gate g;
  {
    worker_options w;
    w.runners["t"] = [&](job_context&) { g.pass(); };
    auto wk = start(std::move(w));
    BOOST_REQUIRE(g.wait_for_waiting(1));
    BOOST_TEST(q->close(0ms).code() == error::timeout);
  }
  options opts;
  opts.recovery = recovery_mode::retry_immediately;
  reopen(opts);
  BOOST_TEST(info(id).run_at_ms == t0);
  worker_options w;
  w.runners["t"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  auto i = info(id);
  BOOST_REQUIRE(i.attempts.size() == 2u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::process_restart);
  BOOST_TEST(i.attempts[1].outcome == attempt_outcome::succeeded);
  g.open();
}

BOOST_AUTO_TEST_CASE(a_worker_stop_waits_for_its_running_jobs) {
  auto first = submit(*job_of("t").build());
  gate g;
  worker_options w;
  w.max_concurrency = 1;
  w.runners["t"] = [&](job_context&) { g.pass(); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto stopping = std::async(std::launch::async, [&] { return wk.stop(30s); });
  g.open();
  BOOST_REQUIRE(stopping.wait_for(hang_guard) == std::future_status::ready);
  BOOST_TEST(stopping.get().ok());
  BOOST_TEST(info(first).status == job_status::succeeded);
  BOOST_TEST(wk.stop(1s).ok());  // stopping twice is fine
}

BOOST_AUTO_TEST_CASE(a_stopped_worker_takes_no_more_jobs) {
  std::atomic<int> ran_on_stopped{0};
  worker_options a;
  a.runners["t"] = [&](job_context&) { ++ran_on_stopped; };
  auto stopped = start(std::move(a));
  BOOST_REQUIRE(stopped.stop(30s).ok());
  auto id = submit(*job_of("t").build());
  worker_options b;
  b.runners["t"] = [](job_context&) {};
  auto other = start(std::move(b));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(ran_on_stopped == 0);
}

BOOST_AUTO_TEST_CASE(a_worker_stop_that_times_out_flags_its_jobs_cancelled) {
  auto id = submit(*job_of("t").build());
  std::promise<void> saw_cancel;
  gate g;
  worker_options w;
  w.runners["t"] = [&](job_context& ctx) {
    g.pass();
    ctx.wait_cancelled(std::chrono::milliseconds::max());
    saw_cancel.set_value();
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(wk.stop(0ms).code() == error::timeout);
  g.open();
  auto f = saw_cancel.get_future();
  BOOST_REQUIRE(f.wait_for(hang_guard) == std::future_status::ready);
  // The abandoned attempt stays running until it expires and retries.
  BOOST_TEST(info(id).status == job_status::running);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(signals)

BOOST_AUTO_TEST_CASE(sigterm_closes_the_graceful_shutdown_example_cleanly) {
  temp_dir dir;
  auto location = ergon::test::test_location(dir);
  child_process child{{ERGON_EXAMPLE_GRACEFUL_SHUTDOWN, location, "100000"}};
  BOOST_REQUIRE(child.wait_for_line("running; press Ctrl-C to stop"));
  child.signal(SIGTERM);
  BOOST_REQUIRE(child.wait_for_line("signal received, closing"));
  auto summary = child.read_line();
  BOOST_TEST(summary.rfind("close: ok", 0) == 0, summary);
  auto st = child.wait();
  BOOST_TEST(WIFEXITED(st));
  BOOST_TEST(WEXITSTATUS(st) == 0);
  engine_probe probe{location};
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE status NOT IN (0, 2)") == 0);
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs") == 100'000);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(crashes)

BOOST_AUTO_TEST_CASE(acknowledged_submits_survive_sigkill) {
  temp_dir dir;
  auto location = ergon::test::test_location(dir);
  std::set<std::string> acked;
  {
    child_process child{{ERGON_TEST_CRASH_WORKER, location, "submit", "100000"}};
    for (;;) {
      auto line = child.read_line();
      BOOST_REQUIRE_MESSAGE(line.rfind("acked ", 0) == 0, "child said: " + line);
      acked.insert(line.substr(6));
      if (acked.size() == 500)
        break;
    }
    child.signal(SIGKILL);
    // Lines already written before the kill were acknowledged too.
    for (auto line = child.read_line(); !line.empty(); line = child.read_line())
      if (line.rfind("acked ", 0) == 0)
        acked.insert(line.substr(6));
    BOOST_TEST(WIFSIGNALED(child.wait()));
  }
  auto q = queue::open(location);
  BOOST_REQUIRE(q.has_value());
  for (auto& text : acked) {
    auto id = job_id::parse(text);
    BOOST_REQUIRE(id.has_value());
    auto i = q->job_info(*id);
    BOOST_REQUIRE_MESSAGE(i.has_value(), "acknowledged job " + text + " is missing");
    BOOST_TEST(i->status == job_status::pending);
  }
  BOOST_TEST(q->counts()[job_status::pending] >= static_cast<int64_t>(acked.size()));
}

// stop() gives back claims whose code never started: pending again, with
// their try unspent, and the next worker runs them.
BOOST_AUTO_TEST_CASE(a_stop_gives_back_the_claims_in_the_window) {
  queue_fixture f;
  gate g;
  std::vector<job_id> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(f.submit(*job_of("block").build()));
  worker_options w;
  w.max_concurrency = 1;
  w.prefetch = 2;
  w.runners["block"] = [&](job_context&) { g.pass(); };
  auto wk = f.start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(wk.stats().jobs_received == 3);
  BOOST_TEST(f.q->counts()[job_status::running] == 3);
  auto stopped = std::async(std::launch::async, [&] { return wk.stop(); });
  // The two unstarted claims go back while the running job still runs.
  BOOST_REQUIRE(f.log->wait_for(event_kind::released, 2));
  BOOST_TEST(f.q->counts()[job_status::pending] == 2);
  BOOST_TEST(f.q->counts()[job_status::running] == 1);
  g.open();
  BOOST_TEST(stopped.get().ok());
  int pending = 0;
  for (auto& id : ids) {
    auto info = f.info(id);
    if (info.status != job_status::pending)
      continue;
    ++pending;
    BOOST_TEST(info.tries == 0);
    BOOST_TEST(info.attempts.empty());
  }
  BOOST_TEST(pending == 2);
  // Another worker runs them: each once.
  worker_options again;
  again.runners["block"] = [](job_context&) {};
  auto w2 = f.start(std::move(again));
  BOOST_REQUIRE(f.log->wait_for(event_kind::succeeded, 3));
  BOOST_TEST(f.q->counts()[job_status::succeeded] == 3);
}

namespace {

// `n` pending jobs of type "work" with payloads "0", "1", ..., in a file no
// queue holds afterwards.
std::vector<job_id> submit_work(const std::string& path, int n) {
  auto q = queue::open(path);
  BOOST_REQUIRE(q.has_value());
  std::vector<job_id> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(*q->submit(*job_builder("work").payload(std::to_string(i)).build()));
  return ids;
}

}  // namespace

// The cost of a prefetch window: claimed jobs that never started are
// recovered like running ones. Each runs exactly once afterwards.
BOOST_AUTO_TEST_CASE(claims_in_the_window_of_a_killed_worker_are_recovered_once) {
  temp_dir dir;
  auto location = ergon::test::test_location(dir);
  auto ids = submit_work(location, 5);
  {
    // One job runs and blocks; a window of 2 holds two more, claimed.
    child_process child{{ERGON_TEST_CRASH_WORKER, location, "hang", "2"}};
    auto line = child.read_line();
    BOOST_REQUIRE_MESSAGE(line.rfind("started ", 0) == 0, "child said: " + line);
    BOOST_TEST(line.substr(8, 36) == ids[0].to_string());
    // The worker's first claim took 1 + 2 in one commit, before any started.
    BOOST_REQUIRE(engine_probe{location}.number(
                    "SELECT count(*) FROM jobs WHERE status = 1") == 3);
    child.signal(SIGKILL);
    BOOST_TEST(WIFSIGNALED(child.wait()));
  }
  options opts;
  opts.recovery = recovery_mode::retry_immediately;
  auto q = queue::open(location, opts);
  BOOST_REQUIRE(q.has_value());
  std::mutex mtx;
  std::map<job_id, int> runs;
  auto log = std::make_unique<event_log>(*q);
  worker_options w;
  w.max_concurrency = 2;
  w.runners["work"] = [&](job_context& ctx) {
    std::lock_guard<std::mutex> guard{mtx};
    ++runs[ctx.id()];
  };
  for (int i = 0; i < 3; ++i) {
    auto info = q->job_info(ids[static_cast<size_t>(i)]);
    BOOST_REQUIRE(info.has_value());
    BOOST_TEST(info->status == job_status::pending);
    BOOST_REQUIRE(info->attempts.size() == 1u);
    BOOST_TEST(info->attempts[0].message == "process restart");
  }
  auto wk = q->start_worker(std::move(w));
  BOOST_REQUIRE(wk.has_value());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 5));
  BOOST_REQUIRE(wk->stop().ok());
  std::lock_guard<std::mutex> guard{mtx};
  for (auto& id : ids)
    BOOST_TEST(runs[id] == 1, id.to_string());
  BOOST_TEST(q->counts()[job_status::succeeded] == 5);
}

BOOST_AUTO_TEST_CASE(a_job_killed_mid_run_retries_and_finishes_and_nothing_is_lost) {
  temp_dir dir;
  auto location = ergon::test::test_location(dir);
  auto ids = submit_work(location, 3);
  std::string killed;
  {
    child_process child{{ERGON_TEST_CRASH_WORKER, location, "hang"}};
    auto line = child.read_line();
    BOOST_REQUIRE_MESSAGE(line.rfind("started ", 0) == 0, "child said: " + line);
    killed = line.substr(8, 36);
    child.signal(SIGKILL);
    BOOST_TEST(WIFSIGNALED(child.wait()));
  }
  BOOST_TEST(engine_probe{location}.number("SELECT count(*) FROM jobs WHERE status = 1")
             == 1);
  options opts;
  opts.recovery = recovery_mode::retry_immediately;
  auto q = queue::open(location, opts);
  BOOST_REQUIRE(q.has_value());
  event_log log{*q};
  worker_options w;
  w.runners["work"] = [](job_context&) {};
  auto wk = q->start_worker(std::move(w));
  BOOST_REQUIRE(log.wait_for(event_kind::succeeded, 3));
  for (auto& id : ids) {
    auto i = q->job_info(id);
    BOOST_REQUIRE(i.has_value());
    BOOST_TEST(i->status == job_status::succeeded);
    if (id.to_string() == killed) {
      BOOST_REQUIRE(i->attempts.size() == 2u);
      BOOST_TEST(i->attempts[0].outcome == attempt_outcome::process_restart);
      BOOST_TEST(i->attempts[1].outcome == attempt_outcome::succeeded);
    } else {
      BOOST_TEST(i->attempts.size() == 1u);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_job_that_kills_its_process_every_time_ends_failed) {
  temp_dir dir;
  auto location = ergon::test::test_location(dir);
  job_id id;
  {
    auto q = queue::open(location);
    BOOST_REQUIRE(q.has_value());
    id = *q->submit(*job_builder("work").max_retries(2).backoff(0ms).build());
  }
  int kills = 0;
  int launches = 0;
  for (; launches < 10; ++launches) {
    child_process child{{ERGON_TEST_CRASH_WORKER, location, "kill"}};
    auto line = child.read_line();
    auto st = child.wait();
    if (line == "idle") {
      BOOST_TEST(WIFEXITED(st));
      break;
    }
    BOOST_REQUIRE_MESSAGE(line.rfind("started ", 0) == 0, "child said: " + line);
    BOOST_TEST(WIFSIGNALED(st));
    ++kills;
  }
  // 1 + max_retries runs, each killing the process; the next open fails it.
  BOOST_TEST(kills == 3);
  BOOST_TEST(launches == 3);
  auto q = queue::open(location);
  BOOST_REQUIRE(q.has_value());
  auto i = q->job_info(id);
  BOOST_TEST(i->status == job_status::failed);
  BOOST_TEST(i->tries == 3);
  BOOST_REQUIRE(i->attempts.size() == 3u);
  for (auto& a : i->attempts)
    BOOST_TEST(a.outcome == attempt_outcome::process_restart);
}

BOOST_AUTO_TEST_SUITE_END()
