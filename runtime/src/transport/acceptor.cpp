#include "transport/acceptor.hpp"

#include <caf/atom.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <openssl/rand.h>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <optional>
#include <thread>

#include "transport/handshake.hpp"
#include "transport/listening_socket.hpp"
#include "transport/scribe.hpp"

namespace ergon::transport {
namespace {

using clock_type = std::chrono::steady_clock;

// One accepted connection between accept and a passed handshake.
struct pending {
  std::unique_ptr<connection> conn;
  clock_type::time_point deadline;
  bool tls_done = false;
  std::optional<server_handshake> handshake;
  std::string out;  // to write before anything else
  std::string in;   // read so far toward `want`
  size_t want = 0;
  bool admitted = false;
  refusal refused = refusal::none;
  progress waits = progress::want_read;
  bool crowded_out = false;  // closed to make room for a newer TLS handshake
  role granted = role::operator_;  // by its certificate, then its secret
};

enum class outcome { waiting, passed, closed };

std::array<uint8_t, nonce_bytes> fresh_nonce() {
  std::array<uint8_t, nonce_bytes> nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
    throw std::runtime_error("OpenSSL has no randomness for a nonce");
  return nonce;
}

}  // namespace

class acceptor::impl {
 public:
  impl(caf::actor_system& sys, listener_terms terms, caf::strong_actor_ptr whom,
       std::set<std::string> ifs, int listen_fd, int wake_fd)
      : sys_(sys),
        terms_(std::move(terms)),
        whom_(std::move(whom)),
        ifs_(std::move(ifs)),
        listen_fd_(listen_fd),
        wake_fd_(wake_fd),
        port_(local_port(listen_fd)),
        basp_(sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"))) {
    thread_ = std::thread{[this] { run(); }};
  }

  ~impl() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
    thread_.join();
    ::close(listen_fd_);
    ::close(wake_fd_);
    // The published actor stays in CAF's table until the port is closed there.
    caf::scoped_actor self{sys_, true};
    self->request(basp_, caf::infinite, caf::close_atom::value, port_)
      .receive([] {}, [](caf::error&) {});
  }

  uint16_t port() const { return port_; }

