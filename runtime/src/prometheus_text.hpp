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

}  // namespace ergon::runtime
