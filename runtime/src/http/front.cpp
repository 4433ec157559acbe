#include "http/front.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "transport/connection.hpp"
#include "transport/listening_socket.hpp"

namespace ergon::http {
namespace {

using clock_type = std::chrono::steady_clock;
using transport::progress;

// After the answer: how long the rest of what the client sends is read and
// dropped, so that closing doesn't reset the connection under the answer.
constexpr auto drain_time = std::chrono::milliseconds{1'000};
constexpr size_t drain_bytes = 256 * 1024;

std::pair<std::string, int> address_of(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET6) {
    auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof(host));
    return {host, ntohs(in6.sin6_port)};
  }
  auto& in = reinterpret_cast<const sockaddr_in&>(a);
  ::inet_ntop(AF_INET, &in.sin_addr, host, sizeof(host));
  return {host, ntohs(in.sin_port)};
}

// Worker threads that answer complete requests, in the order they came.
class lane {
 public:
  struct request {
    uint64_t connection;
    std::string bytes;
    peer_address from;
  };
  using deliver = std::function<void(uint64_t connection, std::string answer)>;

  lane(size_t threads, size_t max_waiting, const responder& respond, deliver done)
      : max_waiting_(max_waiting), respond_(respond), done_(std::move(done)) {
    for (size_t i = 0; i < threads; ++i)
      threads_.emplace_back([this] { run(); });
  }

  ~lane() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      t.join();
  }

  // False when the lane is full.
  bool offer(request r) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (waiting_.size() >= max_waiting_)
        return false;
      waiting_.push_back(std::move(r));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void run() {
    for (;;) {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return stopping_ || !waiting_.empty(); });
      if (stopping_)
        return;
      auto r = std::move(waiting_.front());
      waiting_.pop_front();
      guard.unlock();
      done_(r.connection, respond_(std::move(r.bytes), r.from));
    }
  }

  size_t max_waiting_;
  const responder& respond_;
  deliver done_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<request> waiting_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

class front::impl {
 public:
  impl(front_terms terms, responder respond, int listen_fd, int wake_fd)
      : terms_(std::move(terms)),
        respond_(std::move(respond)),
        listen_fd_(listen_fd),
        wake_fd_(wake_fd),
        port_(transport::local_port(listen_fd)) {
    auto done = [this](uint64_t id, std::string answer) { answered(id, std::move(answer)); };
    api_ = std::make_unique<lane>(terms_.api_threads, terms_.max_waiting, respond_, done);
    probes_ = std::make_unique<lane>(terms_.probe_threads, terms_.max_waiting, respond_, done);
    thread_ = std::thread{[this] { run(); }};
  }

  ~impl() {
    {
      std::lock_guard<std::mutex> guard{answers_mtx_};
      stopping_ = true;
    }
    wake();
    thread_.join();
    api_.reset();
    probes_.reset();
    connections_.clear();
    ::close(listen_fd_);
    ::close(wake_fd_);
  }

  uint16_t port() const { return port_; }

 private:
  enum class stage { tls, reading, answering, writing, draining };

