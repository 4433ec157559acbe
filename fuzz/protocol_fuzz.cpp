// Fuzzes deserialization of the worker protocol
// (actors/include/ergon/actors/protocol.hpp) and of the public types that
// queue_actor's messages carry (include/ergon/wire.hpp): arbitrary bytes read with
// caf::binary_deserializer into each registered message type, and into a
// type-erased caf::message as the network layer reads it. The first input byte
// picks the type. Properties: no crash, throw or UB; a value that deserializes
// serializes to bytes that deserialize to the same value (same bytes again).
//
// Two more selectors reach the transport (runtime/src/transport), the first
// bytes every connection meets:
// - handshake_selector feeds the bytes to both sides of ergon's handshake, as
//   each asks for them, and as BASP chunks to the connection rules.
//   Properties: no step asks for more than a frame of 255 bytes, and no
//   header announcing more than the limit passes.
// - raw_socket_selector writes the bytes to a real acceptor on 127.0.0.1 (one
//   with a secret, one without), then closes its side. Property: the queue
//   closes the connection too, at once, whatever it was sent.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message.hpp>
#include <caf/serializer.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ergon/actors/protocol.hpp"
#include "ergon/queue.hpp"
#include "transport/acceptor.hpp"
#include "transport/basp_rules.hpp"
#include "transport/handshake.hpp"
#include "ergon/queue_actor.hpp"
#include "ergon/wire.hpp"
#include "fuzz_target.hpp"
#include "support/basp_bytes.hpp"

namespace {

using namespace ergon::actors;
using ergon::fuzz::require;

// One actor system for the whole run: deserializing actor handles and
// messages needs one. Kept alive until exit on purpose.
struct wire_node {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  wire_node() {
    ergon::queue::register_types(cfg);
    cfg.set("scheduler.max-threads", 1);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

caf::actor_system& node() {
  static auto* n = new wire_node;
  return *n->sys;
}

template <class T>
std::vector<char> serialize(T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{node(), buf};
  auto err = sink(x);
  require(!err, "serializing a deserialized value failed: " + node().render(err));
  return buf;
}

// Found by this target: CAF 0.17's pack754 loops forever on an infinite or
// NaN float, double or long double, and a type-erased message can hold one
// of CAF's own, at any depth (an error's context, a config_value, a stream
// batch). Reading it is fine, and ergon never sends a received message on
// (replies carry ergon's types, whose doubles travel as bits; CAF answers
// an unexpected message with an error, not the message; BASP forwards
// routed messages as bytes), so only re-serializing one here would hang.
// This serializer walks a value as CAF would write it, writes nothing, and
// notes such a number instead of packing it.
class non_finite_probe final : public caf::serializer {
 public:
  explicit non_finite_probe(caf::actor_system& sys) : caf::serializer(sys) {}
  bool found = false;

  caf::error begin_object(uint16_t&, std::string&) override { return {}; }
  caf::error end_object() override { return {}; }
  caf::error begin_sequence(size_t&) override { return {}; }
  caf::error end_sequence() override { return {}; }
  caf::error apply_raw(size_t, void*) override { return {}; }

 protected:
  caf::error apply_impl(int8_t&) override { return {}; }
  caf::error apply_impl(uint8_t&) override { return {}; }
  caf::error apply_impl(int16_t&) override { return {}; }
  caf::error apply_impl(uint16_t&) override { return {}; }
  caf::error apply_impl(int32_t&) override { return {}; }
  caf::error apply_impl(uint32_t&) override { return {}; }
  caf::error apply_impl(int64_t&) override { return {}; }
  caf::error apply_impl(uint64_t&) override { return {}; }
  caf::error apply_impl(float& x) override { return note(x); }
  caf::error apply_impl(double& x) override { return note(x); }
  caf::error apply_impl(long double& x) override { return note(x); }
  caf::error apply_impl(std::string&) override { return {}; }
  caf::error apply_impl(std::u16string&) override { return {}; }
  caf::error apply_impl(std::u32string&) override { return {}; }

