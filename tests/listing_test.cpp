// Listings for operators and dead letters: list_jobs pages through jobs by
// status, type, group, name and time without skipping or repeating a job
// while others arrive, each filter served by an index or row-id range (the
// query plans are checked); list_failed shows every attempt's error;
// retry_failed (one job, or a filter in one transaction) and purge_failed.
#define BOOST_TEST_MODULE listing
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <set>

#include "ergon/storage/op/list_jobs.hpp"
#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

page_request first(size_t limit) {
  page_request p;
  p.limit = limit;
  return p;
}

// Every detail line of EXPLAIN QUERY PLAN for `sql`.
std::vector<std::string> query_plan(const sqlite_probe& db, const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  auto explain = "EXPLAIN QUERY PLAN " + sql;
  BOOST_REQUIRE(sqlite3_prepare_v2(db.raw(), explain.c_str(), -1, &s, nullptr) == SQLITE_OK);
  std::vector<std::string> lines;
  while (sqlite3_step(s) == SQLITE_ROW)
    lines.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 3)));
  sqlite3_finalize(s);
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (auto& l : lines)
    out += l + "; ";
  return out;
}

// Every job `f` matches, page by page.
std::vector<job_info> all_pages(queue& q, const job_filter& f, page_request page) {
  std::vector<job_info> out;
  for (int guard = 0; guard < 10'000; ++guard) {
    auto p = q.list_jobs(f, page);
    BOOST_REQUIRE_MESSAGE(p.has_value(), p.error().to_string());
    out.insert(out.end(), p->jobs.begin(), p->jobs.end());
    if (!p->next)
      return out;
    page.after = p->next;
  }
  BOOST_FAIL("the listing did not end");
  return out;
}

