// Standby servers in one process (include/ergon/standby.hpp), on a
// PostgreSQL server of the tests' own: the first takes the queue, a second
// stands by and takes it over when the first stops, a server whose queue is
// taken over steps down and stands by again, and the HTTP side tells a load
// balancer which one to use. test-pg-owner runs the same with ergon-server
// processes and SIGKILL.
#define BOOST_TEST_MODULE standby
#include <boost/test/unit_test.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/standby.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

struct system_config : caf::actor_system_config {
  system_config() { queue::register_types(*this); }
};

// The role changes a server reported, and a way to wait for the next.
struct changes {
  std::mutex mtx;
  std::condition_variable grew;
  std::vector<role_change> seen;

  std::function<void(const role_change&)> recorder() {
    return [this](const role_change& c) {
      std::lock_guard<std::mutex> lock(mtx);
      seen.push_back(c);
      grew.notify_all();
    };
  }

  // Waits until `n` changes were reported (a minute at most) and returns the nth.
  role_change wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mtx);
    BOOST_REQUIRE_MESSAGE(grew.wait_for(lock, 60s, [&] { return seen.size() >= n; }),
                          "no role change number " << n);
    return seen[n - 1];
  }

  size_t count() {
    std::lock_guard<std::mutex> lock(mtx);
    return seen.size();
  }
};

struct node {
  system_config cfg;
  caf::actor_system sys{cfg};
};

options with_http() {
  options opts;
  opts.lease_time = 10s;  // takeovers here come from a lease given up
  opts.http = http_options{};
  return opts;
}

standby_options fast() { return standby_options{20ms}; }

json get(uint16_t port, const std::string& path, int& code) {
  httplib::Client c{"127.0.0.1", port};
  auto r = c.Get(path.c_str());
  BOOST_REQUIRE_MESSAGE(r, "GET " << path << " failed");
  code = r->status;
  if (path == "/metrics")
    return json{{"text", r->body}};
  return json::parse(r->body);
}

template <class T, class... Ts>
T ask(caf::actor_system& sys, const queue_actor& q, Ts&&... xs) {
  std::optional<T> out;
  caf::scoped_actor self{sys};
  self->request(q, caf::infinite, xs...)
    .receive([&](T& v) { out = std::move(v); },
             [&](caf::error& e) { BOOST_FAIL("request failed: " << to_status(e)); });
  return *out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_standby_takes_over_when_the_owner_stops_and_shows_its_role) {
  auto uri = shared_pg_server().fresh_database();
  node a, b;
  changes seen_a, seen_b;
  auto first = standby_server::start(a.sys, uri, with_http(), fast(), seen_a.recorder());
  BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
  auto owned = seen_a.wait_for(1);
  BOOST_TEST((owned.role == server_role::owner));
  BOOST_TEST(owned.why.ok());
  auto id = ask<job_id>(a.sys, owned.queue, submit_atom::value, *job_builder("work").build());
  auto second = standby_server::start(b.sys, uri, with_http(), fast(), seen_b.recorder());
  BOOST_REQUIRE_MESSAGE(second.has_value(), second.error().to_string());
  BOOST_TEST((second->role() == server_role::standby));
  BOOST_TEST(!second->queue());

  // The load balancer's view: the owner answers 200, the standby 503.
  int code = 0;
  auto healthy = get(*first->http_port(), "/healthz", code);
  BOOST_TEST(code == 200);
  BOOST_TEST(healthy["role"] == "owner");
  BOOST_TEST(healthy["epoch"] == 1);
  auto standing = get(*second->http_port(), "/healthz", code);
  BOOST_TEST(code == 503);
  BOOST_TEST(standing["role"] == "standby", standing.dump());
  BOOST_TEST(standing["owner"]["pid"] == ::getpid(), standing.dump());
  BOOST_TEST(standing["owner"]["epoch"] == 1);
  get(*second->http_port(), "/livez", code);
  BOOST_TEST(code == 200);
  auto api = get(*second->http_port(), "/api/stats", code);
  BOOST_TEST(code == 503);
  BOOST_TEST(api["error"] == "standby");
  auto metrics = get(*second->http_port(), "/metrics", code)["text"].get<std::string>();
  BOOST_TEST(metrics.find("ergon_role{role=\"standby\"} 1") != std::string::npos, metrics);
  BOOST_TEST(metrics.find("ergon_takeovers_total 0") != std::string::npos, metrics);
  auto owner_metrics = get(*first->http_port(), "/metrics", code)["text"].get<std::string>();
  BOOST_TEST(owner_metrics.find("ergon_role{role=\"owner\"} 1") != std::string::npos);
  BOOST_TEST(owner_metrics.find("ergon_lease_epoch 1") != std::string::npos);

  // The owner stops and gives its lease up: the standby takes over at once,
  // on the same HTTP port, with the job.
  auto port_b = *second->http_port();
  BOOST_TEST(first->stop().ok());
  BOOST_TEST((seen_a.wait_for(2).role == server_role::stopped));
  auto took = seen_b.wait_for(1);
  BOOST_TEST((took.role == server_role::owner));
  BOOST_TEST(second->takeovers() == 1);
  BOOST_TEST(*second->http_port() == port_b);
  auto info = ask<job_info>(b.sys, took.queue, job_info_atom::value, id);
  BOOST_TEST((info.status == job_status::pending));
  auto now = get(port_b, "/healthz", code);
  BOOST_TEST(code == 200);
  BOOST_TEST(now["role"] == "owner");
  BOOST_TEST(now["epoch"] == 2);
  BOOST_TEST(second->stop().ok());
  BOOST_TEST((second->role() == server_role::stopped));
}

