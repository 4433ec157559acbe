#include <cmath>
#include <string>

#include "ergon/job.hpp"
#include "ergon/listing.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/schedule.hpp"

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
  return storage::check_payload_size("payload", payload.size(), limit);
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
  if (static_cast<uint8_t>(b.kind) > static_cast<uint8_t>(backoff_kind::linear))
    return invalid_field("backoff.kind", "must be exponential, constant or linear, got "
                                           + std::to_string(static_cast<int>(b.kind)));
  if (auto st = check_not_negative_ms("backoff.max", b.max_ms); !st)
    return st;
  return {};
}

// Runs checks in order and returns the first failure. A passing check's
// status is dropped, not assigned: every submit runs about 20 of them.
template <class... Checks>
status first_failure(Checks&&... checks) {
  status failure;
  auto passes = [&](auto& check) {
    auto st = check();
    if (st)
      return true;
    failure = std::move(st);
    return false;
  };
  (void) (passes(checks) && ...);
  return failure;
}

// The template's failure with its field under "job.".
status in_template(const status& st) {
  auto prefix = "field '" + st.field() + "': ";
  auto what = st.message().rfind(prefix, 0) == 0 ? st.message().substr(prefix.size())
                                                 : st.message();
  return invalid_field("job." + st.field(), what);
}

status check_dependencies(const job& j) {
  if (static_cast<uint8_t>(j.on_dependency_failure) > static_cast<uint8_t>(dependency_failure::run))
    return invalid_field("on_dependency_failure",
                         "must be cancel, fail or run, got "
                           + std::to_string(static_cast<int>(j.on_dependency_failure)));
  auto count = j.depends_on.size() + j.depends_on_batch.size();
  if (count > max_dependencies)
    return invalid_field(j.depends_on.size() > max_dependencies ? "depends_on" : "depends_on_batch",
                         "a job may depend on at most " + std::to_string(max_dependencies)
                           + " jobs, got " + std::to_string(count));
  for (auto& id : j.depends_on)
    if (id.is_nil())
      return invalid_field("depends_on", "names the nil id");
  return {};
}

}  // namespace

// Declared I/O: 0 to 1 TiB, so that the running total of millions of jobs
// cannot overflow.
status check_io(const char* field, int64_t bytes) {
  constexpr int64_t max_io = int64_t{1} << 40;
  if (bytes < 0 || bytes > max_io)
    return invalid_field(field, "must be 0 to " + std::to_string(max_io) + " bytes (1 TiB), got "
                                  + std::to_string(bytes));
  return {};
}

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
    [&] {
      if (static_cast<uint8_t>(j.ttl_from) > static_cast<uint8_t>(ttl_start::first_attempt))
        return invalid_field("ttl_from", "must be run_at or first_attempt, got "
                                           + std::to_string(static_cast<int>(j.ttl_from)));
      return j.ttl_from == ttl_start::first_attempt && !j.ttl_ms
               ? invalid_field("ttl_from", "counts a ttl from the first attempt; set ttl too")
               : status{};
    },
    [&] { return check_retries(j.max_retries); },
    [&] { return check_backoff(j.backoff); },
    [&] { return check_positive_ms("timeout", j.timeout_ms); },
    [&] { return check_positive_ms("heartbeat_increment", j.heartbeat_increment_ms); },
    [&] { return check_payload(j.payload, max_payload_bytes); },
    [&] { return j.unique_key ? storage::check_key("unique_key", *j.unique_key) : status{}; },
    [&] {
      if (static_cast<uint8_t>(j.on_duplicate) > static_cast<uint8_t>(unique_policy::requeue))
        return invalid_field("on_duplicate", "must be skip, replace, reject or requeue, got "
                                               + std::to_string(static_cast<int>(j.on_duplicate)));
      if (j.on_duplicate == unique_policy::requeue
          && (!j.depends_on.empty() || !j.depends_on_batch.empty()))
        return invalid_field("on_duplicate", "requeue takes no depends_on: a requeued job "
                                             "waits for the key's running holder instead");
      return status{};
    },
    [&] {
      if (!j.raise_holder_priority)
        return status{};
      if (!j.unique_key)
        return invalid_field("raise_holder_priority", "needs a unique_key");
      return j.on_duplicate == unique_policy::skip || j.on_duplicate == unique_policy::requeue
               ? status{}
               : invalid_field("raise_holder_priority",
                               std::string{"works with on_duplicate skip or requeue, not "}
                                 + to_string(j.on_duplicate));
    },
    [&] { return check_not_negative("unique_hold", j.unique_hold_ms); },
    [&] {
      return j.idempotency_key ? storage::check_key("idempotency_key", *j.idempotency_key)
                               : status{};
    },
    [&] {
      return j.unique_hold_ms != 0 && !j.unique_key
               ? invalid_field("unique_hold", "holds the unique key; set unique_key too")
               : status{};
    },
    [&] {
      return j.result_ttl_ms ? check_not_negative("result_ttl", *j.result_ttl_ms) : status{};
    },
    [&] {
      return j.expected_io ? check_io("expected_io.read_bytes", j.expected_io->read_bytes)
                           : status{};
    },
    [&] {
      return j.expected_io ? check_io("expected_io.write_bytes", j.expected_io->write_bytes)
                           : status{};
    },
    [&] { return check_dependencies(j); },
    [&] { return storage::check_tags("tags", j.tags); });
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

