// PostgreSQL faults under a queue (issue 29), with servers of the tests' own:
//  - restarted mid-run: callers get typed errors while it is down, the
//    queue reconnects by itself, no acknowledged job is lost, and no job
//    runs twice (outcomes whose commit was lost are sent again);
//  - a COMMIT whose answer is lost: the writer learns whether it committed;
//  - a statement_timeout, a read-only standby and a role that may not
//    write: typed errors that name the cause, and nothing written.
#define BOOST_TEST_MODULE pg_faults
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/pg_lease.hpp"
#include "ergon/storage/schema.hpp"
#include "support/pg_server.hpp"
#include "support/run_support.hpp"
#include "support/tcp_proxy.hpp"
#include "support/test_engine.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// What the submitter saw: the jobs acknowledged, and every error.
struct submissions {
  std::mutex mtx;
  std::condition_variable grew;
  std::vector<job_id> acked;
  std::vector<status> errors;

  // Waits until `n` jobs were acknowledged; false after a minute.
  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock{mtx};
    return grew.wait_for(lock, 60s, [&] { return acked.size() >= n; });
  }
};

// Which jobs run now, and how often each ran.
struct runs {
  std::mutex mtx;
  std::set<std::string> running;
  std::map<std::string, int> count;
  int overlaps = 0;
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_restart_mid_run_gives_typed_errors_and_loses_nothing) {
  pg_server server;  // its own: restarting the shared one would hit other tests
  auto uri = server.fresh_database();
  auto q = queue::open(uri);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());

  runs seen;
  worker_options w;
  w.max_concurrency = 4;
  w.runners["work"] = [&seen](job_context& ctx) {
    auto id = ctx.id().to_string();
    {
      std::lock_guard<std::mutex> lock{seen.mtx};
      if (!seen.running.insert(id).second)
        ++seen.overlaps;
      ++seen.count[id];
    }
    std::lock_guard<std::mutex> lock{seen.mtx};
    seen.running.erase(id);
  };
  auto worker = q->start_worker(std::move(w));
  BOOST_REQUIRE(worker.has_value());

  submissions subs;
  std::atomic<bool> stop{false};
  std::thread submitter([&] {
    for (int i = 0; !stop.load(); ++i) {
      // The default timeout (5 minutes): an outcome whose commit was lost
      // is sent again, so no attempt waits to expire.
      auto id = q->submit(*job_builder("work").payload(std::to_string(i)).build());
      std::lock_guard<std::mutex> lock{subs.mtx};
      if (id)
        subs.acked.push_back(*id);
      else
        subs.errors.push_back(id.error());
      subs.grew.notify_all();
    }
  });
  BOOST_REQUIRE(subs.wait_for(200));
  size_t before;
  {
    std::lock_guard<std::mutex> lock{subs.mtx};
    before = subs.acked.size();
  }
  server.restart();
  // The queue reconnects by itself: submits succeed again.
  bool resumed = subs.wait_for(before + 200);
  stop = true;
  submitter.join();
  BOOST_REQUIRE_MESSAGE(resumed, "no submit succeeded within a minute of the restart");

  for (auto& e : subs.errors)
    BOOST_TEST((e.code() == error::unreachable), e.to_string());
  BOOST_TEST_MESSAGE(subs.errors.size() << " submits failed during the restart; "
                                        << subs.acked.size() << " acknowledged");
  for (auto& id : subs.acked) {
    auto done = q->wait(id, 120s);
    BOOST_REQUIRE_MESSAGE(done.has_value(), id.to_string() + ": " + done.error().to_string());
    BOOST_TEST((done->status == job_status::succeeded), id.to_string());
  }
  std::lock_guard<std::mutex> lock{seen.mtx};
  BOOST_TEST(seen.overlaps == 0);
  int again = 0;
  for (auto& [id, n] : seen.count)
    again += n > 1;
  BOOST_TEST(again == 0);
  BOOST_TEST_MESSAGE(worker->stats().outcomes_resent << " outcomes sent again");
  BOOST_TEST(q->close().ok());
}

