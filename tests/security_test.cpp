// The shared secret and mutual TLS, with ergon-server and stranger
// processes on 127.0.0.1. Certificates are made at run time with openssl.
#define BOOST_TEST_MODULE security
#include <boost/test/unit_test.hpp>

#include <caf/event_based_actor.hpp>

#include <cstdlib>
#include <fstream>

#include "ergon/job_builder.hpp"
#include "support/server_process.hpp"

using namespace ergon;
using namespace ergon::test;

namespace {

const std::string secret = "correct horse battery staple";

std::string write_file(const temp_dir& dir, const std::string& name, const std::string& text) {
  auto path = dir.file(name);
  std::ofstream{path} << text << '\n';
  return path;
}

// A server that requires `secret`.
std::vector<std::string> secret_args(const temp_dir& dir) {
  return {"--secret-file", write_file(dir, "secret", secret)};
}

result<job_id> submit(client& c, const queue_actor& q) {
  return c.ask<job_id>(q, submit_atom::value, *job_builder("job").payload("p").build());
}

metrics_snapshot metrics_of(client& c, const queue_actor& q) {
  auto m = c.ask<metrics_snapshot>(q, metrics_atom::value);
  BOOST_REQUIRE_MESSAGE(m.has_value(), m.error().to_string());
  return *m;
}

void run(const std::string& cmd) {
  BOOST_REQUIRE_MESSAGE(std::system((cmd + " 2>/dev/null").c_str()) == 0, cmd);
}

// A CA, a server and a client certificate it signed, and a client
// certificate signed by another CA.
struct certificates {
  temp_dir dir;

  certificates() {
    auto key = [&](const std::string& name) {
      run("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "
          + dir.file(name + ".key"));
    };
    auto ca = [&](const std::string& name) {
      key(name);
      run("openssl req -x509 -new -key " + dir.file(name + ".key") + " -days 2 -subj /CN="
          + name + " -out " + dir.file(name + ".pem"));
    };
    auto signed_by = [&](const std::string& name, const std::string& issuer) {
      key(name);
      run("openssl req -new -key " + dir.file(name + ".key") + " -subj /CN=" + name + " -out "
          + dir.file(name + ".csr"));
      run("openssl x509 -req -in " + dir.file(name + ".csr") + " -CA " + dir.file(issuer + ".pem")
          + " -CAkey " + dir.file(issuer + ".key") + " -CAcreateserial -days 2 -out "
          + dir.file(name + ".pem"));
    };
    ca("ca");
    ca("other-ca");
    signed_by("server", "ca");
    signed_by("client", "ca");
    signed_by("stranger", "other-ca");
  }

  tls_options node(const std::string& name, const std::string& ca = "ca") const {
    tls_options tls;
    tls.certificate = dir.file(name + ".pem");
    tls.key = dir.file(name + ".key");
    tls.ca_file = dir.file(ca + ".pem");
    return tls;
  }