status validate(const recurring_job& r, size_t max_payload_bytes) {
  return first_failure(
    [&] { return check_label("id", r.id); },
    [&] {
      auto parsed = storage::schedule::parse(r.schedule, r.time_zone, 0);
      return parsed ? status{} : parsed.error();
    },
    [&] {
      return static_cast<uint8_t>(r.catch_up) > static_cast<uint8_t>(catch_up::skip)
               ? invalid_field("catch_up", "must be once or skip, got "
                                             + std::to_string(static_cast<int>(r.catch_up)))
               : status{};
    },
    [&] {
      auto st = validate(r.job, max_payload_bytes);
      return st ? st : in_template(st);
    },
    [&] {
      return r.job.run_at_ms || r.job.delay_ms != 0
               ? invalid_field(r.job.run_at_ms ? "job.run_at" : "job.delay",
                               "must be unset: the schedule gives each instance its time")
               : status{};
    },
    [&] {
      return !r.job.depends_on.empty() || !r.job.depends_on_batch.empty()
               ? invalid_field(r.job.depends_on.empty() ? "job.depends_on_batch"
                                                        : "job.depends_on",
                               "must be empty: instances follow their schedule, not other jobs")
               : status{};
    },
    [&] {
      return r.job.unique_key
               ? invalid_field("job.unique_key", "must be unset: a recurring job has one "
                                                 "unfinished instance at a time anyway")
               : status{};
    },
    [&] {
      return r.job.idempotency_key
               ? invalid_field("job.idempotency_key",
                               "must be unset: each instance would share it, and only the "
                               "first would be inserted")
               : status{};
    },
    [&] {
      return r.job.expected_io
               ? invalid_field("job.expected_io", "is not kept for recurring jobs: leave it "
                                                  "unset")
               : status{};
    },
    [&] {
      return r.max_executions && *r.max_executions < 1
               ? invalid_field("max_executions",
                               "must be 1 or more (empty: no limit), got "
                                 + std::to_string(*r.max_executions))
               : status{};
    },
    [&] {
      return r.job.ttl_from != ttl_start::run_at
               ? invalid_field("job.ttl_from", "is not kept for recurring jobs: each "
                                               "instance's ttl counts from its time")
               : status{};
    },
    [&] {
      return !r.job.tags.empty()
               ? invalid_field("job.tags", "is not kept for recurring jobs: leave it empty")
               : status{};
    },
    [&] {
      // Not stored with the template yet: refused rather than dropped.
      return r.job.result_ttl_ms
               ? invalid_field("job.result_ttl", "is not kept for recurring jobs: leave it "
                                                 "unset (results are kept as the job is)")
               : status{};
    });
}

namespace {

// Whether `text` is U+10FFFF alone, repeated: no UTF-8 string is the end of
// its prefix range.
bool only_last_characters(const std::string& text) {
  static const std::string last = "\xF4\x8F\xBF\xBF";
  if (text.empty() || text.size() % last.size() != 0)
    return false;
  for (size_t i = 0; i < text.size(); i += last.size())
    if (text.compare(i, last.size(), last) != 0)
      return false;
  return true;
}

}  // namespace

status validate(const job_filter& f) {
  return first_failure(
    [&] {
      return f.status && static_cast<size_t>(*f.status) >= job_status_count
               ? invalid_field("status", "is not a job status: "
                                           + std::to_string(static_cast<int>(*f.status)))
               : status{};
    },
    [&] { return f.type ? check_label("type", *f.type) : status{}; },
    [&] { return f.group ? check_label("group", *f.group) : status{}; },
    [&] { return f.name ? check_label("name", *f.name) : status{}; },
    [&] {
      return f.submitted_from_ms ? check_not_negative("submitted_from", *f.submitted_from_ms)
                                 : status{};
    },
    [&] {
      return f.submitted_before_ms
               ? check_not_negative("submitted_before", *f.submitted_before_ms)
               : status{};
    },
    [&] {
      return f.finished_from_ms ? check_not_negative("finished_from", *f.finished_from_ms)
                                : status{};
    },
    [&] {
      return f.finished_before_ms ? check_not_negative("finished_before", *f.finished_before_ms)
                                  : status{};
    },
    [&] { return storage::check_tags("tags", f.tags, max_filter_tags); },
    [&] { return f.tag_prefix ? storage::check_tag_key("tag_prefix", *f.tag_prefix) : status{}; },
    [&] {
      // No key sorts after such a prefix but within it: it has no range.
      return f.tag_prefix && only_last_characters(*f.tag_prefix)
               ? invalid_field("tag_prefix", "is only U+10FFFF characters, which no range "
                                             "ends above; name the key in tags")
               : status{};
    });
}

}  // namespace ergon
