// ergon-server in a real process on 127.0.0.1, used through ergon::connect.
#define BOOST_TEST_MODULE server
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"
#include "queue_impl.hpp"
#include "support/server_process.hpp"
#include "support/test_engine.hpp"

using namespace ergon;
using ergon::test::child_process;
using ergon::test::temp_dir;

namespace {

using test::client;
using config = test::network_config;

// A server on a free port of 127.0.0.1, with its own directory, serving a
// queue on the test engine.
struct server {
  temp_dir dir;
  std::string location = test::test_location(dir);
  test::server_process running{location};
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
    // Recurring jobs and their errors cross it too.
    recurring_job r;
    r.id = "remote";
    r.schedule = "every 1h";
    r.job = *job_builder("email").build();
    auto instance = c.ask<job_id>(*q, add_recurring_atom::value, r);
    BOOST_REQUIRE_MESSAGE(instance.has_value(), instance.error().to_string());
    auto listed = c.ask<std::vector<recurring_info>>(*q, list_recurring_atom::value,
                                                     std::string{});
    BOOST_REQUIRE(listed.has_value());
    BOOST_TEST(listed->size() == 1u);
    BOOST_TEST(listed->front().schedule == "every 1h");
    BOOST_TEST((listed->front().next_job == *instance));
    BOOST_TEST(c.ask<job_id>(*q, add_recurring_atom::value, r).error().code()
               == error::already_exists);
  }
  BOOST_TEST(s.stop(SIGTERM));
  // The server closed the queue: it opens here, with the job in it.
  auto q = queue::open(s.location);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(q->job_info(id)->status == job_status::pending);
}

