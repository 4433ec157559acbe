// One owner per PostgreSQL schema, with real processes (issue 29): a second
// owner is refused, a SIGKILLed owner is replaced at once, and a stopped
// owner that comes back commits nothing after its successor's first write.
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
  // The old owner's next submit fails: fenced (busy) or its session ended.
  // What it still prints was acked before it stopped: at most a pipe's worth.
  int lines = 0;
  for (auto line = a.read_line(); !line.empty(); line = a.read_line())
    if (++lines > 5'000) {
      a.signal(SIGKILL);
      BOOST_FAIL("the old owner goes on submitting after its successor took over");
    }
  int st = a.wait();
  BOOST_TEST(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
  BOOST_TEST(work_jobs(uri) == before);
  BOOST_TEST(b.submit(*job_builder("mine").build()).has_value());
  BOOST_TEST(b.close().ok());
}
