#include "transport/dialer.hpp"

#include <caf/atom.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <openssl/rand.h>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/handshake.hpp"
#include "transport/scribe.hpp"
#include "transport/settings.hpp"
#include "transport/tls_context.hpp"

namespace ergon::transport {
namespace {

using clock_type = std::chrono::steady_clock;

// A TCP connection to host:port, or why not.
result<std::unique_ptr<connection>> connect_tcp(const std::string& host, uint16_t port,
                                                clock_type::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (auto rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return status{error::unreachable, ::gai_strerror(rc)};
  std::string why = "no address";
  std::unique_ptr<connection> out;
  for (auto* a = found; a && !out; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    auto conn = std::make_unique<connection>(fd, nullptr);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      continue;
    }
    if (!wait_for(*conn, progress::want_write, deadline)) {
      why = "no answer in time";
      continue;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      why = std::strerror(err);
      continue;
    }
    int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    out = std::move(conn);
  }
  ::freeaddrinfo(found);
  if (!out)
    return status{error::unreachable, why};
  return out;
}

// Runs `step` until it is done or fails; false on failure or timeout.
template <class Step>
bool drive(connection& conn, clock_type::time_point deadline, Step step) {
  for (;;) {
    auto p = step();
    if (p == progress::done)
      return true;
    if (p == progress::closed || !wait_for(conn, p, deadline))
      return false;
  }
}

status refused(refusal why, const std::string& target) {
  switch (why) {
    case refusal::wrong_secret:
      return {error::unauthenticated, "the queue at " + target + " refused: " + describe(why)};
    case refusal::secret_required:
      return {error::unauthenticated, "the queue at " + target + " requires a secret, and none "
                                                                 "was given"};
    case refusal::queue_without_secret:
    case refusal::queue_proof_wrong:
      return {error::unauthenticated, "the queue at " + target + ": " + describe(why)};
    case refusal::speaks_tls:
      return {error::unreachable, "the queue at " + target + " is unreachable: " + describe(why)};
    default:
      return {error::closed, "the peer at " + target + " is not an ergon queue of this version: "
                               + describe(why)};
  }
}

}  // namespace

result<dialed> dial(caf::actor_system& sys, const std::string& host, uint16_t port,
                    const credentials& creds, std::chrono::milliseconds timeout) {
  auto target = host + ":" + std::to_string(port);
  auto unreachable = [&](const std::string& why) {
    return status{error::unreachable, "the queue at " + target + " is unreachable: " + why};
  };
  auto deadline = clock_type::now() + timeout;
  auto tls_opts = tls_of(sys);
  std::shared_ptr<tls_context> tls;
  if (!tls_opts.certificate.empty()) {
    auto ctx = tls_context::make(tls_opts, false);
    if (!ctx)
      return ctx.error();
    tls = std::move(*ctx);
  }
  auto tcp = connect_tcp(host, port, deadline);
  if (!tcp)
    return unreachable(tcp.error().message());
  auto conn = std::move(*tcp);
  if (tls) {
    auto ssl = tls->session(conn->fd());
    if (!ssl)
      return unreachable("OpenSSL cannot make a TLS session");
    conn->set_ssl(ssl);
    if (!drive(*conn, deadline, [&] { return conn->tls_handshake(false); }))
      return unreachable("the TLS handshake failed: "
                         + (conn->failure().empty() ? "it took too long" : conn->failure()));
  }
  std::array<uint8_t, nonce_bytes> nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    return status{error::internal, "OpenSSL has no randomness for a nonce"};
  client_handshake handshake{{creds.secret, conn->channel_binding()}, nonce};
  for (auto s = handshake.start();;) {
    if (!drive(*conn, deadline, [&] { return conn->write_from(s.send); }))
      return unreachable("the handshake failed: "
                         + (conn->failure().empty() ? "it took too long" : conn->failure()));
    if (s.admitted)
      break;
    if (s.refused != refusal::none)
      return refused(s.refused, target);
    std::string in;
    if (!drive(*conn, deadline, [&] { return conn->read_into(in, s.want); }))
      return unreachable(conn->failure().empty()
                           ? "the handshake took longer than "
                               + std::to_string(timeout.count()) + " ms"
                           : "the queue closed the connection during the handshake ("
                               + conn->failure() + ")");
    s = handshake.feed(in);
  }
  auto note = std::make_shared<closing_note>();
  auto scribe = make_scribe(sys, std::move(conn),
                            {false, max_message_bytes_of(sys), realm_of(creds.secret, tls_opts),
                             role::operator_, target, nullptr, note});
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  result<dialed> out = unreachable("CAF's handshake was not answered");
  caf::scoped_actor self{sys, true};
  self->request(basp, timeout, caf::connect_atom::value, std::move(scribe), port)
    .receive(
      [&](caf::node_id& node, caf::strong_actor_ptr& actor, std::set<std::string>& ifs) {
        out = dialed{std::move(node), std::move(actor), std::move(ifs)};
      },
      [&](caf::error& e) {
        std::lock_guard<std::mutex> guard{note->mtx};
        // CAF keeps one connection per pair of processes: the actors of a
        // process reached already with other credentials would see those.
        if (note->other_credentials)
          out = status{error::invalid_argument,
                       "this process reaches the process at " + target
                         + " with other credentials already; CAF keeps one connection per pair "
                           "of processes, so use the same credentials for all its queues",
                       "creds"};
        else
          out = unreachable(note->why.empty() ? sys.render(e) : note->why);
      });
  return out;
}

}  // namespace ergon::transport