struct failing_fixture : queue_fixture {
  // Jobs of type "flaky" fail every attempt with "boom <try>".
  worker start_failing() {
    worker_options w;
    w.max_concurrency = 8;
    w.runners["flaky"] = [](job_context& ctx) {
      throw std::runtime_error("boom " + std::to_string(ctx.try_number()));
    };
    w.runners["fine"] = [](job_context&) {};
    return start(std::move(w));
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(list_jobs)

BOOST_FIXTURE_TEST_CASE(every_filter_is_served_by_an_index_or_a_row_range, queue_fixture,
                        *ergon::test::sqlite_only("it reads SQLite's query plans")) {
  submit(*job_of("t").build());  // the file has its tables and indexes
  sqlite_probe db{dir.file("q.db")};
  auto with = [](auto set) {
    job_filter f;
    set(f);
    return f;
  };
  struct plan_case {
    const char* what;
    job_filter filter;
    const char* access;
  };
  plan_case cases[] = {
    {"nothing", {}, "USING INTEGER PRIMARY KEY"},
    {"type and group", with([](job_filter& f) { f.type = "t"; f.group = "g"; }),
     "USING INTEGER PRIMARY KEY"},
    {"succeeded", with([](job_filter& f) { f.status = job_status::succeeded; }),
     "USING INTEGER PRIMARY KEY"},
    {"pending", with([](job_filter& f) { f.status = job_status::pending; }),
     "USING INTEGER PRIMARY KEY"},
    {"running by type", with([](job_filter& f) { f.status = job_status::running; f.type = "t"; }),
     "USING INTEGER PRIMARY KEY"},
    {"failed", with([](job_filter& f) { f.status = job_status::failed; }), "jobs_unsuccessful"},
    {"cancelled in a time range",
     with([](job_filter& f) {
       f.status = job_status::cancelled;
       f.finished_from_ms = 1;
       f.finished_before_ms = 2;
     }),
     "jobs_unsuccessful"},
    {"expired", with([](job_filter& f) { f.status = job_status::expired; }), "jobs_unsuccessful"},
    {"name", with([](job_filter& f) { f.name = "n"; }), "jobs_by_name"},
    {"name and status", with([](job_filter& f) { f.name = "n"; f.status = job_status::failed; }),
     "jobs_by_name"},
  };
  for (auto& c : cases) {
    for (bool desc : {false, true}) {
      auto plan = query_plan(db, storage::list_jobs_sql(c.filter, desc));
      auto text = joined(plan);
      BOOST_TEST_MESSAGE(c.what << (desc ? " (newest first): " : ": ") << text);
      BOOST_TEST(plan.size() == 1u, c.what << ": " << text);
      BOOST_TEST(text.find("SEARCH jobs") == 0, c.what << ": " << text);
      BOOST_TEST(text.find(c.access) != std::string::npos, c.what << ": " << text);
      BOOST_TEST(text.find("SCAN") == std::string::npos, c.what << ": " << text);
      BOOST_TEST(text.find("TEMP B-TREE") == std::string::npos, c.what << ": " << text);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(pages_neither_skip_nor_repeat_while_jobs_arrive, queue_fixture) {
  std::set<job_id> first;
  for (int i = 0; i < 230; ++i)
    first.insert(submit(*job_of(i % 2 ? "a" : "b").build()));
  for (bool desc : {false, true}) {
    page_request page;
    page.limit = 37;
    page.newest_first = desc;
    std::vector<job_id> seen;
    for (int round = 0;; ++round) {
      auto p = q->list_jobs({}, page);
      BOOST_REQUIRE_MESSAGE(p.has_value(), p.error().to_string());
      for (auto& j : p->jobs)
        seen.push_back(j.id);
      // New jobs and a cancel land between pages.
      for (int k = 0; k < 9; ++k)
        submit(*job_of("late").build());
      if (round < 3)
        BOOST_TEST(q->cancel(p->jobs.front().id).ok());
      if (!p->next)
        break;
      page.after = p->next;
    }
    std::set<job_id> unique(seen.begin(), seen.end());
    BOOST_TEST(unique.size() == seen.size());  // no repeats
    for (size_t i = 1; i < seen.size(); ++i)
      BOOST_TEST((desc ? seen[i] < seen[i - 1] : seen[i - 1] < seen[i]));
    for (auto& id : first)
      BOOST_TEST(unique.count(id) == 1u);  // no skips
  }
}

BOOST_FIXTURE_TEST_CASE(filters_match_status_type_group_name_and_time, failing_fixture) {
  auto wk = start_failing();
  std::vector<job_id> failed;
  for (int i = 0; i < 3; ++i)
    failed.push_back(submit(*job_of("flaky").group("tenant-" + std::to_string(i % 2))
                              .max_retries(0).build()));
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 3));
  advance(10s);
  auto ok = submit(*job_of("fine").name("report").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, ok));
  BOOST_TEST(wk.stop(hang_guard).ok());
  auto waiting = submit(*job_of("fine").name("report").group("tenant-1").build());

  auto count = [&](auto set) {
    job_filter f;
    set(f);
    return all_pages(*q, f, {}).size();
  };
  BOOST_TEST(count([](job_filter&) {}) == 5u);
  BOOST_TEST(count([](job_filter& f) { f.status = job_status::failed; }) == 3u);
  BOOST_TEST(count([](job_filter& f) { f.status = job_status::pending; }) == 1u);
  BOOST_TEST(count([](job_filter& f) { f.status = job_status::succeeded; }) == 1u);
  BOOST_TEST(count([](job_filter& f) { f.status = job_status::running; }) == 0u);
  BOOST_TEST(count([](job_filter& f) { f.type = "fine"; }) == 2u);
  BOOST_TEST(count([](job_filter& f) { f.group = "tenant-1"; }) == 2u);
  BOOST_TEST(count([](job_filter& f) {
               f.status = job_status::failed;
               f.group = "tenant-0";
             }) == 2u);
  BOOST_TEST(count([](job_filter& f) { f.name = "report"; }) == 2u);
  BOOST_TEST(count([](job_filter& f) {
               f.name = "report";
               f.status = job_status::pending;
             }) == 1u);
  BOOST_TEST(count([&](job_filter& f) { f.submitted_from_ms = t0 + 10'000; }) == 2u);
  BOOST_TEST(count([&](job_filter& f) { f.submitted_before_ms = t0 + 10'000; }) == 3u);
  BOOST_TEST(count([&](job_filter& f) { f.finished_before_ms = t0 + 1; }) == 3u);
  BOOST_TEST(count([&](job_filter& f) { f.finished_from_ms = t0 + 10'000; }) == 1u);
  auto p = q->list_jobs({}, {2, std::nullopt, true});
  BOOST_REQUIRE(p.has_value());
  BOOST_REQUIRE(p->jobs.size() == 2u);
  BOOST_TEST(p->jobs[0].id == waiting);
  BOOST_TEST(p->jobs[1].id == ok);
  // The view an operator sees: pending jobs carry their scheduling fields.
  BOOST_TEST(p->jobs[0].status == job_status::pending);
}

BOOST_FIXTURE_TEST_CASE(bad_requests_are_named, queue_fixture) {
  auto field_of = [&](const job_filter& f, const page_request& p) {
    auto r = q->list_jobs(f, p);
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == error::invalid_argument);
    return r.error().field();
  };
  BOOST_TEST(field_of({}, first(0)) == "limit");
  BOOST_TEST(field_of({}, first(max_page_size + 1)) == "limit");
  BOOST_TEST(field_of({}, {10, job_id{}}) == "after");
  job_filter f;
  f.type = "";
  BOOST_TEST(field_of(f, {}) == "type");
  f = {};
  f.group = std::string(257, 'g');
  BOOST_TEST(field_of(f, {}) == "group");
  f = {};
  f.status = static_cast<job_status>(9);
  BOOST_TEST(field_of(f, {}) == "status");
  f = {};
  f.finished_before_ms = -1;
  BOOST_TEST(field_of(f, {}) == "finished_before");
  BOOST_TEST(q->jobs_by_name("x", 0).error().field() == "limit");
  BOOST_TEST(q->list_jobs({}, first(max_page_size)).has_value());
  queue moved = std::move(*q);
  BOOST_TEST(q->list_jobs({}).error().code() == error::closed);
  BOOST_TEST(q->list_failed({}).error().code() == error::closed);
}

BOOST_FIXTURE_TEST_CASE(jobs_by_name_stops_at_its_limit, queue_fixture) {
  for (int i = 0; i < 5; ++i)
    submit(*job_of("t").name("same").build());
  BOOST_TEST(q->jobs_by_name("same")->size() == 5u);
  auto two = q->jobs_by_name("same", 2);
  BOOST_REQUIRE(two.has_value());
  BOOST_TEST(two->size() == 2u);
  BOOST_TEST(q->jobs_by_name("")->empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dead_letters)

BOOST_FIXTURE_TEST_CASE(failed_jobs_are_listed_with_every_attempts_error, failing_fixture) {
  auto wk = start_failing();
  auto id = submit(*job_of("flaky").max_retries(2).build());
  submit(*job_of("fine").build());
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  advance(1s);
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 2, id));
  advance(2s);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  auto dead = q->list_failed({});
  BOOST_REQUIRE_MESSAGE(dead.has_value(), dead.error().to_string());
  BOOST_REQUIRE(dead->jobs.size() == 1u);
  auto& j = dead->jobs[0];
  BOOST_TEST(j.id == id);
  BOOST_REQUIRE(j.attempts.size() == 3u);
  for (int t = 0; t < 3; ++t) {
    BOOST_TEST(j.attempts[t].message == "boom " + std::to_string(t + 1));
    BOOST_TEST(j.attempts[t].outcome == attempt_outcome::failed);
  }
  job_filter other;
  other.type = "fine";
  BOOST_TEST(q->list_failed(other)->jobs.empty());
  // The filter's own status is ignored: dead letters are failed jobs.
  other = {};
  other.status = job_status::succeeded;
  BOOST_TEST(q->list_failed(other)->jobs.size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_retried_job_runs_again_with_fresh_tries_and_keeps_its_history,
                        failing_fixture) {
  std::atomic<bool> heal{false};
  worker_options w;
  w.runners["flaky"] = [&](job_context& ctx) {
    if (!heal)
      throw std::runtime_error("boom " + std::to_string(ctx.try_number()));
    if (ctx.try_number() < 4)
      throw std::runtime_error("still broken " + std::to_string(ctx.try_number()));
  };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("flaky").max_retries(1).payload("keep me").build());
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, id));
  advance(1s);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
  BOOST_TEST(q->counts()[job_status::failed] == 1);
  heal = true;
  BOOST_TEST(q->retry_failed(id).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::requeued, 1, id));
  // Try 3 fails, and with max_retries 1 the job may still run try 4.
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 2, id));
  advance(1s);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  auto j = info(id);
  BOOST_TEST(j.tries == 4);
  BOOST_TEST(j.tries_before_retry == 2);
  BOOST_TEST(j.payload == "keep me");
  BOOST_REQUIRE(j.attempts.size() == 4u);
  BOOST_TEST(j.attempts[0].message == "boom 1");
  BOOST_TEST(j.attempts[1].message == "boom 2");
  BOOST_TEST(j.attempts[2].message == "still broken 3");
  BOOST_TEST(j.attempts[3].outcome == attempt_outcome::succeeded);
  BOOST_TEST(q->counts()[job_status::failed] == 0);
  BOOST_TEST(q->counts()[job_status::succeeded] == 1);
  // Retrying what did not fail says why.
  BOOST_TEST(q->retry_failed(id).code() == error::job_finished);
  auto pending = submit(*job_of("nobody").build());
  BOOST_TEST(q->retry_failed(pending).code() == error::invalid_argument);
  BOOST_TEST(q->retry_failed(pending).field() == "id");
  BOOST_TEST(q->retry_failed(job_id{}).code() == error::not_found);
}

BOOST_FIXTURE_TEST_CASE(a_replay_runs_a_finished_job_again_and_keeps_its_history,
                        failing_fixture) {
  std::atomic<int> runs{0};
  worker_options w;
  w.runners["fine"] = [&](job_context& ctx) { return "run " + std::to_string(++runs) + " " + ctx.payload(); };
  auto wk = start(std::move(w));
  auto id = submit(*job_of("fine").payload("p").max_retries(0).build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(info(id).result.value_or("") == "run 1 p");
  BOOST_TEST(q->replay(id).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::requeued, 1, id));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 2, id));
  auto j = info(id);
  BOOST_TEST(j.status == job_status::succeeded);
  BOOST_TEST(j.result.value_or("") == "run 2 p");
  BOOST_TEST(j.tries == 2);
  BOOST_TEST(j.tries_before_retry == 1);
  BOOST_REQUIRE(j.attempts.size() == 2u);
  BOOST_TEST(j.attempts[0].outcome == attempt_outcome::succeeded);
  BOOST_TEST(j.attempts[1].outcome == attempt_outcome::succeeded);
  BOOST_TEST(q->counts()[job_status::succeeded] == 1);
  // A cancelled job runs for the first time.
  auto paused = submit(*job_of("fine").run_at(4'000'000'000'000).build());
  BOOST_TEST(q->cancel(paused).ok());
  BOOST_TEST(q->counts()[job_status::cancelled] == 1);
  BOOST_TEST(q->replay(paused).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, paused));
  BOOST_TEST(q->counts()[job_status::cancelled] == 0);
  BOOST_TEST(info(paused).attempts.size() == 1u);
  // What has not finished, or holds a key another job has taken since,
  // says why and stays as it was.
  auto later = submit(*job_of("nobody").build());
  BOOST_TEST(q->replay(later).code() == error::invalid_argument);
  BOOST_TEST(q->replay(later).field() == "id");
  BOOST_TEST(q->replay(job_id{}).code() == error::not_found);
  auto keyed = submit(*job_of("fine").unique_key("k").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, keyed));
  auto holder = submit(*job_of("nobody").unique_key("k").build());
  auto held = q->replay(keyed);
  BOOST_TEST(held.code() == error::already_exists);
  BOOST_TEST(held.message().find(holder.to_string()) != std::string::npos, held.message());
  BOOST_TEST(info(keyed).status == job_status::succeeded);
}

