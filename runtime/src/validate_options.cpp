#include "validate_options.hpp"

#include <cmath>
#include <cstdio>
#include <set>

#include "http/request_head.hpp"
#include "private_files.hpp"

#include "ergon/job.hpp"
#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/schema.hpp"

namespace ergon::runtime {
namespace {

using storage::check_label_size;
using storage::check_not_negative;
using storage::check_not_negative_ms;
using storage::check_positive_ms;
using storage::check_prefetch;
using storage::check_weight;

// Counts and caps: a limit of 0 would let nothing through.
template <class Int>
status check_at_least_one(const std::string& field, Int value) {
  if (value < 1)
    return invalid_field(field, "must be >= 1");
  return {};
}

// "scheduling.groups[a].weight", "scheduling.type_max_running[t]".
std::string entry_field(const char* map, const std::string& key, const char* member = nullptr) {
  auto field = std::string{"scheduling."} + map + "[" + key + "]";
  return member ? field + "." + member : field;
}

status validate(const rate_limit& r, const char* map, const std::string& key) {
  if (!(r.per_second > 0) || !std::isfinite(r.per_second))
    return invalid_field(entry_field(map, key, "per_second"), "must be finite and > 0");
  return check_at_least_one(entry_field(map, key, "burst"), r.burst);
}

}  // namespace

status validate_path(const std::string& path) {
  if (storage::names_postgres(path))
    return storage::parse_pg_uri(path).error();
  if (storage::names_private_database(path))
    return invalid_field("path", "'" + path + "' names no file; ergon needs a database file "
                                  "(use a temporary directory for a throwaway queue)");
  return {};
}

status validate(const options& o) {
  if (auto st = check_not_negative_ms("busy_timeout", o.busy_timeout.count()); !st)
    return st;
  if (o.max_database_bytes < 0)
    return invalid_field("max_database_bytes", "must be >= 0 (0: no limit), got "
                                                 + std::to_string(o.max_database_bytes));
  if (auto st = check_at_least_one("writer_batch_limit", o.writer_batch_limit); !st)
    return st;
  if (o.writer_idle_spin.count() < 0 || o.writer_idle_spin > std::chrono::seconds(1))
    return invalid_field("writer_idle_spin", "must be between 0 and 1 s, got "
                                               + std::to_string(o.writer_idle_spin.count())
                                               + " us");
  if (auto st = check_not_negative("cache_kib", o.cache_kib); !st)
    return st;
  for (auto [field, ms] : {std::pair{"lease_time", o.lease_time},
                           std::pair{"commit_outcome_wait", o.commit_outcome_wait}})
    if (ms < std::chrono::seconds(1) || ms > std::chrono::hours(1))
      return invalid_field(field, "must be between 1 s and 1 h, got " + std::to_string(ms.count())
                                    + " ms");
  if (o.idempotency_window < std::chrono::seconds(1)
      || o.idempotency_window > std::chrono::hours(24 * 30))
    return invalid_field("idempotency_window",
                         "must be between 1 s and 30 days, got "
                           + std::to_string(o.idempotency_window.count()) + " ms");
  for (auto& [type, policy] : o.retry_policies) {
    job j;
    j.type = type;
    j.backoff = policy;
    if (auto st = validate(j); !st)
      return invalid_field("retry_policies." + type + "." + st.field(), st.message());
  }
  if (o.max_snoozes < 0 || o.max_snoozes > 1'000'000)
    return invalid_field("max_snoozes", "must be between 0 and 1,000,000, got "
                                          + std::to_string(o.max_snoozes));
  if (o.inbox_sweep < std::chrono::milliseconds(10) || o.inbox_sweep > std::chrono::hours(1))
    return invalid_field("inbox_sweep", "must be between 10 ms and 1 h, got "
                                          + std::to_string(o.inbox_sweep.count()) + " ms");
  if (o.remote_grace.count() < 0 || o.remote_grace > std::chrono::hours(1))
    return invalid_field("remote_grace", "must be between 0 and 1 h, got "
                                           + std::to_string(o.remote_grace.count()) + " ms");
  if (auto st = check_at_least_one("scheduler.threads", o.scheduler.threads); !st)
    return st;
  if ((o.file_mode & 0600u) != 0600u || (o.file_mode & ~0666u) != 0) {
    char text[8];
    std::snprintf(text, sizeof(text), "%04o", o.file_mode & 07777u);
    return invalid_field("file_mode", std::string{"must include 0600 and nothing beyond 0666, got "}
                                        + (o.file_mode > 07777u ? std::to_string(o.file_mode)
                                                                 : std::string{text}));
  }
  // Times are ms since 1970 and never negative: a job due before then
  // would never be claimed.
  if (o.clock && o.clock->now_ms() < 0)
    return invalid_field("clock", "reads " + std::to_string(o.clock->now_ms())
                                    + " ms, before 1970; ergon's times start there");
  if (o.http && o.http->address.empty())
    return invalid_field("http.address", "is empty; 127.0.0.1 takes this machine's requests");
  if (o.http && !o.http->tls && !o.http->insecure_plaintext
      && !http::loopback_address(o.http->address) && o.http->address != "localhost")
    return invalid_field("http.tls", "is not set, and " + o.http->address
                                       + " is not a loopback address: the secret and job data "
                                         "would cross the network in clear text; set tls, or "
                                         "insecure_plaintext on a trusted network");
  if (o.listen) {
    if (o.listen->address.empty())
      return invalid_field("listen.address", "is empty; 127.0.0.1 takes this machine's "
                                             "connections, 0.0.0.0 every interface's");
    if (!o.listen->creds.secret.empty())
      if (auto st = validate_secret(o.listen->creds.secret); !st)
        return st;
    if (auto st = validate_roles(*o.listen); !st)
      return st;
    if (auto st = validate_peer_timeout("listen.peer_timeout", o.listen->peer_timeout); !st)
      return st;
    auto handshake = o.listen->handshake_timeout;
    if (handshake < std::chrono::milliseconds{100} || handshake > std::chrono::minutes{10})
      return invalid_field("listen.handshake_timeout",
                           "must be 100 ms to 10 min, got "
                             + std::to_string(handshake.count()) + " ms");
    auto limit = o.listen->max_message_bytes;
    if (limit < min_message_limit || limit > max_message_limit)
      return invalid_field("listen.max_message_bytes",
                           "must be " + std::to_string(min_message_limit) + " to "
                             + std::to_string(max_message_limit) + " bytes, got "
                             + std::to_string(limit));
  }
  if (auto st = validate(o.retention); !st)
    return st;
  if (o.bulk.batch < 1 || o.bulk.batch > 100'000)
    return invalid_field("bulk.batch", "must be 1 to 100000, got " + std::to_string(o.bulk.batch));
  if (!(o.bulk.writer_share > 0.0 && o.bulk.writer_share <= 1.0))
    return invalid_field("bulk.writer_share", "must be over 0 and at most 1, got "
                                                + std::to_string(o.bulk.writer_share));
  return validate(o.scheduling);
}

status validate(const retention_options& r) {
  for (auto [field, keep] : {std::pair{"retention.succeeded", r.succeeded},
                             std::pair{"retention.failed", r.failed},
                             std::pair{"retention.cancelled", r.cancelled},
                             std::pair{"retention.expired", r.expired}})
    if (keep)
      if (auto st = check_positive_ms(field, keep->count()); !st)
        return st;
  if (auto st = check_positive_ms("retention.interval", r.interval.count()); !st)
    return st;
  if (r.batch < 1 || r.batch > 100'000)
    return invalid_field("retention.batch",
                         "must be 1 to 100000, got " + std::to_string(r.batch));
  if (!(r.writer_share > 0.0 && r.writer_share <= 1.0))
    return invalid_field("retention.writer_share",
                         "must be over 0 and at most 1, got " + std::to_string(r.writer_share));
  return {};
}

status validate_peer_timeout(const std::string& field, std::chrono::milliseconds timeout) {
  using namespace std::chrono_literals;
  auto ms = std::to_string(timeout.count()) + " ms";
  if (timeout < 0ms)
    return invalid_field(field, "must be >= 0 (0: off), got " + ms);
  if (timeout > 0ms && timeout < 100ms)
    return invalid_field(field, "must be 0 (off) or at least 100 ms, so heartbeats stay a "
                                "small part of the traffic; got " + ms);
  if (timeout > std::chrono::hours(24))
    return invalid_field(field, "must be at most a day, got " + ms);
  return {};
}

namespace {

// A fraction in (0, 1], named in errors.
status check_fraction(const std::string& field, double x) {
  if (!(x > 0.0 && x <= 1.0))
    return invalid_field(field, "must be above 0 and at most 1, got " + std::to_string(x));
  return {};
}

status validate(const admission_options& a) {
  std::set<std::string> names;
  for (size_t i = 0; i < a.sources.size(); ++i) {
    auto field = "scheduling.admission.sources[" + std::to_string(i) + "]";
    auto& source = a.sources[i];
    if (source.name.empty())
      return invalid_field(field + ".name", "is empty; metrics and logs name each source");
    if (!names.insert(source.name).second)
      return invalid_field(field + ".name", "'" + source.name + "' names two sources");
    if (!source.read)
      return invalid_field(field + ".read", "is empty for source '" + source.name + "'");
  }
  // Pressure is at most 1, so a step must start below it to ever apply.
  for (size_t i = 0; i < a.throttle.steps.size(); ++i) {
    auto above = a.throttle.steps[i].above;
    if (!(above >= 0.0 && above < 1.0))
      return invalid_field("scheduling.admission.throttle.steps[" + std::to_string(i) + "].above",
                           "must be at least 0 and below 1 (pressure never passes 1), got "
                             + std::to_string(above));
  }
  if (auto st = check_positive_ms("scheduling.admission.recheck_interval",
                                  a.recheck_interval.count());
      !st)
    return st;
  if (!a.io_budget)
    return {};
  auto& b = *a.io_budget;
  if (auto st = check_positive_ms("scheduling.admission.io_budget.window", b.window.count()); !st)
    return st;
  if (auto st = check_positive_ms("scheduling.admission.io_budget.sample_interval",
                                  b.sample_interval.count());
      !st)
    return st;
  if (auto st = check_fraction("scheduling.admission.io_budget.share", b.share); !st)
    return st;
  return check_fraction("scheduling.admission.io_budget.smoothing", b.smoothing);
}

}  // namespace

status validate(const scheduling_options& s) {
  if (s.admission)
    if (auto st = validate(*s.admission); !st)
      return st;
  if (s.aging) {
    if (auto st = check_not_negative_ms("scheduling.aging.grace_period",
                                        s.aging->grace_period.count());
        !st)
      return st;
    if (auto st = check_positive_ms("scheduling.aging.interval", s.aging->interval.count()); !st)
      return st;
  }
  if (auto st = check_weight("scheduling.default_group_weight", s.default_group_weight); !st)
    return st;
  for (auto& [group, g] : s.groups) {
    if (g.weight)
      if (auto st = check_weight(entry_field("groups", group, "weight"), *g.weight); !st)
        return st;
    if (auto st = check_not_negative(entry_field("groups", group, "min_slots"), g.min_slots); !st)
      return st;
    if (g.max_running)
      if (auto st = check_at_least_one(entry_field("groups", group, "max_running"),
                                       *g.max_running);
          !st)
        return st;
  }
  for (auto& [group, r] : s.group_rate_limits)
    if (auto st = validate(r, "group_rate_limits", group); !st)
      return st;
  for (auto& [type, r] : s.type_rate_limits)
    if (auto st = validate(r, "type_rate_limits", type); !st)
      return st;
  for (auto& [type, cap] : s.type_max_running)
    if (auto st = check_at_least_one(entry_field("type_max_running", type), cap); !st)
      return st;
  for (auto& [type, b] : s.breakers) {
    if (!storage::check_label("scheduling.breakers", type))
      return invalid_field("scheduling.breakers", "job type '" + type + "' must be 1 to "
                                                    + std::to_string(max_type_bytes) + " bytes");
    if (b.failures < 1 || b.failures > 1'000'000)
      return invalid_field(entry_field("breakers", type, "failures"),
                           "must be 1 to 1000000, got " + std::to_string(b.failures));
    if (auto st = check_positive_ms(entry_field("breakers", type, "window"), b.window.count());
        !st)
      return st;
    if (auto st = check_positive_ms(entry_field("breakers", type, "cool_down"),
                                    b.cool_down.count());
        !st)
      return st;
  }
  return {};
}

status validate(const worker_options& o) {
  // The queue records it with each attempt (worker_identity::name).
  if (auto st = storage::check_label_size("name", o.name); !st)
    return st;
  if (o.runners.empty())
    return invalid_field("runners", "a worker needs at least one job type to run");
  for (auto& [type, handler] : o.runners) {
    // The rule is the job's; the message names the runner's type.
    if (!storage::check_label("runners", type))
      return invalid_field("runners", "job type '" + type + "' must be 1 to "
                                        + std::to_string(max_type_bytes) + " bytes");
    if (!handler)
      return invalid_field("runners", "the handler for '" + type + "' is empty");
  }
  if (auto st = check_weight("max_concurrency", o.max_concurrency); !st)
    return st;
  if (o.min_concurrency && (*o.min_concurrency < 1 || *o.min_concurrency > o.max_concurrency))
    return invalid_field("min_concurrency", "must be between 1 and max_concurrency ("
                                              + std::to_string(o.max_concurrency) + "), got "
                                              + std::to_string(*o.min_concurrency));
  if (auto st = check_prefetch("prefetch", o.prefetch); !st)
    return st;
  if (o.log_lines < 0 || o.log_lines > storage::max_log_lines)
    return invalid_field("log_lines", "must be 0 to " + std::to_string(storage::max_log_lines)
                                        + ", got " + std::to_string(o.log_lines));
  if (o.log_bytes < 0 || o.log_bytes > storage::max_log_bytes)
    return invalid_field("log_bytes", "must be 0 to " + std::to_string(storage::max_log_bytes)
                                        + " (1 MiB), got " + std::to_string(o.log_bytes));
  if (o.progress_interval < std::chrono::milliseconds::zero()
      || o.progress_interval > std::chrono::hours{1})
    return invalid_field("progress_interval",
                         "must be 0 to 1 hour, got " + std::to_string(o.progress_interval.count())
                           + " ms");
  if (o.auto_heartbeat)
    return check_positive_ms("auto_heartbeat", o.auto_heartbeat->count());
  return {};
}

status validate_name(const char* field, const std::string& name) {
  return check_label_size(field, name);
}

status validate_group_weight(const std::string& group, int32_t weight) {
  if (auto st = validate_name("group", group); !st)
    return st;
  return check_weight("weight", weight);
}

status validate_roles(const listen_options& l) {
  const std::string* seen[] = {&l.creds.secret, nullptr, nullptr};
  size_t n = 1;
  for (auto [field, secret] : {std::pair{"listen.worker_secret", &l.worker_secret},
                               std::pair{"listen.client_secret", &l.client_secret}}) {
    if (secret->empty())
      continue;
    if (l.creds.secret.empty())
      return invalid_field(field, "needs listen.creds.secret, the operator's: without it "
                                  "every peer may do everything");
    if (auto st = validate_secret(*secret); !st)
      return invalid_field(field, st.message());
    for (size_t i = 0; i < n; ++i)
      if (*seen[i] == *secret)
        return invalid_field(field, "is the same as another role's secret: a peer proving it "
                                    "would get either role");
    seen[n++] = secret;
  }
  for (auto& [name, granted] : l.certificate_roles) {
    if (auto st = storage::check_label("listen.certificate_roles", name); !st)
      return st;
    if (granted != role::worker && granted != role::client && granted != role::operator_)
      return invalid_field("listen.certificate_roles", "'" + name + "' has no such role");
  }
  return {};
}

status validate_settings(const char* field, const std::string& name, const settings_change& c) {
  bool group = std::string{field} == "group";
  if (std::string{field} == "worker") {
    if (auto st = storage::check_label(field, name); !st)
      return st;
    if (c.weight || c.min_slots || c.rate)
      return invalid_field(c.weight ? "weight" : c.min_slots ? "min_slots" : "rate",
                           "a worker has only max_running (its max_concurrency)");
    if (!c.max_running)
      return invalid_field("max_running", "is required: the workers' max_concurrency");
    return check_weight("max_running", *c.max_running);
  }
  // "" is the group of jobs without one; no job has the type "".
  if (auto st = group ? validate_name(field, name) : storage::check_label(field, name); !st)
    return st;
  if (!group && (c.weight || c.min_slots))
    return invalid_field(c.weight ? "weight" : "min_slots", "only a group has one, not a type");
  if (!c.weight && !c.min_slots && !c.max_running && !c.rate)
    return invalid_field("settings", "change nothing: set at least one field");
  if (c.weight)
    if (auto st = check_weight("weight", *c.weight); !st)
      return st;
  // A slot count or burst past any capacity a queue has is a typo.
  constexpr int64_t most = 1'000'000;
  auto count = [&](const char* what, int64_t v, int64_t least) -> status {
    if (v < least || v > most)
      return invalid_field(what, "must be " + std::to_string(least) + " to 1000000, got "
                                   + std::to_string(v));
    return {};
  };
  if (c.min_slots)
    if (auto st = count("min_slots", *c.min_slots, 0); !st)
      return st;
  if (c.max_running)
    if (auto st = count("max_running", *c.max_running, 0); !st)
      return st;
  if (c.rate) {
    auto per_second = c.rate->per_second;
    if (!std::isfinite(per_second) || per_second < 0 || per_second > most)
      return invalid_field("rate.per_second", "must be 0 (no limit) to 1000000, got "
                                                + std::to_string(per_second));
    if (auto st = count("rate.burst", c.rate->burst, 1); !st)
      return st;
  }
  return {};
}

status validate_pause(const char* field, const std::string& name,
                      std::optional<std::chrono::milliseconds> duration) {
  if (auto st = validate_name(field, name); !st)
    return st;
  if (duration)
    return check_positive_ms("duration", duration->count());
  return {};
}

}  // namespace ergon::runtime

namespace ergon {

status validate(const options& opts) {
  return runtime::validate(opts);
}

}  // namespace ergon
