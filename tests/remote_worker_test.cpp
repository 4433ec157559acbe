// Workers in other processes: ergon-server and worker processes on
// 127.0.0.1, this process as the client. Processes are real and are ended by
// PID; waits are on events and child output, bounded so a bug fails rather
// than hangs.
#define BOOST_TEST_MODULE remote_workers
#include <boost/test/unit_test.hpp>

#include <caf/after.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "ergon/job_builder.hpp"
#include "support/server_process.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::client;
using ergon::test::server_process;
using ergon::test::temp_dir;

namespace {

constexpr auto bound = std::chrono::seconds(60);

// A worker process connected to `port`; it has registered once this returns.
struct worker_process {
  child_process proc;

  worker_process(uint16_t port, const std::string& mode, int concurrency = 4)
      : proc({ERGON_TEST_REMOTE_WORKER, "127.0.0.1", std::to_string(port), mode,
              std::to_string(concurrency)}) {
    auto line = proc.read_line();
    BOOST_REQUIRE_MESSAGE(line == "ready", line);
  }
};

// A client connected to `port` and subscribed to the queue's events.
struct subscribed_client {
  client c;
  queue_actor q;

  explicit subscribed_client(uint16_t port) {
    auto connected = connect(c.sys, "127.0.0.1", port);
    BOOST_REQUIRE_MESSAGE(connected.has_value(), connected.error().to_string());
    q = *connected;
    auto subscribed = c.ask<ok_atom>(q, subscribe_atom::value,
                                     caf::actor_cast<caf::actor>(c.self));
    BOOST_REQUIRE_MESSAGE(subscribed.has_value(), subscribed.error().to_string());
  }

  job_id submit(const std::string& payload, int32_t retries = 3) {
    auto j = job_builder("job")
               .payload(payload)
               .max_retries(retries)
               .backoff(std::chrono::hours(1))  // a retry "at once" is not a backoff
               .timeout(std::chrono::hours(1))  // nor an expiry
               .build();
    auto id = c.ask<job_id>(q, submit_atom::value, *j);
    BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
    return *id;
  }

  // Receives events until `done` says so; false if none came for `bound`.
  template <class Done>
  bool until(Done done) {
    bool finished = false;
    bool quiet = false;
    while (!finished && !quiet)
      c.self->receive([&](const event& e) { finished = done(e); },
                      caf::after(bound) >> [&] { quiet = true; });
    return finished;
  }

