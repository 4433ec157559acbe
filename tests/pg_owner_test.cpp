// One owner per PostgreSQL schema, with real processes (issue 29): a second
// owner is refused, a SIGKILLed owner is replaced at once, and a stopped
// owner that comes back commits nothing after its successor's first write,
// closes its queue and reports busy.
#define BOOST_TEST_MODULE pg_owner
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "support/child_process.hpp"
#include "support/pg_server.hpp"
#include "support/server_process.hpp"
#include "support/test_engine.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// Opens `uri` as soon as the current owner's lease allows: a successor
// keeps trying while the answer is busy, up to a bound.
queue open_when_free(const std::string& uri, options opts) {
  auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    auto q = queue::open(uri, opts);
    if (q)
      return std::move(*q);
    BOOST_REQUIRE_MESSAGE(q.error().code() == error::busy, q.error().to_string());
    BOOST_REQUIRE_MESSAGE((std::chrono::steady_clock::now() < deadline), q.error().to_string());
  }
}

int64_t work_jobs(const std::string& uri) {
  return engine_probe{uri}.number("SELECT count(*) FROM jobs WHERE type = 'work'");
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_second_owner_is_refused_and_a_killed_one_replaced_at_once) {
  auto uri = shared_pg_server().fresh_database();
  child_process a{{ERGON_TEST_CRASH_WORKER, uri, "submit", "1000000"}};
  BOOST_REQUIRE(a.read_line().rfind("acked ", 0) == 0);
  auto refused = queue::open(uri);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().code() == error::busy);
  BOOST_TEST(refused.error().message().find("pid " + std::to_string(a.pid())) != std::string::npos,
             refused.error().message());
  a.signal(SIGKILL);
  a.wait();
  // PostgreSQL saw the sessions end: no need to wait for the 10 s lease.
  auto started = std::chrono::steady_clock::now();
  auto q = open_when_free(uri, options{});
  BOOST_TEST((std::chrono::steady_clock::now() - started < 5s));
}

BOOST_AUTO_TEST_CASE(a_stopped_owner_commits_nothing_after_its_successor_took_over) {
  auto uri = shared_pg_server().fresh_database();
  ::setenv("ERGON_TEST_LEASE_MS", "1000", 1);
  child_process a{{ERGON_TEST_CRASH_WORKER, uri, "submit", "1000000"}};
  ::unsetenv("ERGON_TEST_LEASE_MS");
  std::string first;
  for (int i = 0; i < 20; ++i) {
    auto line = a.read_line();
    BOOST_REQUIRE(line.rfind("acked ", 0) == 0);
    if (first.empty())
      first = line.substr(6);
  }
  // Stopped anywhere: between transactions, or within one, holding the
  // lease row's share lock (the successor then ends its sessions).
  a.signal(SIGSTOP);
  options opts;
  opts.lease_time = 1s;
  auto b = open_when_free(uri, opts);
  // The successor's first write adds no row, so an old owner's next insert
  // could not fail on a row id it also took: only the fence stops it.
  auto id = job_id::parse(first);
  BOOST_REQUIRE(id.has_value());
  BOOST_REQUIRE(b.cancel_pending(*id).ok());
  auto before = work_jobs(uri);
  a.signal(SIGCONT);
  // What it still prints was acked before it stopped: at most a pipe's
  // worth. A submit in flight may fail when its session was ended; the next
  // one fails busy, fenced, and the child exits with status 2.
  int lines = 0;
  std::string failed;
  for (auto line = a.read_line(); !line.empty(); line = a.read_line()) {
    if (line.rfind("failed ", 0) == 0)
      failed = line;
    if (++lines > 5'000) {
      a.signal(SIGKILL);
      BOOST_FAIL("the old owner goes on submitting after its successor took over");
    }
  }
  int st = a.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 2), "wait status " << st);
  BOOST_TEST(failed.find("busy") != std::string::npos, failed);
  // Whichever notices first once it runs again: a renewal or the fence
  // finds the takeover, or its own clock finds its lease lapsed.
  BOOST_TEST((failed.find("took the queue over") != std::string::npos
              || failed.find("lost the queue's lease") != std::string::npos),
             failed);
  BOOST_TEST(work_jobs(uri) == before);
  BOOST_TEST(b.submit(*job_builder("mine").build()).has_value());
  BOOST_TEST(b.close().ok());
}

// ergon-server, stopped past its lease and replaced, notices when it comes
// back: its queue closes and it exits with status 4 (server/main.cpp).
BOOST_AUTO_TEST_CASE(a_replaced_server_closes_its_queue_and_exits_with_status_4) {
  auto uri = shared_pg_server().fresh_database();
  server_process a{uri, 0, {"--lease-time-ms", "1000", "--commit-outcome-wait-ms", "5000"}};
  a.proc.signal(SIGSTOP);
  options opts;
  opts.lease_time = 1s;
  auto b = open_when_free(uri, opts);
  BOOST_REQUIRE(b.submit(*job_builder("mine").build()).has_value());
  a.proc.signal(SIGCONT);
  int st = a.proc.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 4), "wait status " << st);
  BOOST_TEST(b.counts()[job_status::pending] == 1);
  BOOST_TEST(b.close().ok());
}

// A deposed queue answers every call `busy`, naming the takeover, and its
// close reports the same; nothing it did after the takeover committed.
BOOST_AUTO_TEST_CASE(a_deposed_queue_answers_busy_and_closes) {
  auto uri = shared_pg_server().fresh_database();
  // A long lease: no renewal comes between the takeover and the submit, so
  // the writer's fence is what finds it.
  options opts;
  opts.lease_time = 60s;
  auto a = queue::open(uri, opts);
  BOOST_REQUIRE(a.has_value());
  auto id = a->submit(*job_builder("work").build());
  BOOST_REQUIRE(id.has_value());
  // Another process takes the lease over, as if this one had been stopped
  // past its lease: the lease row's epoch moves on.
  engine_probe{uri}.exec("UPDATE ergon.lease SET epoch = epoch + 1, pid = 1, host = 'elsewhere'");
  auto refused = a->submit(*job_builder("work").build());
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().code() == error::busy);
  BOOST_TEST(refused.error().message().find("took the queue over") != std::string::npos,
             refused.error().message());
  // The fence that failed closes the queue: a waiter hears why, and so
  // does every later call.
  auto waited = a->wait(*id, 60s);
  BOOST_REQUIRE(!waited.has_value());
  BOOST_TEST(waited.error().code() == error::busy, waited.error().to_string());
  BOOST_TEST(waited.error().message().find("this queue closed") != std::string::npos,
             waited.error().message());
  auto after = a->submit(*job_builder("work").build());
  BOOST_REQUIRE(!after.has_value());
  BOOST_TEST(after.error().message().find("this queue closed") != std::string::npos,
             after.error().message());
  auto closed = a->close();
  BOOST_TEST(closed.code() == error::busy, closed.to_string());
  BOOST_TEST(work_jobs(uri) == 1);
}
