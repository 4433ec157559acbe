// The transport's deciding parts as plain classes: ergon's handshake
// (transport/handshake.hpp) and the rules on what a connection may carry
// (transport/basp_rules.hpp), with no socket and no actor system.
#define BOOST_TEST_MODULE transport
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>

#include <string>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/queue_actor.hpp"
#include "support/basp_bytes.hpp"
#include "support/test_support.hpp"
#include "transport/basp_rules.hpp"
#include "transport/bounded_reader.hpp"
#include "transport/connection.hpp"
#include "transport/handshake.hpp"

using namespace ergon::transport;

namespace {

std::array<uint8_t, nonce_bytes> nonce(uint8_t seed) {
  std::array<uint8_t, nonce_bytes> n{};
  for (size_t i = 0; i < n.size(); ++i)
    n[i] = static_cast<uint8_t>(seed + i);
  return n;
}

struct outcome {
  step queue;
  step client;
  size_t proved = 0;  ///< which of the queue's secrets the client proved
};

// Runs both sides against each other, each reading exactly what it asks
// for, and returns how each ended.
outcome run(handshake_keys queue_keys, handshake_keys client_keys) {
  server_handshake q{std::move(queue_keys), nonce(1)};
  client_handshake c{std::move(client_keys), nonce(100)};
  auto qs = q.start();
  auto cs = c.start();
  std::string to_client = qs.send;
  std::string to_queue = cs.send;
  for (int round = 0; round < 10; ++round) {
    if (!cs.finished() && to_client.size() >= cs.want) {
      auto chunk = to_client.substr(0, cs.want);
      to_client.erase(0, cs.want);
      cs = c.feed(chunk);
      to_queue += cs.send;
    }
    if (!qs.finished() && to_queue.size() >= qs.want) {
      auto chunk = to_queue.substr(0, qs.want);
      to_queue.erase(0, qs.want);
      qs = q.feed(chunk);
      to_client += qs.send;
    }
  }
  return {qs, cs, q.proved()};
}

const std::string secret = ergon::test::test_secret;

}  // namespace

BOOST_AUTO_TEST_SUITE(handshake)

BOOST_AUTO_TEST_CASE(both_sides_prove_the_same_secret) {
  auto r = run({secret, {}}, {secret, {}});
  BOOST_TEST(r.queue.admitted);
  BOOST_TEST(r.client.admitted);
}

BOOST_AUTO_TEST_CASE(without_secrets_both_admit) {
  auto r = run({}, {});
  BOOST_TEST(r.queue.admitted);
  BOOST_TEST(r.client.admitted);
}

BOOST_AUTO_TEST_CASE(a_wrong_secret_is_refused_and_the_queue_proves_nothing) {
  auto r = run({secret, {}}, {std::string(64, 'a'), {}});
  BOOST_TEST((r.queue.refused == refusal::wrong_secret));
  BOOST_TEST((r.client.refused == refusal::wrong_secret));
  // A refusal frame of three bytes: no proof for an offline guess.
  BOOST_TEST(r.queue.send.size() == 3u);
  BOOST_TEST(r.queue.send[0] == 'R');
}

// Roles: the queue takes its own secret and narrower ones; the handshake
// says which one the client proved, and proves that one back.
BOOST_AUTO_TEST_CASE(a_client_proves_one_of_the_queue_s_secrets_and_the_queue_says_which) {
  const std::string worker(64, 'c');
  const std::string client(64, 'd');
  handshake_keys queue{secret, {}, {worker, client}};
  for (auto [proves, index] : {std::pair{secret, size_t{0}}, std::pair{worker, size_t{1}},
                               std::pair{client, size_t{2}}}) {
    auto r = run(queue, {proves, {}});
    BOOST_TEST(r.queue.admitted, index);
    BOOST_TEST(r.client.admitted, index);  // the queue proved the same one back
    BOOST_TEST(r.proved == index);
  }
  auto wrong = run(queue, {std::string(64, 'e'), {}});
  BOOST_TEST((wrong.queue.refused == refusal::wrong_secret));
  auto none = run(queue, {});
  BOOST_TEST((none.queue.refused == refusal::secret_required));
}