namespace {

// A server of the test's own with a database "lost", reached directly or
// through a proxy that can cut connections.
struct proxied_server {
  pg_server server;
  tcp_proxy proxy{server.port()};
  proxied_server() { server.run_sql(server.uri(), "CREATE DATABASE lost"); }
  // `db` through the proxy.
  std::string proxied_uri(const std::string& db = "lost") const {
    return "postgresql://ergon@127.0.0.1:" + std::to_string(proxy.port()) + "/" + db;
  }
};

// A fenced writer connection through `proxy`, and the lease it is fenced
// with (taken on a connection of its own, straight to the server).
struct fenced_writer {
  std::unique_ptr<storage::pg_lease> lease;
  std::unique_ptr<storage::pg_db> db;
  std::vector<status> halts;

  explicit fenced_writer(const proxied_server& p, std::chrono::milliseconds outcome_wait = 30s) {
    storage::pg_options direct;
    direct.conninfo = p.server.uri("lost");
    auto d = storage::pg_db::open(direct);
    BOOST_REQUIRE_MESSAGE(d.has_value(), d.error().to_string());
    BOOST_REQUIRE(storage::migrate(**d).ok());
    auto held = storage::pg_lease::acquire(std::move(*d), 10s);
    BOOST_REQUIRE_MESSAGE(held.has_value(), held.error().to_string());
    lease = std::move(*held);
    storage::pg_options through = direct;
    through.conninfo = p.proxied_uri();
    through.commit_outcome_wait = outcome_wait;
    auto w = storage::pg_db::open(through);
    BOOST_REQUIRE_MESSAGE(w.has_value(), w.error().to_string());
    db = std::move(*w);
    db->fence(lease->epoch(), [this](const status& why) { halts.push_back(why); });
  }

