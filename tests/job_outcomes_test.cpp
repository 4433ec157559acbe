// How running jobs end besides success: cancelled while they run (by code
// that stops, and by code that ignores the request), failed for good with
// retries left; and how they report progress. On the manual clock.
#define BOOST_TEST_MODULE job_outcomes
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <thread>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

const attempt_info& last_attempt(const job_info& j) {
  BOOST_REQUIRE(!j.attempts.empty());
  return j.attempts.back();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cancel_running)

BOOST_FIXTURE_TEST_CASE(code_that_waits_for_the_flag_stops_and_the_job_ends_cancelled,
                        queue_fixture) {
  std::atomic<bool> woke{false};
  gate g;  // the code runs before the cancel
  worker_options w;
  w.runners["long"] = [&](job_context& ctx) {
    g.pass();
    woke = ctx.wait_cancelled(std::chrono::milliseconds::max());
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("long").max_retries(3).build());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  g.open();
  BOOST_TEST(q->cancel(id).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, id));
  BOOST_TEST(woke.load());
  auto j = info(id);
  BOOST_TEST(j.status == job_status::cancelled);
  BOOST_TEST(j.tries == 1);  // no retry, though three were left
  BOOST_TEST((j.cancel_requested_at_ms == std::optional<int64_t>{t0}));
  BOOST_TEST(last_attempt(j).outcome == attempt_outcome::cancelled);
  BOOST_TEST(last_attempt(j).message == "stopped after a cancel request");
  BOOST_TEST(log->of(event_kind::cancel_requested, &id).size() == 1u);
  BOOST_TEST(log->of(event_kind::retried, &id).empty());
  BOOST_TEST(q->counts()[job_status::cancelled] == 1);
  BOOST_TEST(q->counts()[job_status::running] == 0);
  // A second cancel of the finished job says so.
  BOOST_TEST(q->cancel(id).code() == error::job_finished);
}

BOOST_FIXTURE_TEST_CASE(code_that_ignores_the_flag_is_fenced_at_expiry_and_not_retried,
                        queue_fixture) {
  gate g;
  std::atomic<int> heartbeat_code{-1};
  std::atomic<int> late_complete{-1};
  std::atomic<bool> saw_flag{false};
  worker_options w;
  w.runners["stubborn"] = [&](job_context& ctx) {
    g.pass();  // until the cancel committed
    saw_flag = ctx.wait_cancelled(hang_guard);
    heartbeat_code = static_cast<int>(ctx.heartbeat().code());
    g.pass();  // until the attempt expired
    late_complete = static_cast<int>(ctx.complete("late").code());
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("stubborn").timeout(10s).max_retries(5).build());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(q->cancel(id).ok());
  BOOST_TEST(q->cancel(id).ok());  // asking twice is no error
  BOOST_REQUIRE(log->wait_for(event_kind::cancel_requested, 1, id));
  g.release();
  BOOST_REQUIRE(g.wait_for_arrivals(2));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(saw_flag.load());
  // The request stops heartbeats from extending the attempt.
  BOOST_TEST(heartbeat_code.load() == static_cast<int>(error::cancelled));
  BOOST_TEST(info(id).status == job_status::running);
  advance(10s);
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, id));
  auto j = info(id);
  BOOST_TEST(j.status == job_status::cancelled);
  BOOST_TEST(j.tries == 1);
  BOOST_TEST(last_attempt(j).outcome == attempt_outcome::expired);
  g.release();
  BOOST_TEST(wk.stop(hang_guard).ok());
  // Its late result is fenced and changes nothing.
  BOOST_TEST(late_complete.load() == static_cast<int>(error::stale_attempt));
  BOOST_TEST(info(id).status == job_status::cancelled);
  BOOST_TEST(!info(id).result.has_value());
}

