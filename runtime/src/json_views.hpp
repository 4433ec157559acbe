// json_views: the public types as JSON, for ergonctl --json and the HTTP
// API. Internal to ergon; one shape per type, so both tools say the same.
//
// Times are ms since the epoch ("*_ms"); job ids their canonical text.
// Payloads, checkpoints and results are bytes: shown decoded when they are
// one msgpack value, else as base64, always with their size.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/inspector.hpp"
#include "ergon/job_info.hpp"
#include "ergon/listing.hpp"
#include "ergon/recurring.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/worker.hpp"

namespace ergon::json_views {

using json = nlohmann::json;

/// "worker" is null for an attempt recorded before workers were.
json of(const attempt_info& a);
json of(const log_line& l);
json of(const worker_identity& w);
json of(const worker_info& w);
/// Without `with_bytes`, payload, checkpoint and result give only sizes.
json of(const job_info& j, bool with_bytes = true);
json of(const job_page& p, bool with_bytes = false);
json of(const status_counts& c);
json of(const histogram& h);
json of(const settings_change& c);
json of(const control_info& c);
json of(const metrics_snapshot& m);
json of(const recurring_info& r);
json of(const retry_summary& s);
json of(const cancel_summary& s);
json of(const owner_info& o);
/// {"error": code, "message": ..., "field": ...}.
json of(const status& st);

/// An array of of(x) for each x.
template <class T>
json of_each(const std::vector<T>& xs) {
  json out = json::array();
  for (auto& x : xs)
    out.push_back(of(x));
  return out;
}

/// Bytes as JSON: {"size": n, "msgpack": value} or {"size": n, "base64": text}.
json bytes(const std::string& b);

/// The status named `name` ("pending", ...), or empty.
std::optional<job_status> parse_status(const std::string& name);

}  // namespace ergon::json_views