 private:
  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      // Out of file descriptors: the listening socket stays readable, so it
      // waits a moment rather than spin.
      auto accepting = clock_type::now() >= accept_paused_until_;
      fds.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
      for (auto& p : pending_)
        fds.push_back({p.conn->fd(),
                       static_cast<short>(p.waits == progress::want_write ? POLLOUT : POLLIN), 0});
      auto timeout = -1;
      if (!pending_.empty() || !accepting) {
        auto first = accepting ? clock_type::time_point::max() : accept_paused_until_;
        for (auto& p : pending_)
          first = std::min(first, p.deadline);
        auto left = std::chrono::ceil<std::chrono::milliseconds>(first - clock_type::now());
        timeout = static_cast<int>(std::max<int64_t>(left.count(), 0));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
        return;
      if (fds[0].revents != 0)
        return;
      // Connections accepted below are polled from the next round on.
      size_t i = 2;
      for (auto p = pending_.begin(); p != pending_.end(); ++i) {
        auto ready = fds[i].revents != 0 && !p->crowded_out;
        auto result = ready ? advance(*p) : outcome::waiting;
        if (p->crowded_out)
          result = refuse(*p, "closed to make room: " + std::to_string(terms_.max_tls_pending)
                                + " connections were in their TLS handshake");
        if (result == outcome::waiting && clock_type::now() >= p->deadline) {
          refuse(*p, "the handshake took longer than "
                       + std::to_string(terms_.handshake_timeout.count()) + " ms");
          result = outcome::closed;
        }
        p = result == outcome::waiting ? std::next(p) : pending_.erase(p);
      }
      if (fds[1].revents != 0)
        accept_all();
    }
  }

  void accept_all() {
    for (int taken = 0; taken < 64; ++taken) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_paused_until_ = clock_type::now() + std::chrono::milliseconds{100};
          log_refused_connection("the listening socket",
                                 std::string{"accept failed: "} + std::strerror(errno));
        }
        return;
      }
      int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      if (pending_.size() >= terms_.max_pending) {
        refuse(pending_.front(), "closed to make room: " + std::to_string(pending_.size())
                                   + " connections were in their handshake");
        pending_.pop_front();
      }
      pending_.push_back({});
      auto& p = pending_.back();
      p.conn = std::make_unique<connection>(fd, nullptr);
      p.deadline = clock_type::now() + terms_.handshake_timeout;
      // With TLS, the session is made once the peer sends something, so a
      // silent connection holds no TLS buffers; without, the hello goes now.
      if (terms_.tls)
        continue;
      p.tls_done = true;
      start_handshake(p);
      if (advance(p) != outcome::waiting)
        pending_.pop_back();
    }
  }

  void start_handshake(pending& p) {
    handshake_keys keys{terms_.secret, p.conn->channel_binding()};
    for (auto& s : terms_.other_secrets)
      keys.other_secrets.push_back(s.secret);
    p.handshake.emplace(std::move(keys), fresh_nonce());
    apply(p, p.handshake->start());
  }

  // The role a verified certificate grants; empty (with `why`) if its name
  // has none while certificate_roles is set.
  std::optional<role> certificate_role(pending& p, std::string& why) {
    if (terms_.certificate_roles.empty())
      return role::operator_;
    auto name = p.conn->peer_common_name();
    auto r = terms_.certificate_roles.find(name);
    if (r == terms_.certificate_roles.end()) {
      why = "its certificate's subject name '" + name + "' has no role";
      return std::nullopt;
    }
    return r->second;
  }

  // The role of a peer admitted by the handshake: the lesser of its
  // certificate's and its secret's; two different narrow roles grant nothing.
  std::optional<role> secret_role(pending& p, std::string& why) {
    auto proved = p.handshake->proved();
    auto by_secret = proved == 0 ? role::operator_ : terms_.other_secrets.at(proved - 1).granted;
    if (p.granted == role::operator_ || by_secret == p.granted)
      return by_secret;
    if (by_secret == role::operator_)
      return p.granted;
    why = std::string{"its certificate grants the "} + to_string(p.granted)
          + " role and its secret the " + to_string(by_secret) + " role";
    return std::nullopt;
  }

  static void apply(pending& p, step s) {
    p.out += s.send;
    p.want = s.want;
    p.in.clear();
    p.admitted = s.admitted;
    p.refused = s.refused;
  }

  // Moves `p` on as far as its socket allows.
  outcome advance(pending& p) {
    if (!p.tls_done) {
      if (!p.conn->ssl()) {
        crowd_out_tls_handshakes();
        auto ssl = terms_.tls->session(p.conn->fd());
        if (!ssl)
          return refuse(p, "OpenSSL cannot make a TLS session");
        p.conn->set_ssl(ssl);
      }
      auto r = p.conn->tls_handshake(true);
      if (r == progress::closed)
        return fail(p, "TLS handshake failed: " + p.conn->failure());
      if (r != progress::done) {
        p.waits = r;
        return outcome::waiting;
      }
      p.tls_done = true;
      std::string why;
      auto by_certificate = certificate_role(p, why);
      if (!by_certificate)
        return fail(p, why);
      p.granted = *by_certificate;
      start_handshake(p);
    }
    for (;;) {
      auto r = p.conn->write_from(p.out);
      if (p.refused != refusal::none)  // the refusal went out if it could
        return p.refused == refusal::wrong_secret || p.refused == refusal::secret_required
                 ? fail(p, describe(p.refused))
                 : refuse(p, describe(p.refused));
      if (r == progress::closed)
        return refuse(p, "closed during the handshake: " + p.conn->failure());
      if (r != progress::done) {
        p.waits = r;
        return outcome::waiting;
      }
      if (p.admitted) {
        std::string why;
        auto granted = secret_role(p, why);
        if (!granted)
          return fail(p, why);
        p.granted = *granted;
        pass(p);
        return outcome::passed;
      }
      r = p.conn->read_into(p.in, p.want);
      if (r == progress::closed)
        return refuse(p, "closed during the handshake: " + p.conn->failure());
      if (r != progress::done) {
        p.waits = r;
        return outcome::waiting;
      }
      apply(p, p.handshake->feed(p.in));
    }
  }

  // Makes room for one more TLS handshake: past the limit, the oldest one
  // in progress is closed on the next round.
  void crowd_out_tls_handshakes() {
    size_t in_tls = 0;
    pending* oldest = nullptr;
    for (auto& q : pending_)
      if (!q.tls_done && q.conn && q.conn->ssl() && !q.crowded_out) {
        ++in_tls;
        if (!oldest)
          oldest = &q;
      }
    if (oldest && in_tls >= terms_.max_tls_pending)
      oldest->crowded_out = true;
  }

  // A peer that proved the wrong secret, none, or no certificate.
  outcome fail(pending& p, const std::string& why) {
    if (terms_.gate)
      terms_.gate->count_failed_handshake();
    log_refused_connection(p.conn->peer(), why);
    return outcome::closed;
  }

  // A peer that broke the handshake's rules.
  outcome refuse(pending& p, const std::string& why) {
    if (terms_.gate)
      terms_.gate->count_refused_connection();
    log_refused_connection(p.conn->peer(), why);
    return outcome::closed;
  }

  void pass(pending& p) {
    auto peer = p.conn->peer();
    auto scribe = make_scribe(sys_, std::move(p.conn),
                              {true, terms_.max_message_bytes, terms_.realm, p.granted, peer,
                               terms_.gate, nullptr});
    caf::anon_send(basp_, caf::publish_atom::value, std::move(scribe), port_, whom_, ifs_);
  }

  caf::actor_system& sys_;
  listener_terms terms_;
  caf::strong_actor_ptr whom_;
  std::set<std::string> ifs_;
  int listen_fd_;
  int wake_fd_;
  uint16_t port_;
  caf::actor basp_;
  std::list<pending> pending_;  // oldest first
  clock_type::time_point accept_paused_until_{};
  std::thread thread_;
};

result<std::unique_ptr<acceptor>> acceptor::open(caf::actor_system& sys, listener_terms terms,
                                                 caf::strong_actor_ptr whom,
                                                 std::set<std::string> ifs) {
  auto ends = listen_with_wake(terms.bind, terms.port);
  if (!ends)
    return ends.error();
  auto p = std::make_unique<impl>(sys, std::move(terms), std::move(whom), std::move(ifs),
                                  ends->fd, ends->wake);
  return std::unique_ptr<acceptor>{new acceptor(std::move(p))};
}

acceptor::acceptor(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

acceptor::~acceptor() = default;

uint16_t acceptor::port() const {
  return impl_->port();
}

}  // namespace ergon::transport
