// One owner per PostgreSQL schema, with real processes (issue 29): a second
// owner is refused, a SIGKILLed owner is replaced at once, and a stopped
// owner that comes back commits nothing after its successor's first write,
// closes its queue and reports busy. And standby servers (issue 30):
// ergon-server --standby takes a SIGKILLed owner's queue over, and an
// owner stopped past its lease steps down when it runs again.
#define BOOST_TEST_MODULE pg_owner
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>

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

uint16_t port_in(const std::string& line) {
  return static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
}

// A port nothing listens on now.
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  BOOST_REQUIRE(fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
                && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A `ergon-server --standby` with HTTP, on `port` (0: a free one, chosen
// at its first takeover).
struct standby_process {
  child_process proc;
  uint16_t http = 0;
  uint16_t port = 0;  // once it owns the queue
  // Reads its first lines: the HTTP port, and either the listening line
  // (it owns the queue) or the standby line; they come in either order.
  // The lease is long unless a case stops the owner: a renewal held up on
  // a loaded machine must not make the owner step down by itself.
  standby_process(const std::string& uri, std::vector<std::string> extra, uint16_t at = 0,
                  int lease_ms = 10'000)
      : proc(args(uri, std::move(extra), at, lease_ms)) {
    bool role_known = false;
    while (http == 0 || !role_known) {
      auto line = proc.read_line();
      BOOST_REQUIRE_MESSAGE(!line.empty(), "ergon-server --standby ended early");
      if (line.rfind("ergon-server http on ", 0) == 0)
        http = port_in(line);
      else if (line.rfind("ergon-server listening on ", 0) == 0)
        port = port_in(line), role_known = true;
      else if (line.rfind("ergon-server standby for ", 0) == 0)
        role_known = true;
    }
  }
  static std::vector<std::string> args(const std::string& uri, std::vector<std::string> extra,
                                       uint16_t at, int lease_ms) {
    std::vector<std::string> out{ERGON_SERVER, "--db", uri, "--standby", "--port",
                                 std::to_string(at),
                                 "--http-port", "0", "--standby-poll-ms", "50",
                                 "--lease-time-ms", std::to_string(lease_ms)};
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  }
  // Its /healthz: the status and the body.
  std::pair<int, std::string> health() const {
    httplib::Client c{"127.0.0.1", http};
    auto r = c.Get("/healthz");
    BOOST_REQUIRE(r);
    return {r->status, r->body};
  }
};

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
  // As a takeover does: FOR UPDATE waits for a writer batch that read the
  // old epoch, so no batch straddles the change.
  engine_probe{uri}.exec(
    "BEGIN; SELECT 1 FROM ergon.lease FOR UPDATE; "
    "UPDATE ergon.lease SET epoch = epoch + 1, pid = 1, host = 'elsewhere'; COMMIT");
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

// A SIGKILLed owner's queue continues on a standby (target: within 2 s with
// default settings), with the jobs it held; the standby answers on the same
// ports it announced.
BOOST_AUTO_TEST_CASE(a_standby_server_takes_a_killed_owners_queue_over) {
  auto uri = shared_pg_server().fresh_database();
  standby_process a{uri, {}};
  if (a.port == 0)  // it printed the standby line before it took over
    a.port = port_in(a.proc.line_starting("ergon-server listening on "));
  standby_process b{uri, {}};
  BOOST_REQUIRE(b.port == 0);
  BOOST_TEST(a.health().first == 200);
  auto [code, body] = b.health();
  BOOST_TEST(code == 503);
  BOOST_TEST(body.find("\"role\":\"standby\"") != std::string::npos, body);
  BOOST_TEST(body.find("\"pid\":" + std::to_string(a.proc.pid())) != std::string::npos, body);
  {
    client c;
    auto q = connect(c.sys, "127.0.0.1", a.port);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    BOOST_REQUIRE(c.ask<job_id>(*q, submit_atom::value, *job_builder("work").build()).has_value());
  }
  // A client that knows only the queue's location finds its owner there.
  client finder;
  connect_options by_owner;
  by_owner.owner_of = uri;
  auto found = connect(finder.sys, by_owner);
  BOOST_REQUIRE_MESSAGE(found.has_value(), found.error().to_string());
  BOOST_TEST(finder.ask<status_counts>(*found, counts_atom::value).has_value());
  a.proc.signal(SIGKILL);
  a.proc.wait();
  auto killed = std::chrono::steady_clock::now();
  auto listening = b.proc.line_starting("ergon-server listening on ");
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - killed);
  BOOST_TEST_MESSAGE("the standby served " << took.count() << " ms after the owner's SIGKILL");
  BOOST_TEST(b.health().first == 200);
  client c;
  auto q = connect(c.sys, "127.0.0.1", port_in(listening));
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto counts = c.ask<status_counts>(*q, counts_atom::value);
  BOOST_REQUIRE(counts.has_value());
  BOOST_TEST((*counts)[job_status::pending] == 1);
  // It follows the owner: `unreachable` until a round finds the new one.
  auto seen = finder.ask<status_counts>(*found, counts_atom::value);
  for (int tries = 0; !seen && seen.error().code() == error::unreachable && tries < 1'000'000;
       ++tries)
    seen = finder.ask<status_counts>(*found, counts_atom::value);
  BOOST_REQUIRE_MESSAGE(seen.has_value(), seen.error().to_string());
  BOOST_TEST((*seen)[job_status::pending] == 1);
  b.proc.signal(SIGTERM);
  int st = b.proc.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0), "wait status " << st);
}

