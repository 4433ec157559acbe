// wire: how ergon's public types travel in CAF messages, to actors in this
// process or on other nodes (queue_actor.hpp). Include it where you send or
// receive them; queue::register_types(cfg) registers every one under the
// names below, identically on every node.
//
// Optional fields travel as a flag and a value. Errors travel as caf::error
// in the "ergon" category: to_status gives back the ergon::status.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>

#include "ergon/error.hpp"
#include "ergon/event.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/listing.hpp"
#include "ergon/recurring.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/worker.hpp"

namespace ergon {

/// The category of every caf::error that carries an ergon::status.
inline constexpr caf::atom_value error_category = caf::atom("ergon");

/// The status as a caf::error (empty for ok): code, message and field.
caf::error to_caf_error(const status& st);

/// The status a caf::error stands for. An error of another category (CAF's
/// own) becomes `closed` if the queue actor is gone, `unreachable` if its
/// node can't be reached, and `internal` otherwise, with CAF's description
/// as the message.
status to_status(const caf::error& e);

namespace wire {

// Runs `f` when it goes out of scope: an inspector that writes state stores
// what it read once the read returned, whatever the read returned.
template <class F>
struct after_read {
  F f;
  after_read(const after_read&) = delete;
  after_read& operator=(const after_read&) = delete;
  ~after_read() { f(); }
};
template <class F>
after_read(F) -> after_read<F>;

// An optional field as a flag and a value.
template <class T>
struct optional_field {
  std::optional<T>& x;
};

template <class T>
optional_field<T> optional(std::optional<T>& x) {
  return {x};
}

template <class Inspector, class T>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, optional_field<T>& o) {
  bool has = o.x.has_value();
  T value = has ? *o.x : T{};
  return f(has, value);
}

template <class Inspector, class T>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, optional_field<T>& o) {
  bool has = false;
  T value{};
  wire::after_read store{[&] {
    if (has)
      o.x = std::move(value);
    else
      o.x.reset();
  }};
  return f(has, value);
}

// A double as its IEEE 754 bits. CAF 0.17 packs doubles with a loop that
// never ends for an infinity, so a value read off the wire could hang the
// next send of it.
struct float64_field {
  double& x;
};

