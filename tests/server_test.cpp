// ergon-server in a real process on 127.0.0.1, used through ergon::connect.
#define BOOST_TEST_MODULE server
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <sys/wait.h>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"
#include "support/server_process.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::temp_dir;

namespace {

using test::client;
using config = test::network_config;

// A server on a free port of 127.0.0.1, with its own directory.
struct server {
  temp_dir dir;
  test::server_process running{dir.file("q.db")};
  uint16_t port = running.port;
  child_process& proc = running.proc;

  bool stop(int sig) { return running.stop(sig); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_remote_client_submits_and_reads_and_the_job_is_on_disk) {
  server s;
  job_id id;
  {
    client c;
    auto q = connect(c.sys, "127.0.0.1", s.port);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    auto submitted = c.ask<job_id>(*q, submit_atom::value,
                                   *job_builder("email").payload("hi").build());
    BOOST_REQUIRE_MESSAGE(submitted.has_value(), submitted.error().to_string());
    id = *submitted;
    auto info = c.ask<job_info>(*q, job_info_atom::value, id);
    BOOST_REQUIRE(info.has_value());
    BOOST_TEST(info->payload == "hi");
    // Errors cross the wire with their code and field.
    auto bad = c.ask<job_id>(*q, submit_atom::value, job{});
    BOOST_REQUIRE(!bad.has_value());
    BOOST_TEST(bad.error().code() == error::invalid_argument);
    BOOST_TEST(bad.error().field() == "type");
  }
  BOOST_TEST(s.stop(SIGTERM));
  // The server closed the file: it opens here, with the job in it.
  auto q = queue::open(s.dir.file("q.db"));
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(q->job_info(id)->status == job_status::pending);
}

BOOST_AUTO_TEST_CASE(sigint_closes_the_server_cleanly) {
  server s;
  BOOST_TEST(s.stop(SIGINT));
  BOOST_TEST(queue::open(s.dir.file("q.db")).has_value());
}

BOOST_AUTO_TEST_CASE(nothing_listening_is_unreachable_not_a_hang) {
  uint16_t port = 0;
  {
    server s;  // a port that was just free, and is again once it stops
    port = s.port;
    BOOST_TEST(s.stop(SIGTERM));
  }
  client c;
  auto q = connect(c.sys, "127.0.0.1", port);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::unreachable);
  BOOST_TEST(q.error().message().find("127.0.0.1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(without_a_network_layer_connect_names_the_fix) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto q = connect(sys, "127.0.0.1", 1);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::invalid_argument);
  BOOST_TEST(q.error().message().find("middleman") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_busy_file_stops_the_server_with_its_reason) {
  temp_dir dir;
  auto owner = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(owner.has_value());
  child_process proc{{ERGON_SERVER, "--db", dir.file("q.db"), "--port", "0"}};
  int st = proc.wait();
  BOOST_TEST(WIFEXITED(st));
  BOOST_TEST(WEXITSTATUS(st) == 1);
}
