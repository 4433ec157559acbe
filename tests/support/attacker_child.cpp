// A hostile peer, for the security tests: it talks to the queue at
// HOST:PORT with raw bytes, CAF's own BASP, or ergon's handshake, and
// prints what each try got, one line at a time.
//
//   ergon-test-attacker HOST PORT basp read|submit|close
//       CAF's BASP with no ergon handshake: its client handshake, then a
//       request with no sender and its own actor as the forwarding stage to
//       each actor id 1 to 64. Prints "closed" if the queue closed the
//       connection, "open" if it kept it.
//   ergon-test-attacker HOST PORT caf
//       CAF's own remote_actor: "connected" or "connect <error>".
//   ergon-test-attacker HOST PORT routed|anonymous SECRET
//       passes ergon's handshake with SECRET and CAF's, then sends the
//       queue a close in a routed message naming the queue's own node as
//       its source, or a counts request with no sender and its own actor
//       as the forwarding stage. Prints "closed" or "open".
//   ergon-test-attacker HOST PORT charbuf [SECRET]
//       once both handshakes passed, a request of 40 bytes holding a byte
//       sequence that claims 4 GiB (CAF 0.17 zero-fills what it claims).
//       Prints "closed" or "open".
//   ergon-test-attacker HOST PORT claim NODE [SECRET]
//       passes ergon's handshake (with SECRET, if given), then names NODE
//       (another process's node id) in CAF's handshake. Prints "closed" or
//       "open".
//   ergon-test-attacker HOST PORT huge LEN [SECRET]
//       a BASP header announcing LEN bytes: as its first bytes, or (with
//       SECRET) once both handshakes passed. Prints "closed" or "open".
//   ergon-test-attacker HOST PORT random N
//       N random bytes. Prints "closed" or "open".
//   ergon-test-attacker HOST PORT silent|hellos|slow-ergon|slow-tls N
//       N connections that send nothing, read the queue's hello and stop,
//       or send the start of ergon's (or TLS's) first message a byte a
//       second. Prints "ready N", then "closed N" once the queue closed
//       them all, or stops when stdin closes.
//   ergon-test-attacker HOST PORT client [SECRET]
//       ergon::connect and a submit: prints "node <its node id>", then
//       "submit ok" or "connect <code>: <message>"; waits for stdin to close.
//   ergon-test-attacker HOST PORT malformed
//       connects, asks the queue for its dispatcher and sends it
//       out-of-range worker protocol messages: registrations ("register
//       <code> <field>" each), then, registered as a worker of type "job",
//       two reports claiming room it can't have and an unregistration from
//       another actor ("unregister <code> <field>"). Prints "sent" once the
//       dispatcher has handled them all, then waits for stdin to close.
//   ergon-test-attacker HOST PORT plain-caf JOB_ID
//       CAF's BASP on a port the queue's process published with plain CAF:
//       asks every actor id 1 to 400, with a sender, to wait for JOB_ID and
//       for its job_info, then sends each an exit message about its own
//       actor. Prints "processed N refused M": the answers that an ergon
//       actor handled, and those refused as unauthenticated.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "ergon/actors/protocol.hpp"
#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"
#include "support/basp_bytes.hpp"
#include "transport/handshake.hpp"

namespace {

using namespace std::chrono_literals;
using ergon::test::basp_header;
using ergon::test::serialized;

struct config : caf::actor_system_config {
  config() {
    load<caf::io::middleman>();
    ergon::queue::register_types(*this);
  }
};

constexpr auto patience = std::chrono::seconds(10);

// -- raw sockets -------------------------------------------------------------

int dial(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0)
    return -1;
  int fd = -1;
  for (auto* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    auto n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

bool recv_exact(int fd, size_t n, std::string& out) {
  out.clear();
  while (out.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0)
      return false;
    char buf[4096];
    auto got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0)
      return false;
    out.append(buf, static_cast<size_t>(got));
  }
  return true;
}

// True if the peer closes the connection within `wait`; reads and drops
// whatever it sends meanwhile.
bool closed_by_peer(int fd, std::chrono::milliseconds wait) {
  auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    char buf[4096];
    if (::recv(fd, buf, sizeof(buf), 0) <= 0)
      return true;
  }
}

// -- ergon's handshake, and CAF's BASP by hand -------------------------------

