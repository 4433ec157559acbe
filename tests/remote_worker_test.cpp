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
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ergon/job_builder.hpp"
#include "support/run_support.hpp"
#include "support/server_process.hpp"
#include "support/test_engine.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::client;
using ergon::test::server_process;
using ergon::test::temp_dir;

namespace {

constexpr auto bound = std::chrono::seconds(60);

// A server that does not keep a remote worker's attempts for its return
// (options::remote_grace 0): its loss, or the server's restart, retries
// them at once.
const std::vector<std::string> no_grace{"--remote-grace-ms", "0"};

// A worker process connected to `port`; it has registered once this returns.
struct worker_process {
  child_process proc;

  worker_process(uint16_t port, const std::string& mode, int concurrency = 4)
      : proc({ERGON_TEST_REMOTE_WORKER, "127.0.0.1", std::to_string(port), mode,
              std::to_string(concurrency)}) {
    auto line = proc.read_line();
    BOOST_REQUIRE_MESSAGE(line == "ready", line);
  }

  // SIGTERM: the worker stops cleanly.
  bool stop() {
    proc.signal(SIGTERM);
    return proc.read_line() == "stopped ok";
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

job_id submit_with_priority(subscribed_client& client, const std::string& payload,
                         int32_t priority) {
  auto j = job_builder("job").payload(payload).priority(priority).build();
  auto id = client.c.ask<job_id>(client.q, submit_atom::value, *j);
  BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
  return *id;
}

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

// Preemption across the network: the request reaches the worker process, its
// yield commits without spending a try, and the job resumes from its
// checkpoint on the same try once the urgent job is done.
BOOST_AUTO_TEST_CASE(a_remote_worker_yields_its_slot_to_an_urgent_job_and_resumes) {
  temp_dir dir;
  server_process server{test::location_of(dir), 0, {"--preempt-at", "10"}};
  worker_process worker{server.port, "yield", 1};
  subscribed_client client{server.port};
  auto low = client.submit("low");
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "started low");
  auto urgent = submit_with_priority(client, "now", 10);
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "yielded low ok");
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "resumed resumed:low 1");
  // Resumed once the urgent job's code returned, which is after it started.
  bool preempted = false, resumed = false, urgent_started = false;
  BOOST_REQUIRE(client.until([&](const event& e) {
    preempted |= e.kind == event_kind::preempted && e.id == low;
    urgent_started |= e.kind == event_kind::started && e.id == urgent;
    resumed |= e.kind == event_kind::resumed && e.id == low && urgent_started;
    return e.kind == event_kind::succeeded && e.id == low;
  }));
  BOOST_TEST(preempted);
  BOOST_TEST(resumed);
  auto i = client.info(low);
  BOOST_TEST(i.tries == 1);
  BOOST_TEST(i.yields == 1);
  BOOST_TEST(worker.stop());
  BOOST_TEST(server.stop(SIGTERM));
}

// A snooze across the network: the report carries its delay, the job
// comes back with its checkpoint, and no try is spent.
BOOST_AUTO_TEST_CASE(a_remote_worker_snoozes_a_job_and_runs_it_again) {
  temp_dir dir;
  server_process server{test::location_of(dir), 0};
  worker_process worker{server.port, "snooze", 1};
  subscribed_client client{server.port};
  auto id = client.submit("x", 0);
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "snoozed x ok");
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "ran later:x 2");
  int64_t due = 0;
  BOOST_REQUIRE(client.until([&](const event& e) {
    if (e.kind == event_kind::snoozed && e.id == id)
      due = e.run_at_ms;
    return e.kind == event_kind::succeeded && e.id == id;
  }));
  BOOST_TEST(due > 0);
  auto i = client.info(id);
  BOOST_TEST(i.tries == 2);
  BOOST_TEST(i.tries_before_retry == 1);
  BOOST_REQUIRE(i.attempts.size() == 2u);
  BOOST_TEST(i.attempts.at(0).outcome == attempt_outcome::snoozed);
  BOOST_TEST(i.attempts.at(0).message == "snoozed for 10 ms");
  BOOST_TEST(worker.stop());
  BOOST_TEST(server.stop(SIGTERM));
}

