// http_endpoint: the queue's HTTP side (options::http): /metrics for
// Prometheus, /healthz, the JSON API under /api/ and the dashboard at /.
// http::front owns the connections; cpp-httplib parses and routes each
// complete request it hands over, and each request is one call into the
// queue, as the blocking API makes it. The queue stops it before it closes.
#pragma once

#include <memory>
#include <string>

#include "runtime_access.hpp"
#include "ergon/options.hpp"
#include "ergon/queue.hpp"

namespace ergon::http {
class front;
}

namespace ergon::runtime {

class routed_server;

class http_endpoint {
 public:
  /// Binds `where` and serves `q` until stop(). Errors: invalid_argument
  /// naming a TLS file (certificate, key, ca_file) that can't be used;
  /// io_error naming the address and port that can't be bound.
  static result<std::unique_ptr<http_endpoint>> start(queue_impl& q, const http_options& where);

  http_endpoint(const http_endpoint&) = delete;
  http_endpoint& operator=(const http_endpoint&) = delete;
  /// Stops (see stop()).
  ~http_endpoint();

  /// Closes the port and every connection, once the requests being
  /// answered are.
  void stop();

  uint16_t port() const noexcept { return port_; }

 private:
  http_endpoint() = default;
  std::unique_ptr<routed_server> server_;
  std::unique_ptr<http::front> front_;
  uint16_t port_ = 0;
};

}  // namespace ergon::runtime
