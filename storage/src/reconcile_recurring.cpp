#include "ergon/storage/op/reconcile_recurring.hpp"

#include "ergon/storage/times.hpp"
#include "job_rows.hpp"
#include "recurring_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

#define ERGON_MOVE_INSTANCE(greater)                                                       \
  "UPDATE jobs SET run_at = ?2, scheduled_at = ?2, "                                        \
  "ready_since = " greater "(CAST(?2 AS BIGINT), CAST(?3 AS BIGINT)), "                     \
  "deadline = ?4 WHERE id = ?1 AND status = " ERGON_SQL_PENDING " RETURNING " ERGON_JOB_KEY_COLUMNS
constexpr dialect_sql move_instance = {ERGON_MOVE_INSTANCE("max"),
                                       ERGON_MOVE_INSTANCE("greatest")};

}  // namespace

result<reconcile_recurring_result> reconcile_recurring(db& d, int64_t now_ms) {
  auto all = rows::recurring_with_prefix(d, "");
  if (!all)
    return all.error();
  reconcile_recurring_result out;
  for (auto& r : *all) {
    auto sched = rows::schedule_of(r);
    if (!sched)
      continue;  // its zone is still missing; the next open tries again
    auto instance = rows::unfinished_instance(d, r.id);
    if (!instance)
      return instance.error();
    if (!*instance) {
      if (r.exhausted())
        continue;
      auto next = next_instance(*sched, r.last_scheduled_at.value_or(r.since), std::nullopt,
                                r.since, r.mode, now_ms);
      if (!next)
        continue;
      auto k = rows::create_instance(d, r, *next, now_ms);
      if (!k)
        return k.error();
      out.created.push_back(std::move(*k));
      continue;
    }
    auto& inst = **instance;
    if (r.mode != catch_up::skip || inst.status != job_status::pending)
      continue;
    auto to = skip_missed(*sched, inst.scheduled_at, r.since, now_ms);
    if (!to)
      continue;
    auto s = d.prepare(move_instance);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, inst.key.row);
    q.bind(2, *to);
    q.bind(3, now_ms);
    auto& ttl = r.templ.ttl_ms;
    if (ttl && add_ms(*to, *ttl) != never_ms)
      q.bind(4, add_ms(*to, *ttl));
    else
      q.bind_null(4);
    if (!q.step())
      return q.step_status().ok() ? status{error::internal, "instance changed underneath"}
                                  : q.step_status();
    out.moved.push_back({inst.key, rows::read_key(q)});
    q.reset();
  }
  return out;
}

}  // namespace ergon::storage