bool ergon_handshake(int fd, const std::string& secret) {
  std::array<uint8_t, ergon::transport::nonce_bytes> nonce{};
  std::mt19937_64 rng{std::random_device{}()};
  for (auto& b : nonce)
    b = static_cast<uint8_t>(rng());
  ergon::transport::client_handshake hs{{secret, {}}, nonce};
  for (auto s = hs.start();;) {
    if (!send_all(fd, s.send))
      return false;
    if (s.finished())
      return s.admitted;
    std::string in;
    if (!recv_exact(fd, s.want, in))
      return false;
    s = hs.feed(in);
  }
}

enum : uint8_t { server_handshake = 0, client_handshake = 1, direct_message = 2, routed_message = 3 };

std::string frame(uint8_t op, const std::string& payload, uint64_t op_data, uint64_t source,
                  uint64_t dest) {
  return basp_header(op, static_cast<uint32_t>(payload.size()), op_data, source, dest) + payload;
}

uint64_t request_id(uint64_t n) {
  return 0x1000000000000000ull | n;  // the normal category, a request
}

struct basp_in {
  uint8_t op = 0;
  uint64_t op_data = 0;
  uint64_t dest = 0;
  std::string payload;
};

bool read_basp(int fd, basp_in& out) {
  std::string h;
  if (!recv_exact(fd, 32, h))
    return false;
  auto be = [&](size_t at, int n) {
    uint64_t x = 0;
    for (int i = 0; i < n; ++i)
      x = (x << 8) | static_cast<uint8_t>(h[at + static_cast<size_t>(i)]);
    return x;
  };
  out.op = static_cast<uint8_t>(h[0]);
  out.op_data = be(8, 8);
  out.dest = be(24, 8);
  return recv_exact(fd, be(4, 4), out.payload);
}

// CAF's handshakes: the server's names its node and published actor.
struct basp_peer {
  caf::node_id node;
  caf::actor_id published = 0;
};

bool basp_handshakes(caf::actor_system& sys, int fd, basp_peer& peer) {
  basp_in in;
  if (!read_basp(fd, in) || in.op != server_handshake)
    return false;
  caf::binary_deserializer source{sys, in.payload.data(), in.payload.size()};
  std::vector<std::string> app_ids;
  std::set<std::string> ifs;
  if (source(peer.node, app_ids, peer.published, ifs))
    return false;
  auto me = sys.node();
  return send_all(fd, frame(client_handshake, serialized(sys, me), 0, 0, 0));
}

caf::message content(const std::string& what) {
  if (what == "read")
    return caf::make_message(ergon::counts_atom::value);
  if (what == "submit")
    return caf::make_message(ergon::submit_atom::value,
                             *ergon::job_builder("job").payload("from a stranger").build());
  return caf::make_message(ergon::close_atom::value);
}

int say(bool closed) {
  std::cout << (closed ? "closed" : "open") << std::endl;
  return 0;
}

// -- modes ---------------------------------------------------------------------

int raw_basp(caf::actor_system& sys, int fd, const std::string& what) {
  auto me = caf::actor_cast<caf::strong_actor_ptr>(
    sys.spawn<ergon::test::sink_actor>());
  std::vector<caf::strong_actor_ptr> stages{me};
  auto msg = content(what);
  auto node = sys.node();
  std::string out = frame(client_handshake, serialized(sys, node), 0, 0, 0);
  for (uint64_t aid = 1; aid <= 64; ++aid)
    out += frame(direct_message, serialized(sys, stages, msg), request_id(aid), 0, aid);
  send_all(fd, out);
  auto closed = closed_by_peer(fd, 5s);
  caf::anon_send_exit(me, caf::exit_reason::user_shutdown);
  return say(closed);
}

int authenticated_attack(caf::actor_system& sys, int fd, const std::string& mode,
                         const std::string& secret) {
  basp_peer queue;
  if (!ergon_handshake(fd, secret) || !basp_handshakes(sys, fd, queue)) {
    std::cout << "handshake failed" << std::endl;
    return 1;
  }
  auto me = caf::actor_cast<caf::strong_actor_ptr>(
    sys.spawn<ergon::test::sink_actor>());
  std::vector<caf::strong_actor_ptr> stages{me};
  std::string out;
  if (mode == "routed") {
    std::vector<caf::strong_actor_ptr> none;
    auto msg = content("close");
    // The queue's own node as the source: CAF 0.17 makes that a local sender.
    out = frame(routed_message, serialized(sys, queue.node, queue.node, none, msg),
                request_id(1), queue.published, queue.published);
  } else {
    auto msg = content("read");
    out = frame(direct_message, serialized(sys, stages, msg), request_id(1), 0,
                queue.published);
  }
  send_all(fd, out);
  auto closed = closed_by_peer(fd, 5s);
  caf::anon_send_exit(me, caf::exit_reason::user_shutdown);
  return say(closed);
}

