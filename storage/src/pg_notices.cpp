#include "ergon/storage/pg_notices.hpp"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ergon::storage {

result<std::unique_ptr<pg_notices>> pg_notices::open(const pg_options& opts,
                                                     const std::string& channel) {
  auto session = pg_db::open(opts);
  if (!session)
    return session.error();
  auto listen = "LISTEN " + channel;
  if (auto st = (*session)->exec(listen.c_str()); !st)
    return st;
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0)
    return status{error::io_error, std::string{"eventfd: "} + std::strerror(errno)};
  return std::unique_ptr<pg_notices>{new pg_notices(std::move(*session), fd)};
}

pg_notices::pg_notices(std::unique_ptr<pg_db> session, int wake_fd) noexcept
    : session_(std::move(session)), wake_fd_(wake_fd) {}

pg_notices::~pg_notices() {
  ::close(wake_fd_);
}

void pg_notices::interrupt() noexcept {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

result<std::vector<std::string>> pg_notices::wait(std::chrono::milliseconds timeout) {
  auto* conn = session_->raw();
  auto lost = [&] {
    return status{error::unreachable, session_->location() + ": the listening session was lost: "
                                        + PQerrorMessage(conn)};
  };
  std::vector<std::string> out;
  auto take = [&] {
    while (PGnotify* n = PQnotifies(conn)) {
      out.emplace_back(n->extra != nullptr ? n->extra : "");
      PQfreemem(n);
    }
  };
  take();
  if (!out.empty())
    return out;
  pollfd fds[2] = {{PQsocket(conn), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  if (fds[0].fd < 0)
    return lost();
  int ready = ::poll(fds, 2, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR)
    return status{error::io_error, std::string{"poll: "} + std::strerror(errno)};
  if (ready <= 0 || (fds[1].revents & POLLIN) != 0)
    return out;
  if (PQconsumeInput(conn) == 0 || PQstatus(conn) == CONNECTION_BAD)
    return lost();
  take();
  return out;
}

}  // namespace ergon::storage