  std::vector<std::string> server_args() const {
    return {"--tls-cert", dir.file("server.pem"), "--tls-key", dir.file("server.key"),
            "--tls-ca", dir.file("ca.pem")};
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(shared_secret)

BOOST_AUTO_TEST_CASE(only_a_client_that_proves_the_secret_gets_in) {
  temp_dir dir;
  server_process server{dir.file("q.db"), 0, secret_args(dir)};
  client c;
  auto wrong = connect(c.sys, "127.0.0.1", server.port, {"not the secret at all"});
  BOOST_REQUIRE(!wrong.has_value());
  BOOST_TEST(wrong.error().code() == error::unauthenticated);
  BOOST_TEST(wrong.error().message().find("does not match") != std::string::npos);
  auto none = connect(c.sys, "127.0.0.1", server.port);
  BOOST_REQUIRE(!none.has_value());
  BOOST_TEST(none.error().code() == error::unauthenticated);
  BOOST_TEST(none.error().message().find("requires a secret") != std::string::npos);
  auto q = connect(c.sys, "127.0.0.1", server.port, {secret});
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(submit(c, *q).has_value());
  auto m = metrics_of(c, *q);
  BOOST_TEST(m.failed_handshakes == 2);  // the wrong secret, and none
  BOOST_TEST(m.by_status.total() == 1);
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_client_with_a_secret_refuses_a_queue_without_one) {
  temp_dir dir;
  server_process server{dir.file("q.db")};
  client c;
  auto q = connect(c.sys, "127.0.0.1", server.port, {secret});
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::unauthenticated);
  BOOST_TEST(q.error().message().find("did not prove the secret") != std::string::npos);
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(a_secret_shorter_than_16_bytes_is_refused_on_both_sides) {
  temp_dir dir;
  client c;
  auto q = connect(c.sys, "127.0.0.1", 1, {"short"});
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::invalid_argument);
  BOOST_TEST(q.error().field() == "secret");
  child_process server{{ERGON_SERVER, "--db", dir.file("q.db"), "--port", "0", "--secret-file",
                        write_file(dir, "short", "short")}};
  BOOST_TEST(WEXITSTATUS(server.wait()) == 1);
}

// A stranger speaks plain CAF to the queue, and even holds the dispatcher's
// handle (leaked by an authenticated node): it reaches nothing, and the
// queue keeps working.
BOOST_AUTO_TEST_CASE(a_node_that_skips_the_handshake_reaches_nothing) {
  temp_dir dir;
  server_process server{dir.file("q.db"), 0, secret_args(dir)};
  client c;
  auto q = connect(c.sys, "127.0.0.1", server.port, {secret});
  BOOST_REQUIRE(q.has_value());
  child_process submitter{{ERGON_TEST_RAW_PEER, "127.0.0.1", std::to_string(server.port),
                           "submit"}};
  BOOST_TEST(submitter.read_line() == "submit unauthenticated");
  auto dispatcher = c.ask<caf::actor>(*q, join_atom::value);
  BOOST_REQUIRE(dispatcher.has_value());
  // The handle goes in as a spawn argument: CAF 0.17 binds a null tuple to a
  // reference for a spawn without arguments, which UBSan rejects.
  auto leak = c.sys.spawn(
    [](caf::event_based_actor*, caf::actor d) -> caf::behavior {
      return {[d](join_atom) { return d; }};
    },
    *dispatcher);
  auto leak_port = c.sys.middleman().publish(leak, 0, "127.0.0.1");
  BOOST_REQUIRE(static_cast<bool>(leak_port));
  child_process stranger{{ERGON_TEST_RAW_PEER, "127.0.0.1", std::to_string(server.port),
                          "leaked", std::to_string(*leak_port)}};
  BOOST_TEST(stranger.read_line() == "register unauthenticated");
  BOOST_TEST(stranger.read_line() == "done");
  BOOST_TEST(stranger.wait() == 0);
  // The exit message was dropped too: the dispatcher still answers.
  BOOST_TEST(submit(c, *q).has_value());
  auto m = metrics_of(c, *q);
  BOOST_TEST(m.by_status.total() == 1);  // nothing from the stranger
  BOOST_TEST(m.refused_messages >= 3);   // submit, register, exit
  BOOST_TEST(m.failed_handshakes == 0);
  c.self->send_exit(leak, caf::exit_reason::user_shutdown);
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(mutual_tls)

BOOST_AUTO_TEST_CASE(only_a_certificate_of_the_servers_ca_gets_in) {
  certificates certs;
  temp_dir dir;
  server_process server{dir.file("q.db"), 0, certs.server_args()};
  {
    client c{certs.node("client")};
    auto q = connect(c.sys, "127.0.0.1", server.port);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    BOOST_TEST(submit(c, *q).has_value());
  }
  {
    client stranger{certs.node("stranger", "other-ca")};
    auto q = connect(stranger.sys, "127.0.0.1", server.port);
    BOOST_REQUIRE(!q.has_value());
    BOOST_TEST(q.error().code() == error::unreachable);
    BOOST_TEST(q.error().message().find("127.0.0.1") != std::string::npos);
  }
  {
    client plain;
    auto q = connect(plain.sys, "127.0.0.1", server.port);
    BOOST_REQUIRE(!q.has_value());
    BOOST_TEST(q.error().code() == error::unreachable);
  }
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(use_tls_names_the_file_that_is_wrong) {
  certificates certs;
  struct expectation {
    tls_options tls;
    std::string field;
  };
  auto good = certs.node("client");
  auto missing = good;
  missing.certificate = certs.dir.file("nowhere.pem");
  auto mismatched = good;
  mismatched.key = certs.dir.file("server.key");
  auto not_pem = good;
  not_pem.ca_file = write_file(certs.dir, "junk.pem", "not a certificate");
  auto empty = good;
  empty.key.clear();
  for (auto& [tls, field] : {expectation{missing, "certificate"}, expectation{mismatched, "key"},
                             expectation{not_pem, "ca_file"}, expectation{empty, "key"}}) {
    caf::actor_system_config cfg;
    cfg.load<caf::io::middleman>();
    auto st = use_tls(cfg, tls);
    BOOST_TEST(st.code() == error::invalid_argument);
    BOOST_TEST(st.field() == field);
    BOOST_TEST(cfg.openssl_certificate.empty());  // nothing loaded
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Worker protocol messages out of range, from a node that can reach the
// dispatcher: each is refused with the field it breaks, logged and counted,
// and the queue goes on.
BOOST_AUTO_TEST_SUITE(network_input)

BOOST_AUTO_TEST_CASE(out_of_range_worker_messages_are_rejected_and_change_nothing) {
  temp_dir dir;
  server_process server{dir.file("q.db")};
  client c;
  auto q = connect(c.sys, "127.0.0.1", server.port);
  BOOST_REQUIRE(q.has_value());
  BOOST_REQUIRE(submit(c, *q).has_value());
  child_process peer{{ERGON_TEST_RAW_PEER, "127.0.0.1", std::to_string(server.port),
                      "malformed"}};
  BOOST_TEST(peer.read_line() == "register invalid_argument types");  // none
  BOOST_TEST(peer.read_line() == "register invalid_argument types");  // 300 bytes
  BOOST_TEST(peer.read_line() == "register invalid_argument max_capacity");
  BOOST_TEST(peer.read_line() == "register invalid_argument prefetch");
  BOOST_TEST(peer.read_line() == "register invalid_argument worker");
  BOOST_TEST(peer.read_line() == "unregister invalid_argument worker_id");
  BOOST_TEST(peer.read_line() == "sent");
  // The reports' room was refused: the job was never claimed for the peer.
  auto counts = c.ask<status_counts>(*q, counts_atom::value);
  BOOST_REQUIRE(counts.has_value());
  BOOST_TEST((*counts)[job_status::pending] == 1);
  BOOST_TEST((*counts)[job_status::running] == 0);
  auto m = metrics_of(c, *q);
  BOOST_TEST(m.rejected_messages == 8);  // 5 registrations, 2 reports, 1 unregistration
  BOOST_TEST(m.refused_messages == 0);
  peer.close_stdin();
  BOOST_TEST(peer.wait() == 0);
  BOOST_TEST(submit(c, *q).has_value());
  BOOST_TEST(server.stop(SIGTERM));
}

BOOST_AUTO_TEST_SUITE_END()