int huge(caf::actor_system& sys, int fd, uint32_t len, const std::string& secret) {
  std::string header;
  if (secret.empty()) {
    header = basp_header(client_handshake, len, 3, 0, 0);
  } else {
    basp_peer queue;
    if (!ergon_handshake(fd, secret) || !basp_handshakes(sys, fd, queue)) {
      std::cout << "handshake failed" << std::endl;
      return 1;
    }
    header = basp_header(direct_message, len, request_id(1), 1, queue.published);
  }
  send_all(fd, header);
  return say(closed_by_peer(fd, 5s));
}

int claim(caf::actor_system& sys, int fd, const std::string& node, const std::string& secret) {
  caf::node_id claimed;
  basp_in in;
  if (caf::parse(node, claimed) || !ergon_handshake(fd, secret) || !read_basp(fd, in)
      || in.op != server_handshake) {
    std::cout << "handshake failed" << std::endl;
    return 1;
  }
  send_all(fd, frame(client_handshake, serialized(sys, claimed), 0, 0, 0));
  return say(closed_by_peer(fd, 5s));
}

// A request whose last element is a byte sequence of 3 bytes that claims
// 0xFFFFFFFF.
int charbuf(caf::actor_system& sys, int fd, const std::string& secret) {
  basp_peer queue;
  if (!ergon_handshake(fd, secret) || !basp_handshakes(sys, fd, queue)) {
    std::cout << "handshake failed" << std::endl;
    return 1;
  }
  std::vector<caf::strong_actor_ptr> none;
  auto msg = caf::make_message(std::string{"x"}, std::vector<char>{'a', 'b', 'c'});
  auto bytes = serialized(sys, none, msg);
  bytes = bytes.substr(0, bytes.size() - 4) + std::string{"\xff\xff\xff\xff\x0f", 5} + "abc";
  send_all(fd, frame(direct_message, bytes, request_id(1), 1, queue.published));
  return say(closed_by_peer(fd, 5s));
}

int random_bytes(int fd, size_t n) {
  std::mt19937_64 rng{42};
  std::string bytes(n, '\0');
  for (auto& b : bytes)
    b = static_cast<char>(rng());
  send_all(fd, bytes);
  return say(closed_by_peer(fd, 5s));
}

// Holds `n` connections in `mode` until the queue closes them all or stdin
// closes.
int crowd(const std::string& host, uint16_t port, const std::string& mode, size_t n) {
  std::vector<int> fds;
  for (size_t i = 0; i < n; ++i) {
    int fd = dial(host, port);
    if (fd < 0) {
      std::cout << "dial failed after " << i << std::endl;
      return 1;
    }
    if (mode == "hellos") {
      std::string hello;
      if (!recv_exact(fd, 41, hello)) {
        std::cout << "no hello" << std::endl;
        return 1;
      }
    }
    fds.push_back(fd);
  }
  // The start of a client's proof frame, or of a TLS record of 256 bytes
  // that opens a ClientHello: each is the first thing its peer waits for.
  std::string slow = mode == "slow-tls" ? std::string{"\x16\x03\x01\x01\x00\x01\x00\x00\xfc\x03\x03", 11}
                                        : std::string{"C\x06" "ergon\x01" "P\x47" "ergon\x01\x01", 17};
  slow += std::string(64, '\x5a');
  std::cout << "ready " << n << std::endl;
  std::vector<bool> open(n, true);
  size_t closed = 0;
  size_t sent = 0;
  auto next_byte = std::chrono::steady_clock::now();
  while (closed < n) {
    std::vector<pollfd> polled{{0, POLLIN, 0}};
    for (auto fd : fds)
      polled.push_back({fd, POLLIN, 0});
    ::poll(polled.data(), polled.size(), 100);
    if (polled[0].revents != 0)
      return 0;  // stdin closed: the test is done with us
    for (size_t i = 0; i < n; ++i) {
      if (!open[i] || polled[i + 1].revents == 0)
        continue;
      char buf[256];
      if (::recv(fds[i], buf, sizeof(buf), 0) <= 0) {
        open[i] = false;
        ++closed;
      }
    }
    if (mode.rfind("slow", 0) == 0 && std::chrono::steady_clock::now() >= next_byte
        && sent < slow.size()) {
      for (size_t i = 0; i < n; ++i)
        if (open[i])
          ::send(fds[i], &slow[sent], 1, MSG_NOSIGNAL);
      ++sent;
      next_byte += 1s;
    }
  }
  std::cout << "closed " << n << std::endl;
  std::string line;
  std::getline(std::cin, line);
  return 0;
}

