#include "control_table.hpp"

#include "ergon/storage/op/save_controls.hpp"

namespace ergon::actors {

std::string control_name(control_scope scope, const std::string& name) {
  if (scope == control_scope::queue)
    return "the queue";
  return std::string{to_string(scope)} + " \"" + name + "\"";
}

namespace {

control_scope scope_of(scheduling_control::op_type op) {
  switch (op) {
    case scheduling_control::pause_queue:
    case scheduling_control::resume_queue:
      return control_scope::queue;
    case scheduling_control::pause_type:
    case scheduling_control::resume_type:
    case scheduling_control::change_type:
    case scheduling_control::reset_type:
      return control_scope::type;
    case scheduling_control::change_worker:
    case scheduling_control::reset_worker:
      return control_scope::worker;
    default:
      return control_scope::group;
  }
}

void unpause(control_info& c) {
  c.paused = false;
  c.paused_since_ms = 0;
  c.paused_until_ms.reset();
}

}  // namespace

control_table::control_table(scheduling_policy& policy, std::vector<control_info> stored)
    : policy_(policy) {
  for (auto& c : stored) {
    if (c.paused) {
      // Restored from its start, so aging skips the time it stood before.
      auto since = c.paused_since_ms;
      switch (c.scope) {
        case control_scope::queue: policy_.pause_queue(c.paused_until_ms, since); break;
        case control_scope::group: (void)policy_.pause_group(c.name, c.paused_until_ms, since); break;
        case control_scope::type: (void)policy_.pause_type(c.name, c.paused_until_ms, since); break;
        case control_scope::worker: break;  // no call pauses a worker
      }
    }
    if (c.scope == control_scope::group)
      policy_.change_group(c.name, c.settings);
    else if (c.scope == control_scope::type)
      policy_.change_type(c.name, c.settings);
    rows_.emplace(key{c.scope, c.name}, std::move(c));
  }
}

result<control_info*> control_table::row(const key& k, int64_t now) {
  if (auto i = rows_.find(k); i != rows_.end())
    return &i->second;
  if (rows_.size() >= max_controls)
    return invalid_field("name", std::to_string(max_controls)
                                   + " controls are in force already (the limit): resume or "
                                     "reset some");
  auto& c = rows_[k];
  c.scope = k.first;
  c.name = k.second;
  c.changed_at_ms = now;
  return &c;
}

void control_table::changed(control_info& c, std::string what, int64_t now, applied& out) {
  ++changes_;
  c.changed_at_ms = now;
  event e;
  e.kind = event_kind::control_changed;
  e.at_ms = now;
  if (c.scope == control_scope::group)
    e.group = c.name;
  else if (c.scope == control_scope::type)
    e.type = c.name;

  e.message = std::move(what);
  if (c.paused && c.paused_until_ms)
    e.run_at_ms = *c.paused_until_ms;
  out.events.push_back(std::move(e));
  out.changed.push_back(c);
  if (!c.in_force())
    rows_.erase(key{c.scope, c.name});
}

void control_table::unchanged(control_scope scope, const std::string& name, applied& out) {
  auto i = rows_.find(key{scope, name});
  if (i != rows_.end()) {
    out.changed.push_back(i->second);
    return;
  }
  control_info none;
  none.scope = scope;
  none.name = name;
  out.changed.push_back(std::move(none));
}

result<control_table::applied> control_table::pause(const scheduling_control& c,
                                                    control_scope scope, int64_t now) {
  key k{scope, c.name};
  bool existed = rows_.count(k) != 0;
  auto r = row(k, now);
  if (!r)
    return r.error();
  status done;
  switch (scope) {
    case control_scope::queue: policy_.pause_queue(c.until, now); break;
    case control_scope::group: done = policy_.pause_group(c.name, c.until, now); break;
    case control_scope::type: done = policy_.pause_type(c.name, c.until, now); break;
    case control_scope::worker: break;
  }
  if (!done) {
    if (!existed)
      rows_.erase(k);
    return done;
  }
  auto& row = **r;
  if (!row.paused)
    row.paused_since_ms = now;
  row.paused = true;
  row.paused_until_ms = c.until;
  applied out;
  auto what = "paused " + control_name(scope, c.name);
  if (c.until)
    what += " until " + std::to_string(*c.until);
  changed(row, std::move(what), now, out);
  return out;
}

control_table::applied control_table::resume(control_scope scope, const std::string& name,
                                             int64_t now) {
  switch (scope) {
    case control_scope::queue: policy_.resume_queue(now); break;
    case control_scope::group: policy_.resume_group(name, now); break;
    case control_scope::type: policy_.resume_type(name, now); break;
    case control_scope::worker: break;
  }
  applied out;
  auto i = rows_.find(key{scope, name});
  if (i == rows_.end() || !i->second.paused) {
    unchanged(scope, name, out);
    return out;
  }
  auto& row = i->second;
  unpause(row);
  changed(row, "resumed " + control_name(scope, name), now, out);
  return out;
}

result<control_table::applied> control_table::change(const scheduling_control& c,
                                                     control_scope scope, int64_t now) {
  auto r = row(key{scope, c.name}, now);
  if (!r)
    return r.error();
  // A worker's concurrency is the dispatcher's to send (worker_concurrency).
  if (scope == control_scope::group)
    policy_.change_group(c.name, c.settings);
  else if (scope == control_scope::type)
    policy_.change_type(c.name, c.settings);
  auto& row = **r;
  merge_settings(row.settings, c.settings);
  applied out;
  changed(row, "set " + control_name(scope, c.name) + ": " + to_string(c.settings), now, out);
  return out;
}

control_table::applied control_table::reset(control_scope scope, const std::string& name,
                                            bool weight_only, int64_t now) {
  applied out;
  auto i = rows_.find(key{scope, name});
  if (i == rows_.end()) {
    unchanged(scope, name, out);
    return out;
  }
  auto& row = i->second;
  if (weight_only) {
    if (!row.settings.weight)
      return out;
    policy_.reset_group_weight(name);
    row.settings.weight.reset();
    changed(row, "reset " + control_name(scope, name) + "'s weight", now, out);
    return out;
  }
  auto& s = row.settings;
  if (!s.weight && !s.min_slots && !s.max_running && !s.rate) {
    unchanged(scope, name, out);
    return out;
  }
  if (scope == control_scope::group)
    policy_.reset_group(name);
  else if (scope == control_scope::type)
    policy_.reset_type(name);
  s = {};
  changed(row, "reset " + control_name(scope, name) + " to its configured settings", now, out);
  return out;
}

control_table::applied control_table::resume_all(int64_t now) {
  applied out;
  out.answer = policy_.resume_all(now);
  out.end_all_pauses = true;
  end_pauses([](const control_info&) { return true; }, " (resume all)", now, out);
  return out;
}

void control_table::end_pauses(const std::function<bool(const control_info&)>& which,
                               const char* why, int64_t now, applied& out) {
  std::vector<key> ending;
  for (auto& [k, row] : rows_)
    if (row.paused && which(row))
      ending.push_back(k);
  for (auto& k : ending) {
    auto& row = rows_.at(k);
    unpause(row);
    changed(row, "resumed " + control_name(k.first, k.second) + why, now, out);
  }
}

result<control_table::applied> control_table::apply(const scheduling_control& c, int64_t now) {
  auto scope = scope_of(c.op);
  switch (c.op) {
    case scheduling_control::pause_queue:
    case scheduling_control::pause_group:
    case scheduling_control::pause_type:
      return pause(c, scope, now);
    case scheduling_control::resume_queue:
    case scheduling_control::resume_group:
    case scheduling_control::resume_type:
      return resume(scope, c.name, now);
    case scheduling_control::resume_all:
      return resume_all(now);
    case scheduling_control::set_group_weight: {
      auto weight = c;
      weight.settings = {};
      weight.settings.weight = c.weight;
      return change(weight, control_scope::group, now);
    }
    case scheduling_control::change_group:
    case scheduling_control::change_type:
    case scheduling_control::change_worker:
      return change(c, scope, now);
    case scheduling_control::reset_group:
    case scheduling_control::reset_type:
    case scheduling_control::reset_worker:
      return reset(scope, c.name, false, now);
    case scheduling_control::reset_group_weights: {
      applied out;
      std::vector<std::string> weighted;
      for (auto& [k, row] : rows_)
        if (k.first == control_scope::group && row.settings.weight)
          weighted.push_back(k.second);
      for (auto& name : weighted) {
        auto one = reset(control_scope::group, name, true, now);
        out.changed.insert(out.changed.end(), one.changed.begin(), one.changed.end());
        out.events.insert(out.events.end(), one.events.begin(), one.events.end());
      }
      policy_.reset_group_weights();
      out.clear_group_weights = true;
      return out;
    }
    case scheduling_control::reset_breaker:
      break;
  }
  return applied{};
}

control_table::applied control_table::expire(int64_t now) {
  applied out;
  end_pauses([now](const control_info& c) { return c.paused_until_ms && *c.paused_until_ms <= now; },
             " (its pause ended)", now, out);
  return out;
}

std::optional<int32_t> control_table::worker_concurrency(const std::string& name) const {
  auto i = rows_.find(key{control_scope::worker, name});
  if (i == rows_.end())
    return std::nullopt;
  return i->second.settings.max_running;
}

std::vector<control_info> control_table::list(int64_t now) const {
  std::vector<control_info> all;
  all.reserve(rows_.size());
  for (auto& [k, row] : rows_)
    all.push_back(row);
  return storage::in_force_at(std::move(all), now);
}

}  // namespace ergon::actors
