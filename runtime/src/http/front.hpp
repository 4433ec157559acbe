// The HTTP endpoint's connections. One thread accepts them and does all of
// their socket work without blocking: TLS, reading each request whole
// under one deadline, and writing its answer. Lanes of worker threads only
// turn a complete request into an answer (httplib parses and routes it).
// So a silent or slow client holds a few kilobytes and never a thread, a
// body over the limit is refused before it is read, and /healthz and
// /metrics have a lane of their own that a slow API call can't take.
// Every connection carries one request, then closes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "http/request_head.hpp"
#include "transport/tls_context.hpp"

namespace ergon::http {

/// The two ends of a request's connection, as addresses and ports.
struct peer_address {
  std::string ip;
  int port = 0;
  std::string local_ip;
  int local_port = 0;
};

/// Turns one complete request (its head and body as received) into the
/// bytes of its answer. Runs on a lane's thread, several at once; must not
/// throw.
using responder = std::function<std::string(std::string request, const peer_address& from)>;

struct front_terms {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  ///< 0: a free one
  /// Serves HTTPS when set; null: plain HTTP.
  std::shared_ptr<transport::tls_context> tls;
  request_limits limits;
  /// From accept to a request's last byte, TLS included. A connection still
  /// short of it is answered 408 (or closed, if it sent nothing) and closed.
  std::chrono::milliseconds request_timeout{5'000};
  /// From an answer being ready to its last byte written.
  std::chrono::milliseconds answer_timeout{5'000};
  /// Open connections. Past it, the oldest one not yet fully read is closed.
  size_t max_connections = 512;
  size_t api_threads = 4;
  size_t probe_threads = 2;
  /// Paths answered on the probes' lane.
  std::vector<std::string> probe_paths{"/healthz", "/metrics"};
  /// Complete requests waiting for a lane's thread; past it, 503.
  size_t max_waiting = 64;
};

class front {
 public:
  /// Listens on terms.address:terms.port and answers with `respond`.
  /// Errors: io_error naming the address when it can't be bound.
  static result<std::unique_ptr<front>> open(front_terms terms, responder respond);

  /// Closes the port and every connection, after the lanes finish the
  /// requests they are answering.
  ~front();

  uint16_t port() const;

  class impl;

 private:
  explicit front(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace ergon::http