BOOST_FIXTURE_TEST_CASE(a_failure_or_throw_after_the_request_ends_cancelled, queue_fixture) {
  gate g;  // both codes run before the cancels
  worker_options w;
  w.runners["fails"] = [&](job_context& ctx) {
    g.pass();
    ctx.wait_cancelled(std::chrono::milliseconds::max());
    ctx.fail("gave up");
  };
  w.runners["throws"] = [&](job_context& ctx) {
    g.pass();
    ctx.wait_cancelled(std::chrono::milliseconds::max());
    throw std::runtime_error("interrupted");
  };
  auto wk = start(std::move(w));
  auto a = submit(*job_of("fails").build());
  auto b = submit(*job_of("throws").build());
  BOOST_REQUIRE(g.wait_for_waiting(2));
  g.open();
  BOOST_TEST(q->cancel(a).ok());
  BOOST_TEST(q->cancel(b).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 2));
  BOOST_TEST(info(a).status == job_status::cancelled);
  BOOST_TEST(last_attempt(info(a)).message == "gave up");
  BOOST_TEST(last_attempt(info(a)).outcome == attempt_outcome::failed);
  BOOST_TEST(info(b).status == job_status::cancelled);
  BOOST_TEST(last_attempt(info(b)).message == "interrupted");
}

BOOST_FIXTURE_TEST_CASE(a_success_that_commits_first_wins, queue_fixture) {
  gate g;
  worker_options w;
  w.runners["quick"] = [&](job_context& ctx) {
    ctx.complete("done");
    g.pass();
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("quick").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(q->cancel(id).code() == error::job_finished);
  g.open();
  BOOST_TEST(info(id).status == job_status::succeeded);
  BOOST_TEST((info(id).result == std::optional<std::string>{"done"}));
  BOOST_TEST(!info(id).cancel_requested_at_ms.has_value());
}

namespace {

// The code starts; cancel() returns ok; only then does the code return
// normally (even runs) or call complete() (odd runs), whether or not its
// flag has arrived yet. Every run must end `cancelled`, without a result:
// the queue decides when it records the outcome, not the worker's flag.
void cancel_commits_then_the_code_returns(queue& q, int runs) {
  event_log log{q};
  gate g;
  std::atomic<int> told_cancelled{0};  // complete() calls that said so
  worker_options w;
  w.max_concurrency = 1;
  w.runners["race"] = [&](job_context& ctx) {
    g.pass();
    if (ctx.payload() == "complete" && ctx.complete("result").code() == error::cancelled)
      ++told_cancelled;
  };
  auto wk = q.start_worker(std::move(w));
  BOOST_REQUIRE(wk.has_value());
  int succeeded = 0;
  for (int i = 0; i < runs; ++i) {
    bool completes = i % 2 == 1;
    auto id = q.submit(*job_of("race").payload(completes ? "complete" : "return").max_retries(3).build());
    BOOST_REQUIRE(id.has_value());
    BOOST_REQUIRE(g.wait_for_waiting(1));
    BOOST_REQUIRE(q.cancel(*id).ok());
    g.release();
    BOOST_REQUIRE(log.wait_for(event_kind::cancelled, 1, *id));
    auto j = q.job_info(*id);
    BOOST_REQUIRE(j.has_value());
    if (j->status != job_status::cancelled)
      ++succeeded;
    BOOST_TEST(j->status == job_status::cancelled);
    BOOST_TEST(!j->result.has_value());
    BOOST_TEST(j->tries == 1);
    BOOST_TEST(last_attempt(*j).outcome == attempt_outcome::cancelled);
    BOOST_TEST(last_attempt(*j).message == "stopped after a cancel request");
  }
  BOOST_TEST(wk->stop(hang_guard).ok());  // every code has returned
  BOOST_TEST(succeeded == 0);
  BOOST_TEST(told_cancelled.load() == runs / 2);
  BOOST_TEST(log.of(event_kind::succeeded).empty());
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_cancel_that_committed_wins_over_a_later_return_manual_clock,
                        queue_fixture) {
  cancel_commits_then_the_code_returns(*q, 200);
}

BOOST_AUTO_TEST_CASE(a_cancel_that_committed_wins_over_a_later_return_system_clock) {
  temp_dir dir;
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  cancel_commits_then_the_code_returns(*q, 200);
}

BOOST_FIXTURE_TEST_CASE(a_claim_waiting_in_the_prefetch_window_never_starts,
                        queue_fixture) {
  gate g;
  std::atomic<int> started{0};
  worker_options w;
  w.max_concurrency = 1;
  w.prefetch = 1;
  w.runners["t"] = [&](job_context&) {
    ++started;
    g.pass();
  };
  auto first = submit(*job_of("t").build());
  auto second = submit(*job_of("t").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 2));  // both claimed
  BOOST_TEST(q->cancel(second).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, second));
  auto j = info(second);
  BOOST_TEST(j.status == job_status::cancelled);
  BOOST_TEST(last_attempt(j).outcome == attempt_outcome::cancelled);
  BOOST_TEST(last_attempt(j).message == "cancelled before its code started");
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  BOOST_TEST(wk.stop(hang_guard).ok());
  BOOST_TEST(started.load() == 1);
}