  struct connection {
    std::unique_ptr<transport::connection> socket;
    stage at = stage::reading;
    progress waits = progress::want_read;
    clock_type::time_point deadline;
    std::string in;
    std::string out;
    size_t drained = 0;
    peer_address from;
  };

  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  }

  // On a lane's thread.
  void answered(uint64_t id, std::string answer) {
    {
      std::lock_guard<std::mutex> guard{answers_mtx_};
      if (stopping_)
        return;
      answers_.emplace_back(id, std::move(answer));
    }
    wake();
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> polled;
    for (;;) {
      fds.clear();
      polled.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      auto accepting = clock_type::now() >= accept_paused_until_;
      fds.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
      auto first = accepting ? clock_type::time_point::max() : accept_paused_until_;
      for (auto& [id, c] : connections_) {
        if (c.at == stage::answering)
          continue;
        fds.push_back(
          {c.socket->fd(), static_cast<short>(c.waits == progress::want_write ? POLLOUT : POLLIN), 0});
        polled.push_back(id);
        first = std::min(first, c.deadline);
      }
      int timeout = -1;
      if (first != clock_type::time_point::max()) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(first - clock_type::now());
        timeout = static_cast<int>(std::max<int64_t>(left.count(), 0));
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
        return;
      if (fds[0].revents != 0 && !take_answers())
        return;
      for (size_t i = 0; i < polled.size(); ++i) {
        auto c = connections_.find(polled[i]);
        if (c == connections_.end())
          continue;
        bool keep = fds[i + 2].revents == 0 || advance(c->first, c->second);
        if (keep && clock_type::now() >= c->second.deadline)
          keep = overdue(c->second);
        if (!keep)
          connections_.erase(c);
      }
      if (fds[1].revents != 0)
        accept_all();
    }
  }

  // False once the front stops.
  bool take_answers() {
    uint64_t n = 0;
    [[maybe_unused]] auto got = ::read(wake_fd_, &n, sizeof(n));
    std::vector<std::pair<uint64_t, std::string>> ready;
    {
      std::lock_guard<std::mutex> guard{answers_mtx_};
      if (stopping_)
        return false;
      ready.swap(answers_);
    }
    for (auto& [id, answer] : ready) {
      auto c = connections_.find(id);
      if (c == connections_.end())
        continue;
      answer_with(c->second, std::move(answer));
      if (!advance(c->first, c->second))
        connections_.erase(c);
    }
    return true;
  }

  void answer_with(connection& c, std::string answer) {
    c.out = std::move(answer);
    c.in.clear();
    c.in.shrink_to_fit();
    c.at = stage::writing;
    c.deadline = clock_type::now() + terms_.answer_timeout;
  }

  void accept_all() {
    for (int taken = 0; taken < 64; ++taken) {
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          accept_paused_until_ = clock_type::now() + std::chrono::milliseconds{100};
        return;
      }
      if (connections_.size() >= terms_.max_connections && !crowd_out()) {
        ::close(fd);  // every connection is being answered
        continue;
      }
      int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      auto id = next_id_++;
      auto& c = connections_[id];
      c.socket = std::make_unique<transport::connection>(fd, nullptr);
      c.at = terms_.tls ? stage::tls : stage::reading;
      c.deadline = clock_type::now() + terms_.request_timeout;
      std::tie(c.from.ip, c.from.port) = address_of(peer);
      sockaddr_storage local{};
      len = sizeof(local);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
      std::tie(c.from.local_ip, c.from.local_port) = address_of(local);
      // With TLS, nothing is made until the client sends something.
      if (!terms_.tls && !advance(id, c))
        connections_.erase(id);
    }
  }

  // Closes the oldest connection not yet fully read; false if there is none.
  bool crowd_out() {
    for (auto c = connections_.begin(); c != connections_.end(); ++c)
      if (c->second.at == stage::tls || c->second.at == stage::reading) {
        connections_.erase(c);
        return true;
      }
    return false;
  }

  // Moves `c` on as far as its socket allows; false when it is done with.
  bool advance(uint64_t id, connection& c) {
    auto& s = *c.socket;
    if (c.at == stage::tls) {
      if (!s.ssl()) {
        auto ssl = terms_.tls->session(s.fd());
        if (!ssl)
          return false;
        s.set_ssl(ssl);
      }
      auto r = s.tls_handshake(true);
      if (r == progress::closed)
        return false;
      c.waits = r;
      if (r != progress::done)
        return true;
      c.at = stage::reading;
    }
    if (c.at == stage::reading)
      return read_request(id, c);
    if (c.at == stage::writing) {
      auto r = s.write_from(c.out);
      if (r == progress::closed)
        return false;
      c.waits = r;
      if (r != progress::done)
        return true;
      // The answer is out: say so, then read what is left for a moment.
      if (s.ssl()) {
        transport::no_sigpipe guard;
        SSL_shutdown(s.ssl());
      } else {
        ::shutdown(s.fd(), SHUT_WR);
      }
      c.at = stage::draining;
      c.waits = progress::want_read;
      c.deadline = clock_type::now() + drain_time;
    }
    if (c.at == stage::draining) {
      for (;;) {
        std::string scratch;
        auto r = s.read_into(scratch, 4096);
        c.drained += scratch.size();
        if (r == progress::closed || c.drained > drain_bytes)
          return false;
        if (r != progress::done)
          return true;
      }
    }
    return true;
  }

  bool read_request(uint64_t id, connection& c) {
    for (;;) {
      auto r = c.socket->read_into(c.in, c.in.size() + 4096);
      auto f = frame_request(c.in, terms_.limits, c.from.ip);
      if (f.what == framing::verdict::refused) {
        answer_with(c, response_bytes(f.refused));
        return advance(id, c);
      }
      if (f.what == framing::verdict::complete) {
        c.in.resize(f.length);
        return dispatch(id, c, f.path);
      }
      if (r == progress::closed)
        return false;
      c.waits = r;
      if (r != progress::done)
        return true;
    }
  }

  bool dispatch(uint64_t id, connection& c, const std::string& path) {
    auto& probes = terms_.probe_paths;
    bool probe = std::find(probes.begin(), probes.end(), path) != probes.end();
    c.at = stage::answering;
    if ((probe ? probes_ : api_)->offer({id, std::move(c.in), c.from}))
      return true;
    answer_with(c, response_bytes({503, "busy",
                                   "every thread of the endpoint is answering; try again"}));
    return advance(id, c);
  }

  // A connection past its deadline: a request that has begun is told why,
  // once and without waiting, since its client is slow already.
  bool overdue(connection& c) {
    if (c.at == stage::reading && !c.in.empty()) {
      auto answer = response_bytes({408, "request_timeout",
                                    "the request did not arrive whole within "
                                      + std::to_string(terms_.request_timeout.count()) + " ms"});
      c.socket->write_from(answer);
    }
    return false;
  }

  front_terms terms_;
  responder respond_;
  int listen_fd_;
  int wake_fd_;
  uint16_t port_;
  std::map<uint64_t, connection> connections_;  // by accept order
  uint64_t next_id_ = 1;
  clock_type::time_point accept_paused_until_{};
  std::unique_ptr<lane> api_;
  std::unique_ptr<lane> probes_;
  std::mutex answers_mtx_;
  std::vector<std::pair<uint64_t, std::string>> answers_;
  bool stopping_ = false;
  std::thread thread_;
};

result<std::unique_ptr<front>> front::open(front_terms terms, responder respond) {
  auto ends = transport::listen_with_wake(terms.address, terms.port);
  if (!ends)
    return ends.error();
  auto p = std::make_unique<impl>(std::move(terms), std::move(respond), ends->fd, ends->wake);
  return std::unique_ptr<front>{new front(std::move(p))};
}

front::front(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

front::~front() = default;

uint16_t front::port() const { return impl_->port(); }

}  // namespace ergon::http
