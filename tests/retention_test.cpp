// Retention: the sweeper deletes finished jobs past their status's
// retention and drops results past their TTL, in small steps through the
// writer; under a steady load the file stops growing. On the manual clock.
#define BOOST_TEST_MODULE retention
#include <boost/test/unit_test.hpp>

#include "ergon/actors/retention_sweeper.hpp"
#include "support/queue_fixture.hpp"

using ergon::test::engine_probe;
using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

struct retention_fixture : queue_fixture {
  void open_with(const retention_options& r) {
    options o;
    o.retention = r;
    reopen(o);
  }

  // Waits for the n-th swept event and returns it.
  event swept(size_t n) {
    BOOST_REQUIRE(log->wait_for(event_kind::swept, n));
    return log->of(event_kind::swept).at(n - 1);
  }

  int64_t stored(const std::string& sql) { return engine_probe{location}.number(sql); }
};

worker_options quick_worker() {
  worker_options w;
  w.max_concurrency = 8;
  w.runners["ok"] = [](job_context& ctx) {
    ctx.log(log_level::info, "ran");
    return ctx.payload();
  };
  w.runners["bad"] = [](job_context&) { throw std::runtime_error("bad"); };
  return w;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(each_status_is_kept_for_its_own_retention, retention_fixture) {
  retention_options r;
  r.succeeded = 1min;
  r.cancelled = 1min;
  r.expired = 1min;
  r.failed = 10min;
  r.interval = 1min;
  open_with(r);
  auto wk = start(quick_worker());
  std::vector<job_id> ok, bad;
  for (int i = 0; i < 3; ++i)
    ok.push_back(submit(*job_of("ok").build()));
  for (int i = 0; i < 2; ++i)
    bad.push_back(submit(*job_of("bad").max_retries(0).build()));
  auto cancelled = submit(*job_of("idle").build());
  auto expired = submit(*job_of("idle").ttl(1s).build());
  BOOST_TEST(q->cancel(cancelled).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 3));
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 2));
  BOOST_TEST(stored("SELECT count(*) FROM job_logs") == 3);
  advance(2s);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, expired));
  // The first pass after they finished: a minute on.
  advance(61s);
  auto e = swept(1);
  BOOST_TEST(e.jobs_deleted == 5);  // 3 succeeded, cancelled, expired
  for (auto& id : ok)
    BOOST_TEST(q->job_info(id).error().code() == error::not_found);
  BOOST_TEST(q->job_info(cancelled).error().code() == error::not_found);
  BOOST_TEST(q->job_info(expired).error().code() == error::not_found);
  for (auto& id : bad)
    BOOST_TEST(info(id).status == job_status::failed);
  auto young = submit(*job_of("ok").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, young));
  advance(30s);  // no pass is due yet
  BOOST_TEST(info(young).status == job_status::succeeded);
  advance(9min);
  e = swept(2);
  BOOST_TEST(e.jobs_deleted == 3);  // the young one, and both failed
  BOOST_TEST(q->counts().total() == 0);
  BOOST_TEST(stored("SELECT count(*) FROM jobs") == 0);
  BOOST_TEST(stored("SELECT count(*) FROM attempts") == 0);
  BOOST_TEST(stored("SELECT count(*) FROM job_logs") == 0);  // with their jobs
  BOOST_TEST(stored("SELECT coalesce(sum(count), 0) FROM finished_counts") == 0);
}

BOOST_FIXTURE_TEST_CASE(a_result_is_dropped_at_its_ttl_and_the_job_stays, retention_fixture) {
  retention_options r;
  r.interval = 1min;
  open_with(r);
  auto wk = start(quick_worker());
  auto short_lived = submit(*job_of("ok").payload("r1").result_ttl(30s).build());
  auto kept = submit(*job_of("ok").payload("r2").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 2));
  advance(1min);
  auto e = swept(1);
  BOOST_TEST(e.results_dropped == 1);
  BOOST_TEST(e.jobs_deleted == 0);
  auto j = info(short_lived);
  BOOST_TEST(j.status == job_status::succeeded);
  BOOST_TEST(!j.result.has_value());
  BOOST_TEST(!j.result_expires_at_ms.has_value());
  BOOST_TEST((info(kept).result == std::optional<std::string>{"r2"}));
}