BOOST_FIXTURE_TEST_CASE(pending_unknown_and_moved_from, queue_fixture) {
  auto id = submit(*job_of("nobody").build());
  BOOST_TEST(q->cancel(id).ok());
  BOOST_TEST(info(id).status == job_status::cancelled);
  BOOST_TEST(!info(id).cancel_requested_at_ms.has_value());
  BOOST_TEST(log->wait_for(event_kind::cancelled, 1, id));
  BOOST_TEST(q->cancel(job_id{}).code() == error::not_found);
  queue moved = std::move(*q);
  BOOST_TEST(q->cancel(id).code() == error::closed);
  BOOST_TEST(moved.close().ok());
}

BOOST_FIXTURE_TEST_CASE(a_request_outlives_the_process_and_recovery_ends_it_cancelled,
                        queue_fixture) {
  gate g;
  worker_options w;
  w.runners["t"] = [&](job_context&) { g.pass(); };  // ignores the request
  auto wk = start(std::move(w));
  auto id = submit(*job_of("t").max_retries(3).build());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(q->cancel(id).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancel_requested, 1, id));
  // Closing with no time to wait leaves the job marked running, as a
  // crash would.
  BOOST_TEST(q->close(0ms).code() == error::timeout);
  options retry_now;
  retry_now.recovery = recovery_mode::retry_immediately;
  reopen(retry_now);
  auto j = info(id);
  BOOST_TEST(j.status == job_status::cancelled);
  BOOST_TEST(last_attempt(j).outcome == attempt_outcome::process_restart);
  BOOST_TEST(q->counts()[job_status::pending] == 0);
  g.open();
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(failing_for_good)

BOOST_FIXTURE_TEST_CASE(failing_for_good_skips_the_retries_left, queue_fixture) {
  worker_options w;
  w.runners["call"] = [](job_context& ctx) { ctx.fail_permanently("400: bad address"); };
  w.runners["throw"] = [](job_context&) { throw ergon::permanent_failure("schema mismatch"); };
  auto wk = start(std::move(w));
  auto a = submit(*job_of("call").max_retries(5).build());
  auto b = submit(*job_of("throw").max_retries(5).build());
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 2));
  for (auto& [id, message] : {std::pair{a, "400: bad address"}, std::pair{b, "schema mismatch"}}) {
    auto j = info(id);
    BOOST_TEST(j.status == job_status::failed);
    BOOST_TEST(j.tries == 1);
    BOOST_TEST(j.attempts.size() == 1u);
    BOOST_TEST(last_attempt(j).outcome == attempt_outcome::failed_permanently);
    BOOST_TEST(last_attempt(j).message == message);
    BOOST_TEST(log->of(event_kind::failed, &id).front().message == message);
  }
  BOOST_TEST(log->of(event_kind::retried).empty());
}

