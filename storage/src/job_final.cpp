#include "job_final.hpp"

#include "dependents.hpp"

#include "ergon/storage/times.hpp"
#include "job_rows.hpp"
#include "recurring_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_links =
  "SELECT recurring_id, scheduled_at, started_at, unique_key, unique_hold_ms, external_id, "
  "has_dependents "
  "FROM jobs WHERE id = ?1";

// `job_id = ?2`: a replaced holder no longer owns the key.
constexpr const char* hold_key =
  "UPDATE unique_keys SET held_until = ?3 WHERE key = ?1 AND job_id = ?2";
constexpr const char* free_key = "DELETE FROM unique_keys WHERE key = ?1 AND job_id = ?2";

// ?6: 1 if the instance started (it counts toward max_executions).
constexpr const char* record_last_run =
  "UPDATE recurring_jobs SET last_job = ?2, last_scheduled_at = ?3, last_finished_at = ?4, "
  "last_status = ?5, executions = executions + ?6 WHERE id = ?1";

}  // namespace

status release_key(db& d, const std::string& key, int64_t row, std::optional<int64_t> hold,
                   int64_t now_ms) {
  auto s = d.prepare(hold ? hold_key : free_key);
  if (!s)
    return s.error();
  (*s)->bind_text(1, key);
  (*s)->bind(2, row);
  if (hold)
    (*s)->bind(3, add_ms(now_ms, *hold));
  return d.run(**s);
}

result<final_effects> on_job_final(db& d, int64_t row, job_status final_status,
                                   int64_t now_ms) {
  auto links = end_links(d, row, final_status, now_ms);
  if (!links)
    return links.error();
  final_effects out;
  out.next_instance = std::move(links->next_instance);
  auto settled = settle_dependents(d, row, links->id, final_status, now_ms, links->has_children);
  if (!settled)
    return settled.error();
  out.dependents = std::move(*settled);
  return out;
}

result<ended_links> end_links(db& d, int64_t row, job_status final_status, int64_t now_ms) {
  auto s = d.prepare(select_links);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  if (!q.step())
    return q.step_status().ok() ? status{error::internal, "end_links: no job row"}
                                : q.step_status();
  auto recurring_id = q.column_opt_text(0);
  auto scheduled_at = q.column_opt_int(1);
  auto started_at = q.column_opt_int(2);
  auto key = q.column_opt_text(3);
  auto hold = q.column_opt_int(4);
  ended_links out;
  out.id = rows::column_id(q, 5);
  out.has_children = (q.column_int(6) & has_children_bit) != 0;
  q.reset();
  if (key)
    if (auto st = release_key(d, *key, row, hold, now_ms); !st)
      return st;
  if (!recurring_id || !scheduled_at)
    return out;
  auto r = rows::find_recurring(d, *recurring_id);
  if (!r)
    return r.error();
  if (!*r)
    return out;  // deleted: the chain ends here
  auto u = d.prepare(record_last_run);
  if (!u)
    return u.error();
  (*u)->bind_text(1, *recurring_id);
  rows::bind_id(**u, 2, out.id);
  (*u)->bind(3, *scheduled_at);
  (*u)->bind(4, now_ms);
  (*u)->bind(5, static_cast<int64_t>(final_status));
  (*u)->bind(6, int64_t{started_at ? 1 : 0});
  if (auto st = d.run(**u); !st)
    return st;
  auto& rec = **r;
  rec.executions += started_at ? 1 : 0;
  if (rec.exhausted() || rec.held())
    return out;  // it ran max_executions instances, or it is paused: the chain ends here
  // A zone the tz database lost leaves the job without a next instance;
  // open's reconcile_recurring tries again.
  auto sched = rows::schedule_of(**r);
  if (!sched)
    return out;
  auto next = rows::after_pause(
    rec, *sched, next_instance(*sched, *scheduled_at, started_at, rec.since, rec.mode, now_ms));
  if (!next)
    return out;
  auto k = rows::create_instance(d, **r, *next, now_ms);
  if (!k)
    return k.error();
  out.next_instance = std::move(*k);
  return out;
}

}  // namespace ergon::storage