// An idempotency key is kept for its window from the first submission,
// then the sweeper deletes it, and the key takes a new job.
BOOST_FIXTURE_TEST_CASE(a_key_past_its_window_is_swept_and_free_again, retention_fixture) {
  options o;
  o.retention.interval = 1min;
  o.idempotency_window = 90s;
  reopen(o);
  auto first = submit(*job_of("ok").idempotency_key("order-1").build());
  BOOST_TEST(submit(*job_of("ok").idempotency_key("order-1").build()) == first);
  BOOST_TEST(stored("SELECT count(*) FROM idempotency_keys") == 1);
  advance(1min);  // within the window: nothing to sweep
  advance(1min);
  auto e = swept(1);
  BOOST_TEST(e.keys_expired == 1);
  BOOST_TEST(e.jobs_deleted == 0);
  BOOST_TEST(stored("SELECT count(*) FROM idempotency_keys") == 0);
  auto second = submit(*job_of("ok").idempotency_key("order-1").build());
  BOOST_TEST(second != first);
  BOOST_TEST(stored("SELECT count(*) FROM idempotency_keys") == 1);
}

BOOST_FIXTURE_TEST_CASE(a_pass_works_in_steps_of_the_batch_size, retention_fixture) {
  retention_options r;
  r.succeeded = 1s;
  r.interval = 1min;
  r.batch = 10;
  open_with(r);
  auto wk = start(quick_worker());
  std::vector<job> jobs(95, *job_of("ok").build());
  BOOST_REQUIRE(q->submit_batch(jobs).has_value());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 95));
  advance(1min);
  BOOST_TEST(swept(1).jobs_deleted == 95);
  BOOST_TEST(q->counts()[job_status::succeeded] == 0);
  BOOST_TEST(stored("SELECT count(*) FROM jobs") == 0);
}

BOOST_FIXTURE_TEST_CASE(under_a_steady_load_the_file_stops_growing, retention_fixture,
                        *ergon::test::sqlite_only("it measures the SQLite file")) {
  retention_options r;
  r.succeeded = 1min;
  r.interval = 1min;
  open_with(r);
  auto wk = start(quick_worker());
  constexpr int rounds = 60;
  constexpr int per_round = 300;
  std::vector<int64_t> pages;
  for (int round = 1; round <= rounds; ++round) {
    std::vector<job> jobs(per_round, *job_of("ok").payload(std::string(512, 'p')).build());
    BOOST_REQUIRE(q->submit_batch(jobs).has_value());
    BOOST_REQUIRE(log->wait_for(event_kind::succeeded, static_cast<size_t>(round * per_round)));
    advance(61s);
    if (round > 1)
      BOOST_REQUIRE(swept(static_cast<size_t>(round - 1)).jobs_deleted == per_round);
    pages.push_back(stored("PRAGMA page_count"));
  }
  std::string series;
  for (auto p : pages)
    series += std::to_string(p) + " ";
  BOOST_TEST_MESSAGE("page counts by round: " << series << "; free pages now "
                                              << stored("PRAGMA freelist_count"));
  // Each round's jobs reuse the pages the previous round's left: without
  // the sweeper the file grows by about 50 pages a round. A page or two
  // may still come as the tables' trees settle.
  auto first_half = *std::max_element(pages.begin(), pages.begin() + rounds / 2);
  auto second_half = *std::max_element(pages.begin() + rounds / 2, pages.end());
  BOOST_TEST(second_half <= first_half + 2);
  BOOST_TEST(first_half < 3 * pages[0]);
}