 private:
  template <class T>
  caf::error note(T x) {
    found = found || !std::isfinite(x);
    return {};
  }
};

template <class T>
bool has_non_finite_float(T& x) {
  non_finite_probe probe{node()};
  (void) probe(x);
  return probe.found;
}

template <class T>
void check(const char* data, size_t size) {
  T x;
  caf::binary_deserializer source{node(), data, size};
  if (source(x))
    return;  // rejected: fine, as long as nothing broke
  if (has_non_finite_float(x))
    return;  // CAF 0.17 never finishes packing it again (see above)
  auto bytes = serialize(x);
  T y;
  caf::binary_deserializer again{node(), bytes.data(), bytes.size()};
  auto err = again(y);
  require(!err, "re-reading a serialized value failed: " + node().render(err));
  require(serialize(y) == bytes, "serialize/deserialize is not stable");
  if constexpr (std::is_same_v<T, wire_status>)
    (void) ergon::actors::from_wire(x).to_string();
  if constexpr (std::is_same_v<T, job_assignment>)
    (void) ergon::actors::id_from_wire(x.id);
}

// The message types queue::register_types names, plus a type-erased message.
using checker = void (*)(const char*, size_t);
constexpr std::array<checker, 39> checkers = {
  check<wire_status>, check<register_worker>, check<worker_registered>,
  check<worker_report>, check<unregister_worker>, check<job_assignment>,
  check<std::vector<job_assignment>>, check<assign_jobs>, check<cancel_attempt>,
  check<ergon::storage::attempt_report>, check<std::vector<ergon::storage::attempt_report>>,
  check<ergon::storage::attempt_ref>, check<std::vector<wire_status>>,
  check<std::vector<ergon::storage::attempt_ref>>, check<heartbeat_request>,
  check<heartbeat_reply>, check<caf::message>, check<ergon::job>,
  check<std::vector<ergon::job>>, check<ergon::job_update>, check<ergon::job_id>,
  check<ergon::job_info>, check<ergon::status_counts>, check<ergon::metrics_snapshot>,
  check<ergon::event>, check<ergon::recurring_job>, check<ergon::recurring_info>,
  check<ergon::storage::progress_report>, check<std::vector<ergon::storage::progress_report>>,
  check<progress_batch>, check<ergon::job_filter>, check<ergon::page_request>,
  check<ergon::job_page>, check<ergon::retry_summary>, check<preempt_attempt>,
  check<results_request>, check<results_reply>, check<ergon::cancel_summary>,
  check<resize_worker>};
constexpr uint8_t message_selector = 16;

template <class T>
std::string seed(uint8_t selector, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{node(), buf};
  require(!sink(x), "serializing a seed failed");
  return static_cast<char>(selector) + std::string{buf.begin(), buf.end()};
}

ergon::job public_job() {
  ergon::job j;
  j.type = "email";
  j.payload = "payload";
  j.name = "welcome";
  j.ttl_ms = 60'000;
  j.tags = {{"tenant", "acme"}, {"batch", ""}};
  return j;
}

// A duplicate that runs after a running holder and raises a waiting one.
ergon::job requeue_job() {
  auto j = public_job();
  j.unique_key = "welcome:42";
  j.on_duplicate = ergon::unique_policy::requeue;
  j.raise_holder_priority = true;
  return j;
}

// Found by this target: a type-erased message holding a float whose bytes
// read as infinity (see has_non_finite_float). Raw bytes: packing it to make
// the seed would hang too.
std::string infinite_float_message() {
  return std::string{"\x10\x00\x00\x0a@<>+float+", 14} + std::string(120, '\xff')
         + std::string{"@\xdb)\x1c", 4};
}

// Found by this target: CAF 0.17 packs an infinite double in a loop that
// never ends, so doubles travel as their bits (wire.hpp).
ergon::job infinite_backoff_job() {
  auto j = public_job();
  j.backoff.multiplier = std::numeric_limits<double>::infinity();
  return j;
}

ergon::job_update public_update() {
  ergon::job_update u;
  u.priority = 3;
  u.payload = "new";
  return u;
}

ergon::job_info public_info() {
  ergon::job_info i;
  i.type = "email";
  i.group = "tenant";
  i.result = "ok";
  i.attempts.push_back({1, 1'700'000'000'000, 1'700'000'000'100,
                        ergon::attempt_outcome::failed, "boom", {}, {}, 0});
  i.attempts[0].worker = {3, "w1", "host-a", 4242, "node/7"};
  i.attempts[0].logs = {{0, 1'700'000'000'050, ergon::log_level::warn, "slow upstream"}};
  i.attempts[0].logs_dropped = 2;
  i.tags = {{"tenant", "acme"}};
  return i;
}

ergon::metrics_snapshot public_metrics() {
  ergon::metrics_snapshot m;
  m.queue_wait_bounds_ms = {1, 10};
  m.queue_wait_counts = {1, 2, 3};
  m.effective_priorities[5] = 2;
  m.groups.push_back({"A", 3, 0.75, 12, 11, 0.9, 500, false});
  m.by_type["email"] = ergon::status_counts{};
  return m;
}

ergon::event public_event() {
  ergon::event e;
  e.kind = ergon::event_kind::retried;
  e.type = "email";
  e.message = "boom";
  return e;
}

ergon::recurring_job public_recurring() {
  ergon::recurring_job r;
  r.id = "nightly";
  r.schedule = "0 3 * * MON-FRI";
  r.time_zone = "Europe/Berlin";
  r.job = public_job();
  r.job.unique_key = "k";
  r.catch_up = ergon::catch_up::skip;
  return r;
}

ergon::recurring_info public_recurring_info() {
  ergon::recurring_info i;
  i.id = "nightly";
  i.schedule = "every 15m";
  i.job = public_job();
  i.last_status = ergon::job_status::succeeded;
  i.next_scheduled_at_ms = 1'700'000'900'000;
  i.paused_since_ms = 1'700'000'000'000;
  i.paused_until_ms = 1'700'003'600'000;
  return i;
}

ergon::job_filter public_filter() {
  ergon::job_filter f;
  f.status = ergon::job_status::failed;
  f.type = "email";
  f.group = "tenant";
  f.finished_from_ms = 1'700'000'000'000;
  f.finished_before_ms = 1'700'000'900'000;
  f.tags = {{"tenant", "acme"}};
  f.tag_prefix = "billing.";
  return f;
}

// -- the transport -------------------------------------------------------------

constexpr uint8_t handshake_selector = 253;
constexpr uint8_t raw_socket_selector = 254;

std::string transport_seed(uint8_t selector) {
  std::string out(1, static_cast<char>(selector));
  out += std::string{"C\x06" "ergon\x01", 8};
  out += std::string{"P\x27" "ergon\x01\x00", 9} + std::string(32, '\x07');
  out += std::string{"\x01\x00\x00\x00\x00\x00\x00\x10", 8} + std::string(24, '\0');
  return out;
}

const std::string fuzz_secret = std::string(64, 'f');

// Feeds `data` to one side of the handshake, as it asks for bytes.
template <class Side>
void drive(Side& side, const char* data, size_t size) {
  auto s = side.start();
  size_t at = 0;
  while (!s.finished()) {
    auto want = s.want;
    require(want > 0 && want <= 255, "a handshake step asked for " + std::to_string(want)
                                       + " bytes");
    if (size - at < want)
      return;
    s = side.feed(std::string{data + at, want});
    at += want;
  }
}

void check_transport(const char* data, size_t size) {
  std::array<uint8_t, ergon::transport::nonce_bytes> nonce{};
  for (auto secret : {std::string{}, fuzz_secret}) {
    ergon::transport::server_handshake queue{{secret, {}}, nonce};
    ergon::transport::client_handshake client{{secret, {}}, nonce};
    drive(queue, data, size);
    drive(client, data, size);
  }
  // As BASP chunks: a header, then the payload it announces, and so on.
  constexpr size_t limit = 1 << 16;
  ergon::transport::basp_rules rules{size % 2 == 0, limit, node().node()};
  size_t at = 0;
  bool want_payload = false;
  uint32_t announced = 0;
  while (at < size) {
    size_t chunk = want_payload ? announced : ergon::transport::basp_header_bytes;
    chunk = std::min(chunk, size - at);
    if (!want_payload && chunk == ergon::transport::basp_header_bytes) {
      announced = 0;
      for (size_t i = 4; i < 8; ++i)
        announced = (announced << 8) | static_cast<uint8_t>(data[at + i]);
    }
    auto why = rules.check(data + at, chunk);
    if (!why.empty())
      return;
    if (!want_payload)
      require(announced <= std::max(limit, ergon::transport::max_handshake_bytes),
              "a header announcing " + std::to_string(announced) + " bytes passed");
    at += chunk;
    want_payload = !want_payload && announced > 0;
  }
}

// Acceptors on 127.0.0.1, with and without a secret, in a system of their own.
struct listening {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor published;
  std::unique_ptr<ergon::transport::acceptor> plain;
  std::unique_ptr<ergon::transport::acceptor> with_secret;

