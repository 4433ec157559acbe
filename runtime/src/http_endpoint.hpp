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

namespace ergon::runtime {

/// Binds `where` and serves `q` until q stops: the endpoint registers with
/// the queue as one of its front ends. Errors: invalid_argument naming a
/// TLS file (certificate, key, ca_file) that can't be used; io_error naming
/// the address and port that can't be bound; closed if q closed meanwhile.
status serve_http(queue_impl& q, const http_options& where);

}  // namespace ergon::runtime