BOOST_AUTO_TEST_CASE(the_queue_s_hello_carries_nothing_derived_from_the_secret) {
  server_handshake a{{secret, {}}, nonce(1)};
  server_handshake b{{std::string(64, 'b'), {}}, nonce(1)};
  BOOST_TEST(a.start().send == b.start().send);
}

BOOST_AUTO_TEST_CASE(a_client_without_the_secret_is_told_one_is_required) {
  auto r = run({secret, {}}, {});
  BOOST_TEST((r.queue.refused == refusal::secret_required));
  BOOST_TEST((r.client.refused == refusal::secret_required));
}

BOOST_AUTO_TEST_CASE(a_client_with_a_secret_sends_nothing_to_a_queue_without_one) {
  server_handshake q{{}, nonce(1)};
  client_handshake c{{secret, {}}, nonce(2)};
  auto hello = q.start().send;
  c.start();
  c.feed(hello.substr(0, 2));
  auto cs = c.feed(hello.substr(2));
  BOOST_TEST((cs.refused == refusal::queue_without_secret));
  BOOST_TEST(cs.send.empty());
}

BOOST_AUTO_TEST_CASE(a_proof_from_another_tls_channel_does_not_pass) {
  // A relay: the client's TLS session with the relay is not the relay's
  // with the queue, so their exported keys differ.
  auto r = run({secret, std::string(32, 'x')}, {secret, std::string(32, 'y')});
  BOOST_TEST((r.queue.refused == refusal::wrong_secret));
  auto same = run({secret, std::string(32, 'x')}, {secret, std::string(32, 'x')});
  BOOST_TEST(same.client.admitted);
}

BOOST_AUTO_TEST_CASE(a_queue_that_fakes_acceptance_is_caught) {
  server_handshake q{{secret, {}}, nonce(1)};
  client_handshake c{{secret, {}}, nonce(2)};
  auto hello = q.start().send;
  c.start();
  c.feed(hello.substr(0, 2));
  c.feed(hello.substr(2));
  // An acceptance whose proof was made with another secret.
  std::string fake = "A";
  fake += static_cast<char>(proof_bytes);
  auto cs = c.feed(fake);
  cs = c.feed(std::string(proof_bytes, 'z'));
  BOOST_TEST((cs.refused == refusal::queue_proof_wrong));
}

BOOST_AUTO_TEST_CASE(proofs_depend_on_role_nonces_and_channel) {
  handshake_keys k{secret, {}};
  auto base = handshake_proof(k, "client", "n1", "n2");
  BOOST_TEST(base.size() == proof_bytes);
  BOOST_TEST(base != handshake_proof(k, "queue", "n1", "n2"));
  BOOST_TEST(base != handshake_proof(k, "client", "n2", "n1"));
  BOOST_TEST(base != handshake_proof({secret, "c"}, "client", "n1", "n2"));
}

BOOST_AUTO_TEST_CASE(bytes_that_are_not_the_handshake_are_refused_at_once) {
  struct probe {
    std::string frame;
    std::string what;
  };
  // A BASP header (CAF's first bytes), HTTP, a proof frame of the wrong
  // length, and an accepted frame where a proof belongs.
  for (auto& p : std::vector<probe>{{std::string{"\x01\x00", 2}, "BASP"},
                                    {"GE", "HTTP"},
                                    {"P\x10", "short proof"},
                                    {"A\x20", "acceptance"}}) {
    server_handshake q{{secret, {}}, nonce(1)};
    q.start();
    auto s = q.feed(p.frame);
    BOOST_TEST((s.refused == refusal::not_ergon), p.what);
    BOOST_TEST(s.send.empty(), p.what);
  }
  client_handshake c{{secret, {}}, nonce(2)};
  c.start();
  BOOST_TEST((c.feed(std::string{"\x00\x00", 2}).refused == refusal::not_ergon));
}

BOOST_AUTO_TEST_CASE(no_frame_asks_for_more_than_255_bytes) {
  server_handshake q{{secret, {}}, nonce(1)};
  auto s = q.start();
  BOOST_TEST(s.want == 2u);
  std::string proof_frame{"P"};
  proof_frame += static_cast<char>(255);
  BOOST_TEST((q.feed(proof_frame).refused == refusal::not_ergon));
}