BOOST_FIXTURE_TEST_CASE(a_permanent_failure_on_a_retry_keeps_the_history, queue_fixture) {
  worker_options w;
  w.runners["flaky"] = [](job_context& ctx) {
    if (ctx.try_number() == 1)
      throw std::runtime_error("timeout talking to upstream");
    ctx.fail_permanently("upstream says: no such account");
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("flaky").max_retries(5).build());
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  advance(1s);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto j = info(id);
  BOOST_REQUIRE(j.attempts.size() == 2u);
  BOOST_TEST(j.attempts[0].outcome == attempt_outcome::failed);
  BOOST_TEST(j.attempts[1].outcome == attempt_outcome::failed_permanently);
  BOOST_TEST(j.status == job_status::failed);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(progress)

BOOST_FIXTURE_TEST_CASE(reports_from_several_jobs_are_stored_with_an_eta, queue_fixture) {
  constexpr int jobs = 4;
  // Two gates: with one, a job past the first pass could take a permit meant
  // for another job's first pass.
  gate g;
  gate done;
  worker_options w;
  w.max_concurrency = jobs;
  w.progress_interval = 0ms;  // every report is stored
  w.runners["copy"] = [&](job_context& ctx) {
    // Each job has 100 units and a rate of its own: job k does 10 * k
    // units per 10 s.
    auto k = std::stoi(ctx.payload());
    ctx.progress(0, 100, "starting");
    g.pass();  // the test moves the clock 10 s
    ctx.progress(10 * k, 100, "copied " + std::to_string(10 * k));
    done.pass();
  };
  auto wk = start(std::move(w));
  std::vector<job_id> ids;
  for (int k = 1; k <= jobs; ++k)
    ids.push_back(submit(*job_of("copy").payload(std::to_string(k)).build()));
  BOOST_REQUIRE(g.wait_for_waiting(jobs));
  BOOST_REQUIRE(log->wait_for(event_kind::progress, jobs));
  for (auto& id : ids) {
    auto p = info(id).progress;
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->done == 0);
    BOOST_TEST(p->total == 100);
    BOOST_TEST(p->message == "starting");
    BOOST_TEST(p->reported_at_ms == t0);
    BOOST_TEST(!p->eta_ms.has_value());  // one report: no rate yet
  }
  advance(10s);
  g.release(jobs);
  BOOST_REQUIRE(done.wait_for_waiting(jobs));
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 2 * jobs));
  for (int k = 1; k <= jobs; ++k) {
    auto p = info(ids[k - 1]).progress;
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->done == 10 * k);
    // 10k units in 10 s: the remaining 100 - 10k take (100 - 10k) / k s,
    // rounded up to the ms.
    int64_t eta = t0 + 10'000 + ((100 - 10 * k) * 1'000 + k - 1) / k;
    BOOST_TEST((p->eta_ms == std::optional<int64_t>{eta}), "job " << k);
  }
  auto events = log->of(event_kind::progress, &ids[1]);
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[1].progress.done == 20);
  BOOST_TEST((events[1].progress.eta_ms == std::optional<int64_t>{t0 + 10'000 + 40'000}));
  BOOST_TEST(events[1].type == "copy");
  done.open();
}

BOOST_FIXTURE_TEST_CASE(reports_within_the_interval_are_throttled_and_the_last_is_kept,
                        queue_fixture) {
  gate g;
  worker_options w;
  w.progress_interval = 5s;
  std::atomic<bool> all_ok{true};
  w.runners["t"] = [&](job_context& ctx) {
    ctx.progress(0, 100);
    g.pass();  // until the first report is stored
    for (int i = 1; i <= 100; ++i)
      all_ok = all_ok && ctx.progress(i, 100).ok();
    g.pass();
    ctx.progress(100, 100, "done");  // the last report before the end
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 1, id));
  BOOST_TEST(info(id).progress->done == 0);
  g.release();
  BOOST_REQUIRE(g.wait_for_arrivals(2));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_TEST(all_ok.load());
  // The first report went at once; the other 100 wait for the interval.
  BOOST_TEST(log->of(event_kind::progress, &id).size() == 1u);
  advance(5s);
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 2, id));
  BOOST_TEST(info(id).progress->done == 100);
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(wk.stop(hang_guard).ok());
  auto p = info(id).progress;
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->message == "done");
  // The last report may commit with the outcome or after it, and its event
  // then follows `succeeded`.
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 3, id));
  BOOST_TEST(log->of(event_kind::progress, &id).size() == 3u);
}

