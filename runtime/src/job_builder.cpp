#include "ergon/job_builder.hpp"

namespace ergon {

job_builder::job_builder(std::string type) {
  job_.type = std::move(type);
}

job_builder& job_builder::payload(std::string bytes) {
  job_.payload = std::move(bytes);
  return *this;
}

job_builder& job_builder::name(std::string name) {
  job_.name = std::move(name);
  return *this;
}

job_builder& job_builder::group(std::string group) {
  job_.group = std::move(group);
  return *this;
}

job_builder& job_builder::priority(int32_t priority) {
  job_.priority = priority;
  return *this;
}

job_builder& job_builder::weight(int32_t weight) {
  job_.weight = weight;
  return *this;
}

job_builder& job_builder::run_at(int64_t ms_since_epoch) {
  job_.run_at_ms = ms_since_epoch;
  return *this;
}

job_builder& job_builder::delay(std::chrono::milliseconds d) {
  job_.delay_ms = d.count();
  return *this;
}

job_builder& job_builder::ttl(std::chrono::milliseconds ttl) {
  job_.ttl_ms = ttl.count();
  return *this;
}

job_builder& job_builder::ttl_from(ttl_start from) {
  job_.ttl_from = from;
  return *this;
}

job_builder& job_builder::max_retries(int32_t n) {
  job_.max_retries = n;
  return *this;
}

job_builder& job_builder::backoff(backoff_policy policy) {
  job_.backoff = policy;
  return *this;
}

job_builder& job_builder::backoff(std::chrono::milliseconds initial, double multiplier,
                                  double randomization) {
  job_.backoff = backoff_policy{initial.count(), multiplier, randomization};
  return *this;
}

job_builder& job_builder::timeout(std::chrono::milliseconds t) {
  job_.timeout_ms = t.count();
  return *this;
}

job_builder& job_builder::unique_key(std::string key, unique_policy on_duplicate,
                                      std::chrono::milliseconds hold) {
  job_.unique_key = std::move(key);
  job_.on_duplicate = on_duplicate;
  job_.unique_hold_ms = hold.count();
  return *this;
}

job_builder& job_builder::raise_holder_priority(bool raise) {
  job_.raise_holder_priority = raise;
  return *this;
}

job_builder& job_builder::idempotency_key(std::string key) {
  job_.idempotency_key = std::move(key);
  return *this;
}

job_builder& job_builder::result_ttl(std::chrono::milliseconds ttl) {
  job_.result_ttl_ms = ttl.count();
  return *this;
}

job_builder& job_builder::expected_io(int64_t read_bytes, int64_t write_bytes) {
  job_.expected_io = io_estimate{read_bytes, write_bytes};
  return *this;
}

job_builder& job_builder::depends_on(const job_id& id) {
  job_.depends_on.push_back(id);
  return *this;
}

job_builder& job_builder::depends_on_batch(uint32_t position) {
  job_.depends_on_batch.push_back(position);
  return *this;
}

job_builder& job_builder::on_dependency_failure(dependency_failure policy) {
  job_.on_dependency_failure = policy;
  return *this;
}

job_builder& job_builder::heartbeat_increment(std::chrono::milliseconds inc) {
  job_.heartbeat_increment_ms = inc.count();
  return *this;
}

job_builder& job_builder::tag(std::string key, std::string value) {
  if (!job_.tags.emplace(key, std::move(value)).second && !repeated_tag_)
    repeated_tag_ = std::move(key);
  return *this;
}

result<job> job_builder::build() const {
  if (repeated_tag_)
    return invalid_field("tags", "key '" + *repeated_tag_ + "' is given twice");
  if (auto st = validate(job_); !st)
    return st;
  return job_;
}

}  // namespace ergon