BOOST_FIXTURE_TEST_CASE(a_retried_job_survives_a_reopen_as_pending, failing_fixture) {
  job_id id;
  {
    auto wk = start_failing();
    id = submit(*job_of("flaky").max_retries(0).build());
    BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, id));
    BOOST_TEST(wk.stop(hang_guard).ok());
  }
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(q->cancel(submit(*job_of("nobody").build())).ok());
  reopen();  // the low mark passes every finished job
  BOOST_TEST(q->retry_failed(id).ok());
  reopen();
  BOOST_TEST(info(id).status == job_status::pending);
  BOOST_TEST(q->counts()[job_status::pending] == 1);
  job_filter f;
  f.status = job_status::pending;
  BOOST_TEST(q->list_jobs(f)->jobs.size() == 1u);
  // The dispatcher loaded it: it runs.
  worker_options w;
  w.runners["flaky"] = [](job_context&) {};
  auto wk = start(std::move(w));
  BOOST_TEST(q->wait(id, hang_guard)->status == job_status::succeeded);
}

BOOST_FIXTURE_TEST_CASE(bulk_retry_takes_the_filter_in_one_transaction_and_skips_held_keys,
                        failing_fixture) {
  auto wk = start_failing();
  std::vector<job_id> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(submit(*job_of("flaky").group(i < 4 ? "a" : "b").max_retries(0).build()));
  auto keyed = submit(*job_of("flaky").group("a").max_retries(0).unique_key("k").build());
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 7));
  BOOST_TEST(wk.stop(hang_guard).ok());
  // Another job holds the key now.
  auto holder = submit(*job_of("nobody").unique_key("k").build());
  job_filter only_a;
  only_a.group = "a";
  auto r = q->retry_failed(only_a);
  BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
  BOOST_TEST(r->retried == 4);
  BOOST_REQUIRE(r->skipped.size() == 1u);
  BOOST_TEST(r->skipped[0] == keyed);
  BOOST_TEST(info(keyed).status == job_status::failed);
  BOOST_TEST(q->retry_failed(keyed).code() == error::already_exists);
  for (int i = 0; i < 6; ++i)
    BOOST_TEST(info(ids[i]).status == (i < 4 ? job_status::pending : job_status::failed));
  BOOST_TEST(q->counts()[job_status::failed] == 3);
  BOOST_TEST(q->counts()[job_status::pending] == 5);
  // Once the holder is gone the key is free again.
  BOOST_TEST(q->cancel(holder).ok());
  BOOST_TEST(q->retry_failed(keyed).ok());
  job_filter bad;
  bad.type = "";
  BOOST_TEST(q->retry_failed(bad).error().field() == "type");
}