  listening() {
    cfg.load<caf::io::middleman>();
    ergon::queue::register_types(cfg);
    cfg.set("scheduler.max-threads", 1);
    sys = std::make_unique<caf::actor_system>(cfg);
    published = sys->spawn<ergon::test::sink_actor>();
    for (auto* slot : {&plain, &with_secret}) {
      ergon::transport::listener_terms terms;
      terms.secret = slot == &plain ? std::string{} : fuzz_secret;
      terms.realm = terms.secret.empty() ? "" : "fuzz";
      terms.handshake_timeout = std::chrono::milliseconds{500};
      terms.gate = std::make_shared<ergon::actors::node_gate>();
      auto opened = ergon::transport::acceptor::open(
        *sys, std::move(terms), caf::actor_cast<caf::strong_actor_ptr>(published), {});
      require(opened.has_value(), "cannot listen for the raw-socket mode");
      *slot = std::move(*opened);
    }
  }
};

listening& acceptors() {
  static auto* l = new listening;  // kept until exit, like node()
  return *l;
}

void check_raw_socket(const char* data, size_t size) {
  auto& l = acceptors();
  auto port = (size % 2 == 0 ? l.plain : l.with_secret)->port();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  require(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0,
          "cannot connect to the acceptor");
  for (size_t at = 0; at < size;) {
    auto n = ::send(fd, data + at, size - at, MSG_NOSIGNAL);
    if (n <= 0)
      break;  // closed already
    at += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  // Whatever it was sent, the queue ends the connection once its peer is
  // done: at the first bad byte, at the end of the bytes, or (a connection
  // handed to CAF) when CAF sees the end.
  bool closed = false;
  for (int waited = 0; waited < 50 && !closed; ++waited) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char buf[4096];
    closed = ::recv(fd, buf, sizeof(buf), 0) <= 0;
  }
  ::close(fd);
  require(closed, "the queue kept a connection open for 5 s after its peer finished");
}

std::vector<std::string> seeds() {
  wire_status st{1, "field 'weight': must be >= 1", "weight"};
  ergon::storage::progress_report progress{7, 42, 30, 100, "rows", 1'700'000'000'000,
                                           1'700'000'070'000};
  ergon::page_request page;
  page.limit = 50;
  page.after = ergon::job_id{};
  page.newest_first = true;
  job_assignment job{7, std::string(16, '\x01'), "email", "tenant", "payload", 1, 42, 2};
  ergon::storage::attempt_report ok{7, 42, ergon::storage::report_kind::succeeded, "result"};
  ergon::storage::attempt_report failed{8, 43, ergon::storage::report_kind::failed, "boom"};
  worker_report req{3, 10, 4, 4, {ok, failed}, {{7, 42}, {8, 43}}, {{9, 44}}};
  ergon::storage::attempt_report spawned{9, 44, ergon::storage::report_kind::spawned, "join"};
  spawned.children = {public_job(), ergon::job{}};
  heartbeat_request ext{7, 42, true, "checkpoint"};
  heartbeat_reply reply{st, 1'700'000'420'000};
  return {seed(0, st),
          seed(1, register_worker{"w1", "host-a", 4242, {"email", "sms"}, 4, 2, caf::actor{}}),
          seed(2, worker_registered{3, worker_writer_actor{}}),
          seed(2, worker_registered{3, worker_writer_actor{}, {{7, 42}}, 5'000, 8}),
          seed(3, req),
          seed(4, unregister_worker{3}),
          seed(5, job),
          seed(6, std::vector<job_assignment>{job, job}),
          seed(7, assign_jobs{{job}, {st}, true}),
          seed(8, cancel_attempt{7, 42, "expired"}),
          seed(9, ok),
          seed(10, std::vector<ergon::storage::attempt_report>{ok, failed}),
          seed(11, ergon::storage::attempt_ref{7, 42}),
          seed(12, std::vector<wire_status>{st, wire_status{}}),
          seed(13, std::vector<ergon::storage::attempt_ref>{{7, 42}}),
          seed(14, ext),
          seed(15, reply),
          seed(message_selector, caf::make_message(req)),
          seed(message_selector, caf::make_message(assign_jobs{{job}, {}, false})),
          seed(message_selector, caf::make_message(ext, st)),
          seed(message_selector, caf::make_message(std::string(64, 'c'), std::string(64, 'd'))),
          // A client's first bytes without a secret: its hello and proof
          // frames, then the start of a BASP client handshake.
          transport_seed(handshake_selector), transport_seed(raw_socket_selector),
          infinite_float_message(),
          seed(17, public_job()),
          seed(17, infinite_backoff_job()),
          seed(17, requeue_job()),
          seed(18, std::vector<ergon::job>{public_job(), ergon::job{}}),
          seed(19, public_update()),
          seed(20, ergon::job_id{}),
          seed(21, public_info()),
          seed(22, ergon::status_counts{}),
          seed(23, public_metrics()),
          seed(24, public_event()),
          seed(25, public_recurring()),
          seed(26, public_recurring_info()),
          seed(27, progress),
          seed(28, std::vector<ergon::storage::progress_report>{progress, {}}),
          seed(29, progress_batch{{progress}, {}}),
          seed(29, progress_batch{{}, {{7, 42, {{0, 1'700'000'000'050, ergon::log_level::info, "line"}}, 1}}}),
          seed(8, cancel_attempt{7, 42, "cancel requested", true}),
          seed(30, public_filter()),
          seed(31, page),
          seed(32, ergon::job_page{{public_info()}, ergon::job_id{}}),
          seed(33, ergon::retry_summary{3, {ergon::job_id{}}}),
          seed(34, preempt_attempt{7, 42}),
          seed(35, results_request{7, 42, 0}),
          seed(36, results_reply{st, {ergon::dependency_result{ergon::job_id{},
                                                               ergon::job_status::succeeded,
                                                               std::string{"r"}}},
                                 9}),
          seed(10, std::vector<ergon::storage::attempt_report>{spawned}),
          seed(37, ergon::cancel_summary{2, 1}),
          seed(38, resize_worker{8}),
          seed(38, resize_worker{-1}),
          seed(message_selector, caf::make_message(resize_worker{0})),
          seed(message_selector, caf::make_message(ergon::set_worker_atom::value,
                                                   std::string{"mailer"}, ergon::settings_change{})),
          seed(message_selector, caf::make_message(ergon::cancel_jobs_atom::value, public_filter())),
          seed(message_selector,
               caf::make_message(ergon::list_jobs_atom::value, public_filter(), page)),
          seed(message_selector, caf::make_message(ergon::wait_atom::value, ergon::job_id{},
                                                   std::chrono::milliseconds{-1}))};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ergon::fuzz::write_seeds_if_asked(seeds());
  node();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  auto bytes = reinterpret_cast<const char*>(data);
  if (data[0] == handshake_selector)
    check_transport(bytes + 1, size - 1);
  else if (data[0] == raw_socket_selector)
    check_raw_socket(bytes + 1, size - 1);
  else
    checkers[data[0] % checkers.size()](bytes + 1, size - 1);
  return 0;
}
