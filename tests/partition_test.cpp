// A partition between hosts: ergon-server and two worker processes each in a
// network namespace of their own, joined by veth pairs, so they talk as
// separate machines do. Cutting one worker's link makes the server drop it
// after the peer timeout and rerun its job on the other ("worker lost");
// once the link is back, the cut-off worker's late result is fenced. With a
// grace for remote work, a cut shorter than it reruns nothing. And a standby
// server takes a PostgreSQL queue over from an owner cut off from the
// database, which steps down.
// Network namespaces need root: without it the test is skipped, saying so.
#define BOOST_TEST_MODULE partition
#include <boost/test/unit_test.hpp>

#include <caf/after.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <httplib.h>

#include "ergon/job_builder.hpp"
#include "support/pg_server.hpp"
#include "support/server_process.hpp"
#include "support/test_engine.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::temp_dir;

namespace {

constexpr auto bound = std::chrono::seconds(60);
constexpr int peer_timeout_ms = 1'000;
const std::string secret = test::test_secret;

// Runs a shell command; its exit status.
int sh(const std::string& cmd) {
  int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void must(const std::string& cmd) {
  BOOST_REQUIRE_MESSAGE(sh(cmd) == 0, "failed: " + cmd);
}

// A link from this namespace (`here_end`, <net>.1) to namespace `ns`
// (`ns_end`, <net>.2), both up.
void link_to(const std::string& ns, const std::string& here_end, const std::string& ns_end,
             const std::string& net) {
  must("ip link add " + here_end + " type veth peer name " + ns_end + " netns " + ns);
  must("ip addr add " + net + ".1/30 dev " + here_end);
  must("ip link set " + here_end + " up");
  must("ip -n " + ns + " addr add " + net + ".2/30 dev " + ns_end);
  must("ip -n " + ns + " link set " + ns_end + " up");
}

boost::test_tools::assertion_result can_make_namespaces(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result ok{::geteuid() == 0};
  if (!ok) {
    ok.message() << "network namespaces need root; run the suite as root to test partitions";
    return ok;
  }
  auto probe = "ergon-probe-" + std::to_string(::getpid());
  ok = boost::test_tools::assertion_result{sh("ip netns add " + probe) == 0};
  if (!ok)
    ok.message() << "'ip netns add' failed (no iproute2, or no CAP_SYS_ADMIN here)";
  else
    sh("ip netns del " + probe);
  return ok;
}

// Three namespaces: the server's, joined by one veth pair to this process
// (the client) and by one to each worker's. Names carry the pid, so runs
// don't collide; everything goes when this does.
struct hosts {
  std::string tag = std::to_string(::getpid());
  std::string server = "ergon-s-" + tag;
  std::string worker_a = "ergon-a-" + tag;
  std::string worker_b = "ergon-b-" + tag;
  std::string link_a = "esa" + tag;  // the server's end of worker A's link

  hosts() {
    for (auto& ns : {server, worker_a, worker_b}) {
      must("ip netns add " + ns);
      must("ip -n " + ns + " link set lo up");
    }
    // This process: 10.231.0.1, the server 10.231.0.2.
    link_to(server, "egr" + tag, "egs" + tag, "10.231.0");
    pair(worker_a, link_a, "ega" + tag, "10.231.1");
    pair(worker_b, "esb" + tag, "egb" + tag, "10.231.2");
  }

  // A link between the server (<net>.1) and `ns` (<net>.2).
  void pair(const std::string& ns, const std::string& server_end, const std::string& ns_end,
            const std::string& net) {
    must("ip -n " + server + " link add " + server_end + " type veth peer name " + ns_end
         + " netns " + ns);
    must("ip -n " + server + " addr add " + net + ".1/30 dev " + server_end);
    must("ip -n " + server + " link set " + server_end + " up");
    must("ip -n " + ns + " addr add " + net + ".2/30 dev " + ns_end);
    must("ip -n " + ns + " link set " + ns_end + " up");
  }

  ~hosts() {
    sh("ip link del egr" + tag);
    for (auto& ns : {server, worker_a, worker_b})
      sh("ip netns del " + ns);
  }

  std::vector<std::string> in(const std::string& ns, std::vector<std::string> argv) const {
    std::vector<std::string> out{"/usr/sbin/ip", "netns", "exec", ns};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
};

struct client_config : test::network_config {
  client_config() {
    auto st = set_peer_timeout(*this, std::chrono::milliseconds{peer_timeout_ms});
    BOOST_REQUIRE(st.ok());
  }
};

std::vector<std::string> worker_argv(const hosts& h, const std::string& ns, const std::string& server,
                                uint16_t port, const std::string& mode) {
  return h.in(ns, {ERGON_TEST_REMOTE_WORKER, server, std::to_string(port), mode, "1"});
}

// ergon-server in its namespace, with the secret, the peer timeout and a
// grace for remote work of `grace_ms`; worker A in its own, in `mode`,
// registered; and this process's client, connected.
struct cut_setup {
  hosts h;
  temp_dir dir;
  child_process server;
  uint16_t port;
  child_process a;
  client_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  queue_actor q;

  cut_setup(const std::string& grace_ms, const std::string& mode)
      : server(start_server(h, dir, grace_ms)),
        port(test::read_listening_port(server)),
        a(worker_argv(h, h.worker_a, "10.231.1.1", port, mode)) {
    BOOST_REQUIRE_EQUAL(a.read_line(), "ready");
    auto connected = connect(sys, "10.231.0.2", port, {secret});
    BOOST_REQUIRE_MESSAGE(connected.has_value(), connected.error().to_string());
    q = *connected;
  }
  ~cut_setup() {
    ::unsetenv("ERGON_TEST_SECRET");
    ::unsetenv("ERGON_TEST_PEER_TIMEOUT_MS");
  }

  static std::vector<std::string> start_server(const hosts& h, const temp_dir& dir,
                                               const std::string& grace_ms) {
    test::write_private_file(dir.file("secret"), secret);
    ::setenv("ERGON_TEST_SECRET", secret.c_str(), 1);
    ::setenv("ERGON_TEST_PEER_TIMEOUT_MS", std::to_string(peer_timeout_ms).c_str(), 1);
    return h.in(h.server, {ERGON_SERVER, "--db", dir.file("q.db"), "--bind", "0.0.0.0",
                           "--port", "0", "--secret-file", dir.file("secret"),
                           "--peer-timeout-ms", std::to_string(peer_timeout_ms),
                           "--remote-grace-ms", grace_ms});
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_cut_off_worker_s_job_reruns_elsewhere_and_its_late_result_is_fenced,
                     *test::sqlite_only("ergon-server runs in a network namespace of its own, "
                                        "where the harness's PostgreSQL on 127.0.0.1 can't be "
                                        "reached")
                       * boost::unit_test::precondition(can_make_namespaces)) {
  cut_setup c{"0", "late"};
  auto& [h, dir, server, port, a, cfg, sys, self, q] = c;
  auto ask_ok = [&](auto... xs) {
    bool ok = false;
    self->request(q, caf::infinite, xs...).receive([&](ok_atom) { ok = true; },
                                                    [](caf::error&) {});
    return ok;
  };
  BOOST_REQUIRE(ask_ok(subscribe_atom::value, caf::actor_cast<caf::actor>(self)));
  auto j = job_builder("job")
             .payload("J")
             .max_retries(3)
             .backoff(std::chrono::hours(1))  // a rerun "at once" is not a backoff
             .timeout(std::chrono::hours(1))  // nor an expiry
             .build();
  job_id id;
  self->request(q, caf::infinite, submit_atom::value, *j)
    .receive([&](job_id& x) { id = x; }, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_REQUIRE_EQUAL(a.read_line(), "started J");

  child_process b{worker_argv(h, h.worker_b, "10.231.2.1", port, "complete")};
  BOOST_REQUIRE_EQUAL(b.read_line(), "ready");
  must("ip -n " + h.server + " link set " + h.link_a + " down");

  bool succeeded = false;
  bool quiet = false;
  while (!succeeded && !quiet)
    self->receive(
      [&](const event& e) { succeeded = e.kind == event_kind::succeeded && e.id == id; },
      caf::after(bound) >> [&] { quiet = true; });
  BOOST_REQUIRE_MESSAGE(succeeded, "the cut-off worker's job did not rerun elsewhere");
  job_info info;
  self->request(q, caf::infinite, job_info_atom::value, id)
    .receive([&](job_info& x) { info = std::move(x); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_REQUIRE_EQUAL(info.attempts.size(), 2u);
  BOOST_TEST(info.attempts[0].outcome == attempt_outcome::worker_lost);
  BOOST_TEST(info.attempts[0].message == "worker lost");
  BOOST_TEST(info.result.value_or("") == "done:J");

  // The link comes back: A registers again and its late result is fenced.
  must("ip -n " + h.server + " link set " + h.link_a + " up");
  BOOST_TEST(a.read_line() == "outcome J stale_attempt");
  self->request(q, caf::infinite, job_info_atom::value, id)
    .receive([&](job_info& x) { info = std::move(x); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_TEST(info.result.value_or("") == "done:J");

  for (auto* w : {&a, &b}) {
    w->signal(SIGTERM);
    BOOST_TEST(w->read_line().rfind("stopped", 0) == 0);
    w->wait();
  }
  server.signal(SIGTERM);
  int st = server.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

// With a grace (--remote-grace-ms), the server holds a cut-off worker's
// attempt rather than rerun it; the worker keeps running it, joins again
// when the link is back, takes it back, and its outcome commits: one try.
BOOST_AUTO_TEST_CASE(a_cut_shorter_than_the_grace_reruns_nothing,
                     *test::sqlite_only("ergon-server runs in a network namespace of its own, "
                                        "where the harness's PostgreSQL on 127.0.0.1 can't be "
                                        "reached")
                       * boost::unit_test::precondition(can_make_namespaces)) {
  cut_setup c{"30000", "step"};
  auto& [h, dir, server, port, a, cfg, sys, self, q] = c;
  auto metrics_until = [&](auto done) {
    auto until = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < until) {
      metrics_snapshot m;
      self->request(q, caf::infinite, metrics_atom::value)
        .receive([&](metrics_snapshot& x) { m = std::move(x); },
                 [](caf::error& e) { BOOST_FAIL(to_string(e)); });
      if (done(m))
        return true;
    }
    return false;
  };
  auto j = job_builder("job").payload("complete").max_retries(3).timeout(std::chrono::hours(1))
             .build();
  job_id id;
  self->request(q, caf::infinite, submit_atom::value, *j)
    .receive([&](job_id& x) { id = x; }, [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_REQUIRE_EQUAL(a.read_line(), "started complete");

  must("ip -n " + h.server + " link set " + h.link_a + " down");
  BOOST_REQUIRE(metrics_until([](const metrics_snapshot& m) {
    return m.remote_workers == 0 && m.orphaned_attempts == 1;
  }));
  must("ip -n " + h.server + " link set " + h.link_a + " up");
  BOOST_REQUIRE(metrics_until([](const metrics_snapshot& m) {
    return m.remote_workers == 1 && m.orphaned_attempts == 0;
  }));
  BOOST_REQUIRE(a.write_line("go"));
  BOOST_TEST(a.read_line() == "outcome complete none");  // no error
  job_info info;
  self->request(q, caf::infinite, job_info_atom::value, id)
    .receive([&](job_info& x) { info = std::move(x); },
             [](caf::error& e) { BOOST_FAIL(to_string(e)); });
  BOOST_TEST(info.status == job_status::succeeded);
  BOOST_TEST(info.tries == 1);
  BOOST_REQUIRE_EQUAL(info.attempts.size(), 1u);
  BOOST_TEST(info.attempts[0].outcome == attempt_outcome::succeeded);

  a.signal(SIGTERM);
  BOOST_TEST(a.read_line().rfind("stopped", 0) == 0);
  a.wait();
  server.signal(SIGTERM);
  int st = server.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

namespace {

// An owner's host: a namespace joined to this one by a veth pair, this
// side 10.231.9.1, the owner's 10.231.9.2. PostgreSQL listens on this side.
struct owner_host {
  std::string tag = std::to_string(::getpid());
  std::string ns = "ergon-o-" + tag;
  std::string link = "ego" + tag;  // this side's end

  owner_host() {
    must("ip netns add " + ns);
    must("ip -n " + ns + " link set lo up");
    link_to(ns, link, "egp" + tag, "10.231.9");
  }
  ~owner_host() {
    sh("ip link del " + link);
    sh("ip netns del " + ns);
  }
};

}  // namespace

// The owner of a PostgreSQL queue loses its link to the database. Its
// lease lapses on its own clock and it steps down; a standby on the
// database's side takes the queue over within the lease plus a little. When
// the link is back, the old owner stays a standby, and says so on /healthz.
BOOST_AUTO_TEST_CASE(a_standby_takes_over_from_an_owner_cut_off_from_postgresql,
                     *test::sqlite_only("it starts a PostgreSQL of its own, reachable from the "
                                        "owner's namespace; once is enough")
                       * boost::unit_test::precondition(can_make_namespaces)) {
  owner_host h;
  test::pg_server pg{test::pg_server::reachable_at{"10.231.9.1", "10.231.9.0/30"}};
  auto local = pg.fresh_database();
  auto db = local.substr(local.rfind('/'));
  auto remote = "postgresql://ergon@10.231.9.1:" + std::to_string(pg.port()) + db;
  std::vector<std::string> common{"--standby", "--port", "0", "--lease-time-ms", "3000",
                                  "--standby-poll-ms", "50"};
  std::vector<std::string> a_argv{"/usr/sbin/ip", "netns", "exec", h.ns, ERGON_SERVER, "--db",
                                  remote, "--http-port", "0", "--http-bind", "0.0.0.0",
                                  "--http-insecure-plaintext"};
  a_argv.insert(a_argv.end(), common.begin(), common.end());
  child_process a{a_argv};
  uint16_t a_http = 0;
  bool owner = false;
  while (a_http == 0 || !owner) {
    auto line = a.read_line();
    BOOST_REQUIRE_MESSAGE(!line.empty(), "the owner ended early");
    if (line.rfind("ergon-server http on ", 0) == 0)
      a_http = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
    owner = owner || line.rfind("ergon-server listening on ", 0) == 0;
  }
  std::vector<std::string> b_argv{ERGON_SERVER, "--db", local};
  b_argv.insert(b_argv.end(), common.begin(), common.end());
  child_process b{b_argv};
  b.line_starting("ergon-server standby for ");

  must("ip link set " + h.link + " down");
  auto cut = std::chrono::steady_clock::now();
  b.line_starting("ergon-server listening on ");
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - cut);
  BOOST_TEST_MESSAGE("the standby served " << took.count()
                                           << " ms after the owner's link was cut (lease 3000 ms)");
  auto down = a.line_starting("ergon-server stepping down: ");
  BOOST_TEST(down.find("lost the queue's lease") != std::string::npos, down);
  a.line_starting("ergon-server standby for ");

  must("ip link set " + h.link + " up");
  httplib::Client c{"10.231.9.2", a_http};
  auto r = c.Get("/healthz");
  BOOST_REQUIRE(r);
  BOOST_TEST(r->status == 503);
  BOOST_TEST(r->body.find("\"role\":\"standby\"") != std::string::npos, r->body);
  for (auto* p : {&a, &b}) {
    p->signal(SIGTERM);
    int st = p->wait();
    BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0), "wait status " << st);
  }
}