BOOST_FIXTURE_TEST_CASE(purge_deletes_failed_jobs_with_their_attempts, failing_fixture) {
  auto wk = start_failing();
  for (int i = 0; i < 1'203; ++i)
    submit(*job_of("flaky").max_retries(i < 3 ? 1 : 0).build());
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 3));
  advance(1s);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1'203));
  auto kept = submit(*job_of("fine").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, kept));
  BOOST_TEST(wk.stop(hang_guard).ok());
  advance(1h);
  // Failed within the last hour: none; older than a minute: all.
  BOOST_TEST(q->purge_failed(2h).value() == 0);
  BOOST_TEST(q->purge_failed(-1ms).error().field() == "older_than");
  auto three = q->list_failed({}, first(3));
  BOOST_REQUIRE(three.has_value());
  for (auto& j : three->jobs)
    BOOST_TEST(j.attempts.size() == 2u);  // the first three were retried once
  BOOST_TEST(q->purge_failed(1min).value() == 1'203);
  ergon::test::engine_probe db{location};
  BOOST_TEST(db.number("SELECT count(*) FROM attempts") == 0);
  BOOST_TEST(db.number("SELECT count(*) FROM jobs") == 1);
  BOOST_TEST(q->counts()[job_status::failed] == 0);
  BOOST_TEST(q->counts()[job_status::succeeded] == 1);
  BOOST_TEST(db.number("SELECT coalesce(sum(count), 0) FROM finished_counts WHERE status = 3")
             == 0);
  BOOST_TEST(info(kept).status == job_status::succeeded);
}

BOOST_AUTO_TEST_SUITE_END()
