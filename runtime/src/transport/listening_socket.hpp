// A listening TCP socket, non-blocking, for the queue's port and the HTTP
// endpoint: both run their own accept loop.
#pragma once

#include <cstdint>
#include <string>

#include "ergon/error.hpp"

namespace ergon::transport {

/// "address:port", with an IPv6 address in brackets.
std::string where(const std::string& bind, uint16_t port);

/// A socket listening on `bind`:`port` (0: a free port), non-blocking and
/// close-on-exec. Errors: io_error naming the address, when it does not
/// resolve or can't be bound.
result<int> listen_on(const std::string& bind, uint16_t port);

/// The port `fd` is bound to.
uint16_t local_port(int fd);

/// A listening socket and an eventfd that wakes its accept loop.
struct listening_ends {
  int fd = -1;
  int wake = -1;
};

/// listen_on, and an eventfd beside it. Errors: those of listen_on, and
/// io_error when no eventfd can be made (nothing is left open then).
result<listening_ends> listen_with_wake(const std::string& bind, uint16_t port);

}  // namespace ergon::transport
