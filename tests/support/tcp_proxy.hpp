// A TCP proxy on 127.0.0.1 in front of a PostgreSQL server, that can cut a
// connection at the moment a test needs: when the client sends COMMIT, or
// when the server answers it, can refuse new connections, and can stall:
// a server that went silent, whose kernel still takes the bytes. Test-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

namespace ergon::test {

class tcp_proxy {
 public:
  enum class cut : int {
    none,
    before_commit,  ///< the client's COMMIT never reaches the server
    after_commit,   ///< the server commits; its answer never reaches the client
  };

  explicit tcp_proxy(int target_port) : target_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
        || ::listen(listener_, 16) != 0
        || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("tcp_proxy: no listening socket");
    port_ = ntohs(a.sin_port);
    if (::pipe(wake_) != 0)
      throw std::runtime_error("tcp_proxy: pipe failed");
    thread_ = std::thread([this] { run(); });
  }

  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  ~tcp_proxy() {
    stop_ = true;
    (void)::write(wake_[1], "x", 1);
    thread_.join();
    for (auto& p : pairs_) {
      ::close(p.client);
      ::close(p.server);
    }
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  int port() const noexcept { return port_; }

  /// Cuts the next connection that sends COMMIT, once.
  void cut_next(cut c) { next_cut_ = static_cast<int>(c); }
  /// Closes new connections at once while set.
  void refuse(bool on) { refusing_ = on; }
  /// While set, moves no byte and accepts no connection (they wait in the
  /// backlog): the server seems to hang.
  void stall(bool on) {
    stalled_ = on;
    (void)::write(wake_[1], "x", 1);
  }
  /// How many connections were cut at a COMMIT.
  int cuts() const noexcept { return cuts_.load(); }

 private:
  struct pair {
    int client;
    int server;
    bool commit_sent = false;
  };

  int connect_target() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_));
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
      return fd;
    if (fd >= 0)
      ::close(fd);
    return -1;
  }

  static bool has_commit(const char* data, size_t n) {
    static constexpr std::string_view commit{"COMMIT\0", 7};
    return std::string_view{data, n}.find(commit) != std::string_view::npos;
  }

  void run() {
    char buf[65536];
    while (!stop_) {
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      if (stalled_) {
        if (::poll(fds.data(), 1, -1) > 0)
          (void)::read(wake_[0], buf, sizeof buf);
        continue;
      }
      for (auto& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0)
        continue;
      if (fds[0].revents & POLLIN)
        (void)::read(wake_[0], buf, sizeof buf);
      if (fds[1].revents & POLLIN) {
        int c = ::accept(listener_, nullptr, nullptr);
        int s = c >= 0 && !refusing_ ? connect_target() : -1;
        if (s < 0) {
          if (c >= 0)
            ::close(c);
        } else {
          pairs_.push_back({c, s});
        }
      }
      std::vector<size_t> closing;
      for (size_t i = 0; i < fds.size() - 2 && i / 2 < pairs_.size(); ++i) {
        if (!(fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        auto& p = pairs_[i / 2];
        bool from_client = i % 2 == 0;
        auto n = ::read(from_client ? p.client : p.server, buf, sizeof buf);
        if (n <= 0) {
          closing.push_back(i / 2);
          continue;
        }
        auto size = static_cast<size_t>(n);
        if (from_client && has_commit(buf, size)) {
          int c = next_cut_.exchange(static_cast<int>(cut::none));
          if (c == static_cast<int>(cut::before_commit)) {
            ++cuts_;
            closing.push_back(i / 2);
            continue;
          }
          p.commit_sent = c == static_cast<int>(cut::after_commit);
        } else if (!from_client && p.commit_sent) {
          ++cuts_;
          closing.push_back(i / 2);
          continue;
        }
        (void)::write(from_client ? p.server : p.client, buf, size);
      }
      for (auto k = closing.rbegin(); k != closing.rend(); ++k) {
        if (*k >= pairs_.size() || (k != closing.rbegin() && *k == *(k - 1)))
          continue;
        ::close(pairs_[*k].client);
        ::close(pairs_[*k].server);
        pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(*k));
      }
    }
  }

  int target_;
  int port_ = 0;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int> next_cut_{static_cast<int>(cut::none)};
  std::atomic<bool> refusing_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<int> cuts_{0};
  std::vector<pair> pairs_;
  std::thread thread_;
};

}  // namespace ergon::test
