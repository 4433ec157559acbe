#include "ergon/error.hpp"

#include <ostream>

#include "ergon/job.hpp"
#include "ergon/job_info.hpp"
#include "ergon/recurring.hpp"

namespace ergon {

const char* to_string(error code) noexcept {
  switch (code) {
    case error::none: return "none";
    case error::invalid_argument: return "invalid_argument";
    case error::not_found: return "not_found";
    case error::job_running: return "job_running";
    case error::job_finished: return "job_finished";
    case error::stale_attempt: return "stale_attempt";
    case error::timeout: return "timeout";
    case error::busy: return "busy";
    case error::read_only: return "read_only";
    case error::storage_full: return "storage_full";
    case error::io_error: return "io_error";
    case error::corrupt: return "corrupt";
    case error::closed: return "closed";
    case error::cancelled: return "cancelled";
    case error::internal: return "internal";
    case error::unreachable: return "unreachable";
    case error::unauthenticated: return "unauthenticated";
    case error::already_exists: return "already_exists";
    case error::forbidden: return "forbidden";
  }
  return "unknown";
}

std::string status::to_string() const {
  if (ok())
    return "ok";
  std::string out = ergon::to_string(code_);
  if (!message_.empty())
    out += ": " + message_;
  return out;
}

status invalid_field(std::string field, std::string what) {
  auto message = "field '" + field + "': " + what;
  return {error::invalid_argument, std::move(message), std::move(field)};
}

const char* to_string(job_status s) noexcept {
  switch (s) {
    case job_status::pending: return "pending";
    case job_status::running: return "running";
    case job_status::succeeded: return "succeeded";
    case job_status::failed: return "failed";
    case job_status::cancelled: return "cancelled";
    case job_status::expired: return "expired";
    case job_status::waiting: return "waiting";
  }
  return "unknown";
}

const char* to_string(dependency_failure p) noexcept {
  switch (p) {
    case dependency_failure::cancel: return "cancel";
    case dependency_failure::fail: return "fail";
    case dependency_failure::run: return "run";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, dependency_failure p) {
  return out << to_string(p);
}

const char* to_string(backoff_kind k) noexcept {
  switch (k) {
    case backoff_kind::exponential: return "exponential";
    case backoff_kind::constant: return "constant";
    case backoff_kind::linear: return "linear";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, backoff_kind k) {
  return out << to_string(k);
}

const char* to_string(log_level l) noexcept {
  switch (l) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, log_level l) {
  return out << to_string(l);
}

const char* to_string(attempt_outcome o) noexcept {
  switch (o) {
    case attempt_outcome::running: return "running";
    case attempt_outcome::succeeded: return "succeeded";
    case attempt_outcome::failed: return "failed";
    case attempt_outcome::expired: return "expired";
    case attempt_outcome::process_restart: return "process_restart";
    case attempt_outcome::worker_lost: return "worker_lost";
    case attempt_outcome::cancelled: return "cancelled";
    case attempt_outcome::failed_permanently: return "failed_permanently";
    case attempt_outcome::yielded: return "yielded";
    case attempt_outcome::snoozed: return "snoozed";
    case attempt_outcome::spawned: return "spawned";
  }
  return "unknown";
}

const char* to_string(unique_policy p) noexcept {
  switch (p) {
    case unique_policy::skip: return "skip";
    case unique_policy::replace: return "replace";
    case unique_policy::reject: return "reject";
    case unique_policy::requeue: return "requeue";
  }
  return "unknown";
}

const char* to_string(ttl_start s) noexcept {
  switch (s) {
    case ttl_start::run_at: return "run_at";
    case ttl_start::first_attempt: return "first_attempt";
  }
  return "unknown";
}

const char* to_string(catch_up c) noexcept {
  switch (c) {
    case catch_up::once: return "once";
    case catch_up::skip: return "skip";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, error code) {
  return out << to_string(code);
}

std::ostream& operator<<(std::ostream& out, const status& st) {
  return out << st.to_string();
}

std::ostream& operator<<(std::ostream& out, job_status s) {
  return out << to_string(s);
}

std::ostream& operator<<(std::ostream& out, attempt_outcome o) {
  return out << to_string(o);
}

std::ostream& operator<<(std::ostream& out, const job_id& id) {
  return out << id.to_string();
}

int64_t status_counts::total() const noexcept {
  int64_t sum = 0;
  for (auto n : by_status)
    sum += n;
  return sum;
}

}  // namespace ergon