// Children across the network: the report carries them, the parent waits
// without its slot (the worker has one), and reads their results through
// the writer when it runs again.
BOOST_AUTO_TEST_CASE(a_remote_worker_spawns_children_and_joins_their_results) {
  temp_dir dir;
  server_process server{test::location_of(dir), 0};
  worker_process worker{server.port, "parent", 1};
  subscribed_client client{server.port};
  auto id = client.submit("fan", 0);
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "spawned ok");
  BOOST_REQUIRE_EQUAL(worker.proc.read_line(), "joined done:kid0,done:kid1,done:kid2");
  BOOST_REQUIRE(client.until([&](const event& e) {
    return e.kind == event_kind::succeeded && e.id == id;
  }));
  auto i = client.info(id);
  BOOST_TEST(i.result.value_or("") == "done:kid0,done:kid1,done:kid2");
  BOOST_REQUIRE(i.depends_on.size() == 3u);
  BOOST_TEST(client.info(i.depends_on[0]).parent.value_or(job_id{}) == id);
  BOOST_TEST(i.attempts.at(0).outcome == attempt_outcome::spawned);
  BOOST_TEST(worker.stop());
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_remote_worker_runs_the_jobs_of_a_remote_client) {
  temp_dir dir;
  server_process server{test::location_of(dir)};
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
  BOOST_TEST(worker.stop());
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_killed_worker_s_job_reruns_at_once_as_worker_lost) {
  temp_dir dir;
  server_process server{test::location_of(dir), 0, no_grace};
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
  BOOST_TEST(rescuer->stop());
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_worker_lost_on_its_last_try_fails_the_job) {
  temp_dir dir;
  server_process server{test::location_of(dir), 0, no_grace};
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
  auto server = std::make_unique<server_process>(test::location_of(dir), 0, no_grace);
  auto port = server->port;
  worker_process worker{port, "late", 1};
  job_id first;
  {
    subscribed_client client{port};
    first = client.submit("first");
  }
  BOOST_REQUIRE(worker.proc.read_line() == "started first");
  // The claim records who holds it: the worker's node (its host and pid)
  // and its actor, the same when it joins again.
  auto holder = test::engine_probe{test::location_of(dir)}.text("SELECT held_by FROM jobs");
  BOOST_TEST(holder.find("#" + std::to_string(worker.proc.pid()) + "/") != std::string::npos,
             holder);
  // SIGTERM with a worker attached: the server closes and exits 0.
  BOOST_TEST(server->stop(SIGTERM));
  // The dropped connection cancelled the attempt; its late result waits for
  // the next registration and is refused then.
  server = std::make_unique<server_process>(test::location_of(dir), port, no_grace);
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

namespace {

// Two worker processes run 200 ms jobs of a server with a grace for remote
// work; the server is SIGKILLed once 8 run, and restarted on the same data
// and port. With `kill_b`, worker b is SIGKILLed during the outage. Returns
// the jobs, each finished, and how many times each one's code ran.
struct restart_run {
  std::vector<job_info> jobs;
  std::map<std::string, int> runs;
};

restart_run restart_under_running_jobs(const std::string& grace_ms, bool kill_b) {
  temp_dir dir;
  auto side = dir.file("side");
  ::setenv("ERGON_TEST_SIDE_FILE", side.c_str(), 1);
  std::vector<std::string> grace{"--remote-grace-ms", grace_ms};
  auto server = std::make_unique<server_process>(test::location_of(dir), 0, grace);
  auto port = server->port;
  worker_process a{port, "side", 4};
  worker_process b{port, "side", 4};
  std::vector<job_id> ids;
  {
    subscribed_client client{port};
    for (int i = 0; i < 40; ++i)
      ids.push_back(client.submit("j" + std::to_string(i)));
    int started = 0;
    BOOST_REQUIRE(client.until(
      [&](const event& e) { return e.kind == event_kind::started && ++started == 8; }));
  }
  server->proc.signal(SIGKILL);
  server->proc.wait();
  if (kill_b) {
    b.proc.signal(SIGKILL);
    b.proc.wait();
  }
  server = std::make_unique<server_process>(test::location_of(dir), port, grace);
  subscribed_client client{port};
  restart_run out;
  for (auto& id : ids) {
    auto done = client.c.ask<job_info>(client.q, wait_atom::value, id,
                                       std::chrono::milliseconds{60'000});
    BOOST_REQUIRE_MESSAGE(done.has_value(), done.error().to_string());
    out.jobs.push_back(*done);
  }
  auto m = client.c.ask<metrics_snapshot>(client.q, metrics_atom::value);
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->orphaned_attempts == 0);
  BOOST_TEST(a.stop());
  if (!kill_b)
    BOOST_TEST(b.stop());
  BOOST_TEST(server->stop(SIGTERM));
  out.runs = test::runs_in(side);
  ::unsetenv("ERGON_TEST_SIDE_FILE");
  return out;
}

bool has_attempt(const job_info& j, attempt_outcome o) {
  for (auto& a : j.attempts)
    if (a.outcome == o)
      return true;
  return false;
}

}  // namespace

// What remote workers run outlives a SIGKILLed server: they keep running
// it, join the restarted server, list what they hold, and go on under the
// same attempts. Every job's code runs once and succeeds; no attempt is
// recovered as a process restart. (A claim committed whose jobs never
// reached the worker is lost at its registration and runs then, once.)
BOOST_AUTO_TEST_CASE(remote_work_survives_a_server_restart_and_runs_once) {
  auto run = restart_under_running_jobs("20000", false);
  BOOST_REQUIRE_EQUAL(run.jobs.size(), 40u);
  for (auto& j : run.jobs) {
    auto payload = j.payload;
    BOOST_TEST(j.status == job_status::succeeded, payload);
    BOOST_TEST(j.result.value_or("") == "done:" + payload);
    BOOST_TEST(run.runs[payload] == 1, payload << " ran " << run.runs[payload] << " times");
    BOOST_TEST(!has_attempt(j, attempt_outcome::process_restart), payload);
  }
}

// A worker that dies during the outage does not come back: its attempts
// wait out the grace (2 s), are lost, and run again on the other worker.
// Only those ran twice.
BOOST_AUTO_TEST_CASE(a_worker_that_died_during_the_outage_has_its_jobs_rerun_after_the_grace) {
  auto run = restart_under_running_jobs("2000", true);
  BOOST_REQUIRE_EQUAL(run.jobs.size(), 40u);
  int lost = 0;
  for (auto& j : run.jobs) {
    auto payload = j.payload;
    BOOST_TEST(j.status == job_status::succeeded, payload);
    BOOST_TEST(!has_attempt(j, attempt_outcome::process_restart), payload);
    bool was_lost = has_attempt(j, attempt_outcome::worker_lost);
    lost += was_lost ? 1 : 0;
    BOOST_TEST(run.runs[payload] <= (was_lost ? 2 : 1), payload << " ran " << run.runs[payload]);
    BOOST_TEST(run.runs[payload] >= 1, payload);
  }
  BOOST_TEST(lost > 0);  // b ran jobs when it died
}

BOOST_AUTO_TEST_CASE(client_requests_get_unreachable_not_a_hang_when_the_server_dies) {
  temp_dir dir;
  auto server = std::make_unique<server_process>(test::location_of(dir));
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
  server_process server{test::location_of(dir), 0, no_grace};
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
  BOOST_TEST(rescuer.stop());
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_queue_opened_with_listen_takes_remote_workers_until_it_closes) {
  temp_dir dir;
  const std::string secret = test::test_secret;
  options opts;
  opts.listen = listen_options{};
  opts.listen->creds.secret = secret;
  auto q = queue::open(test::location_of(dir), opts);
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
  BOOST_TEST(queue::open(test::location_of(dir)).has_value());
}

namespace {

// A worker in another process runs each job up to its code's start; the
// queue commits cancel(); only then does the code return normally (even
// runs) or call complete() (odd runs). Each run must end `cancelled`.
void cancel_commits_before_a_remote_return(std::shared_ptr<ergon::clock> clk, int runs) {
  temp_dir dir;
  options opts;
  opts.clock = std::move(clk);
  opts.listen = listen_options{};
  auto q = queue::open(test::location_of(dir), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto port = q->listening_port();
  BOOST_REQUIRE(port.has_value());
  test::event_log log{*q};
  worker_process worker{*port, "step", 1};
  for (int i = 0; i < runs; ++i) {
    std::string how = i % 2 == 1 ? "complete" : "return";
    auto id = q->submit(*job_builder("job").payload(how).max_retries(3).build());
    BOOST_REQUIRE(id.has_value());
    BOOST_REQUIRE(worker.proc.read_line() == "started " + how);
    BOOST_REQUIRE(q->cancel(*id).ok());
    BOOST_REQUIRE(worker.proc.write_line("go"));
    BOOST_TEST(worker.proc.read_line()
               == (how == "complete" ? "outcome complete cancelled" : "returned return"));
    BOOST_REQUIRE(log.wait_for(event_kind::cancelled, 1, *id));
    auto j = q->job_info(*id);
    BOOST_REQUIRE(j.has_value());
    BOOST_TEST(j->status == job_status::cancelled);
    BOOST_TEST(!j->result.has_value());
    BOOST_REQUIRE(j->attempts.size() == 1u);
    BOOST_TEST(j->attempts[0].outcome == attempt_outcome::cancelled);
  }
  BOOST_TEST(log.of(event_kind::succeeded).empty());
  BOOST_TEST(worker.stop());
  BOOST_TEST(q->close().ok());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_cancel_that_committed_wins_over_a_remote_return_manual_clock) {
  cancel_commits_before_a_remote_return(std::make_shared<ergon::manual_clock>(1'700'000'000'000), 200);
}

BOOST_AUTO_TEST_CASE(a_cancel_that_committed_wins_over_a_remote_return_system_clock) {
  cancel_commits_before_a_remote_return(default_clock(), 200);
}

namespace {

using ms = std::chrono::milliseconds;

// Asks the server for its metrics until `done` holds; false after `bound`.
// Each look is a round trip through the server's writer and dispatcher.
template <class Done>
bool metrics_until(subscribed_client& client, Done done) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < until) {
    auto m = client.c.ask<metrics_snapshot>(client.q, metrics_atom::value);
    BOOST_REQUIRE_MESSAGE(m.has_value(), m.error().to_string());
    if (done(*m))
      return true;
  }
  return false;
}

// A wait from a client of its own, on a thread of its own.
std::future<result<job_info>> wait_from_another_client(uint16_t port, const job_id& id,
                                                       ms timeout) {
  return std::async(std::launch::async, [port, id, timeout] {
    client other;
    auto q = connect(other.sys, "127.0.0.1", port);
    if (!q)
      return result<job_info>{q.error()};
    return other.ask<job_info>(*q, wait_atom::value, id, timeout);
  });
}

}  // namespace

// Progress, cancel and wait between a remote client and a remote worker:
// the last report is stored and published, the cancel reaches the job's code,
// and a wait on a third connection ends with the cancelled job.
BOOST_AUTO_TEST_CASE(progress_cancel_and_wait_cross_the_network) {
  temp_dir dir;
  server_process server{test::location_of(dir)};
  worker_process worker{server.port, "progress", 1};
  subscribed_client client{server.port};
  auto id = client.submit("p");
  BOOST_REQUIRE(worker.proc.read_line() == "started p");
  BOOST_REQUIRE(worker.proc.read_line() == "progressed p");
  // Reports made faster than the worker hands them over are coalesced, the
  // latest winning: the last one always arrives, and none goes backwards.
  std::vector<progress_info> seen;
  BOOST_REQUIRE(client.until([&](const event& e) {
    if (e.kind == event_kind::progress && e.id == id)
      seen.push_back(e.progress);
    return !seen.empty() && seen.back().done == 3;
  }));
  for (size_t i = 0; i < seen.size(); ++i) {
    BOOST_TEST(seen[i].total == 3);
    if (i > 0)
      BOOST_TEST(seen[i].done > seen[i - 1].done);
  }
  BOOST_TEST(seen.back().message == "three");
  auto running = client.info(id);
  BOOST_TEST(running.status == job_status::running);
  BOOST_REQUIRE(running.progress.has_value());
  BOOST_TEST(running.progress->done == 3);
  BOOST_TEST(running.progress->message == "three");
  // Waits that only look, and an unknown job, answer at once with their code.
  auto look = client.c.ask<job_info>(client.q, wait_atom::value, id, ms::zero());
  BOOST_REQUIRE(!look.has_value());
  BOOST_TEST(look.error().code() == error::timeout);
  BOOST_TEST(look.error().message().find("running") != std::string::npos);
  auto unknown = client.c.ask<job_info>(client.q, wait_atom::value, job_id{}, ms{1000});
  BOOST_REQUIRE(!unknown.has_value());
  BOOST_TEST(unknown.error().code() == error::not_found);
  // A wait without limit from another connection; the server counts it.
  auto waited = wait_from_another_client(server.port, id, ms::max());
  BOOST_REQUIRE(metrics_until(client, [](const metrics_snapshot& m) { return m.waits == 1; }));
  auto cancelled = client.c.ask<ok_atom>(client.q, cancel_job_atom::value, id);
  BOOST_REQUIRE_MESSAGE(cancelled.has_value(), cancelled.error().to_string());
  BOOST_TEST(worker.proc.read_line() == "returned p cancelled");
  bool requested = false;
  BOOST_REQUIRE(client.until([&](const event& e) {
    requested = requested || (e.kind == event_kind::cancel_requested && e.id == id);
    return e.kind == event_kind::cancelled && e.id == id;
  }));
  BOOST_TEST(requested);
  auto done = waited.get();
  BOOST_REQUIRE_MESSAGE(done.has_value(), done.error().to_string());
  BOOST_TEST(done->status == job_status::cancelled);
  BOOST_REQUIRE(done->attempts.size() == 1u);
  BOOST_TEST(done->attempts[0].outcome == attempt_outcome::cancelled);
  BOOST_TEST(metrics_until(client, [](const metrics_snapshot& m) { return m.waits == 0; }));
  // Cancelling it again names why not.
  auto again = client.c.ask<ok_atom>(client.q, cancel_job_atom::value, id);
  BOOST_REQUIRE(!again.has_value());
  BOOST_TEST(again.error().code() == error::job_finished);
  BOOST_TEST(worker.stop());
  BOOST_TEST(server.stop(SIGTERM));
}

// A client that disconnects while it waits has its wait dropped by the
// server; one still waiting when the server stops hears why, not nothing.
BOOST_AUTO_TEST_CASE(a_remote_wait_ends_with_its_client_or_its_server) {
  temp_dir dir;
  server_process server{test::location_of(dir)};
  subscribed_client client{server.port};
  auto id = client.submit("never runs");  // no worker
  {
    ergon::test::client gone;
    auto q = connect(gone.sys, "127.0.0.1", server.port);
    BOOST_REQUIRE(q.has_value());
    gone.self->send(*q, wait_atom::value, id, ms::max());
    BOOST_REQUIRE(metrics_until(client, [](const metrics_snapshot& m) { return m.waits == 1; }));
  }  // its actor system shuts down: the connection drops
  BOOST_TEST(metrics_until(client, [](const metrics_snapshot& m) { return m.waits == 0; }));
  auto waited = wait_from_another_client(server.port, id, ms::max());
  BOOST_REQUIRE(metrics_until(client, [](const metrics_snapshot& m) { return m.waits == 1; }));
  BOOST_TEST(server.stop(SIGTERM));
  auto ended = waited.get();
  BOOST_REQUIRE(!ended.has_value());
  // The server answers `closed` as it closes; if the connection drops first,
  // the client's side says `unreachable`. Either names the server.
  BOOST_TEST_MESSAGE("wait ended: " << ended.error().to_string());
  BOOST_TEST((ended.error().code() == error::closed
              || ended.error().code() == error::unreachable));
}

// Listings and dead letters through ergon-server: jobs that a remote worker
// failed for good are listed with their error, retried one by one and by
// filter, and purged; bad filters and pages are named across the wire.
BOOST_AUTO_TEST_CASE(listings_and_dead_letters_cross_the_network) {
  temp_dir dir;
  server_process server{test::location_of(dir)};
  subscribed_client client{server.port};
  auto& c = client.c;
  auto& q = client.q;
  std::optional<worker_process> worker{std::in_place, server.port, "fail", 2};
  std::set<job_id> ids;
  for (int i = 0; i < 3; ++i)
    ids.insert(client.submit("f" + std::to_string(i)));
  auto failed_all = [&] {
    std::set<job_id> waiting = ids;
    return client.until([&](const event& e) {
      if (e.kind == event_kind::failed)
        waiting.erase(e.id);
      return waiting.empty();
    });
  };
  BOOST_REQUIRE(failed_all());
  // The worker goes, so retried jobs stay pending.
  BOOST_TEST(worker->stop());
  worker.reset();
  page_request page;
  page.limit = 2;
  auto first = c.ask<job_page>(q, list_failed_atom::value, job_filter{}, page);
  BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
  BOOST_REQUIRE(first->jobs.size() == 2u);
  BOOST_REQUIRE(first->next.has_value());
  page.after = first->next;
  auto second = c.ask<job_page>(q, list_failed_atom::value, job_filter{}, page);
  BOOST_REQUIRE(second.has_value());
  BOOST_REQUIRE(second->jobs.size() == 1u);
  BOOST_TEST(!second->next.has_value());
  std::set<job_id> listed;
  for (auto* p : {&*first, &*second})
    for (auto& j : p->jobs) {
      listed.insert(j.id);
      BOOST_TEST(j.status == job_status::failed);
      BOOST_REQUIRE(j.attempts.size() == 1u);
      BOOST_TEST(j.attempts[0].outcome == attempt_outcome::failed_permanently);
      BOOST_TEST(j.attempts[0].message == "boom:" + j.payload);
    }
  BOOST_TEST((listed == ids));
  // One by one, then by filter.
  auto one = *ids.begin();
  auto retried = c.ask<ok_atom>(q, retry_failed_atom::value, one);
  BOOST_REQUIRE_MESSAGE(retried.has_value(), retried.error().to_string());
  BOOST_REQUIRE(client.until([&](const event& e) {
    return e.kind == event_kind::requeued && e.id == one;
  }));
  BOOST_TEST(client.info(one).status == job_status::pending);
  auto twice = c.ask<ok_atom>(q, retry_failed_atom::value, one);
  BOOST_REQUIRE(!twice.has_value());
  BOOST_TEST(twice.error().code() == error::invalid_argument);
  BOOST_TEST(twice.error().field() == "id");
  job_filter by_type;
  by_type.type = "job";
  auto summary = c.ask<retry_summary>(q, retry_failed_atom::value, by_type);
  BOOST_REQUIRE_MESSAGE(summary.has_value(), summary.error().to_string());
  BOOST_TEST(summary->retried == 2);
  BOOST_TEST(summary->skipped.empty());
  job_filter pending;
  pending.status = job_status::pending;
  auto listing = c.ask<job_page>(q, list_jobs_atom::value, pending, page_request{});
  BOOST_REQUIRE(listing.has_value());
  BOOST_TEST(listing->jobs.size() == 3u);
  // They fail again on a new worker, and are purged.
  worker.emplace(server.port, "fail", 2);
  BOOST_REQUIRE(failed_all());
  for (auto& id : ids)
    BOOST_TEST(client.info(id).attempts.size() == 2u);
  auto purged = c.ask<int64_t>(q, purge_failed_atom::value, by_type);
  BOOST_REQUIRE_MESSAGE(purged.has_value(), purged.error().to_string());
  BOOST_TEST(*purged == 3);
  BOOST_TEST(c.ask<job_page>(q, list_failed_atom::value, job_filter{}, page_request{})
               ->jobs.empty());
  BOOST_TEST(c.ask<job_info>(q, job_info_atom::value, one).error().code() == error::not_found);
  // Bad input is named across the wire and changes nothing.
  page_request empty_page;
  empty_page.limit = 0;
  auto bad_page = c.ask<job_page>(q, list_jobs_atom::value, job_filter{}, empty_page);
  BOOST_REQUIRE(!bad_page.has_value());
  BOOST_TEST(bad_page.error().code() == error::invalid_argument);
  BOOST_TEST(bad_page.error().field() == "limit");
  job_filter bad_filter;
  bad_filter.type = "";
  auto bad_purge = c.ask<int64_t>(q, purge_failed_atom::value, bad_filter);
  BOOST_REQUIRE(!bad_purge.has_value());
  BOOST_TEST(bad_purge.error().field() == "type");
  auto negative = c.ask<int64_t>(q, purge_failed_atom::value, ms{-1});
  BOOST_REQUIRE(!negative.has_value());
  BOOST_TEST(negative.error().field() == "older_than");
  // Tags and bulk actions cross the network as well.
  auto later = job_builder("later").tag("batch", "9").run_at(4'000'000'000'000).build();
  auto tagged = c.ask<job_id>(q, submit_atom::value, *later);
  BOOST_REQUIRE_MESSAGE(tagged.has_value(), tagged.error().to_string());
  BOOST_TEST(client.info(*tagged).tags.at("batch") == "9");
  job_filter batch;
  batch.tags["batch"] = "9";
  auto cancelled = c.ask<cancel_summary>(q, cancel_jobs_atom::value, batch);
  BOOST_REQUIRE_MESSAGE(cancelled.has_value(), cancelled.error().to_string());
  BOOST_TEST(cancelled->cancelled == 1);
  auto deleted = c.ask<int64_t>(q, delete_jobs_atom::value, batch);
  BOOST_REQUIRE_MESSAGE(deleted.has_value(), deleted.error().to_string());
  BOOST_TEST(*deleted == 1);
  BOOST_TEST(worker->stop());
  BOOST_TEST(server.stop(SIGTERM));
}

// Each attempt names the worker that ran it: its name, host and pid, and a
// remote one's node; a remote worker's log lines arrive with its outcome. queue::workers(), and a client across the network,
// list those registered now. A reopen keeps the records, each ended, and
// the next worker's id counts on from them.
BOOST_AUTO_TEST_CASE(attempts_name_their_worker_and_the_registered_workers_are_listed) {
  temp_dir dir;
  options opts;
  opts.listen = listen_options{};
  auto q = queue::open(test::location_of(dir), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto port = q->listening_port();
  BOOST_REQUIRE(port.has_value());
  test::event_log log{*q};
  worker_options here;
  here.name = "in-process";
  here.max_concurrency = 2;
  here.runners["local"] = [](job_context& ctx) { ctx.complete("ok"); };
  auto local = q->start_worker(here);
  BOOST_REQUIRE(local.has_value());
  worker_process far{*port, "complete", 3};
  auto mine = q->submit(*job_builder("local").build());
  auto theirs = q->submit(*job_builder("job").payload("x").build());
  BOOST_REQUIRE(log.wait_for(event_kind::succeeded, 1, *mine));
  BOOST_REQUIRE(log.wait_for(event_kind::succeeded, 1, *theirs));
  char host[256] = {};
  BOOST_REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  auto a = q->job_info(*mine)->attempts.at(0).worker;
  BOOST_TEST(a.id > 0);
  BOOST_TEST(a.name == "in-process");
  BOOST_TEST(a.host == host);
  BOOST_TEST(a.pid == ::getpid());
  BOOST_TEST(a.node == "");
  auto b = q->job_info(*theirs)->attempts.at(0).worker;
  BOOST_TEST(b.id != a.id);
  BOOST_TEST(b.name == "child-complete");
  BOOST_TEST(b.host == host);
  BOOST_TEST(b.pid == far.proc.pid());
  BOOST_TEST(!b.node.empty());
  // Its log lines crossed the network with its outcome.
  auto remote_logs = q->job_info(*theirs)->attempts.at(0).logs;
  BOOST_REQUIRE(remote_logs.size() == 1u);
  BOOST_TEST(remote_logs[0].text == "completing x");

  auto listed = q->workers();
  BOOST_REQUIRE_MESSAGE(listed.has_value(), listed.error().to_string());
  BOOST_REQUIRE(listed->size() == 2u);
  auto& one = listed->at(0).identity.id == a.id ? listed->at(0) : listed->at(1);
  auto& two = listed->at(0).identity.id == a.id ? listed->at(1) : listed->at(0);
  BOOST_TEST(one.identity.pid == a.pid);
  BOOST_TEST(one.types == std::vector<std::string>{"local"});
  BOOST_TEST(one.max_concurrency == 2);
  BOOST_TEST(two.identity.id == b.id);
  BOOST_TEST(two.identity.node == b.node);
  BOOST_TEST(two.types == std::vector<std::string>{"job"});
  BOOST_TEST(two.max_concurrency == 3);
  BOOST_TEST(two.last_report_ms.has_value());
  BOOST_TEST(!two.leaving);
  {
    client c;
    auto link = connect(c.sys, "127.0.0.1", *port);
    BOOST_REQUIRE_MESSAGE(link.has_value(), link.error().to_string());
    auto remote = c.ask<std::vector<worker_info>>(*link, workers_atom::value);
    BOOST_REQUIRE_MESSAGE(remote.has_value(), remote.error().to_string());
    BOOST_REQUIRE(remote->size() == 2u);
    BOOST_TEST(remote->at(0).identity.host == host);
    BOOST_TEST(remote->at(0).identity.id == listed->at(0).identity.id);
    BOOST_TEST(remote->at(1).identity.pid == listed->at(1).identity.pid);
  }
  BOOST_TEST(far.stop());
  BOOST_TEST(q->workers()->size() == 1u);
  BOOST_TEST(local->stop().ok());
  BOOST_TEST(q->workers()->empty());
  BOOST_TEST(q->close().ok());
  BOOST_TEST(q->workers().error().code() == error::closed);

  auto again = queue::open(test::location_of(dir));
  BOOST_REQUIRE_MESSAGE(again.has_value(), again.error().to_string());
  test::event_log later{*again};
  auto next = again->start_worker(here);
  BOOST_REQUIRE(next.has_value());
  auto third = again->submit(*job_builder("local").build());
  BOOST_REQUIRE(later.wait_for(event_kind::succeeded, 1, *third));
  auto c = again->job_info(*third)->attempts.at(0).worker;
  BOOST_TEST(c.id > std::max(a.id, b.id));
  BOOST_TEST(again->job_info(*theirs)->attempts.at(0).worker.pid == far.proc.pid());
  BOOST_TEST(again->workers()->at(0).identity.id == c.id);
}

// queue::set_worker reaches a worker in another process: it runs more at
// once without a restart, and the dispatcher lists its new concurrency.
BOOST_AUTO_TEST_CASE(a_remote_worker_takes_its_concurrency_from_a_run_time_control) {
  temp_dir dir;
  server_process server{test::location_of(dir), 0, no_grace};
  subscribed_client client{server.port};
  worker_process far{server.port, "hold", 1};
  for (int i = 0; i < 3; ++i)
    client.submit("r" + std::to_string(i));
  BOOST_REQUIRE(far.proc.read_line().rfind("started ", 0) == 0);
  settings_change three;
  three.max_running = 3;
  auto set = client.c.ask<ok_atom>(client.q, set_worker_atom::value, std::string{"child-hold"},
                                   three);
  BOOST_REQUIRE_MESSAGE(set.has_value(), set.error().to_string());
  BOOST_REQUIRE(far.proc.read_line().rfind("started ", 0) == 0);
  BOOST_REQUIRE(far.proc.read_line().rfind("started ", 0) == 0);
  auto listed = client.c.ask<std::vector<worker_info>>(client.q, workers_atom::value);
  BOOST_REQUIRE_MESSAGE(listed.has_value(), listed.error().to_string());
  BOOST_REQUIRE_EQUAL(listed->size(), 1u);
  BOOST_TEST(listed->at(0).max_concurrency == 3);
  BOOST_TEST(listed->at(0).running == 3);
  far.proc.signal(SIGKILL);
  far.proc.wait();
  BOOST_TEST(server.stop(SIGTERM));
}