  // Writes `marker` in a transaction, up to its COMMIT.
  void write(const std::string& marker) {
    BOOST_REQUIRE(db->begin_write().ok());
    auto q = "UPDATE lease SET host = '" + marker + "'";
    BOOST_REQUIRE(db->exec(q.c_str()).ok());
  }
};

std::string host_in_lease(const pg_server& server, const std::string& dbname) {
  return engine_probe{server.uri(dbname) + "?schema=ergon"}.text("SELECT host FROM lease");
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_commit_whose_answer_was_lost_is_known_committed) {
  proxied_server p;
  auto& [server, proxy] = p;
  fenced_writer w{p};
  w.write("committed");
  proxy.cut_next(tcp_proxy::cut::after_commit);
  auto st = w.db->commit();
  BOOST_TEST(st.ok(), st.to_string());
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST(host_in_lease(server, "lost") == "committed");
  BOOST_TEST(w.halts.empty());
  // The connection is back and fenced as before.
  w.write("again");
  BOOST_TEST(w.db->commit().ok());
  BOOST_TEST(host_in_lease(server, "lost") == "again");
}

BOOST_AUTO_TEST_CASE(a_commit_that_never_arrived_is_known_rolled_back) {
  proxied_server p;
  auto& [server, proxy] = p;
  fenced_writer w{p};
  auto before = host_in_lease(server, "lost");
  w.write("never");
  proxy.cut_next(tcp_proxy::cut::before_commit);
  auto st = w.db->commit();
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST(st.code() == error::unreachable, st.to_string());
  BOOST_TEST(st.message().find("did not commit") != std::string::npos, st.message());
  BOOST_TEST(host_in_lease(server, "lost") == before);
  BOOST_TEST(w.halts.empty());
  w.write("later");
  BOOST_TEST(w.db->commit().ok());
}

// While the server can't be reached, a commit's fate stays unknown: writing
// halts for good, and the connection says so without asking the server.
BOOST_AUTO_TEST_CASE(a_commit_whose_fate_stays_unknown_halts_writing) {
  proxied_server p;
  auto& [server, proxy] = p;
  fenced_writer w{p, 1s};
  w.write("unknown");
  proxy.cut_next(tcp_proxy::cut::after_commit);
  proxy.refuse(true);
  auto st = w.db->commit();
  BOOST_TEST(st.code() == error::unreachable, st.to_string());
  BOOST_TEST(st.message().find("unknown") != std::string::npos, st.message());
  BOOST_REQUIRE(w.halts.size() == 1);
  BOOST_TEST(w.halts.front().message() == st.message());
  proxy.refuse(false);
  auto again = w.db->begin_write();
  BOOST_TEST(again.message() == st.message());
  BOOST_TEST(w.halts.size() == 1);
}

// A worker sends an outcome again when its write failed for a passing cause,
// so the job does not wait out its attempt's timeout (5 minutes here) to
// run again: the COMMIT that carries the success is cut, and the success
// commits on the resend, with the job's code run once.
BOOST_AUTO_TEST_CASE(an_outcome_whose_commit_was_lost_is_sent_again_and_the_job_runs_once) {
  proxied_server p;
  auto& [server, proxy] = p;
  options opts;
  opts.lease_time = std::chrono::hours(1);  // no lease renewal's COMMIT meets the cut
  auto q = queue::open(p.proxied_uri(), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());

  gate g;
  std::atomic<int> ran{0};
  worker_options w;
  w.runners["work"] = [&](job_context&) {
    ++ran;
    g.pass();
  };
  auto worker = q->start_worker(std::move(w));
  BOOST_REQUIRE(worker.has_value());
  auto id = q->submit(*job_builder("work").build());
  BOOST_REQUIRE(id.has_value());
  BOOST_REQUIRE(g.wait_for_arrivals(1));
  // The next COMMIT is the one that records the success.
  proxy.cut_next(tcp_proxy::cut::before_commit);
  g.open();
  auto done = q->wait(*id, 60s);
  BOOST_REQUIRE_MESSAGE(done.has_value(), done.error().to_string());
  BOOST_TEST((done->status == job_status::succeeded));
  BOOST_TEST(proxy.cuts() == 1);
  BOOST_TEST(worker->stats().outcomes_resent >= 1);
  BOOST_TEST(ran.load() == 1);
  BOOST_TEST(q->close().ok());
}

// A COMMIT whose answer was lost while the server can't be reached again:
// the queue can't know what it holds, so it closes itself, and its callers
// hear why. The transaction did commit: the next owner finds the job.
BOOST_AUTO_TEST_CASE(a_commit_whose_fate_stays_unknown_closes_the_queue) {
  proxied_server p;
  auto& [server, proxy] = p;
  options opts;
  opts.lease_time = std::chrono::hours(1);  // the lease's session stays up meanwhile
  opts.commit_outcome_wait = 1s;
  auto q = queue::open(p.proxied_uri(), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_REQUIRE(q->submit(*job_builder("work").build()).has_value());
  proxy.cut_next(tcp_proxy::cut::after_commit);
  proxy.refuse(true);
  auto lost = q->submit(*job_builder("work").build());
  BOOST_REQUIRE(!lost.has_value());
  BOOST_TEST(lost.error().code() == error::unreachable);
  BOOST_TEST(lost.error().message().find("unknown") != std::string::npos, lost.error().message());
  BOOST_TEST(proxy.cuts() == 1);
  auto later = q->submit(*job_builder("work").build());
  BOOST_REQUIRE(!later.has_value());
  BOOST_TEST(later.error().code() == error::unreachable);
  BOOST_TEST(later.error().message().find("unknown") != std::string::npos,
             later.error().message());
  auto closed = q->close();
  BOOST_TEST(closed.code() == error::unreachable);
  BOOST_TEST(closed.message().find("this queue closed") != std::string::npos, closed.message());
  proxy.refuse(false);
  auto next = queue::open(server.uri("lost"), opts);
  BOOST_REQUIRE_MESSAGE(next.has_value(), next.error().to_string());
  BOOST_TEST(next->counts()[job_status::pending] == 2);
}

// An owner whose server goes silent (stopped, or a network that takes the
// bytes and never answers) takes its lease as lapsed before a successor can
// take over: the queue closes `busy`, naming the lapse, even though
// its renewal still waits for an answer.
BOOST_AUTO_TEST_CASE(an_owner_whose_server_went_silent_closes_before_its_lease_ends) {
  proxied_server p;
  auto& [server, proxy] = p;
  options opts;
  opts.lease_time = 1s;
  auto q = queue::open(p.proxied_uri(), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto id = q->submit(*job_builder("work").build());
  BOOST_REQUIRE(id.has_value());
  proxy.stall(true);
  auto started = std::chrono::steady_clock::now();
  // Nothing works "work": the wait ends when the queue closes.
  auto waited = q->wait(*id, 60s);
  auto took = std::chrono::steady_clock::now() - started;
  BOOST_REQUIRE(!waited.has_value());
  BOOST_TEST(waited.error().code() == error::busy, waited.error().to_string());
  BOOST_TEST(waited.error().message().find("lost the queue's lease") != std::string::npos,
             waited.error().message());
  BOOST_TEST_MESSAGE("closed "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms after the server went silent (lease 1000 ms)");
  proxy.stall(false);
  auto closed = q->close();
  BOOST_TEST(closed.code() == error::busy, closed.to_string());
  // The job is there for the next owner, once the lease passed (about a
  // tenth of it after the close) or its session ended.
  auto next = queue::open(server.uri("lost"), opts);
  for (int tries = 0; !next && next.error().code() == error::busy && tries < 100'000; ++tries)
    next = queue::open(server.uri("lost"), opts);
  BOOST_REQUIRE_MESSAGE(next.has_value(), next.error().to_string());
  BOOST_TEST(next->counts()[job_status::pending] == 1);
}

// A statement that runs past statement_timeout fails `timeout`; the queue
// goes on once the lock that held it is gone.
BOOST_AUTO_TEST_CASE(a_statement_timeout_is_a_timeout) {
  pg_server server;
  server.run_sql(server.uri(), "CREATE DATABASE slow");
  auto uri = server.uri("slow") + "?options=-c%20statement_timeout%3D300";
  auto q = queue::open(uri);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_REQUIRE(q->submit(*job_builder("work").build()).has_value());
  {
    // Another session holds the jobs table.
    storage::pg_options other;
    other.conninfo = server.uri("slow");
    auto locker = storage::pg_db::open(other);
    BOOST_REQUIRE(locker.has_value());
    BOOST_REQUIRE((*locker)->exec("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").ok());
    auto held = q->submit(*job_builder("work").build());
    BOOST_REQUIRE(!held.has_value());
    BOOST_TEST(held.error().code() == error::timeout, held.error().to_string());
    BOOST_TEST(held.error().message().find("statement timeout") != std::string::npos,
               held.error().message());
    (*locker)->rollback();
  }
  BOOST_TEST(q->submit(*job_builder("work").build()).has_value());
  BOOST_TEST(q->counts()[job_status::pending] == 2);
  BOOST_TEST(q->close().ok());
}

// A hot standby takes reads only: opening a queue on it fails read_only,
// naming the cause, and writes nothing.
BOOST_AUTO_TEST_CASE(a_read_only_standby_is_refused_read_only) {
  pg_server primary;
  primary.run_sql(primary.uri(), "CREATE DATABASE q");
  {
    auto q = queue::open(primary.uri("q"));
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    BOOST_REQUIRE(q->submit(*job_builder("work").build()).has_value());
    BOOST_REQUIRE(q->close().ok());
  }
  pg_server standby{pg_server::standby_of{primary}};
  auto on_standby = queue::open(standby.uri("q"));
  BOOST_REQUIRE(!on_standby.has_value());
  BOOST_TEST(on_standby.error().code() == error::read_only, on_standby.error().to_string());
  BOOST_TEST(on_standby.error().message().find("read-only") != std::string::npos,
             on_standby.error().message());
  // The inspector reads it.
  auto seen = queue::inspect(standby.uri("q"));
  BOOST_REQUIRE_MESSAGE(seen.has_value(), seen.error().to_string());
}

// A role that may read the queue's tables but not write them: the open
// fails read_only, naming the missing privilege, and writes nothing.
BOOST_AUTO_TEST_CASE(a_role_without_write_privileges_gets_read_only) {
  pg_server server;
  server.run_sql(server.uri(), "CREATE DATABASE q");
  {
    auto q = queue::open(server.uri("q"));
    BOOST_REQUIRE(q.has_value());
    BOOST_REQUIRE(q->submit(*job_builder("work").build()).has_value());
    BOOST_REQUIRE(q->close().ok());
  }
  server.run_sql(server.uri("q"), "CREATE ROLE reader LOGIN; "
                                  "GRANT USAGE ON SCHEMA ergon TO reader; "
                                  "GRANT SELECT ON ALL TABLES IN SCHEMA ergon TO reader");
  auto as_reader = "postgresql://reader@127.0.0.1:" + std::to_string(server.port()) + "/q";
  auto q = queue::open(as_reader);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::read_only, q.error().to_string());
  BOOST_TEST(q.error().message().find("permission denied") != std::string::npos,
             q.error().message());
  auto owner = queue::open(server.uri("q"));
  BOOST_REQUIRE(owner.has_value());
  BOOST_TEST(owner->counts()[job_status::pending] == 1);
}