std::string code_of(const caf::error& e) {
  return ergon::to_string(ergon::to_status(e).code());
}

std::string code_and_field(const caf::error& e) {
  auto st = ergon::to_status(e);
  return std::string{ergon::to_string(st.code())} + " " + st.field();
}

int client(caf::actor_system& sys, const std::string& host, uint16_t port,
           const std::string& secret) {
  std::cout << "node " << caf::to_string(sys.node()) << std::endl;
  auto q = ergon::connect(sys, host, port, {secret});
  if (!q) {
    std::cout << "connect " << ergon::to_string(q.error().code()) << ": " << q.error().message()
              << std::endl;
  } else {
    caf::scoped_actor self{sys};
    self->request(*q, patience, ergon::submit_atom::value, *ergon::job_builder("job").build())
      .receive([](const ergon::job_id&) { std::cout << "submit ok" << std::endl; },
               [](caf::error& e) { std::cout << "submit " << code_of(e) << std::endl; });
  }
  std::string line;
  std::getline(std::cin, line);
  return 0;
}

int send_malformed(caf::actor_system& sys, const std::string& host, uint16_t port) {
  using namespace ergon::actors;
  auto q = ergon::connect(sys, host, port);
  if (!q) {
    std::cout << "connect " << ergon::to_string(q.error().code()) << std::endl;
    return 1;
  }
  caf::scoped_actor self{sys};
  caf::actor dispatcher;
  self->request(*q, patience, ergon::join_atom::value)
    .receive([&](caf::actor& d) { dispatcher = d; },
             [](caf::error& e) { std::cout << "join " << code_of(e) << std::endl; });
  if (!dispatcher)
    return 1;
  register_worker good;
  good.name = "malformed";
  good.types = {"job"};
  good.max_capacity = 1;
  good.worker = caf::actor_cast<caf::actor>(self);
  std::vector<register_worker> bad(8, good);
  bad[0].types.clear();
  bad[1].types = {std::string(300, 't')};
  bad[2].max_capacity = 0;
  bad[3].prefetch = -1;
  bad[4].worker = caf::actor{};
  bad[5].worker = dispatcher;  // an actor of another node: its attempts aren't ours
  bad[6].held.assign(5, {1, 1});  // more than 4 per unit of room, and rows twice
  bad[7].returned = {{0, 1}};
  for (auto& reg : bad)
    self->request(dispatcher, patience, reg)
      .receive([](worker_registered&) { std::cout << "register ok" << std::endl; },
               [](caf::error& e) { std::cout << "register " << code_and_field(e) << std::endl; });
  uint64_t id = 0;
  self->request(dispatcher, patience, good)
    .receive([&](worker_registered& r) { id = r.worker_id; },
             [](caf::error& e) { std::cout << "register " << code_of(e) << std::endl; });
  if (id == 0)
    return 1;
  self->send(dispatcher, worker_report{id, 1'000'000, 0, 0, {}, {}, {}});
  self->send(dispatcher, worker_report{id, 1, 5, 0, {}, {}, {}});
  self->send(dispatcher, worker_report{id, 1, 0, -3, {}, {}, {}});  // a max no worker has
  caf::scoped_actor other{sys};
  other->request(dispatcher, patience, unregister_worker{id})
    .receive([](unregistered_atom) { std::cout << "unregister ok" << std::endl; },
             [](caf::error& e) { std::cout << "unregister " << code_and_field(e) << std::endl; });
  // Answered after the reports before it: they have all been handled.
  self->request(dispatcher, patience, unregister_worker{id})
    .receive([](unregistered_atom) { std::cout << "sent" << std::endl; },
             [](caf::error& e) { std::cout << "own unregister " << code_of(e) << std::endl; });
  std::string line;
  std::getline(std::cin, line);
  return 0;
}

