// http_endpoint: the queue's HTTP side (options::http): /metrics for
// Prometheus, /healthz, the JSON API under /api/ and the dashboard at /.
// http::front owns the connections; cpp-httplib parses and routes each
// complete request it hands over, and each request is one call into the
// queue, as the blocking API makes it. The queue stops it before it closes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime_access.hpp"
#include "ergon/options.hpp"
#include "ergon/queue.hpp"
#include "front_end.hpp"

namespace ergon::runtime {

/// Binds `where` and serves `q` until q stops: the endpoint registers with
/// the queue as one of its front ends. Errors: invalid_argument naming a
/// TLS file (certificate, key, ca_file) that can't be used; io_error naming
/// the address and port that can't be bound; closed if q closed meanwhile.
status serve_http(queue_impl& q, const http_options& where);

/// What a standby server's HTTP side shows while it waits.
struct standby_status {
  /// The owner it waits for, from its last read of the lease.
  bool owner_known = false;
  std::string owner_host;
  int64_t owner_pid = 0;
  int64_t epoch = 0;
  int64_t lease_ms_left = 0;
  /// Why its last read of the lease failed; empty if it did not.
  std::string read_error;
  int64_t takeovers = 0;
  int64_t step_downs = 0;
};

/// Binds `where` and serves a standby's pages until the front end returned
/// stops: /healthz answers 503 with role "standby" and the owner (so a load
/// balancer sends nothing here), /livez 200, /metrics the role families,
/// and every other page 503 naming the owner. `now` is called per request,
/// on the endpoint's threads. Errors: as serve_http's.
result<std::unique_ptr<front_end>> serve_standby_http(const http_options& where,
                                                      std::function<standby_status()> now);

}  // namespace ergon::runtime
