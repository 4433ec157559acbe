#include "ergon/storage/op/save_controls.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ergon::storage {
namespace {

// Both engines take ON CONFLICT ... excluded.
constexpr const char* upsert =
  "INSERT INTO controls (scope, name, paused_since, paused_until, weight, min_slots,"
  " max_running, rate_per_second, rate_burst, changed_at)"
  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
  " ON CONFLICT (scope, name) DO UPDATE SET paused_since = excluded.paused_since,"
  " paused_until = excluded.paused_until, weight = excluded.weight,"
  " min_slots = excluded.min_slots, max_running = excluded.max_running,"
  " rate_per_second = excluded.rate_per_second, rate_burst = excluded.rate_burst,"
  " changed_at = excluded.changed_at";

constexpr const char* delete_row = "DELETE FROM controls WHERE scope = ?1 AND name = ?2";

constexpr const char* end_pauses =
  "UPDATE controls SET paused_since = NULL, paused_until = NULL WHERE paused_since IS NOT NULL";
constexpr const char* clear_weights = "UPDATE controls SET weight = NULL WHERE scope = 1";
constexpr const char* drop_empty =
  "DELETE FROM controls WHERE paused_since IS NULL AND weight IS NULL AND min_slots IS NULL"
  " AND max_running IS NULL AND rate_per_second IS NULL";

constexpr const char* select_all =
  "SELECT scope, name, paused_since, paused_until, weight, min_slots, max_running,"
  " rate_per_second, rate_burst, changed_at FROM controls ORDER BY scope, name";

std::optional<int64_t> widened(const std::optional<int32_t>& v) {
  return v ? std::optional<int64_t>{*v} : std::nullopt;
}

// What no run-time control could have stored (queue::set_group checks
// the same ranges); empty if the row is sound.
std::string out_of_range(const control_info& c) {
  constexpr int64_t most = 1'000'000;
  auto& s = c.settings;
  if (s.weight && (*s.weight < 1 || *s.weight > most))
    return "weight " + std::to_string(*s.weight);
  if (s.min_slots && (*s.min_slots < 0 || *s.min_slots > most))
    return "min_slots " + std::to_string(*s.min_slots);
  if (s.max_running && (*s.max_running < 0 || *s.max_running > most))
    return "max_running " + std::to_string(*s.max_running);
  if (s.rate && (!std::isfinite(s.rate->per_second) || s.rate->per_second < 0
                 || s.rate->per_second > most || s.rate->burst < 1 || s.rate->burst > most))
    return "rate " + std::to_string(s.rate->per_second) + "/s burst "
           + std::to_string(s.rate->burst);
  if (c.scope != control_scope::group && (s.weight || s.min_slots))
    return "a weight or min_slots outside a group";
  if (c.scope == control_scope::worker
      && (c.paused || s.rate || (s.max_running && *s.max_running < 1)))
    return "a pause, a rate or a max_running below 1 for a worker";
  return {};
}

std::optional<int64_t> optional_column(const stmt& s, int i) {
  return s.column_is_null(i) ? std::nullopt : std::optional<int64_t>{s.column_int(i)};
}

// Saturated, so that a value past int32 is caught by out_of_range.
int32_t int32_of(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

std::optional<int32_t> optional_int32(const stmt& s, int i) {
  return s.column_is_null(i) ? std::nullopt : std::optional<int32_t>{int32_of(s.column_int(i))};
}

}  // namespace

status save_controls(db& d, const save_controls_args& args) {
  if (args.end_all_pauses || args.clear_group_weights) {
    for (auto sql : {args.end_all_pauses ? end_pauses : nullptr,
                     args.clear_group_weights ? clear_weights : nullptr, drop_empty}) {
      if (!sql)
        continue;
      auto s = d.prepare(sql);
      if (!s)
        return s.error();
      if (auto st = d.run(**s); !st)
        return st;
    }
  }
  for (auto& c : args.controls) {
    auto s = d.prepare(c.in_force() ? upsert : delete_row);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, static_cast<int64_t>(c.scope));
    q.bind_text(2, c.name);
    if (c.in_force()) {
      q.bind(3, c.paused ? std::optional<int64_t>{c.paused_since_ms} : std::nullopt);
      q.bind(4, c.paused ? c.paused_until_ms : std::nullopt);
      q.bind(5, widened(c.settings.weight));
      q.bind(6, widened(c.settings.min_slots));
      q.bind(7, widened(c.settings.max_running));
      if (c.settings.rate) {
        q.bind(8, c.settings.rate->per_second);
        q.bind(9, int64_t{c.settings.rate->burst});
      } else {
        q.bind_null(8);
        q.bind_null(9);
      }
      q.bind(10, c.changed_at_ms);
    }
    if (auto st = d.run(q); !st)
      return st;
  }
  return {};
}

result<std::vector<control_info>> read_controls(db& d) {
  auto s = d.prepare(select_all);
  if (!s)
    return s.error();
  auto& q = **s;
  std::vector<control_info> out;
  while (q.step()) {
    control_info c;
    auto scope = q.column_int(0);
    if (scope < 0 || scope > static_cast<int64_t>(control_scope::worker))
      return status{error::corrupt, "controls: unknown scope " + std::to_string(scope)};
    c.scope = static_cast<control_scope>(scope);
    c.name = q.column_text(1);
    if (auto since = optional_column(q, 2)) {
      c.paused = true;
      c.paused_since_ms = *since;
      c.paused_until_ms = optional_column(q, 3);
    }
    c.settings.weight = optional_int32(q, 4);
    c.settings.min_slots = optional_int32(q, 5);
    c.settings.max_running = optional_int32(q, 6);
    if (!q.column_is_null(7))
      c.settings.rate = rate_limit{q.column_double(7), int32_of(q.column_int(8))};
    c.changed_at_ms = q.column_int(9);
    auto why = !q.column_is_null(7) && q.column_is_null(8) ? std::string{"a rate without a burst"}
                                                            : out_of_range(c);
    if (!why.empty())
      return status{error::corrupt, "controls: " + std::string{to_string(c.scope)} + " '" + c.name
                                      + "': " + why + " (no run-time control sets that)"};
    out.push_back(std::move(c));
  }
  if (auto& st = q.step_status(); !st)
    return st;
  return out;
}

std::vector<control_info> in_force_at(std::vector<control_info> controls, int64_t now) {
  std::vector<control_info> out;
  for (auto& c : controls) {
    if (c.paused && c.paused_until_ms && *c.paused_until_ms <= now) {
      c.paused = false;
      c.paused_since_ms = 0;
      c.paused_until_ms.reset();
    }
    if (c.in_force())
      out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ergon::storage
