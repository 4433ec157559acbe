// http_endpoint: the queue's HTTP side (options::http): /metrics for
// Prometheus, /healthz, the JSON API under /api/ and the dashboard at /.
// Runs cpp-httplib on threads of its own; each request is one call into the
// queue, as the blocking API makes it. The queue stops it before it closes.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "ergon/options.hpp"
#include "ergon/queue.hpp"

namespace httplib {
class Server;
}

namespace ergon::runtime {

class http_endpoint {
 public:
  /// Binds `where` and serves `q` until stop(). Errors: io_error naming
  /// the address and port that can't be bound.
  static result<std::unique_ptr<http_endpoint>> start(queue::impl& q, const http_options& where);

  http_endpoint(const http_endpoint&) = delete;
  http_endpoint& operator=(const http_endpoint&) = delete;
  /// Stops (see stop()).
  ~http_endpoint();

  /// Closes the port and waits for requests in flight to be answered.
  void stop();

  uint16_t port() const noexcept { return port_; }

 private:
  http_endpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace ergon::runtime