  job_info info(const job_id& id) {
    auto i = c.ask<job_info>(q, job_info_atom::value, id);
    BOOST_REQUIRE_MESSAGE(i.has_value(), i.error().to_string());
    return *i;
  }
};

// Submits a job, lets a worker process start it and SIGKILLs that process;
// `meanwhile` runs after the start, before the kill.
job_id submit_and_kill_its_worker(uint16_t port, subscribed_client& client,
                                  const std::string& payload, int32_t retries,
                                  const std::function<void()>& meanwhile = {}) {
  worker_process doomed{port, "hold", 1};
  auto id = client.submit(payload, retries);
  BOOST_REQUIRE(doomed.proc.read_line() == "started " + payload);
  if (meanwhile)
    meanwhile();
  doomed.proc.signal(SIGKILL);
  doomed.proc.wait();
  return id;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_remote_worker_runs_the_jobs_of_a_remote_client) {
  temp_dir dir;
  server_process server{dir.file("q.db")};
  worker_process worker{server.port, "complete"};
  subscribed_client client{server.port};
  std::set<job_id> waiting;
  for (int i = 0; i < 20; ++i)
    waiting.insert(client.submit("p" + std::to_string(i)));
  auto ids = waiting;
  BOOST_REQUIRE(client.until([&](const event& e) {
    if (e.kind == event_kind::succeeded)
      waiting.erase(e.id);
    return waiting.empty();
  }));
  for (auto& id : ids) {
    auto i = client.info(id);
    BOOST_TEST(i.status == job_status::succeeded);
    BOOST_TEST(i.result.value_or("").rfind("done:p", 0) == 0);
  }
  worker.proc.signal(SIGTERM);
  BOOST_TEST(worker.proc.read_line() == "stopped ok");
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_killed_worker_s_job_reruns_at_once_as_worker_lost) {
  temp_dir dir;
  server_process server{dir.file("q.db")};
  subscribed_client client{server.port};
  std::optional<worker_process> rescuer;
  auto id = submit_and_kill_its_worker(server.port, client, "x", 3,
                                       [&] { rescuer.emplace(server.port, "complete"); });
  auto killed_at = std::chrono::steady_clock::now();
  BOOST_REQUIRE(client.until([&](const event& e) {
    return e.kind == event_kind::succeeded && e.id == id;
  }));
  auto took = std::chrono::steady_clock::now() - killed_at;
  BOOST_TEST_MESSAGE("kill to success on the other worker: "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms");
  auto i = client.info(id);
  BOOST_TEST(i.status == job_status::succeeded);
  BOOST_TEST(i.tries == 2);
  BOOST_REQUIRE(i.attempts.size() == 2u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::worker_lost);
  BOOST_TEST(i.attempts[0].message == "worker lost");
  BOOST_TEST(i.result.value_or("") == "done:x");
  rescuer->proc.signal(SIGTERM);
  BOOST_TEST(rescuer->proc.read_line() == "stopped ok");
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_worker_lost_on_its_last_try_fails_the_job) {
  temp_dir dir;
  server_process server{dir.file("q.db")};
  subscribed_client client{server.port};
  auto id = submit_and_kill_its_worker(server.port, client, "last", 0);
  BOOST_REQUIRE(client.until([&](const event& e) {
    return e.kind == event_kind::failed && e.id == id;
  }));
  auto i = client.info(id);
  BOOST_TEST(i.status == job_status::failed);
  BOOST_REQUIRE(i.attempts.size() == 1u);
  BOOST_TEST(i.attempts[0].outcome == attempt_outcome::worker_lost);
  BOOST_TEST(server.stop(SIGTERM));
}

// The server goes away under a running job and comes back on the same port
// and file: the worker reconnects by itself, its late result is fenced, and
// it takes new jobs.
BOOST_AUTO_TEST_CASE(a_worker_outlives_a_server_restart_and_its_late_result_is_fenced) {
  temp_dir dir;
  auto server = std::make_unique<server_process>(dir.file("q.db"));
  auto port = server->port;
  worker_process worker{port, "late", 1};
  job_id first;
  {
    subscribed_client client{port};
    first = client.submit("first");
  }
  BOOST_REQUIRE(worker.proc.read_line() == "started first");
  // SIGTERM with a worker attached: the server closes and exits 0.
  BOOST_TEST(server->stop(SIGTERM));
  // The dropped connection cancelled the attempt; its late result waits for
  // the next registration and is refused then.
  server = std::make_unique<server_process>(dir.file("q.db"), port);
  BOOST_TEST(worker.proc.read_line() == "outcome first stale_attempt");
  subscribed_client client{port};
  auto info = client.info(first);
  BOOST_TEST(info.tries == 1);
  BOOST_REQUIRE(info.attempts.size() == 1u);
  BOOST_TEST(info.attempts[0].outcome == attempt_outcome::process_restart);
  BOOST_TEST(info.status == job_status::pending);  // retried after its (long) backoff
  // The worker registered again and takes new jobs.
  client.submit("second");
  BOOST_TEST(worker.proc.read_line() == "started second");
  worker.proc.signal(SIGKILL);
  worker.proc.wait();
  BOOST_TEST(server->stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(client_requests_get_unreachable_not_a_hang_when_the_server_dies) {
  temp_dir dir;
  auto server = std::make_unique<server_process>(dir.file("q.db"));
  client c;
  auto q = connect(c.sys, "127.0.0.1", server->port);
  BOOST_REQUIRE(q.has_value());
  server->proc.signal(SIGKILL);
  server->proc.wait();
  auto late = c.ask<job_id>(*q, submit_atom::value, *job_builder("job").build());
  BOOST_REQUIRE(!late.has_value());
  BOOST_TEST(late.error().code() == error::unreachable);
  BOOST_TEST(late.error().message().find("127.0.0.1") != std::string::npos);
  auto worker = start_worker(*q, [] {
    worker_options o;
    o.runners["job"] = [](job_context&) {};
    return o;
  }());
  BOOST_REQUIRE(!worker.has_value());
  BOOST_TEST(worker.error().code() == error::unreachable);
}

// A stuck worker process (SIGSTOP) holds only the jobs its credit let it
// claim; the rest run elsewhere, and its own run again once it dies.
BOOST_AUTO_TEST_CASE(a_stuck_worker_holds_only_its_credit) {
  temp_dir dir;
  server_process server{dir.file("q.db")};
  subscribed_client client{server.port};
  worker_process stuck{server.port, "hold", 2};
  std::set<job_id> waiting;
  for (int i = 0; i < 50; ++i)
    waiting.insert(client.submit("s" + std::to_string(i)));
  BOOST_REQUIRE(stuck.proc.read_line().rfind("started ", 0) == 0);
  BOOST_REQUIRE(stuck.proc.read_line().rfind("started ", 0) == 0);
  stuck.proc.signal(SIGSTOP);
  worker_process rescuer{server.port, "complete"};
  BOOST_REQUIRE(client.until([&](const event& e) {
    if (e.kind == event_kind::succeeded)
      waiting.erase(e.id);
    return waiting.size() == 2;
  }));
  auto counts = client.c.ask<status_counts>(client.q, counts_atom::value);
  BOOST_REQUIRE(counts.has_value());
  BOOST_TEST((*counts)[job_status::running] == 2);
  stuck.proc.signal(SIGKILL);
  stuck.proc.wait();
  BOOST_REQUIRE(client.until([&](const event& e) {
    if (e.kind == event_kind::succeeded)
      waiting.erase(e.id);
    return waiting.empty();
  }));
  rescuer.proc.signal(SIGTERM);
  BOOST_TEST(rescuer.proc.read_line() == "stopped ok");
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_queue_opened_with_listen_takes_remote_workers_until_it_closes) {
  temp_dir dir;
  const std::string secret = "a secret of the listen test, 32 bytes";
  options opts;
  opts.listen = listen_options{};
  opts.listen->creds.secret = secret;
  auto q = queue::open(dir.file("q.db"), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto port = q->listening_port();
  BOOST_REQUIRE_MESSAGE(port.has_value(), port.error().to_string());
  ::setenv("ERGON_TEST_SECRET", secret.c_str(), 1);  // the worker proves it
  worker_process worker{*port, "complete"};
  ::unsetenv("ERGON_TEST_SECRET");
  std::mutex mtx;
  std::condition_variable cv;
  std::set<job_id> waiting;
  auto sub = q->subscribe([&](const event& e) {
    std::lock_guard<std::mutex> guard{mtx};
    if (e.kind == event_kind::succeeded)
      waiting.erase(e.id);
    cv.notify_all();
  });
  {
    std::lock_guard<std::mutex> guard{mtx};
    for (int i = 0; i < 10; ++i)
      waiting.insert(*q->submit(*job_builder("job").payload("p" + std::to_string(i)).build()));
  }
  {
    std::unique_lock<std::mutex> guard{mtx};
    BOOST_REQUIRE(cv.wait_for(guard, bound, [&] { return waiting.empty(); }));
  }
  BOOST_TEST(q->metrics()->failed_handshakes == 0);
  BOOST_TEST(q->close().ok());
  BOOST_TEST(q->listening_port().error().code() == error::closed);
  // The worker notices, and stops when told to.
  worker.proc.signal(SIGTERM);
  BOOST_TEST(worker.proc.read_line().rfind("stopped", 0) == 0);
  BOOST_TEST(queue::open(dir.file("q.db")).has_value());
}
