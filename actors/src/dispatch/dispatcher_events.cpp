#include "dispatcher_events.hpp"

#include <algorithm>
#include <string>

#include "ergon/storage/job_ids.hpp"

namespace ergon::actors {
namespace {

event make_event(event_kind kind, int64_t at, const job_id& id, const std::string& type,
                 const std::string& group, const std::string& recurring_id = {}) {
  event e;
  e.kind = kind;
  e.at_ms = at;
  e.id = id;
  e.type = type;
  e.group = group;
  e.recurring_id = recurring_id;
  return e;
}

event make_event(event_kind kind, int64_t at, const storage::job_key& k) {
  return make_event(kind, at, k.id, k.type, k.group, k.recurring_id);
}

void add_claim_events(std::vector<event>& out, const claim_result& c,
                      const std::unordered_map<int64_t, picked_job>& picks) {
  for (auto& j : c.claimed) {
    auto p = picks.find(j.key.row);
    auto effective = p != picks.end() ? p->second.effective_priority : j.key.priority;
    if (effective > j.key.priority) {
      auto aged = make_event(event_kind::job_aged, j.started_at, j.key);
      aged.try_number = j.try_number;
      aged.base_priority = j.key.priority;
      aged.effective_priority = effective;
      aged.wait_ms = p->second.waited_ms;
      out.push_back(std::move(aged));
    }
    auto ev = make_event(event_kind::started, j.started_at, j.key);
    ev.try_number = j.try_number;
    ev.base_priority = j.key.priority;
    ev.effective_priority = effective;
    ev.wait_ms = std::max<int64_t>(0, j.started_at - j.key.run_at);
    out.push_back(std::move(ev));
  }
}

void add_end_events(std::vector<event>& out, const storage::attempt_end& end, int64_t now) {
  auto emit = [&](event_kind kind) {
    auto ev = make_event(kind, now, end.id, end.type, end.group, end.key.recurring_id);
    ev.try_number = end.try_number;
    ev.base_priority = ev.effective_priority = end.key.priority;
    ev.message = end.message;
    if (kind == event_kind::retried || kind == event_kind::snoozed)
      ev.run_at_ms = end.key.run_at;
    out.push_back(std::move(ev));
  };
  if (end.outcome == attempt_outcome::expired)
    emit(event_kind::expired);
  if (end.outcome == attempt_outcome::yielded && end.status == job_status::pending)
    emit(event_kind::yielded);
  else if (end.outcome == attempt_outcome::snoozed && end.status == job_status::pending)
    emit(event_kind::snoozed);
  else if (end.outcome == attempt_outcome::spawned)
    emit(event_kind::spawned);  // waiting, or pending if its children had all ended
  else if (end.status == job_status::succeeded)
    emit(event_kind::succeeded);
  else if (end.status == job_status::pending)
    emit(event_kind::retried);
  else if (end.status == job_status::cancelled)
    emit(event_kind::cancelled);
  else
    emit(event_kind::failed);
}

}  // namespace

std::vector<event> feed_events(const commit_feed& f, int64_t now,
                               const std::unordered_map<int64_t, picked_job>& picks,
                               const attempt_table& attempts, const scheduling_policy& names) {
  std::vector<event> out;
  // A job that is pending (or waiting), due at its run_at.
  auto due = [&](event_kind kind, const storage::job_key& k, const char* message = "") {
    auto ev = make_event(kind, now, k);
    ev.base_priority = ev.effective_priority = k.priority;
    ev.run_at_ms = k.run_at;
    ev.message = message;
    out.push_back(std::move(ev));
  };
  out.insert(out.end(), f.controls.begin(), f.controls.end());
  for (auto& k : f.added)
    due(event_kind::submitted, k);
  for (auto& k : f.waiting)
    due(event_kind::submitted, k, "waiting for its dependencies");
  for (auto& k : f.requeued)
    due(event_kind::requeued, k);
  for (auto& k : f.requeued_waiting)
    due(event_kind::requeued, k, "waiting for its dependencies");
  for (auto& k : f.cancelled)
    out.push_back(make_event(event_kind::cancelled, now, k));
  for (auto& k : f.expired) {
    auto ev = make_event(event_kind::expired, now, k);
    ev.message = "deadline passed before the job started";
    out.push_back(std::move(ev));
  }
  for (auto& c : f.claims)
    add_claim_events(out, c, picks);
  for (auto& end : f.ended)
    add_end_events(out, end, now);
  for (auto& c : f.children_cancelled) {
    auto ev = make_event(event_kind::cancelled, now, c.key);
    ev.message = c.message;
    out.push_back(std::move(ev));
  }
  for (auto& e : f.ended_waiting) {
    auto ev = make_event(e.status == job_status::failed ? event_kind::failed
                                                        : event_kind::cancelled,
                         now, e.key);
    ev.base_priority = ev.effective_priority = e.key.priority;
    ev.message = e.message;
    out.push_back(std::move(ev));
  }
  for (auto& k : f.unblocked)
    due(event_kind::unblocked, k);
  for (auto& r : f.released)
    out.push_back(make_event(event_kind::released, now, r.key));
  for (auto& c : f.cancel_requests)
    out.push_back(make_event(event_kind::cancel_requested, now, c.key));
  for (auto& p : f.progress) {
    auto ev = make_event(event_kind::progress, p.report.at, p.id, p.type, p.group,
                         p.recurring_id);
    ev.progress = progress_info{p.report.done, p.report.total, p.report.message, p.report.at,
                                p.report.eta};
    out.push_back(std::move(ev));
  }
  for (auto& x : f.extended) {
    auto a = attempts.find(x.row);
    // Expiry checks extend too; only the worker's heartbeats are events.
    if (!x.by_worker || !a || a->token != x.token)
      continue;
    auto ev = make_event(event_kind::heartbeat, now, a->id, names.type_name(a->type),
                         names.group_name(a->group), a->recurring_id);
    ev.expires_at_ms = x.expires_at;
    out.push_back(std::move(ev));
  }
  return out;
}

event preempted_event(const attempt_table::attempt& a, const scheduling_policy& names,
                      const job_id& preemptor, int32_t preemptor_priority, int64_t now) {
  auto ev = make_event(event_kind::preempted, now, a.id, names.type_name(a.type),
                       names.group_name(a.group), a.recurring_id);
  ev.effective_priority = a.priority;
  ev.message = "asked to yield for job " + preemptor.to_string() + " (effective priority "
               + std::to_string(preemptor_priority) + ")";
  return ev;
}

event resumed_event(const storage::job_key& k, int64_t now) {
  auto ev = make_event(event_kind::resumed, now, k);
  ev.base_priority = ev.effective_priority = k.priority;
  return ev;
}

std::vector<event> allocation_events(const std::vector<allocation_change>& changes,
                                     int64_t now) {
  std::vector<event> out;
  for (auto& c : changes) {
    auto ev = make_event(event_kind::group_allocation_changed, now, job_id{}, {}, c.group);
    ev.previous_slots = c.before;
    ev.new_slots = c.after;
    ev.reason = c.reason;
    out.push_back(std::move(ev));
  }
  return out;
}

std::vector<event> too_heavy_events(const std::vector<pending_job>& jobs,
                                    const scheduling_policy& policy, uint32_t id_tag,
                                    int64_t now) {
  std::vector<event> out;
  for (auto& j : jobs) {
    auto id = storage::make_job_id(j.added_at, id_tag, j.row);
    auto& type = policy.type_name(j.type);
    auto ev = make_event(event_kind::job_too_heavy, now, id, type, policy.group_name(j.group));
    ev.base_priority = j.priority;
    ev.message = "weight " + std::to_string(j.weight)
                 + " is more than any registered worker of type '" + type + "' takes (max "
                 + std::to_string(policy.type_limit(j.type)) + ")";
    out.push_back(std::move(ev));
  }
  return out;
}

}  // namespace ergon::actors