// An owner stopped past its lease is replaced by a standby; when it runs
// again it steps down and stands by itself, rather than exiting.
BOOST_AUTO_TEST_CASE(an_owner_stopped_past_its_lease_steps_down_when_it_runs_again) {
  auto uri = shared_pg_server().fresh_database();
  standby_process a{uri, {}, 0, 2'000};
  if (a.port == 0)
    a.proc.line_starting("ergon-server listening on ");
  standby_process b{uri, {}, 0, 2'000};
  BOOST_REQUIRE(b.port == 0);
  a.proc.signal(SIGSTOP);
  auto stopped = std::chrono::steady_clock::now();
  b.proc.line_starting("ergon-server listening on ");
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - stopped);
  BOOST_TEST_MESSAGE("the standby served " << took.count()
                                           << " ms after the owner stopped (lease 2000 ms)");
  a.proc.signal(SIGCONT);
  auto down = a.proc.line_starting("ergon-server stepping down: ");
  BOOST_TEST(down.find("busy") != std::string::npos, down);
  a.proc.line_starting("ergon-server standby for ");
  auto [code, body] = a.health();
  BOOST_TEST(code == 503);
  BOOST_TEST(body.find("\"role\":\"standby\"") != std::string::npos, body);
  BOOST_TEST(body.find("\"pid\":" + std::to_string(b.proc.pid())) != std::string::npos, body);
  // Still a standby: it takes the queue back when b goes.
  b.proc.signal(SIGTERM);
  b.proc.wait();
  a.proc.line_starting("ergon-server listening on ");
  BOOST_TEST(a.health().first == 200);
}

// Two worker processes and a client that know both servers' addresses
// (connect_options) run 200 ms jobs; the owner is SIGKILLed while they run.
// The standby takes over, the workers join it with what they hold and go
// on under the same attempts, and the client's handle reaches it too. Every
// job's code runs exactly once, and succeeds.
BOOST_AUTO_TEST_CASE(remote_work_moves_to_the_standby_that_took_over_and_runs_once) {
  auto uri = shared_pg_server().fresh_database();
  temp_dir dir;
  auto side = dir.file("side");
  ::setenv("ERGON_TEST_SIDE_FILE", side.c_str(), 1);
  auto p1 = free_port(), p2 = free_port();
  standby_process a{uri, {}, p1};
  if (a.port == 0)
    a.port = port_in(a.proc.line_starting("ergon-server listening on "));
  BOOST_REQUIRE(a.port == p1);
  standby_process b{uri, {}, p2};
  BOOST_REQUIRE(b.port == 0);
  auto ports = std::to_string(p1) + "," + std::to_string(p2);
  std::vector<std::unique_ptr<child_process>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<child_process>(
      std::vector<std::string>{ERGON_TEST_REMOTE_WORKER, "127.0.0.1", ports, "side", "4"}));
    BOOST_REQUIRE_EQUAL(workers.back()->read_line(), "ready");
  }
  client c;
  connect_options where;
  where.addresses = {{"127.0.0.1", p1}, {"127.0.0.1", p2}};
  auto q = connect(c.sys, where);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  std::vector<job_id> ids;
  for (int i = 0; i < 40; ++i) {
    auto id = c.ask<job_id>(*q, submit_atom::value,
                            *job_builder("job").payload("j" + std::to_string(i)).build());
    BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
    ids.push_back(*id);
  }
  // Some run now: the first job's code has started.
  auto first = c.ask<job_info>(*q, wait_atom::value, ids[0], std::chrono::milliseconds{0});
  for (int tries = 0; first && first->status == job_status::pending && tries < 100'000; ++tries)
    first = c.ask<job_info>(*q, job_info_atom::value, ids[0]);
  a.proc.signal(SIGKILL);
  a.proc.wait();
  auto killed = std::chrono::steady_clock::now();
  BOOST_TEST(port_in(b.proc.line_starting("ergon-server listening on ")) == p2);
  BOOST_TEST_MESSAGE("the standby served "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - killed)
                          .count()
                     << " ms after the owner's SIGKILL");
  // The same handle: `unreachable` until a round reaches the new owner.
  std::vector<job_info> done;
  for (auto& id : ids) {
    auto info = c.ask<job_info>(*q, wait_atom::value, id, std::chrono::milliseconds{60'000});
    for (int tries = 0; !info && info.error().code() == error::unreachable && tries < 1'000'000;
         ++tries)
      info = c.ask<job_info>(*q, wait_atom::value, id, std::chrono::milliseconds{60'000});
    BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
    done.push_back(*info);
  }
  auto runs = runs_in(side);
  for (auto& j : done) {
    BOOST_TEST((j.status == job_status::succeeded), j.id.to_string());
    BOOST_TEST(runs[j.payload] == 1, j.payload << " ran " << runs[j.payload] << " times");
  }
  for (auto& w : workers) {
    w->signal(SIGTERM);
    BOOST_TEST(w->read_line() == "stopped ok");
  }
  b.proc.signal(SIGTERM);
  b.proc.wait();
  ::unsetenv("ERGON_TEST_SIDE_FILE");
}

// A client submits jobs with idempotency keys throughout, and the owner is
// SIGKILLed with ten submits in flight. Each submit whose answer is an
// error (unreachable: it may or may not have committed) is sent again,
// under the same key, until it is answered with an id. Every key ends up
// with exactly one job, and every answer for a key names that job.
BOOST_AUTO_TEST_CASE(a_keyed_submit_sent_again_across_a_takeover_makes_one_job) {
  auto uri = shared_pg_server().fresh_database();
  auto p1 = free_port(), p2 = free_port();
  standby_process a{uri, {}, p1};
  if (a.port == 0)
    a.port = port_in(a.proc.line_starting("ergon-server listening on "));
  standby_process b{uri, {}, p2};
  client c;
  connect_options where;
  where.addresses = {{"127.0.0.1", p1}, {"127.0.0.1", p2}};
  auto q = connect(c.sys, where);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto job_for = [](int i) {
    return *job_builder("keyed").payload("p" + std::to_string(i))
              .idempotency_key("order-" + std::to_string(i)).build();
  };
  std::map<int, job_id> acked;
  int resent = 0;
  // Sends job i until it is acknowledged.
  auto submit_until_acked = [&](int i, result<job_id> first) {
    auto r = std::move(first);
    for (int tries = 0; !r && tries < 1'000'000; ++tries) {
      BOOST_REQUIRE_MESSAGE((r.error().code() == error::unreachable
                             || r.error().code() == error::busy),
                            r.error().to_string());
      ++resent;
      r = c.ask<job_id>(*q, submit_atom::value, job_for(i));
    }
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    acked[i] = *r;
  };
  for (int i = 0; i < 20; ++i)
    submit_until_acked(i, c.ask<job_id>(*q, submit_atom::value, job_for(i)));
  // Ten in flight, then the owner dies.
  using handle = decltype(c.self->request(*q, caf::infinite, submit_atom::value, job_for(0)));
  std::vector<handle> in_flight;
  for (int i = 20; i < 30; ++i)
    in_flight.push_back(c.self->request(*q, caf::infinite, submit_atom::value, job_for(i)));
  a.proc.signal(SIGKILL);
  a.proc.wait();
  for (int i = 20; i < 30; ++i) {
    result<job_id> first = status{error::internal, "no answer"};
    in_flight[static_cast<size_t>(i - 20)].receive(
      [&](job_id& id) { first = id; }, [&](caf::error& e) { first = to_status(e); });
    submit_until_acked(i, std::move(first));
  }
  for (int i = 30; i < 40; ++i)
    submit_until_acked(i, c.ask<job_id>(*q, submit_atom::value, job_for(i)));
  BOOST_TEST_MESSAGE(resent << " submits were sent again");
  // Each key: one job, the one every answer named.
  for (int i = 0; i < 40; ++i) {
    auto again = c.ask<job_id>(*q, submit_atom::value, job_for(i));
    BOOST_REQUIRE_MESSAGE(again.has_value(), again.error().to_string());
    BOOST_TEST(*again == acked[i], "order-" << i);
  }
  engine_probe probe{uri};
  BOOST_TEST(probe.number("SELECT count(*) FROM ergon.jobs WHERE type = 'keyed'") == 40);
  BOOST_TEST(probe.number("SELECT count(*) FROM ergon.idempotency_keys") == 40);
  b.proc.signal(SIGTERM);
  b.proc.wait();
}
