#include "transport/listening_socket.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ergon::transport {

std::string where(const std::string& bind, uint16_t port) {
  return (bind.find(':') != std::string::npos ? "[" + bind + "]" : bind) + ":"
         + std::to_string(port);
}

result<int> listen_on(const std::string& bind, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (auto rc = ::getaddrinfo(bind.c_str(), service.c_str(), &hints, &found); rc != 0)
    return status{error::io_error, "cannot listen on " + where(bind, port) + ": "
                                     + ::gai_strerror(rc)};
  std::string why = "no address";
  int fd = -1;
  for (auto* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0)
    return status{error::io_error, "cannot listen on " + where(bind, port) + ": " + why};
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
}

result<listening_ends> listen_with_wake(const std::string& bind, uint16_t port) {
  auto fd = listen_on(bind, port);
  if (!fd)
    return fd.error();
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    auto why = std::string{std::strerror(errno)};
    ::close(*fd);
    return status{error::io_error,
                  "cannot listen on " + where(bind, port) + ": no eventfd: " + why};
  }
  return listening_ends{*fd, wake};
}

}  // namespace ergon::transport
