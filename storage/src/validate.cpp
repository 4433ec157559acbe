#include <cmath>
#include <string>

#include "ergon/job.hpp"
#include "ergon/storage/field_rules.hpp"

namespace ergon {
namespace {

using storage::check_label;
using storage::check_not_negative;
using storage::check_not_negative_ms;
using storage::check_positive_ms;
using storage::check_weight;

status check_retries(int32_t n) {
  if (n < 0 || n > max_retries_limit)
    return invalid_field("max_retries", "must be between 0 and "
                                          + std::to_string(max_retries_limit)
                                          + ", got " + std::to_string(n));
  return {};
}

status check_payload(const std::string& payload, size_t limit) {
  if (limit != 0 && payload.size() > limit)
    return invalid_field("payload", "is " + std::to_string(payload.size())
                                      + " bytes; the queue's limit is "
                                      + std::to_string(limit));
  return {};
}

status check_backoff(const backoff_policy& b) {
  if (auto st = check_not_negative_ms("backoff.initial", b.initial_ms); !st)
    return st;
  if (!std::isfinite(b.multiplier) || b.multiplier < 1.0 || b.multiplier > 1000.0)
    return invalid_field("backoff.multiplier", "must be between 1 and 1000, got "
                                                 + std::to_string(b.multiplier));
  if (!std::isfinite(b.randomization) || b.randomization < 0.0 || b.randomization > 10.0)
    return invalid_field("backoff.randomization", "must be between 0 and 10, got "
                                                    + std::to_string(b.randomization));
  return {};
}

// Runs checks in order and returns the first failure.
template <class... Checks>
status first_failure(Checks&&... checks) {
  status result;
  (void) ((result = checks(), result.ok()) && ...);
  return result;
}

}  // namespace

status validate(const job& j, size_t max_payload_bytes) {
  return first_failure(
    [&] { return check_label("type", j.type); },
    [&] { return j.name ? check_label("name", *j.name) : status{}; },
    [&] { return j.group ? check_label("group", *j.group) : status{}; },
    [&] { return check_weight("weight", j.weight); },
    [&] { return j.run_at_ms ? check_not_negative("run_at", *j.run_at_ms) : status{}; },
    [&] { return check_not_negative("delay", j.delay_ms); },
    [&] {
      return j.run_at_ms && j.delay_ms != 0
               ? invalid_field("delay", "set either run_at or delay, not both")
               : status{};
    },
    [&] { return j.ttl_ms ? check_positive_ms("ttl", *j.ttl_ms) : status{}; },
    [&] { return check_retries(j.max_retries); },
    [&] { return check_backoff(j.backoff); },
    [&] { return check_positive_ms("timeout", j.timeout_ms); },
    [&] { return check_positive_ms("heartbeat_increment", j.heartbeat_increment_ms); },
    [&] { return check_payload(j.payload, max_payload_bytes); });
}

status validate(const job_update& u, size_t max_payload_bytes) {
  if (!u.priority && !u.weight && !u.run_at_ms && !u.payload && !u.max_retries
      && !u.timeout_ms)
    return invalid_field("update", "sets no field");
  return first_failure(
    [&] { return u.weight ? check_weight("weight", *u.weight) : status{}; },
    [&] { return u.run_at_ms ? check_not_negative("run_at", *u.run_at_ms) : status{}; },
    [&] { return u.max_retries ? check_retries(*u.max_retries) : status{}; },
    [&] { return u.timeout_ms ? check_positive_ms("timeout", *u.timeout_ms) : status{}; },
    [&] { return u.payload ? check_payload(*u.payload, max_payload_bytes) : status{}; },
    [&] {
      return u.keep_checkpoint && !u.payload
               ? invalid_field("keep_checkpoint", "keeps the checkpoint when the payload "
                                                  "changes; set a payload too")
               : status{};
    });
}

}  // namespace ergon
