// job_builder: a fluent way to describe a job, checked by build().
//
//   auto job = ergon::job_builder("send_email")
//                .payload(ergon::pack(email))   // see msgpack.hpp
//                .priority(10)
//                .max_retries(5)
//                .timeout(std::chrono::seconds(30))
//                .build();
//   if (!job) { std::cerr << job.error().to_string() << '\n'; return; }
//   auto id = queue.submit(*job);
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "ergon/job.hpp"

namespace ergon {

/// Collects a job's fields; `build()` validates them all.
class job_builder {
 public:
  /// `type` selects the runner; it must be 1 to 256 bytes.
  explicit job_builder(std::string type);

  /// Opaque bytes for the runner.
  job_builder& payload(std::string bytes);
  /// A label for `queue::jobs_by_name`.
  job_builder& name(std::string name);
  /// The fairness group (tenant, endpoint, ...).
  job_builder& group(std::string group);
  /// Higher runs first; default 0.
  job_builder& priority(int32_t priority);
  /// Capacity taken on a worker, >= 1; default 1.
  job_builder& weight(int32_t weight);
  /// Absolute earliest start in ms since the epoch. Excludes `delay`.
  job_builder& run_at(int64_t ms_since_epoch);
  /// Earliest start relative to submission. Excludes `run_at`.
  job_builder& delay(std::chrono::milliseconds d);
  /// The job must start within `ttl` of its run_at, or it ends expired.
  job_builder& ttl(std::chrono::milliseconds ttl);
  /// Where the ttl counts from (job::ttl_from).
  job_builder& ttl_from(ttl_start from);
  /// Attempts after the first; default 3.
  job_builder& max_retries(int32_t n);
  /// Backoff between attempts (see backoff_policy); defaults 20 s, 2, 0.2.
  job_builder& backoff(std::chrono::milliseconds initial, double multiplier = 2.0,
                       double randomization = 0.2);
  /// The whole retry policy: a kind, a cap, jitter (see backoff_policy).
  job_builder& backoff(backoff_policy policy);
  /// An attempt expires this long after it starts unless heartbeats extend
  /// it; default 300 s.
  job_builder& timeout(std::chrono::milliseconds t);
  /// Each heartbeat extends expiry to at least now plus this; default 120 s.
  job_builder& heartbeat_increment(std::chrono::milliseconds inc);

  /// At most one job holds `key` (1 to 256 bytes; see job::unique_key).
  /// `on_duplicate` says what a submit does while it is held, and `hold`
  /// how long it stays held after the job finishes (>= 0).
  job_builder& unique_key(std::string key, unique_policy on_duplicate = unique_policy::skip,
                          std::chrono::milliseconds hold = std::chrono::milliseconds{0});

  /// A duplicate submit raises a holder that has not started to this job's
  /// priority (see job::raise_holder_priority). build() refuses it
  /// (invalid_argument "raise_holder_priority") without a unique_key, or
  /// with on_duplicate replace or reject.
  job_builder& raise_holder_priority(bool raise = true);

  /// Submitting again under `key` (1 to 256 bytes) within the queue's
  /// idempotency window returns the first job's id and writes nothing (see
  /// job::idempotency_key): safe to resend after `unreachable`.
  job_builder& idempotency_key(std::string key);

  /// How long a successful attempt's result is kept (>= 0; 0: not stored).
  /// Default: as long as the job.
  job_builder& result_ttl(std::chrono::milliseconds ttl);

  /// The disk I/O the job expects to do, in bytes (both >= 0; see
  /// job::expected_io).
  job_builder& expected_io(int64_t read_bytes, int64_t write_bytes);

  /// Runs only once job `id` has ended (see job::depends_on); may be
  /// called for several jobs.
  job_builder& depends_on(const job_id& id);
  /// Runs only once the job at `position` of the same submit_batch has
  /// ended; it must come earlier in the batch (job::depends_on_batch).
  job_builder& depends_on_batch(uint32_t position);
  /// What a dependency that ends unsuccessfully does; default cancel.
  job_builder& on_dependency_failure(dependency_failure policy);

  /// Adds a tag (job::tags). A key given twice is an error at build().
  job_builder& tag(std::string key, std::string value);

  /// The job, or invalid_argument naming the first bad field.
  result<job> build() const;

 private:
  job job_;
  std::optional<std::string> repeated_tag_;
};

}  // namespace ergon
