#include "ergon/storage/op/reconcile_recurring.hpp"

#include "ergon/storage/times.hpp"
#include "job_rows.hpp"
#include "recurring_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {

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
      if (r.exhausted() || r.held())
        continue;
      auto next = rows::after_pause(r, *sched,
                                    next_instance(*sched, r.last_scheduled_at.value_or(r.since),
                                                  std::nullopt, r.since, r.mode, now_ms));
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
    auto moved = rows::move_instance(d, r, inst.key, *to, now_ms);
    if (!moved)
      return moved.error();
    out.moved.push_back(std::move(*moved));
  }
  return out;
}

}  // namespace ergon::storage