BOOST_AUTO_TEST_CASE(sigint_closes_the_server_cleanly) {
  server s;
  BOOST_TEST(s.stop(SIGINT));
  BOOST_TEST(queue::open(s.location).has_value());
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

// Several servers: the one that answers is used; when none does, each is
// named. Bad lists and times are refused before anything is dialed.
BOOST_AUTO_TEST_CASE(connect_tries_each_address_and_names_what_is_wrong) {
  temp_dir dir;
  test::server_process s{test::test_location(dir)};
  client c;
  connect_options where;
  where.addresses = {{"127.0.0.1", 1}, {"127.0.0.1", s.port}};
  auto q = connect(c.sys, where);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(c.ask<status_counts>(*q, counts_atom::value).has_value());
  where.addresses = {{"127.0.0.1", 1}, {"127.0.0.1", 2}};
  auto none = connect(c.sys, where);
  BOOST_REQUIRE(!none.has_value());
  BOOST_TEST(none.error().code() == error::unreachable);
  BOOST_TEST(none.error().message().find("127.0.0.1:1") != std::string::npos,
             none.error().message());
  BOOST_TEST(none.error().message().find("127.0.0.1:2") != std::string::npos,
             none.error().message());
  auto refused = [&](connect_options o, const std::string& field) {
    auto r = connect(c.sys, o);
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == error::invalid_argument);
    BOOST_TEST(r.error().field() == field, r.error().to_string());
  };
  refused(connect_options{}, "addresses");
  // Found through the owner's lock file, with no address at all.
  connect_options by_owner;
  by_owner.owner_of = s.db;
  auto found = connect(c.sys, by_owner);
  BOOST_REQUIRE_MESSAGE(found.has_value(), found.error().to_string());
  BOOST_TEST(c.ask<status_counts>(*found, counts_atom::value).has_value());
  connect_options bad;
  bad.addresses = {{"", 4780}};
  refused(bad, "addresses");
  bad.addresses = {{"127.0.0.1", 0}};
  refused(bad, "addresses");
  bad.addresses = {{"127.0.0.1", s.port}};
  bad.dial_timeout = std::chrono::milliseconds{99};
  refused(bad, "dial_timeout");
  bad.dial_timeout = std::chrono::milliseconds{60'001};
  refused(bad, "dial_timeout");
  bad.dial_timeout = std::chrono::seconds{3};
  bad.retry_min = std::chrono::milliseconds{9};
  refused(bad, "retry_min");
  bad.retry_min = std::chrono::seconds{2};
  bad.retry_max = std::chrono::seconds{1};
  refused(bad, "retry_min");
  bad.retry_min = std::chrono::seconds{1};
  bad.retry_max = std::chrono::milliseconds{60'001};
  refused(bad, "retry_max");
  BOOST_TEST(s.stop(SIGTERM));
}

BOOST_AUTO_TEST_CASE(without_a_network_layer_connect_names_the_fix) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto q = connect(sys, "127.0.0.1", 1);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::invalid_argument);
  BOOST_TEST(q.error().message().find("middleman") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_busy_queue_stops_the_server_with_its_reason) {
  temp_dir dir;
  auto location = test::test_location(dir);
  auto owner = queue::open(location);
  BOOST_REQUIRE(owner.has_value());
  child_process proc{{ERGON_SERVER, "--db", location, "--port", "0"}};
  int st = proc.wait();
  BOOST_TEST(WIFEXITED(st));
  BOOST_TEST(WEXITSTATUS(st) == 1);
}

namespace {

// True if a TCP connection to 127.0.0.1:port is accepted.
bool accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

BOOST_AUTO_TEST_CASE(closing_a_published_queue_closes_its_port_and_releases_the_file) {
  temp_dir dir;
  client c;
  auto q = spawn_queue(c.sys, dir.file("q.db"));
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto port = publish(*q, 0, "127.0.0.1");
  BOOST_REQUIRE_MESSAGE(port.has_value(), port.error().to_string());
  BOOST_TEST(accepts(*port));
  BOOST_REQUIRE(c.ask<ok_atom>(*q, close_atom::value).has_value());
  BOOST_TEST(!accepts(*port));
  BOOST_TEST(queue::open(dir.file("q.db")).has_value());
}

// Every way in registers with the queue, and a closing queue stops them all:
// each published port, the HTTP endpoint, and the actor.
BOOST_AUTO_TEST_CASE(closing_stops_every_front_end) {
  temp_dir dir;
  client c;
  options opts;
  opts.http = http_options{};
  auto q = spawn_queue(c.sys, dir.file("q.db"), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto first = publish(*q, 0, "127.0.0.1");
  auto second = publish(*q, 0, "127.0.0.1");
  BOOST_REQUIRE(first.has_value());
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(*listening_port(*q) == *first);  // the oldest port
  auto web = http_port(*q);
  BOOST_REQUIRE(web.has_value());
  BOOST_TEST(accepts(*first));
  BOOST_TEST(accepts(*second));
  BOOST_TEST(accepts(*web));
  BOOST_REQUIRE(c.ask<ok_atom>(*q, close_atom::value).has_value());
  BOOST_TEST(!accepts(*first));
  BOOST_TEST(!accepts(*second));
  BOOST_TEST(!accepts(*web));
  caf::scoped_actor self{c.sys};
  self->wait_for(*q);  // the actor went with its queue
}

namespace {

// A way in that counts its stops.
struct counted_front final : runtime::front_end {
  int* stops;
  explicit counted_front(int* counter) : stops(counter) {}
  kind what() const noexcept override { return kind::http; }
  uint16_t port() const noexcept override { return 7; }
  void stop() override { ++*stops; }
};

}  // namespace

// A way in that registers while the queue closes never outlives it: a
// closed queue stops it at once and answers closed.
BOOST_AUTO_TEST_CASE(a_front_end_that_registers_with_a_closed_queue_is_stopped) {
  temp_dir dir;
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(q.has_value());
  auto* impl = runtime_access::impl_of(*q);
  int stops = 0;
  BOOST_REQUIRE(impl->attach(std::make_unique<counted_front>(&stops)).ok());
  BOOST_TEST(*q->http_port() == 7);
  BOOST_REQUIRE(q->close().ok());
  BOOST_TEST(stops == 1);  // stopped with the queue, once
  auto late = impl->attach(std::make_unique<counted_front>(&stops));
  BOOST_TEST(late.code() == error::closed);
  BOOST_TEST(stops == 2);
}

BOOST_AUTO_TEST_CASE(an_exit_message_closes_the_queue_before_its_actor_is_down) {
  temp_dir dir;
  client c;
  auto q = spawn_queue(c.sys, dir.file("q.db"));
  BOOST_REQUIRE(q.has_value());
  BOOST_REQUIRE(publish(*q, 0, "127.0.0.1").has_value());
  caf::scoped_actor self{c.sys};
  self->send_exit(*q, caf::exit_reason::user_shutdown);
  self->wait_for(*q);
  BOOST_TEST(queue::open(dir.file("q.db")).has_value());
}

BOOST_AUTO_TEST_CASE(a_spawned_queue_with_listen_is_published_at_once_and_closes_its_port) {
  temp_dir dir;
  client c;
  options opts;
  opts.listen = listen_options{};
  auto q = spawn_queue(c.sys, dir.file("q.db"), opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto port = listening_port(*q);
  BOOST_REQUIRE_MESSAGE(port.has_value(), port.error().to_string());
  BOOST_TEST(accepts(*port));
  BOOST_REQUIRE(c.ask<ok_atom>(*q, close_atom::value).has_value());
  BOOST_TEST(!accepts(*port));
  BOOST_TEST(!listening_port(*q).has_value());
}

BOOST_AUTO_TEST_CASE(bad_listen_options_are_named_and_open_nothing) {
  temp_dir dir;
  auto refused = [&](options opts, const std::string& field) {
    auto q = queue::open(dir.file("q.db"), std::move(opts));
    BOOST_REQUIRE(!q.has_value());
    BOOST_TEST(q.error().code() == error::invalid_argument);
    BOOST_TEST(q.error().field() == field);
  };
  options empty_address;
  empty_address.listen = listen_options{};
  empty_address.listen->address = "";
  refused(empty_address, "listen.address");
  options short_secret;
  short_secret.listen = listen_options{};
  short_secret.listen->creds.secret = "too short";
  refused(short_secret, "secret");
  options missing_cert;
  missing_cert.listen = listen_options{};
  missing_cert.listen->tls.certificate = dir.file("none.pem");
  missing_cert.listen->tls.key = dir.file("none.key");
  missing_cert.listen->tls.ca_file = dir.file("ca.pem");
  refused(missing_cert, "certificate");
  for (auto bytes : {min_message_limit - 1, max_message_limit + 1, size_t{0}}) {
    options limit;
    limit.listen = listen_options{};
    limit.listen->max_message_bytes = bytes;
    refused(limit, "listen.max_message_bytes");
  }
  for (auto ms : {99, 600'001, 0, -1}) {
    options timeout;
    timeout.listen = listen_options{};
    timeout.listen->handshake_timeout = std::chrono::milliseconds{ms};
    refused(timeout, "listen.handshake_timeout");
  }
  BOOST_TEST(!std::filesystem::exists(dir.file("q.db")));
  caf::actor_system_config limits;
  for (auto bytes : {min_message_limit - 1, max_message_limit + 1})
    BOOST_TEST(set_max_message_size(limits, bytes).field() == "bytes");
  BOOST_TEST(set_max_message_size(limits, min_message_limit).ok());

  // With your own actor system: it needs the network layer, and TLS is set
  // on its config.
  caf::actor_system_config plain_cfg;
  queue::register_types(plain_cfg);
  caf::actor_system plain{plain_cfg};
  options listen;
  listen.listen = listen_options{};
  auto no_network = spawn_queue(plain, dir.file("q.db"), listen);
  BOOST_REQUIRE(!no_network.has_value());
  BOOST_TEST(no_network.error().field() == "sys");
  client c;
  options tls = listen;
  tls.listen->tls.certificate = "node.pem";
  auto tls_here = queue::open(c.sys, dir.file("q.db"), tls);
  BOOST_REQUIRE(!tls_here.has_value());
  BOOST_TEST(tls_here.error().field() == "listen.tls");
  options limit_here = listen;
  limit_here.listen->max_message_bytes = min_message_limit;
  auto limited = queue::open(c.sys, dir.file("q.db"), limit_here);
  BOOST_REQUIRE(!limited.has_value());
  BOOST_TEST(limited.error().field() == "listen.max_message_bytes");
  BOOST_TEST(!std::filesystem::exists(dir.file("q.db")));
}

BOOST_AUTO_TEST_CASE(a_port_in_use_fails_the_open_and_releases_the_file) {
  temp_dir dir;
  options first;
  first.listen = listen_options{};
  auto holder = queue::open(dir.file("a.db"), first);
  BOOST_REQUIRE(holder.has_value());
  options same_port;
  same_port.listen = listen_options{};
  same_port.listen->port = *holder->listening_port();
  auto second = queue::open(dir.file("b.db"), same_port);
  BOOST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().code() == error::io_error);
  BOOST_TEST(second.error().message().find(std::to_string(same_port.listen->port)) !=
             std::string::npos);
  BOOST_TEST(queue::open(dir.file("b.db")).has_value());
  // A queue that does not listen says so.
  auto quiet = queue::open(dir.file("c.db"));
  BOOST_REQUIRE(quiet.has_value());
  BOOST_TEST(quiet->listening_port().error().code() == error::invalid_argument);
}

BOOST_AUTO_TEST_CASE(peer_timeouts_out_of_range_are_named) {
  using std::chrono::milliseconds;
  caf::actor_system_config cfg;
  for (auto bad : {milliseconds{-1}, milliseconds{99}, milliseconds::max(), milliseconds::min()}) {
    auto st = set_peer_timeout(cfg, bad);
    BOOST_TEST(st.code() == error::invalid_argument);
    BOOST_TEST(st.field() == "timeout");
  }
  BOOST_TEST(set_peer_timeout(cfg, milliseconds{0}).ok());
  BOOST_TEST(set_peer_timeout(cfg, milliseconds{100}).ok());
  options opts;
  opts.listen = listen_options{};
  opts.listen->peer_timeout = milliseconds{-5};
  temp_dir dir;
  auto q = queue::open(dir.file("q.db"), opts);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().field() == "listen.peer_timeout");
  child_process proc{{ERGON_SERVER, "--db", dir.file("q.db"), "--peer-timeout-ms", "5"}};
  int st = proc.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 1));
  BOOST_TEST(!std::filesystem::exists(dir.file("q.db")));
}

// A grace for remote work out of range (0 to 1 h) is refused before the
// database is touched.
BOOST_AUTO_TEST_CASE(a_remote_grace_or_idempotency_window_out_of_range_is_refused) {
  temp_dir dir;
  for (auto [flag, ms] : {std::pair{"--remote-grace-ms", "-1"},
                          std::pair{"--remote-grace-ms", "3600001"},
                          std::pair{"--idempotency-window-ms", "999"},
                          std::pair{"--idempotency-window-ms", "2592000001"}}) {
    child_process proc{{ERGON_SERVER, "--db", dir.file("q.db"), "--port", "0", flag, ms}};
    int st = proc.wait();
    BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 1), flag << " " << ms);
    BOOST_TEST(!std::filesystem::exists(dir.file("q.db")), ms);
  }
}

