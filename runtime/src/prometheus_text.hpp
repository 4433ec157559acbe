// prometheus_text: a metrics snapshot in Prometheus' text exposition format
// (version 0.0.4), as /metrics serves it. Names follow Prometheus' rules:
// an ergon_ prefix, base units (seconds), _total for counters, cumulative
// histogram buckets with +Inf.
#pragma once

#include <string>

#include "ergon/scheduling.hpp"

namespace ergon::runtime {

/// The exposition of `m`. Label values are escaped (\\, \", \n).
std::string prometheus_text(const metrics_snapshot& m);

/// A server's role for its queue, as /metrics shows it beside the queue's
/// own families: ergon_role (1 for the role it has, 0 for the other) and,
/// on PostgreSQL, ergon_lease_epoch (the owner's; a standby shows the epoch
/// it saw) and a standby server's ergon_takeovers_total and
/// ergon_step_downs_total.
struct role_metrics {
  bool owner = true;
  int64_t epoch = 0;  ///< 0: no lease (SQLite)
  bool standby_server = false;  ///< counts follow
  int64_t takeovers = 0;
  int64_t step_downs = 0;
};
std::string prometheus_text(const role_metrics& r);

}  // namespace ergon::runtime