// A server whose queue another takes over (here, a lease moved on by SQL)
// steps down and stands by; once that owner's session is gone, it takes
// the queue back.
BOOST_AUTO_TEST_CASE(a_deposed_owner_steps_down_and_stands_by) {
  auto uri = shared_pg_server().fresh_database();
  node a;
  changes seen;
  options opts;
  opts.lease_time = 60s;  // the writer's fence finds the takeover, not a renewal
  auto s = standby_server::start(a.sys, uri, opts, fast(), seen.recorder());
  BOOST_REQUIRE_MESSAGE(s.has_value(), s.error().to_string());
  auto owned = seen.wait_for(1);
  BOOST_REQUIRE((owned.role == server_role::owner));
  // As a takeover does: FOR UPDATE waits for a writer batch that read the
  // old epoch, so no batch straddles the change.
  engine_probe{uri}.exec(
    "BEGIN; SELECT 1 FROM ergon.lease FOR UPDATE; "
    "UPDATE ergon.lease SET epoch = epoch + 1, pid = 1, host = 'elsewhere'; COMMIT");
  caf::scoped_actor self{a.sys};
  self->request(owned.queue, caf::infinite, submit_atom::value, *job_builder("work").build())
    .receive([](job_id&) { BOOST_FAIL("a deposed owner took a submit"); },
             [](caf::error& e) { BOOST_TEST(to_status(e).code() == error::busy); });
  auto down = seen.wait_for(2);
  BOOST_TEST((down.role == server_role::standby));
  BOOST_TEST(down.why.code() == error::busy, down.why.to_string());
  BOOST_TEST(down.why.message().find("took the queue over") != std::string::npos,
             down.why.message());
  BOOST_TEST(s->step_downs() == 1);
  // The "other owner" has no session: the lease is takeable, and it comes back.
  auto back = seen.wait_for(3);
  BOOST_TEST((back.role == server_role::owner));
  BOOST_TEST(s->takeovers() == 2);
  BOOST_TEST(engine_probe{uri}.number("SELECT epoch FROM ergon.lease") == 3);
  BOOST_TEST(s->stop().ok());
}

BOOST_AUTO_TEST_CASE(bad_standby_arguments_are_named) {
  node a;
  temp_dir dir;
  auto sqlite = standby_server::start(a.sys, dir.file("q.db"), {});
  BOOST_REQUIRE(!sqlite.has_value());
  BOOST_TEST(sqlite.error().field() == "location");
  auto uri = shared_pg_server().fresh_database();
  for (std::chrono::milliseconds poll : {0ms, 9ms, 61000ms}) {
    auto bad = standby_server::start(a.sys, uri, {}, standby_options{poll});
    BOOST_REQUIRE(!bad.has_value());
    BOOST_TEST(bad.error().field() == "poll");
  }
  options opts;
  opts.lease_time = 0ms;
  auto lease = standby_server::start(a.sys, uri, opts);
  BOOST_REQUIRE(!lease.has_value());
  BOOST_TEST(lease.error().field() == "lease_time");
  // No middleman in this system: listening can't work.
  opts = {};
  opts.listen = listen_options{};
  auto listen = standby_server::start(a.sys, uri, opts);
  BOOST_REQUIRE(!listen.has_value());
  BOOST_TEST(listen.error().field() == "sys");
  // A moved-from server.
  auto s = standby_server::start(a.sys, uri, {}, fast());
  BOOST_REQUIRE(s.has_value());
  auto moved = std::move(*s);
  BOOST_TEST((s->role() == server_role::stopped));
  BOOST_TEST(s->stop().code() == error::closed);
  BOOST_TEST(!s->http_port().has_value());
  BOOST_TEST(moved.stop().ok());
}