inline float64_field float64(double& x) {
  return {x};
}

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, float64_field& d) {
  uint64_t bits = 0;
  std::memcpy(&bits, &d.x, sizeof bits);
  return f(bits);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, float64_field& d) {
  uint64_t bits = 0;
  wire::after_read store{[&] { std::memcpy(&d.x, &bits, sizeof bits); }};
  return f(bits);
}

}  // namespace wire

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, job_id& x) {
  auto bytes = x.bytes();
  return f(caf::meta::type_name("ergon::job_id"), bytes);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, job_id& x) {
  job_id::bytes_type bytes{};
  wire::after_read store{[&] { x = job_id{bytes}; }};
  return f(caf::meta::type_name("ergon::job_id"), bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backoff_policy& x) {
  auto multiplier = wire::float64(x.multiplier);
  auto randomization = wire::float64(x.randomization);
  return f(caf::meta::type_name("ergon::backoff_policy"), x.initial_ms, multiplier,
           randomization, x.kind, x.max_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, io_estimate& x) {
  return f(caf::meta::type_name("ergon::io_estimate"), x.read_bytes, x.write_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job& x) {
  auto name = wire::optional(x.name);
  auto group = wire::optional(x.group);
  auto run_at = wire::optional(x.run_at_ms);
  auto ttl = wire::optional(x.ttl_ms);
  auto unique_key = wire::optional(x.unique_key);
  auto result_ttl = wire::optional(x.result_ttl_ms);
  auto expected_io = wire::optional(x.expected_io);
  auto idempotency_key = wire::optional(x.idempotency_key);
  return f(caf::meta::type_name("ergon::job"), x.type, x.payload, name, group, x.priority,
           x.weight, run_at, x.delay_ms, ttl, x.max_retries, x.backoff, x.timeout_ms,
           x.heartbeat_increment_ms, unique_key, x.on_duplicate, x.unique_hold_ms,
           result_ttl, expected_io, idempotency_key, x.depends_on, x.depends_on_batch,
           x.on_dependency_failure, x.tags, x.ttl_from, x.raise_holder_priority);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_update& x) {
  auto priority = wire::optional(x.priority);
  auto weight = wire::optional(x.weight);
  auto run_at = wire::optional(x.run_at_ms);
  auto payload = wire::optional(x.payload);
  auto max_retries = wire::optional(x.max_retries);
  auto timeout = wire::optional(x.timeout_ms);
  return f(caf::meta::type_name("ergon::job_update"), priority, weight, run_at, payload,
           max_retries, timeout, x.keep_checkpoint);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_identity& x) {
  return f(caf::meta::type_name("ergon::worker_identity"), x.id, x.name, x.host, x.pid, x.node);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, log_line& x) {
  return f(caf::meta::type_name("ergon::log_line"), x.seq, x.at_ms, x.level, x.text);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attempt_info& x) {
  auto finished = wire::optional(x.finished_at_ms);
  return f(caf::meta::type_name("ergon::attempt_info"), x.try_number, x.started_at_ms,
           finished, x.outcome, x.message, x.worker, x.logs, x.logs_dropped);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_info& x) {
  auto last_report = wire::optional(x.last_report_ms);
  return f(caf::meta::type_name("ergon::worker_info"), x.identity, x.types, x.max_concurrency,
           x.prefetch, x.running, x.running_weight, x.credit, x.registered_at_ms, last_report,
           x.leaving);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_info& x) {
  auto eta = wire::optional(x.eta_ms);
  return f(caf::meta::type_name("ergon::progress_info"), x.done, x.total, x.message,
           x.reported_at_ms, eta);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_info& x) {
  auto name = wire::optional(x.name);
  auto group = wire::optional(x.group);
  auto deadline = wire::optional(x.deadline_ms);
  auto checkpoint = wire::optional(x.checkpoint);
  auto result = wire::optional(x.result);
  auto started = wire::optional(x.started_at_ms);
  auto finished = wire::optional(x.finished_at_ms);
  auto expires = wire::optional(x.expires_at_ms);
  auto recurring_id = wire::optional(x.recurring_id);
  auto scheduled_at = wire::optional(x.scheduled_at_ms);
  auto unique_key = wire::optional(x.unique_key);
  auto result_expires = wire::optional(x.result_expires_at_ms);
  auto cancel_requested = wire::optional(x.cancel_requested_at_ms);
  auto progress = wire::optional(x.progress);
  auto expected_io = wire::optional(x.expected_io);
  auto parent = wire::optional(x.parent);
  return f(caf::meta::type_name("ergon::job_info"), x.id, x.type, name, group, x.status,
           x.priority, x.effective_priority, x.weight, x.too_heavy, x.run_at_ms,
           x.ready_since_ms, deadline, x.payload, checkpoint, result, result_expires, x.tries,
           x.tries_before_retry, x.max_retries, x.backoff, x.timeout_ms,
           x.heartbeat_increment_ms, x.added_at_ms, started, finished, expires, x.attempts,
           recurring_id, scheduled_at, unique_key, cancel_requested, progress, x.yields,
           expected_io, x.depends_on, x.dependents, x.waiting_on, x.on_dependency_failure,
           parent, x.tags);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dependency_result& x) {
  auto result = wire::optional(x.result);
  return f(caf::meta::type_name("ergon::dependency_result"), x.id, x.status, result);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_filter& x) {
  auto status = wire::optional(x.status);
  auto type = wire::optional(x.type);
  auto group = wire::optional(x.group);
  auto name = wire::optional(x.name);
  auto submitted_from = wire::optional(x.submitted_from_ms);
  auto submitted_before = wire::optional(x.submitted_before_ms);
  auto finished_from = wire::optional(x.finished_from_ms);
  auto finished_before = wire::optional(x.finished_before_ms);
  auto tag_prefix = wire::optional(x.tag_prefix);
  return f(caf::meta::type_name("ergon::job_filter"), status, type, group, name,
           submitted_from, submitted_before, finished_from, finished_before, x.tags, tag_prefix);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, page_request& x) {
  uint64_t limit = x.limit;
  auto after = wire::optional(x.after);
  wire::after_read store{[&] { x.limit = static_cast<size_t>(limit); }};
  return f(caf::meta::type_name("ergon::page_request"), limit, after, x.newest_first);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_page& x) {
  auto next = wire::optional(x.next);
  return f(caf::meta::type_name("ergon::job_page"), x.jobs, next);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_summary& x) {
  return f(caf::meta::type_name("ergon::cancel_summary"), x.cancelled, x.stop_requested);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, retry_summary& x) {
  return f(caf::meta::type_name("ergon::retry_summary"), x.retried, x.skipped);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurring_job& x) {
  auto max_executions = wire::optional(x.max_executions);
  return f(caf::meta::type_name("ergon::recurring_job"), x.id, x.schedule, x.time_zone, x.job,
           x.catch_up, x.run_now, max_executions);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recurring_info& x) {
  auto last_job = wire::optional(x.last_job);
  auto last_scheduled = wire::optional(x.last_scheduled_at_ms);
  auto last_finished = wire::optional(x.last_finished_at_ms);
  auto last_status = wire::optional(x.last_status);
  auto next_job = wire::optional(x.next_job);
  auto next_status = wire::optional(x.next_status);
  auto next_scheduled = wire::optional(x.next_scheduled_at_ms);
  auto next_run = wire::optional(x.next_run_at_ms);
  auto max_executions = wire::optional(x.max_executions);
  auto paused_since = wire::optional(x.paused_since_ms);
  auto paused_until = wire::optional(x.paused_until_ms);
  return f(caf::meta::type_name("ergon::recurring_info"), x.id, x.schedule, x.time_zone,
           x.catch_up, x.job, x.added_at_ms, x.updated_at_ms, last_job, last_scheduled,
           last_finished, last_status, next_job, next_status, next_scheduled, next_run,
           x.executions, max_executions, paused_since, paused_until);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, status_counts& x) {
  return f(caf::meta::type_name("ergon::status_counts"), x.by_status);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, group_metrics& x) {
  auto share = wire::float64(x.share);
  auto utilization = wire::float64(x.utilization);
  return f(caf::meta::type_name("ergon::group_metrics"), x.group, x.weight, share,
           x.allocated_slots, x.running_slots, utilization, x.ready_jobs, x.paused);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pause_info& x) {
  auto until = wire::optional(x.until_ms);
  return f(caf::meta::type_name("ergon::pause_info"), x.group, x.name, x.since_ms, until);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rate_limit& x) {
  auto per_second = wire::float64(x.per_second);
  return f(caf::meta::type_name("ergon::rate_limit"), per_second, x.burst);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_change& x) {
  auto weight = wire::optional(x.weight);
  auto min_slots = wire::optional(x.min_slots);
  auto max_running = wire::optional(x.max_running);
  auto rate = wire::optional(x.rate);
  return f(caf::meta::type_name("ergon::settings_change"), weight, min_slots, max_running, rate);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, control_info& x) {
  auto until = wire::optional(x.paused_until_ms);
  return f(caf::meta::type_name("ergon::control_info"), x.scope, x.name, x.paused,
           x.paused_since_ms, until, x.settings, x.changed_at_ms);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, histogram& x) {
  return f(caf::meta::type_name("ergon::histogram"), x.bounds, x.counts, x.total, x.sum);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pressure_reading& x) {
  auto value = wire::float64(x.value);
  return f(caf::meta::type_name("ergon::pressure_reading"), x.source, value);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, metrics_snapshot& x) {
  auto pressure = wire::float64(x.pressure);
  auto io_read = wire::float64(x.io_read_bytes_per_second);
  auto io_write = wire::float64(x.io_write_bytes_per_second);
  return f(caf::meta::type_name("ergon::metrics_snapshot"), x.queue_wait_bounds_ms,
           x.queue_wait_counts, x.queue_wait_total, x.queue_wait_sum_ms, x.effective_priorities,
           x.aging_promotions, x.excess_slots_redistributed, x.capacity, x.groups, x.pauses,
           x.too_heavy_jobs, x.subscriber_errors, x.refused_messages, x.forbidden_messages,
           x.failed_handshakes, x.refused_connections, x.rejected_messages, x.waits, x.by_status, x.by_type, x.by_group,
           x.oldest_ready_ms, x.run_ms_by_type, x.attempts_by_outcome, x.writer_batch_requests,
           x.commit_us, x.local_workers, x.remote_workers, x.orphaned_attempts, x.preemptions, x.yields,
           x.resumptions, x.preempted_waiting, pressure, x.pressure_by_source,
           x.pressure_errors, x.deferred_by_pressure, x.deferred_by_io, io_read, io_write,
           x.io_running_read_bytes, x.io_running_write_bytes, x.controls, x.control_changes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, event& x) {
  return f(caf::meta::type_name("ergon::event"), x.kind, x.at_ms, x.id, x.type, x.group,
           x.try_number, x.message, x.run_at_ms, x.expires_at_ms, x.base_priority,
           x.effective_priority, x.wait_ms, x.previous_slots, x.new_slots, x.reason,
           x.recurring_id, x.progress, x.jobs_deleted, x.results_dropped, x.keys_expired,
           x.workers_deleted, x.inbox_entries_deleted, x.inbox_entry);
}

}  // namespace ergon