// Plain HTTP beyond loopback only when asked for by name: the secret and
// job data would cross the network in clear text.
BOOST_AUTO_TEST_CASE(plain_http_beyond_loopback_needs_its_flag) {
  temp_dir dir;
  child_process proc{{ERGON_SERVER, "--db", dir.file("q.db"), "--port", "0", "--http-port", "0",
                      "--http-bind", "0.0.0.0"}};
  int st = proc.wait();
  BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 1));
  BOOST_TEST(!std::filesystem::exists(dir.file("q.db")));
}

namespace {

// Runs ergon-server with `args` to its end; its exit status and what it
// printed on stdout and stderr.
std::pair<int, std::string> run_server(const std::vector<std::string>& args) {
  std::string cmd = ERGON_SERVER;
  for (auto& a : args)
    cmd += " '" + a + "'";
  child_process p{{"/bin/sh", "-c", cmd + " 2>&1"}};
  std::string out;
  for (auto line = p.read_line(); !line.empty() || !p.eof(); line = p.read_line())
    out += line + "\n";
  int st = p.wait();
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string write_config(temp_dir& dir, const std::string& text) {
  auto path = dir.file("ergon.toml");
  std::ofstream{path} << text;
  return path;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_configuration_file_sets_the_options_and_flags_override_it) {
  temp_dir dir;
  auto location = test::test_location(dir);
  auto config = write_config(dir, R"(# every table of ergon::options the server takes
db = "not-this-one.db"
recovery = "retry_immediately"
max_snoozes = 7

[listen]
port = 1

[retention]
succeeded = "7d"
interval = "1m"

[bulk]
batch = 100
writer_share = 0.5

[scheduling]
default_group_weight = 2

[scheduling.groups."tenant-a"]
weight = 5
min_slots = 1
max_running = 3
rate = { per_second = 10.0, burst = 4 }

[scheduling.types.report]
max_running = 2
rate = { per_second = 0.5, burst = 1 }

[scheduling.breakers.flaky]
failures = 3
window = "1m"
cool_down = "30s"

[retry_policies.email]
initial = "5s"
kind = "constant"
)");
  auto checked = run_server({"--config", config, "--db", location, "--check-config"});
  BOOST_TEST(checked.first == 0, checked.second);
  BOOST_TEST(checked.second.find("the configuration is valid") != std::string::npos,
             checked.second);
  if (!test::on_postgres())
    BOOST_TEST(!std::filesystem::exists(location));  // nothing was opened
  // --db and --port override the file's db and port 1.
  test::server_process s{location, 0, {"--config", config}};
  client c;
  auto q = connect(c.sys, "127.0.0.1", s.port);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_REQUIRE(c.ask<job_id>(*q, submit_atom::value,
                             *job_builder("report").group("tenant-a").build())
                  .has_value());
  auto m = c.ask<metrics_snapshot>(*q, metrics_atom::value);
  BOOST_REQUIRE(m.has_value());
  auto g = std::find_if(m->groups.begin(), m->groups.end(),
                        [](const group_metrics& x) { return x.group == "tenant-a"; });
  BOOST_REQUIRE(g != m->groups.end());
  BOOST_TEST(g->weight == 5);
  BOOST_TEST(s.stop(SIGTERM));
  BOOST_TEST(!std::filesystem::exists(dir.file("not-this-one.db")));
}

BOOST_AUTO_TEST_CASE(a_bad_configuration_names_the_file_line_and_key_and_opens_nothing) {
  temp_dir dir;
  auto db = dir.file("q.db");
  struct bad {
    std::string text;
    std::string says;
  };
  std::vector<bad> cases{
    {"colour = 1\n", ":1: colour: is not a key of the file"},
    {"[scheduling.groups.\"a\"]\nweight = \"x\"\n",
     ":2: scheduling.groups.\"a\".weight: must be an integer"},
    {"[scheduling.groups.\"a\"]\nwieght = 2\n",
     ":2: scheduling.groups.\"a\".wieght: is not a key of [scheduling.groups.\"a\"]"},
    {"\n[retention]\ninterval = 60\n", ":3: retention.interval: must be a duration with its unit"},
    {"[retention]\ninterval = \"60\"\n", ":2: retention.interval: '60' has no unit"},
    // Checked by ergon::validate after reading, still named by line.
    {"[scheduling.groups.\"a\"]\nmin_slots = 1\nweight = 0\n",
     ":3: scheduling.groups.\"a\".weight: must be between 1 and"},
    {"[retention]\nbatch = 0\n", ":2: retention.batch: must be"},
    {"[bulk]\nbatch = 0\n", ":2: bulk.batch: must be 1 to 100000, got 0"},
    {"\n[bulk]\nwriter_share = 1.5\n", ":3: bulk.writer_share: must be over 0 and at most 1"},
    {"idempotency_window = \"1ms\"\n", ":1: idempotency_window: must be between 1 s and 30 days"},
    {"[listen]\nport = 70000\n", ":2: listen.port: must be 0 to 65535, got 70000"},
    {"recovery = \"later\"\n", ":1: recovery: must be \"retry_with_backoff\" or"},
    {"[listen\nport = 1\n", "ergon.toml:1:"},
    {"[scheduling.types.t]\nrate = 5\n", ":2: scheduling.types.\"t\".rate: must be a table"},
    {"[listen.certificate_roles]\nclient = \"admin\"\n",
     ":2: listen.certificate_roles.\"client\": must be \"worker\", \"client\" or \"operator\""},
    {"[listen]\ncertificate_roles = 3\n", ":2: listen.certificate_roles: must be a table"},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.text) {
      auto config = write_config(dir, c.text);
      auto r = run_server({"--config", config, "--db", db, "--check-config"});
      BOOST_TEST(r.first == 1);
      BOOST_TEST(r.second.find(c.says) != std::string::npos, r.second);
      // A start with it refuses the same way.
      auto start = run_server({"--config", config, "--db", db, "--port", "0"});
      BOOST_TEST(start.first == 1);
      BOOST_TEST(start.second.find(c.says) != std::string::npos, start.second);
      BOOST_TEST(!std::filesystem::exists(db));
    }
  }
  // A flag's value is the flag's: its error names no line of the file.
  auto config = write_config(dir, "[listen]\nhandshake_timeout = \"10s\"\n");
  auto flagged = run_server({"--config", config, "--db", db, "--handshake-timeout-ms", "5",
                             "--check-config"});
  BOOST_TEST(flagged.first == 1);
  BOOST_TEST(flagged.second.find("listen.handshake_timeout") != std::string::npos, flagged.second);
  BOOST_TEST(flagged.second.find("ergon.toml:2") == std::string::npos, flagged.second);
  // Each table's TLS files are named by their own table and line.
  config = write_config(dir, "[listen.tls]\ncertificate = \"/nonexistent/listen.pem\"\n"
                             "key = \"/nonexistent/listen.key\"\nca_file = \"/nonexistent/ca.pem\"\n");
  auto tls = run_server({"--config", config, "--db", db, "--check-config"});
  BOOST_TEST(tls.first == 1);
  BOOST_TEST(tls.second.find("ergon.toml:") != std::string::npos, tls.second);
  BOOST_TEST(tls.second.find("listen.tls.") != std::string::npos, tls.second);
  auto missing = run_server({"--config", dir.file("nope.toml"), "--db", db, "--check-config"});
  BOOST_TEST(missing.first == 1);
  BOOST_TEST(missing.second.find("nope.toml: no such configuration file") != std::string::npos,
             missing.second);
}

// Secrets per role (docs/distribution.md, "Roles"): each needs the queue's
// own, keeps its rules and differs from the others; refused by field, by
// the flag or by the file's line.
BOOST_AUTO_TEST_CASE(role_secrets_are_checked_by_field_before_anything_opens) {
  temp_dir dir;
  auto db = dir.file("q.db");
  auto main = test::write_private_file(dir.file("secret"), test::test_secret);
  auto worker = test::write_private_file(dir.file("worker"), make_secret());
  auto weak = test::write_private_file(dir.file("weak"), "short");
  auto refused = [&](std::vector<std::string> args, const std::string& says) {
    args.insert(args.end(), {"--db", db, "--check-config"});
    auto r = run_server(args);
    BOOST_TEST(r.first == 1, r.second);
    BOOST_TEST(r.second.find(says) != std::string::npos, r.second);
  };
  refused({"--worker-secret-file", worker},
          "field 'listen.worker_secret': needs listen.creds.secret");
  refused({"--secret-file", main, "--client-secret-file", main},
          "field 'listen.client_secret': is the same as another role's secret");
  refused({"--secret-file", main, "--worker-secret-file", weak},
          "field 'listen.worker_secret': the secret must be at least 32 random bytes");
  auto config = write_config(dir, "[listen]\nworker_secret_file = \"" + worker + "\"\n");
  refused({"--config", config}, "ergon.toml:2: listen.worker_secret_file: needs");
  auto fine = run_server({"--secret-file", main, "--worker-secret-file", worker, "--db", db,
                          "--check-config"});
  BOOST_TEST(fine.first == 0, fine.second);
  BOOST_TEST(!std::filesystem::exists(db));
}

// The example configuration in examples/ is valid, as the docs show it.
BOOST_AUTO_TEST_CASE(the_example_configuration_is_valid) {
  temp_dir dir;
  auto r = run_server({"--config", ERGON_EXAMPLE_CONFIG, "--db", dir.file("q.db"), "--check-config"});
  BOOST_TEST(r.first == 0, r.second);
}
