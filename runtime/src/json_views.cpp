#include "json_views.hpp"

#include <openssl/evp.h>

#include <vector>

namespace ergon::json_views {
namespace {

template <class T>
json optional(const std::optional<T>& x) {
  return x ? json(*x) : json(nullptr);
}

json optional_bytes(const std::optional<std::string>& b, bool with_bytes) {
  if (!b)
    return nullptr;
  return with_bytes ? bytes(*b) : json{{"size", b->size()}};
}

json optional_id(const std::optional<job_id>& id) {
  return id ? json(id->to_string()) : json(nullptr);
}

json optional_status(const std::optional<job_status>& s) {
  return s ? json(to_string(*s)) : json(nullptr);
}

}  // namespace

json bytes(const std::string& b) {
  json out{{"size", b.size()}};
  if (!b.empty()) {
    // One whole msgpack value decodes; anything else (several values,
    // plain text, a truncated value) is shown as it is.
    auto decoded = json::from_msgpack(b, true, false);
    if (!decoded.is_discarded()) {
      out["msgpack"] = std::move(decoded);
      return out;
    }
  }
  std::vector<unsigned char> text(4 * ((b.size() + 2) / 3) + 1);
  auto n = EVP_EncodeBlock(text.data(), reinterpret_cast<const unsigned char*>(b.data()),
                           static_cast<int>(b.size()));
  out["base64"] = std::string(reinterpret_cast<const char*>(text.data()), static_cast<size_t>(n));
  return out;
}

json of(const attempt_info& a) {
  return {{"try", a.try_number},
          {"started_at_ms", a.started_at_ms},
          {"finished_at_ms", optional(a.finished_at_ms)},
          {"outcome", to_string(a.outcome)},
          {"message", a.message},
          {"worker", a.worker.id == 0 ? json(nullptr) : of(a.worker)},
          {"logs", of_each(a.logs)},
          {"logs_dropped", a.logs_dropped}};
}

json of(const log_line& l) {
  return {{"seq", l.seq}, {"at_ms", l.at_ms}, {"level", to_string(l.level)}, {"text", l.text}};
}

json of(const worker_identity& w) {
  return {{"id", w.id}, {"name", w.name}, {"host", w.host}, {"pid", w.pid}, {"node", w.node}};
}

json of(const worker_info& w) {
  return {{"worker", of(w.identity)},
          {"types", w.types},
          {"max_concurrency", w.max_concurrency},
          {"prefetch", w.prefetch},
          {"running", w.running},
          {"running_weight", w.running_weight},
          {"credit", w.credit},
          {"registered_at_ms", w.registered_at_ms},
          {"last_report_ms", optional(w.last_report_ms)},
          {"leaving", w.leaving}};
}

json of(const job_info& j, bool with_bytes) {
  auto attempts = of_each(j.attempts);
  auto ids = [](const std::vector<job_id>& v) {
    json out = json::array();
    for (auto& id : v)
      out.push_back(id.to_string());
    return out;
  };
  json progress = nullptr;
  if (j.progress)
    progress = {{"done", j.progress->done},
                {"total", j.progress->total},
                {"message", j.progress->message},
                {"reported_at_ms", j.progress->reported_at_ms},
                {"eta_ms", optional(j.progress->eta_ms)}};
  return {{"id", j.id.to_string()},
          {"type", j.type},
          {"name", optional(j.name)},
          {"group", optional(j.group)},
          {"status", to_string(j.status)},
          {"priority", j.priority},
          {"effective_priority", j.effective_priority},
          {"weight", j.weight},
          {"too_heavy", j.too_heavy},
          {"run_at_ms", j.run_at_ms},
          {"ready_since_ms", j.ready_since_ms},
          {"deadline_ms", optional(j.deadline_ms)},
          {"payload", with_bytes ? bytes(j.payload) : json{{"size", j.payload.size()}}},
          {"checkpoint", optional_bytes(j.checkpoint, with_bytes)},
          {"result", optional_bytes(j.result, with_bytes)},
          {"result_expires_at_ms", optional(j.result_expires_at_ms)},
          {"tries", j.tries},
          {"tries_before_retry", j.tries_before_retry},
          {"max_retries", j.max_retries},
          {"timeout_ms", j.timeout_ms},
          {"added_at_ms", j.added_at_ms},
          {"started_at_ms", optional(j.started_at_ms)},
          {"finished_at_ms", optional(j.finished_at_ms)},
          {"expires_at_ms", optional(j.expires_at_ms)},
          {"recurring_id", optional(j.recurring_id)},
          {"scheduled_at_ms", optional(j.scheduled_at_ms)},
          {"unique_key", optional(j.unique_key)},
          {"cancel_requested_at_ms", optional(j.cancel_requested_at_ms)},
          {"progress", std::move(progress)},
          {"yields", j.yields},
          {"expected_io", j.expected_io ? json{{"read_bytes", j.expected_io->read_bytes},
                                               {"write_bytes", j.expected_io->write_bytes}}
                                        : json(nullptr)},
          {"depends_on", ids(j.depends_on)},
          {"dependents", ids(j.dependents)},
          {"waiting_on", j.waiting_on},
          {"on_dependency_failure", to_string(j.on_dependency_failure)},
          {"tags", j.tags},
          {"attempts", std::move(attempts)}};
}

json of(const job_page& p, bool with_bytes) {
  json jobs = json::array();
  for (auto& j : p.jobs)
    jobs.push_back(of(j, with_bytes));
  return {{"jobs", std::move(jobs)}, {"next", optional_id(p.next)}};
}

json of(const status_counts& c) {
  json out = json::object();
  for (size_t i = 0; i < job_status_count; ++i)
    out[to_string(static_cast<job_status>(i))] = c.by_status[i];
  out["total"] = c.total();
  return out;
}

json of(const histogram& h) {
  return {{"bounds", h.bounds}, {"counts", h.counts}, {"total", h.total}, {"sum", h.sum}};
}

json of(const settings_change& c) {
  json out = json::object();
  if (c.weight)
    out["weight"] = *c.weight;
  if (c.min_slots)
    out["min_slots"] = *c.min_slots;
  if (c.max_running)
    out["max_running"] = *c.max_running;
  if (c.rate)
    out["rate"] = {{"per_second", c.rate->per_second}, {"burst", c.rate->burst}};
  return out;
}

json of(const control_info& c) {
  json out{{"scope", to_string(c.scope)},
           {"name", c.name},
           {"paused", c.paused},
           {"settings", of(c.settings)},
           {"changed_at_ms", c.changed_at_ms}};
  if (c.paused) {
    out["paused_since_ms"] = c.paused_since_ms;
    out["paused_until_ms"] = c.paused_until_ms ? json(*c.paused_until_ms) : json(nullptr);
  }
  return out;
}

json of(const metrics_snapshot& m) {
  json groups = json::array();
  for (auto& g : m.groups)
    groups.push_back({{"group", g.group},
                      {"weight", g.weight},
                      {"share", g.share},
                      {"allocated_slots", g.allocated_slots},
                      {"running_slots", g.running_slots},
                      {"utilization", g.utilization},
                      {"ready_jobs", g.ready_jobs},
                      {"paused", g.paused}});
  json pauses = json::array();
  for (auto& p : m.pauses)
    pauses.push_back({{p.group ? "group" : "type", p.name},
                      {"since_ms", p.since_ms},
                      {"until_ms", p.until_ms ? json(*p.until_ms) : json(nullptr)}});
  json breakers = json::array();
  for (auto& b : m.breakers)
    breakers.push_back({{"type", b.type},
                        {"state", to_string(b.state)},
                        {"recent_failures", b.recent_failures},
                        {"open_until_ms", b.open_until_ms ? json(*b.open_until_ms) : json(nullptr)},
                        {"trips", b.trips}});
  auto controls = of_each(m.controls);
  json by_type = json::object();
  for (auto& [type, counts] : m.by_type)
    by_type[type] = of(counts);
  json run_ms = json::object();
  for (auto& [type, h] : m.run_ms_by_type)
    run_ms[type] = of(h);
  json outcomes = json::object();
  for (size_t i = 1; i < m.attempts_by_outcome.size(); ++i)
    outcomes[to_string(static_cast<attempt_outcome>(i))] = m.attempts_by_outcome[i];
  json by_group = json::object();
  for (auto& [group, counts] : m.by_group)
    by_group[group] = of(counts);
  json priorities = json::object();
  for (auto& [p, n] : m.effective_priorities)
    priorities[std::to_string(p)] = n;
  json pressure = json::object();
  for (auto& r : m.pressure_by_source)
    pressure[r.source] = r.value;
  return {{"by_status", of(m.by_status)},
          {"by_type", std::move(by_type)},
          {"groups", std::move(groups)},
          {"pauses", std::move(pauses)},
          {"breakers", std::move(breakers)},
          {"controls", std::move(controls)},
          {"control_changes", m.control_changes},
          {"capacity", m.capacity},
          {"queue_wait",
           {{"bounds_ms", m.queue_wait_bounds_ms},
            {"counts", m.queue_wait_counts},
            {"total", m.queue_wait_total},
            {"sum_ms", m.queue_wait_sum_ms}}},
          {"effective_priorities", std::move(priorities)},
          {"aging_promotions", m.aging_promotions},
          {"excess_slots_redistributed", m.excess_slots_redistributed},
          {"too_heavy_jobs", m.too_heavy_jobs},
          {"subscriber_errors", m.subscriber_errors},
          {"refused_messages", m.refused_messages},
          {"forbidden_messages", m.forbidden_messages},
          {"failed_handshakes", m.failed_handshakes},
          {"refused_connections", m.refused_connections},
          {"rejected_messages", m.rejected_messages},
          {"waits", m.waits},
          {"by_group", std::move(by_group)},
          {"oldest_ready_ms", m.oldest_ready_ms},
          {"run_ms_by_type", std::move(run_ms)},
          {"attempts_by_outcome", std::move(outcomes)},
          {"writer_batch_requests", of(m.writer_batch_requests)},
          {"commit_us", of(m.commit_us)},
          {"local_workers", m.local_workers},
          {"remote_workers", m.remote_workers},
          {"orphaned_attempts", m.orphaned_attempts},
          {"preemptions", m.preemptions},
          {"yields", m.yields},
          {"resumptions", m.resumptions},
          {"preempted_waiting", m.preempted_waiting},
          {"pressure", m.pressure},
          {"pressure_by_source", std::move(pressure)},
          {"pressure_errors", m.pressure_errors},
          {"deferred_by_pressure", m.deferred_by_pressure},
          {"deferred_by_io", m.deferred_by_io},
          {"io_read_bytes_per_second", m.io_read_bytes_per_second},
          {"io_write_bytes_per_second", m.io_write_bytes_per_second},
          {"io_running_read_bytes", m.io_running_read_bytes},
          {"io_running_write_bytes", m.io_running_write_bytes}};
}

json of(const recurring_info& r) {
  return {{"id", r.id},
          {"schedule", r.schedule},
          {"time_zone", r.time_zone.empty() ? "UTC" : r.time_zone},
          {"catch_up", to_string(r.catch_up)},
          {"type", r.job.type},
          {"group", optional(r.job.group)},
          {"priority", r.job.priority},
          {"payload", {{"size", r.job.payload.size()}}},
          {"added_at_ms", r.added_at_ms},
          {"updated_at_ms", r.updated_at_ms},
          {"last_job", optional_id(r.last_job)},
          {"last_scheduled_at_ms", optional(r.last_scheduled_at_ms)},
          {"last_finished_at_ms", optional(r.last_finished_at_ms)},
          {"last_status", optional_status(r.last_status)},
          {"next_job", optional_id(r.next_job)},
          {"next_status", optional_status(r.next_status)},
          {"next_scheduled_at_ms", optional(r.next_scheduled_at_ms)},
          {"next_run_at_ms", optional(r.next_run_at_ms)},
          {"executions", r.executions},
          {"max_executions", optional(r.max_executions)},
          {"paused", r.paused_since_ms.has_value()},
          {"paused_since_ms", optional(r.paused_since_ms)},
          {"paused_until_ms", optional(r.paused_until_ms)}};
}

json of(const retry_summary& s) {
  json skipped = json::array();
  for (auto& id : s.skipped)
    skipped.push_back(id.to_string());
  return {{"retried", s.retried}, {"skipped", std::move(skipped)}};
}

json of(const cancel_summary& s) {
  return {{"cancelled", s.cancelled}, {"stop_requested", s.stop_requested}};
}

json of(const owner_info& o) {
  json listeners = json::array();
  for (auto& l : o.listeners)
    listeners.push_back({{"address", l.address},
                         {"port", l.port},
                         {"needs_secret", l.needs_secret},
                         {"needs_tls", l.needs_tls}});
  return {{"pid", o.pid}, {"host", o.host}, {"listeners", std::move(listeners)}};
}

json of(const status& st) {
  json out{{"error", to_string(st.code())}, {"message", st.message()}};
  if (!st.field().empty())
    out["field"] = st.field();
  return out;
}

std::optional<job_status> parse_status(const std::string& name) {
  for (size_t i = 0; i < job_status_count; ++i)
    if (name == to_string(static_cast<job_status>(i)))
      return static_cast<job_status>(i);
  return std::nullopt;
}

}  // namespace ergon::json_views