BOOST_FIXTURE_TEST_CASE(bad_reports_are_named_and_record_nothing, queue_fixture) {
  std::vector<status> got;
  worker_options w;
  w.runners["t"] = [&](job_context& ctx) {
    got.push_back(ctx.progress(-1, 10));
    got.push_back(ctx.progress(0, -1));
    got.push_back(ctx.progress(11, 10));
    got.push_back(ctx.progress(1, 10, std::string(1'025, 'm')));
    got.push_back(ctx.progress(7, 0, std::string(1'024, 'm')));  // no total: fine
    ctx.complete();
    got.push_back(ctx.progress(8, 0));
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(wk.stop(hang_guard).ok());
  BOOST_REQUIRE(got.size() == 6u);
  const char* fields[] = {"done", "total", "done", "message"};
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST(got[i].code() == error::invalid_argument);
    BOOST_TEST(got[i].field() == fields[i]);
  }
  BOOST_TEST(got[4].ok());
  BOOST_TEST(got[5].code() == error::job_finished);
  auto p = info(id).progress;
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->done == 7);
  BOOST_TEST(!p->eta_ms.has_value());
}

BOOST_FIXTURE_TEST_CASE(a_retry_starts_without_the_last_attempts_progress, queue_fixture) {
  worker_options w;
  w.runners["t"] = [](job_context& ctx) {
    if (ctx.try_number() == 1) {
      ctx.progress(50, 100);
      throw std::runtime_error("crashed halfway");
    }
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 1, id));
  BOOST_TEST(info(id).progress->done == 50);  // kept while it waits
  advance(1s);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(!info(id).progress.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// A failure message is the job code's text, any bytes: a NUL or bytes that
// are not UTF-8 reach the record as the same text on both engines (they
// would fail PostgreSQL's text columns), and the job ends as it should.
BOOST_FIXTURE_TEST_CASE(a_message_that_is_not_utf8_or_holds_nul_is_kept_readable,
                        queue_fixture) {
  worker_options w;
  w.runners["odd"] = [](job_context& ctx) {
    ctx.fail_permanently(std::string{"bad \xff byte and a \0 NUL", 22});
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("odd").build());
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto j = info(id);
  BOOST_TEST(j.status == job_status::failed);
  BOOST_TEST(last_attempt(j).message == "bad \\xff byte and a \\x00 NUL");
}

// Middleware (issue 32, item 7): hooks around every job a worker runs.
BOOST_AUTO_TEST_SUITE(job_logs)

// What job code wrote, per attempt and in order: cut at 4,096 bytes, bytes
// that are not UTF-8 escaped, and the lines past the worker's bound dropped
// and counted. A bad level writes nothing; after the outcome, no more.
BOOST_FIXTURE_TEST_CASE(lines_are_kept_per_attempt_in_order_within_their_bounds,
                        queue_fixture) {
  worker_options w;
  w.log_lines = 3;
  std::atomic<int> bad_level{-1};
  std::atomic<int> after_outcome{-1};
  w.runners["chatty"] = [&](job_context& ctx) {
    ctx.log(log_level::info, "try " + std::to_string(ctx.try_number()));
    ctx.log(log_level::warn, std::string(4'095, 'x') + "\xc3\xa9");  // é across the cut
    bad_level = static_cast<int>(ctx.log(static_cast<log_level>(9), "no").code());
    ctx.log(log_level::debug, "bad \xff byte");
    ctx.log(log_level::error, "one too many");
    ctx.log(log_level::error, "and another");
    if (ctx.try_number() == 1) {
      ctx.fail("again", 0ms);
      return;
    }
    ctx.complete("ok");
    after_outcome = static_cast<int>(ctx.log(log_level::info, "late").code());
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("chatty").max_retries(1).build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(wk.stop(hang_guard).ok());
  BOOST_TEST(bad_level.load() == static_cast<int>(error::invalid_argument));
  BOOST_TEST(after_outcome.load() == static_cast<int>(error::job_finished));
  auto j = info(id);
  BOOST_REQUIRE(j.attempts.size() == 2u);
  for (int t = 1; t <= 2; ++t) {
    auto& a = j.attempts[t - 1];
    BOOST_REQUIRE(a.logs.size() == 3u);
    BOOST_TEST(a.logs_dropped == 2);
    BOOST_TEST(a.logs[0].text == "try " + std::to_string(t));
    BOOST_TEST(a.logs[0].level == log_level::info);
    BOOST_TEST(a.logs[0].at_ms == t0);
    BOOST_TEST(a.logs[1].text == std::string(4'095, 'x'));  // not half of é
    BOOST_TEST(a.logs[1].level == log_level::warn);
    BOOST_TEST(a.logs[2].text == "bad \\xff byte");
    BOOST_TEST(a.logs[2].level == log_level::debug);
    for (int k = 0; k < 3; ++k)
      BOOST_TEST(a.logs[k].seq == k);
  }
  // Listings carry no lines.
  auto page = q->list_jobs({}, {});
  BOOST_REQUIRE(page.has_value());
  BOOST_TEST(page->jobs.at(0).attempts.at(0).logs.empty());
}

// The byte bound counts the lines kept: a line that would pass it is
// dropped, a shorter one after it still fits. 0 lines: logging is off.
BOOST_FIXTURE_TEST_CASE(the_byte_bound_drops_what_would_pass_it, queue_fixture) {
  worker_options w;
  w.log_bytes = 10;
  w.runners["t"] = [](job_context& ctx) {
    ctx.log(log_level::info, "12345");
    ctx.log(log_level::info, "678901");
    ctx.log(log_level::info, "abcde");
  };
  worker_options off;
  off.log_lines = 0;
  off.runners["quiet"] = [](job_context& ctx) { ctx.log(log_level::info, "unheard"); };
  auto wk = start(std::move(w));
  auto wk_off = start(std::move(off));
  auto id = submit(*job_of("t").build());
  auto quiet = submit(*job_of("quiet").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, quiet));
  BOOST_TEST(wk.stop(hang_guard).ok());
  BOOST_TEST(wk_off.stop(hang_guard).ok());
  auto a = info(id).attempts.at(0);
  BOOST_REQUIRE(a.logs.size() == 2u);
  BOOST_TEST(a.logs[0].text == "12345");
  BOOST_TEST(a.logs[1].text == "abcde");
  BOOST_TEST(a.logs[1].seq == 1);
  BOOST_TEST(a.logs_dropped == 1);
  auto b = info(quiet).attempts.at(0);
  BOOST_TEST(b.logs.empty());
  BOOST_TEST(b.logs_dropped == 1);
}

// While the job runs, its lines reach the queue with its progress, at most
// once per progress_interval, without a round trip of their own.
BOOST_FIXTURE_TEST_CASE(a_running_attempt_s_lines_travel_with_its_progress, queue_fixture) {
  gate g;
  worker_options w;
  w.progress_interval = 5s;
  w.runners["t"] = [&](job_context& ctx) {
    ctx.log(log_level::info, "first");
    ctx.progress(1, 3);
    g.pass();
    ctx.log(log_level::info, "second");
    ctx.progress(2, 3);
    g.pass();
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("t").build());
  // The worker may hand the line over before the report is made: the
  // interval's end sends whatever waited.
  BOOST_REQUIRE(g.wait_for_arrivals(1));
  advance(5s);
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 1, id));
  auto running = info(id);
  BOOST_TEST(running.status == job_status::running);
  BOOST_REQUIRE(running.attempts.size() == 1u);
  BOOST_REQUIRE(running.attempts[0].logs.size() == 1u);
  BOOST_TEST(running.attempts[0].logs[0].text == "first");
  g.release();
  BOOST_REQUIRE(g.wait_for_arrivals(2));
  advance(5s);
  BOOST_REQUIRE(log->wait_for(event_kind::progress, 2, id));
  BOOST_TEST(info(id).attempts[0].logs.size() == 2u);
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(wk.stop(hang_guard).ok());
}

BOOST_FIXTURE_TEST_CASE(bad_log_bounds_and_worker_names_are_named, queue_fixture) {
  auto field_of = [&](auto change) {
    worker_options w;
    w.runners["t"] = [](job_context&) {};
    change(w);
    auto wk = q->start_worker(std::move(w));
    BOOST_REQUIRE(!wk.has_value());
    BOOST_TEST(wk.error().code() == error::invalid_argument);
    return wk.error().field();
  };
  BOOST_TEST(field_of([](worker_options& w) { w.log_lines = -1; }) == "log_lines");
  BOOST_TEST(field_of([](worker_options& w) { w.log_lines = 1'001; }) == "log_lines");
  BOOST_TEST(field_of([](worker_options& w) { w.log_bytes = -1; }) == "log_bytes");
  BOOST_TEST(field_of([](worker_options& w) { w.log_bytes = (1 << 20) + 1; }) == "log_bytes");
  // The name is recorded with each attempt: a label's rules.
  BOOST_TEST(field_of([](worker_options& w) { w.name = std::string(257, 'n'); }) == "name");
  BOOST_TEST(field_of([](worker_options& w) { w.name = "two\nlines"; }) == "name");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(middleware)

BOOST_FIXTURE_TEST_CASE(hooks_wrap_every_job_in_order_and_a_throwing_hook_changes_nothing,
                        queue_fixture) {
  std::mutex mtx;
  std::vector<std::string> trace;
  auto note = [&](std::string what) {
    std::lock_guard<std::mutex> guard{mtx};
    trace.push_back(std::move(what));
  };
  worker_options w;
  w.runners["ok"] = [&](job_context&) {
    note("code");
    return std::string{"result"};
  };
  w.runners["bad"] = [&](job_context&) -> std::string { throw std::runtime_error("boom"); };
  w.runners["doomed"] = [&](job_context&) { throw permanent_failure("no hope"); };
  w.max_concurrency = 1;
  job_middleware outer;
  outer.before = [&](job_context& ctx) { note("outer before " + ctx.type()); };
  outer.after = [&](job_context& ctx) { note("outer after " + ctx.type()); };
  outer.on_error = [&](job_context& ctx, const std::string& e) {
    note("outer error " + ctx.type() + ": " + e);
  };
  job_middleware inner;
  inner.before = [&](job_context&) {
    note("inner before");
    throw std::runtime_error("a broken tracer");
  };
  inner.after = [&](job_context&) { note("inner after"); };
  inner.on_error = [&](job_context&, const std::string&) { throw 42; };
  w.middleware = {outer, inner};
  auto wk = start(std::move(w));
  auto ok = submit(*job_of("ok").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, ok));
  auto bad = submit(*job_of("bad").max_retries(0).build());
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, bad));
  auto doomed = submit(*job_of("doomed").max_retries(5).build());
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, doomed));
  // The job is as it would be without hooks: its result, its failure, and
  // a permanent failure that spends no more tries.
  BOOST_TEST(info(ok).result.value_or("") == "result");
  BOOST_TEST(info(bad).attempts.at(0).message == "boom");
  BOOST_TEST(info(doomed).attempts.size() == 1u);
  std::vector<std::string> expected{
    "outer before ok",  "inner before", "code",           "inner after",
    "outer after ok",   "outer before bad", "inner before", "outer error bad: boom",
    "outer before doomed", "inner before", "outer error doomed: no hope"};
  {
    std::lock_guard<std::mutex> guard{mtx};
    BOOST_TEST(trace == expected, boost::test_tools::per_element());
  }
  // inner.before threw three times, inner.on_error twice.
  BOOST_TEST(wk.stats().middleware_errors == 5);
}

BOOST_AUTO_TEST_SUITE_END()
