#include "ergon/actors/protocol.hpp"

#include <caf/actor_system_config.hpp>

#include <cstring>
#include <ostream>
#include <sstream>
#include <unordered_set>

#include "ergon/event.hpp"
#include "ergon/storage/field_rules.hpp"

namespace ergon::actors {

wire_status to_wire(const status& st) {
  return {static_cast<uint8_t>(st.code()), st.message(), st.field()};
}

status from_wire(const wire_status& w) {
  if (w.code == 0)
    return {};
  return {static_cast<error>(w.code), w.message, w.field};
}

std::string to_wire(const job_id& id) {
  return std::string{reinterpret_cast<const char*>(id.bytes().data()), id.bytes().size()};
}

job_id id_from_wire(const std::string& bytes) {
  job_id::bytes_type b{};
  if (bytes.size() == b.size())
    std::memcpy(b.data(), bytes.data(), b.size());
  return job_id{b};
}

status validate(const register_worker& r) {
  if (auto st = storage::check_label_size("name", r.name); !st)
    return st;
  if (auto st = storage::check_label_size("host", r.host); !st)
    return st;
  if (r.pid < 0)
    return invalid_field("pid", "must not be negative, got " + std::to_string(r.pid));
  if (r.types.empty())
    return invalid_field("types", "a worker needs at least one job type to run");
  for (auto& type : r.types)
    if (auto st = storage::check_label("types", type); !st)
      return st;
  if (auto st = storage::check_weight("max_capacity", r.max_capacity); !st)
    return st;
  if (auto st = storage::check_prefetch("prefetch", r.prefetch); !st)
    return st;
  if (!r.worker)
    return invalid_field("worker", "the registration names no worker actor");
  auto most = listed_per_unit * static_cast<size_t>(r.max_capacity + r.prefetch);
  if (r.held.size() + r.returned.size() > most)
    return invalid_field(r.held.size() > most ? "held" : "returned",
                         "a registration lists at most " + std::to_string(most)
                           + " attempts for its capacity and prefetch, got "
                           + std::to_string(r.held.size() + r.returned.size()));
  std::unordered_set<int64_t> rows;
  for (auto* list : {&r.held, &r.returned}) {
    const char* field = list == &r.held ? "held" : "returned";
    for (auto& a : *list) {
      if (a.row <= 0 || a.token < 0)
        return invalid_field(field, "attempt (" + std::to_string(a.row) + ", "
                                      + std::to_string(a.token)
                                      + ") has a row below 1 or a negative token");
      if (!rows.insert(a.row).second)
        return invalid_field(field, "row " + std::to_string(a.row) + " is listed twice");
    }
  }
  return {};
}

void register_protocol(caf::actor_system_config& cfg) {
  cfg.add_message_type<wire_status>("ergon::wire_status")
    .add_message_type<register_worker>("ergon::register_worker")
    .add_message_type<worker_registered>("ergon::worker_registered")
    .add_message_type<storage::attempt_ref>("ergon::attempt_ref")
    .add_message_type<std::vector<storage::attempt_ref>>("ergon::attempt_refs")
    .add_message_type<storage::attempt_report>("ergon::attempt_report")
    .add_message_type<std::vector<storage::attempt_report>>("ergon::attempt_reports")
    .add_message_type<worker_report>("ergon::worker_report")
    .add_message_type<unregister_worker>("ergon::unregister_worker")
    .add_message_type<job_assignment>("ergon::job_assignment")
    .add_message_type<std::vector<job_assignment>>("ergon::job_assignments")
    .add_message_type<assign_jobs>("ergon::assign_jobs")
    .add_message_type<cancel_attempt>("ergon::cancel_attempt")
    .add_message_type<preempt_attempt>("ergon::preempt_attempt")
    .add_message_type<resize_worker>("ergon::resize_worker")
    .add_message_type<storage::progress_report>("ergon::progress_report")
    .add_message_type<std::vector<storage::progress_report>>("ergon::progress_reports")
    .add_message_type<progress_batch>("ergon::progress_batch")
    .add_message_type<std::vector<wire_status>>("ergon::wire_statuses")
    .add_message_type<heartbeat_request>("ergon::heartbeat_request")
    .add_message_type<heartbeat_reply>("ergon::heartbeat_reply")
    .add_message_type<results_request>("ergon::results_request")
    .add_message_type<results_reply>("ergon::results_reply");
}

}  // namespace ergon::actors

namespace ergon {

const char* to_string(event_kind k) noexcept {
  switch (k) {
    case event_kind::submitted: return "submitted";
    case event_kind::started: return "started";
    case event_kind::succeeded: return "succeeded";
    case event_kind::failed: return "failed";
    case event_kind::retried: return "retried";
    case event_kind::expired: return "expired";
    case event_kind::cancelled: return "cancelled";
    case event_kind::heartbeat: return "heartbeat";
    case event_kind::job_aged: return "job_aged";
    case event_kind::group_allocation_changed: return "group_allocation_changed";
    case event_kind::subscriber_failed: return "subscriber_failed";
    case event_kind::job_too_heavy: return "job_too_heavy";
    case event_kind::released: return "released";
    case event_kind::cancel_requested: return "cancel_requested";
    case event_kind::progress: return "progress";
    case event_kind::requeued: return "requeued";
    case event_kind::swept: return "swept";
    case event_kind::preempted: return "preempted";
    case event_kind::yielded: return "yielded";
    case event_kind::resumed: return "resumed";
    case event_kind::inbox_refused: return "inbox_refused";
    case event_kind::snoozed: return "snoozed";
    case event_kind::unblocked: return "unblocked";
    case event_kind::spawned: return "spawned";
    case event_kind::breaker_opened: return "breaker_opened";
    case event_kind::breaker_half_open: return "breaker_half_open";
    case event_kind::breaker_closed: return "breaker_closed";
    case event_kind::control_changed: return "control_changed";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, event_kind k) {
  return out << to_string(k);
}

const char* to_string(allocation_reason r) noexcept {
  switch (r) {
    case allocation_reason::weight_change: return "weight_change";
    case allocation_reason::rebalance: return "rebalance";
    case allocation_reason::group_drained: return "group_drained";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, breaker_state s) {
  return out << to_string(s);
}

const char* to_string(breaker_state s) noexcept {
  switch (s) {
    case breaker_state::closed: return "closed";
    case breaker_state::open: return "open";
    case breaker_state::half_open: return "half_open";
  }
  return "unknown";
}

std::string to_string(const settings_change& c) {
  std::ostringstream out;
  auto sep = [&, first = true]() mutable {
    if (!first)
      out << ", ";
    first = false;
  };
  if (c.weight) {
    sep();
    out << "weight " << *c.weight;
  }
  if (c.min_slots) {
    sep();
    out << "min_slots " << *c.min_slots;
  }
  if (c.max_running) {
    sep();
    out << "max_running ";
    if (*c.max_running > 0)
      out << *c.max_running;
    else
      out << "none";
  }
  if (c.rate) {
    sep();
    out << "rate ";
    if (c.rate->per_second > 0)
      out << c.rate->per_second << "/s burst " << c.rate->burst;
    else
      out << "none";
  }
  return out.str();
}

const char* to_string(control_scope s) noexcept {
  switch (s) {
    case control_scope::queue: return "queue";
    case control_scope::group: return "group";
    case control_scope::type: return "type";
    case control_scope::worker: return "worker";
  }
  return "unknown";
}

}  // namespace ergon