int plain_caf(caf::actor_system& sys, int fd, const std::string& job) {
  auto id = ergon::job_id::parse(job);
  basp_peer peer;
  if (!id || !basp_handshakes(sys, fd, peer)) {
    std::cout << "handshake failed" << std::endl;
    return 1;
  }
  // Our actor 1 asks: it needs no actor here, the answers are read raw.
  std::vector<caf::strong_actor_ptr> none;
  uint64_t asked = 0;
  std::string out;
  for (uint64_t aid = 1; aid <= 400; ++aid) {
    auto wait = caf::make_message(ergon::wait_atom::value, *id, std::chrono::milliseconds{0});
    auto info = caf::make_message(ergon::job_info_atom::value, *id);
    out += frame(direct_message, serialized(sys, none, wait), request_id(++asked), 1, aid);
    out += frame(direct_message, serialized(sys, none, info), request_id(++asked), 1, aid);
  }
  // Then an exit message about its own actor to each: CAF sends such
  // messages about a peer's actors when the peer's connection ends.
  auto me = sys.spawn<ergon::test::sink_actor>();
  auto exit = caf::make_message(caf::exit_msg{me.address(), caf::exit_reason::user_shutdown});
  for (uint64_t aid = 1; aid <= 400; ++aid)
    out += frame(direct_message, serialized(sys, none, exit), 0x1000000000000000ull, me.id(), aid);
  send_all(fd, out);
  int processed = 0;
  int refused = 0;
  auto until = std::chrono::steady_clock::now() + 5s;
  basp_in in;
  while (std::chrono::steady_clock::now() < until && read_basp(fd, in)) {
    if (in.op != direct_message || in.dest != 1 || !caf::message_id{in.op_data}.is_response())
      continue;
    caf::binary_deserializer source{sys, in.payload.data(), in.payload.size()};
    std::vector<caf::strong_actor_ptr> stages;
    caf::message msg;
    if (source(stages, msg))
      continue;
    if (msg.match_elements<caf::error>()) {
      auto& e = msg.get_as<caf::error>(0);
      if (e.category() != caf::atom("ergon"))
        continue;  // CAF's: no such actor, or no such handler
      if (ergon::to_status(e).code() == ergon::error::unauthenticated)
        ++refused;
      else
        ++processed;
    } else {
      ++processed;
    }
  }
  std::cout << "processed " << processed << " refused " << refused << std::endl;
  caf::anon_send_exit(me, caf::exit_reason::user_shutdown);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " HOST PORT MODE [ARGS]\n";
    return 2;
  }
  std::string host = argv[1];
  auto port = static_cast<uint16_t>(std::stoi(argv[2]));
  std::string mode = argv[3];
  std::string arg = argc > 4 ? argv[4] : "";
  std::string arg2 = argc > 5 ? argv[5] : "";
  config cfg;
  caf::actor_system sys{cfg};
  if (mode == "client")
    return client(sys, host, port, arg);
  if (mode == "malformed")
    return send_malformed(sys, host, port);
  if (mode == "caf") {
    auto q = sys.middleman().remote_actor<ergon::queue_actor>(host, port);
    std::cout << (q ? std::string{"connected"} : "connect " + sys.render(q.error())) << std::endl;
    return 0;
  }
  if (mode == "silent" || mode == "hellos" || mode.rfind("slow", 0) == 0)
    return crowd(host, port, mode, std::stoul(arg));
  int fd = dial(host, port);
  if (fd < 0) {
    std::cout << "dial failed" << std::endl;
    return 1;
  }
  if (mode == "basp")
    return raw_basp(sys, fd, arg);
  if (mode == "routed" || mode == "anonymous")
    return authenticated_attack(sys, fd, mode, arg);
  if (mode == "huge")
    return huge(sys, fd, static_cast<uint32_t>(std::stoul(arg)), arg2);
  if (mode == "claim")
    return claim(sys, fd, arg, arg2);
  if (mode == "charbuf")
    return charbuf(sys, fd, arg);
  if (mode == "random")
    return random_bytes(fd, std::stoul(arg));
  if (mode == "plain-caf")
    return plain_caf(sys, fd, arg);
  std::cerr << "unknown mode " << mode << '\n';
  return 2;
}