BOOST_AUTO_TEST_CASE(another_version_is_refused_by_name_on_both_sides) {
  server_handshake q{{}, nonce(1)};
  auto hello = q.start().send;
  hello[2 + 5] = protocol_version + 1;  // the version byte after "ergon"
  client_handshake c{{}, nonce(2)};
  auto client_hello = c.start().send;
  c.feed(hello.substr(0, 2));
  BOOST_TEST((c.feed(hello.substr(2)).refused == refusal::unsupported_version));
  client_hello[2 + 5] = protocol_version + 1;
  q.feed(client_hello.substr(0, 2));
  auto s = q.feed(client_hello.substr(2));
  BOOST_TEST((s.refused == refusal::unsupported_version));
  BOOST_TEST(s.send.size() == 3u);  // says so
}

BOOST_AUTO_TEST_CASE(a_client_that_meets_tls_is_told_so) {
  client_handshake c{{}, nonce(2)};
  c.start();
  BOOST_TEST((c.feed(std::string{"\x15\x03", 2}).refused == refusal::speaks_tls));
}

BOOST_AUTO_TEST_CASE(the_client_speaks_first_so_tls_fails_a_plain_client_at_once) {
  client_handshake c{{}, nonce(2)};
  auto s = c.start();
  BOOST_TEST(s.send.substr(0, 7) == std::string("C\x06" "ergon", 7));
  BOOST_TEST(s.want == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Without the network layer, CAF 0.17 gives a system no node id.
struct with_network : caf::actor_system_config {
  with_network() { load<caf::io::middleman>(); }
};

struct nodes {
  with_network cfg;
  caf::actor_system sys{cfg};
  caf::node_id local = sys.node();
  // Another process on this host: the same host id, another pid.
  caf::node_id peer = another(42);

  caf::node_id another(uint32_t pid) const {
    return *caf::make_node_id(pid, caf::to_string(local).substr(0, 40));
  }
};

std::string header(uint8_t op, uint32_t len, uint64_t op_data = 0, uint64_t src = 0,
                   uint64_t dst = 0, uint8_t flags = 0) {
  return ergon::test::basp_header(op, len, op_data, src, dst, flags);
}

template <class... Ts>
std::string payload(caf::actor_system& sys, const Ts&... xs) {
  return ergon::test::serialized(sys, xs...);
}

std::string check(basp_rules& r, const std::string& chunk) {
  return r.check(chunk.data(), chunk.size());
}

constexpr uint64_t request = 0x1000000000000001ull;
constexpr uint64_t response = 0x8000000000000001ull;

// A rule set past the peer's handshake (it dialed us).
basp_rules after_handshake(nodes& n, size_t limit = 1 << 20) {
  basp_rules r{true, limit, n.local};
  auto hs = payload(n.sys, n.peer);
  BOOST_REQUIRE(check(r, header(1, static_cast<uint32_t>(hs.size()))).empty());
  BOOST_REQUIRE(check(r, hs).empty());
  BOOST_REQUIRE(r.take_new_peer());
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rules)

BOOST_AUTO_TEST_CASE(the_handshake_names_the_peer_once) {
  nodes n;
  BOOST_REQUIRE((n.peer != n.local));
  auto r = after_handshake(n);
  BOOST_TEST((r.peer() == n.peer));
  BOOST_TEST(!r.take_new_peer());
  // CAF repeats its client handshake; the same node passes, another not.
  auto again = payload(n.sys, n.peer);
  BOOST_TEST(check(r, header(1, static_cast<uint32_t>(again.size()))).empty());
  BOOST_TEST(check(r, again).empty());
  auto other = payload(n.sys, n.another(43));
  BOOST_TEST(check(r, header(1, static_cast<uint32_t>(other.size()))).empty());
  BOOST_TEST(check(r, other).find("another node") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_handshake_naming_this_node_or_none_is_refused) {
  nodes n;
  for (auto& node : {n.local, caf::node_id{}}) {
    basp_rules r{true, 1 << 20, n.local};
    auto hs = payload(n.sys, node);
    BOOST_TEST(check(r, header(1, static_cast<uint32_t>(hs.size()))).empty());
    BOOST_TEST(!check(r, hs).empty());
  }
}

BOOST_AUTO_TEST_CASE(nothing_comes_before_the_handshake) {
  nodes n;
  basp_rules r{true, 1 << 20, n.local};
  BOOST_TEST(check(r, header(2, 10, request, 5, 1)).find("before its handshake")
             != std::string::npos);
  basp_rules dialed{false, 1 << 20, n.local};
  BOOST_TEST(!check(dialed, header(1, 10)).empty());  // the queue sends the server's
}

BOOST_AUTO_TEST_CASE(a_length_over_the_limit_is_refused_before_its_payload) {
  nodes n;
  auto r = after_handshake(n, 1 << 16);
  BOOST_TEST(check(r, header(2, (1 << 16) + 1, request, 5, 1)).find("over the limit")
             != std::string::npos);
  auto ok = after_handshake(n, 1 << 16);
  BOOST_TEST(check(ok, header(2, 1 << 16, request, 5, 1)).empty());
  // The handshake itself is held to 64 KiB whatever the limit.
  basp_rules fresh{true, 1u << 30, n.local};
  BOOST_TEST(!check(fresh, header(1, 0xFFFFFFFF)).empty());
  BOOST_TEST(!check(fresh, header(1, 512u << 20)).empty());
}

BOOST_AUTO_TEST_CASE(routed_messages_are_refused) {
  nodes n;
  auto r = after_handshake(n);
  BOOST_TEST(check(r, header(3, 100, request, 5, 1)).find("routed") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_message_without_a_sender_passes_only_as_an_answer) {
  nodes n;
  auto r = after_handshake(n);
  BOOST_TEST(check(r, header(2, 10, request, 0, 1)).find("without a sender") != std::string::npos);
  auto answers = after_handshake(n);
  BOOST_TEST(check(answers, header(2, 10, response, 0, 1)).empty());
  auto async = after_handshake(n);
  BOOST_TEST(!check(async, header(2, 10, 0x1000000000000000ull, 0, 1)).empty());
}

BOOST_AUTO_TEST_CASE(only_caf_s_spawn_server_is_reached_by_name) {
  nodes n;
  auto r = after_handshake(n);
  auto spawn_serv = static_cast<uint64_t>(caf::atom("SpawnServ"));
  BOOST_TEST(check(r, header(2, 10, request, 5, spawn_serv, 0x01)).empty());
  auto config = after_handshake(n);
  BOOST_TEST(!check(config, header(2, 10, request, 5,
                                   static_cast<uint64_t>(caf::atom("ConfigServ")), 0x01))
                .empty());
}

BOOST_AUTO_TEST_CASE(monitor_and_down_messages_speak_only_for_the_two_ends) {
  nodes n;
  auto third = n.another(44);
  struct pair_case {
    caf::node_id from, to;
    bool passes;
  };
  for (uint8_t op : {uint8_t{4}, uint8_t{5}})
    for (auto& c : {pair_case{n.peer, n.local, true}, pair_case{third, n.local, false},
                    pair_case{n.peer, third, false}}) {
      auto r = after_handshake(n);
      auto body = payload(n.sys, c.from, c.to);
      BOOST_TEST(check(r, header(op, static_cast<uint32_t>(body.size()), 0, op == 5 ? 7 : 0,
                                 op == 4 ? 7 : 0))
                   .empty());
      BOOST_TEST(check(r, body).empty() == c.passes);
    }
}

BOOST_AUTO_TEST_CASE(a_payload_of_another_length_than_announced_is_refused) {
  nodes n;
  auto r = after_handshake(n);
  BOOST_TEST(check(r, header(2, 10, request, 5, 1)).empty());
  BOOST_TEST(!check(r, std::string(9, 'x')).empty());
}

BOOST_AUTO_TEST_CASE(payloads_go_to_the_length_check) {
  nodes n;
  std::vector<payload_kind> seen;
  basp_rules r{true, 1 << 20, n.local, [&](payload_kind kind, const char*, size_t) {
                 seen.push_back(kind);
                 return kind == payload_kind::down_message ? std::string{"too long"}
                                                           : std::string{};
               }};
  auto hs = payload(n.sys, n.peer);
  BOOST_REQUIRE(check(r, header(1, static_cast<uint32_t>(hs.size()))).empty());
  BOOST_REQUIRE(check(r, hs).empty());
  BOOST_TEST(check(r, header(2, 3, request, 5, 1)).empty());
  BOOST_TEST(check(r, "abc").empty());
  auto body = payload(n.sys, n.peer, n.local);
  BOOST_TEST(check(r, header(5, static_cast<uint32_t>(body.size()), 0, 7)).empty());
  BOOST_TEST(check(r, body) == "too long");
  BOOST_TEST(seen.size() == 2u);  // not the handshake
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lengths)

namespace {

// A message payload (no forwarding stack) whose last element is a byte
// sequence of 3 bytes, its length prefix replaced by `prefix`.
std::string charbuf_payload(caf::actor_system& sys, const std::string& prefix) {
  std::vector<caf::strong_actor_ptr> stages;
  auto msg = caf::make_message(std::string{"x"}, std::vector<char>{'a', 'b', 'c'});
  auto bytes = payload(sys, stages, msg);
  BOOST_REQUIRE(bytes.size() > 4);
  BOOST_REQUIRE(bytes[bytes.size() - 4] == '\x03');  // varbyte 3, then "abc"
  return bytes.substr(0, bytes.size() - 4) + prefix + "abc";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_sequence_longer_than_the_bytes_left_is_refused_unread) {
  nodes n;
  auto fine = charbuf_payload(n.sys, "\x03");
  BOOST_TEST(check_payload_bytes(n.sys, payload_kind::direct_message, fine.data(), fine.size()).empty());
  // 0xFFFFFFFF as a varbyte: CAF 0.17 would zero-fill 4 GiB for it.
  auto bomb = charbuf_payload(n.sys, "\xff\xff\xff\xff\x0f");
  BOOST_TEST(check_payload_bytes(n.sys, payload_kind::direct_message, bomb.data(), bomb.size())
               .find("longer than the bytes left")
             != std::string::npos);
  auto four = charbuf_payload(n.sys, "\x04");
  BOOST_TEST(!check_payload_bytes(n.sys, payload_kind::direct_message, four.data(), four.size()).empty());
}

BOOST_AUTO_TEST_CASE(actor_handles_are_read_without_making_proxies) {
  nodes n;
  // A handle on another node, as a peer would name one.
  std::vector<char> buf;
  caf::binary_serializer sink{n.sys, buf};
  std::vector<caf::strong_actor_ptr> stages;
  caf::actor_id aid = 7;
  auto msg = caf::make_message(std::string{"x"});
  BOOST_REQUIRE(!sink(stages));
  BOOST_REQUIRE(!sink(msg));
  std::string bytes{buf.begin(), buf.end()};
  BOOST_TEST(check_payload_bytes(n.sys, payload_kind::direct_message, bytes.data(), bytes.size()).empty());
  auto handle = payload(n.sys, aid, n.peer);
  auto with_stage = std::string{"\x01"} + handle + bytes.substr(1);  // one stage: that handle
  BOOST_TEST(check_payload_bytes(n.sys, payload_kind::direct_message, with_stage.data(),
                           with_stage.size())
               .empty());
  auto garbage = std::string(8, '\xff');
  BOOST_TEST(!check_payload_bytes(n.sys, payload_kind::direct_message, garbage.data(), garbage.size())
                .empty());
}

BOOST_AUTO_TEST_CASE(a_remote_link_request_is_refused) {
  nodes n;
  std::vector<caf::strong_actor_ptr> stages;
  for (auto what : {caf::atom_value{caf::link_atom::value}, caf::atom_value{caf::unlink_atom::value}}) {
    auto msg = caf::make_message(what, caf::strong_actor_ptr{});
    auto bytes = payload(n.sys, stages, msg);
    BOOST_TEST(check_payload_bytes(n.sys, payload_kind::direct_message, bytes.data(), bytes.size())
                 .find("link") != std::string::npos);
  }
  auto other = caf::make_message(caf::atom("ergclose"), caf::strong_actor_ptr{});
  auto bytes = payload(n.sys, stages, other);
  BOOST_TEST(check_payload_bytes(n.sys, payload_kind::direct_message, bytes.data(), bytes.size())
               .empty());
}

BOOST_AUTO_TEST_SUITE_END()

// The process-wide admissions: a node is admitted in one realm, with one
// role, at a time.
BOOST_AUTO_TEST_CASE(a_node_live_in_one_realm_is_refused_in_another) {
  using ergon::role;
  nodes n;
  auto& table = ergon::actors::admissions::of_process();
  auto node = n.another(77);
  BOOST_TEST(table.add(node, "a", role::worker));
  BOOST_TEST(table.add(node, "a", role::worker));  // a second connection, same credentials
  BOOST_TEST(!table.add(node, "b", role::worker));
  BOOST_TEST(!table.add(node, "a", role::operator_));  // same realm, another role
  BOOST_TEST(!table.role_of(node, "b").has_value());
  BOOST_TEST((table.role_of(node, "a") == role::worker));
  table.remove(node, "a");
  BOOST_TEST(table.role_of(node, "a").has_value());
  table.remove(node, "a");
  BOOST_TEST(!table.role_of(node, "a").has_value());
  BOOST_TEST(table.add(node, "b", role::client));  // once it left, another realm may have it
  table.remove(node, "b");
}

// Which role each message needs: a worker's protocol and join, a client's
// submits and reads, and everything else (unknown messages included)
// needs operator.
BOOST_AUTO_TEST_CASE(each_message_needs_the_role_its_kind_has) {
  using ergon::role;
  using namespace ergon;
  auto needs = [](const caf::message& m) { return ergon::actors::needed_role(m.content()); };
  BOOST_TEST((needs(caf::make_message(join_atom::value)) == role::worker));
  BOOST_TEST((needs(caf::make_message(ergon::actors::worker_report{})) == role::worker));
  BOOST_TEST((needs(caf::make_message(ergon::actors::register_worker{})) == role::worker));
  BOOST_TEST((needs(caf::make_message(ergon::actors::progress_batch{})) == role::worker));
  BOOST_TEST((needs(caf::make_message(submit_atom::value, job{})) == role::client));
  BOOST_TEST((needs(caf::make_message(counts_atom::value)) == role::client));
  BOOST_TEST((needs(caf::make_message(wait_atom::value, job_id{}, std::chrono::milliseconds{1}))
              == role::client));
  BOOST_TEST((needs(caf::make_message(purge_failed_atom::value, std::chrono::milliseconds{0}))
              == role::operator_));
  BOOST_TEST((needs(caf::make_message(set_worker_atom::value, std::string{"w"}))
              == role::operator_));
  BOOST_TEST((needs(caf::make_message(close_atom::value)) == role::operator_));
  BOOST_TEST((needs(caf::make_message(std::string{"anything"})) == role::operator_));
  BOOST_TEST(ergon::actors::permits(role::operator_, role::worker));
  BOOST_TEST(!ergon::actors::permits(role::client, role::worker));
  BOOST_TEST(!ergon::actors::permits(role::worker, role::client));
}

// OpenSSL writes with send(2) and no MSG_NOSIGNAL: a write to a peer that
// left raises SIGPIPE, which kills the process. The guard the transport
// puts around every OpenSSL call keeps it from the process, in any thread.
BOOST_AUTO_TEST_CASE(a_write_to_a_peer_that_left_raises_no_sigpipe) {
  int fds[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  ::close(fds[1]);
  {
    ergon::transport::no_sigpipe guard;
    char byte = 'x';
    BOOST_TEST(::write(fds[0], &byte, 1) == -1);  // without the guard: SIGPIPE
    BOOST_TEST(errno == EPIPE);
  }
  sigset_t pending;
  sigpending(&pending);
  BOOST_TEST(!sigismember(&pending, SIGPIPE));  // dropped, not left for later
  ::close(fds[0]);
}