BOOST_FIXTURE_TEST_CASE(bad_options_are_named, retention_fixture) {
  auto field_of = [&](auto set) {
    options o;
    set(o.retention);
    auto r = queue::open(dir.file("other.db"), o);
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == error::invalid_argument);
    return r.error().field();
  };
  BOOST_TEST(field_of([](retention_options& r) { r.succeeded = 0ms; }) == "retention.succeeded");
  BOOST_TEST(field_of([](retention_options& r) { r.failed = -1ms; }) == "retention.failed");
  BOOST_TEST(field_of([](retention_options& r) { r.interval = 0ms; }) == "retention.interval");
  BOOST_TEST(field_of([](retention_options& r) { r.batch = 0; }) == "retention.batch");
  BOOST_TEST(field_of([](retention_options& r) { r.batch = 100'001; }) == "retention.batch");
  BOOST_TEST(!std::filesystem::exists(dir.file("other.db")));
}

BOOST_AUTO_TEST_CASE(a_pass_goes_status_by_status_then_results_then_keys) {
  retention_options r;
  r.succeeded = 1min;
  r.expired = 2min;
  r.batch = 100;
  actors::retention_pass pass{r, t0};
  auto step = pass.next();
  BOOST_REQUIRE(step && step->jobs);
  BOOST_TEST(step->jobs->status == job_status::succeeded);
  BOOST_TEST(step->jobs->cutoff_ms == t0 - 60'000);
  BOOST_TEST(step->jobs->after_row == 0);
  pass.done({{}, 100, 812, 0});  // a full step: more may follow from row 812
  step = pass.next();
  BOOST_REQUIRE(step && step->jobs);
  BOOST_TEST(step->jobs->after_row == 812);
  pass.done({{}, 7, 0, 0});
  step = pass.next();
  BOOST_REQUIRE(step && step->jobs);
  BOOST_TEST(step->jobs->status == job_status::expired);
  BOOST_TEST(step->jobs->cutoff_ms == t0 - 120'000);
  pass.done({{}, 0, 0, 0});
  step = pass.next();
  BOOST_REQUIRE(step.has_value());
  BOOST_TEST(!step->jobs.has_value());
  BOOST_TEST(step->results == 100u);
  pass.done({{}, 0, 0, 100});
  BOOST_TEST(pass.next().has_value());  // a full step of results: look again
  pass.done({{}, 0, 0, 3});
  // Idempotency keys past their window, until a step finds fewer than a batch.
  step = pass.next();
  BOOST_REQUIRE(step.has_value());
  BOOST_TEST(step->results == 0u);
  BOOST_TEST(step->keys == 100u);
  pass.done({{}, 0, 0, 0, 100});
  BOOST_TEST(pass.next().has_value());
  pass.done({{}, 0, 0, 0, 40});
  BOOST_TEST(!pass.next().has_value());
  BOOST_TEST(pass.deleted() == 107);
  BOOST_TEST(pass.results_dropped() == 103);
  BOOST_TEST(pass.keys_expired() == 140);
  // A failed step ends the pass; the next pass tries again.
  actors::retention_pass failing{r, t0};
  failing.done({status{error::io_error, "disk"}, 0, 0, 0});
  BOOST_TEST(!failing.next().has_value());
}

// With every status kept for a while, a pass ends by deleting the records
// of workers that left longer ago than the longest retention: no job it
// keeps can have run on them.
BOOST_AUTO_TEST_CASE(a_pass_with_every_status_retained_ends_with_departed_workers) {
  retention_options r;
  r.succeeded = 1min;
  r.failed = 7min;
  r.cancelled = 2min;
  r.expired = 3min;
  r.batch = 10;
  actors::retention_pass pass{r, t0};
  for (int i = 0; i < 4; ++i) {
    auto step = pass.next();
    BOOST_REQUIRE(step && step->jobs && !step->workers);
    pass.done({{}, 0, 0, 0});
  }
  pass.done({{}, 0, 0, 0});           // results
  pass.done({{}, 0, 0, 0, 0});        // keys
  auto step = pass.next();
  BOOST_REQUIRE(step.has_value());
  BOOST_REQUIRE(step->workers.has_value());
  BOOST_TEST(step->workers->first == t0 - 7 * 60'000);
  BOOST_TEST(step->workers->second == 10u);
  BOOST_TEST(!step->jobs.has_value());
  BOOST_TEST(step->keys == 0u);
  pass.done({{}, 0, 0, 0, 0, 10});    // a full step: look again
  BOOST_TEST(pass.next()->workers.has_value());
  pass.done({{}, 0, 0, 0, 0, 4});
  BOOST_TEST(!pass.next().has_value());
  BOOST_TEST(pass.workers_deleted() == 14);
  // A status kept forever keeps every worker's record.
  r.failed.reset();
  actors::retention_pass forever{r, t0};
  for (int i = 0; i < 4; ++i)  // three statuses, then results
    forever.done({{}, 0, 0, 0});
  forever.done({{}, 0, 0, 0, 0});
  BOOST_TEST(!forever.next().has_value());
}

// A worker's record stays while a job it ran may still be kept: it goes
// once the worker left longer ago than the longest retention. The last
// registration stays, so that ids count on.
BOOST_FIXTURE_TEST_CASE(records_of_departed_workers_go_after_the_longest_retention,
                        retention_fixture) {
  retention_options r;
  r.succeeded = 1min;
  r.cancelled = 1min;
  r.expired = 1min;
  r.failed = 5min;
  r.interval = 1min;
  open_with(r);
  for (size_t i = 1; i <= 2; ++i) {
    auto wk = start(quick_worker());
    submit(*job_of("ok").build());
    BOOST_REQUIRE(log->wait_for(event_kind::succeeded, i));
    BOOST_TEST(wk.stop().ok());
  }
  advance(4min);
  auto e = swept(1);
  BOOST_TEST(e.jobs_deleted == 2);
  BOOST_TEST(e.workers_deleted == 0);  // left 4 minutes ago: a failed job may still name them
  advance(2min);
  e = swept(2);
  BOOST_TEST(e.jobs_deleted == 0);
  BOOST_TEST(e.workers_deleted == 1);
  BOOST_TEST(stored("SELECT count(*) FROM workers") == 1);
  BOOST_TEST(stored("SELECT count(*) FROM workers WHERE left_at IS NULL") == 0);
}
