#include "ergon/storage/op/update_pending.hpp"

#include <algorithm>

#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// A new payload replaces any checkpoint, unless kept (?9): the next attempt
// should see the new payload. A
// new run_at restarts the aging clock of a job that never started.
#define ERGON_UPDATE_JOB(greater, keep)                                                 \
  "UPDATE jobs SET priority = coalesce(?2, priority), weight = coalesce(?3, weight), "   \
  "run_at = coalesce(?4, run_at), payload = coalesce(?5, payload), "                    \
  "ready_since = CASE WHEN ?4 IS NOT NULL AND current_try = 0 "                          \
  "THEN " greater "(CAST(?4 AS BIGINT), CAST(?8 AS BIGINT)) "                           \
  "ELSE ready_since END, "                                                               \
  "checkpoint = CASE WHEN ?5 IS NULL OR " keep " THEN checkpoint ELSE NULL END, "      \
  "max_retries = coalesce(?6, max_retries), timeout_ms = coalesce(?7, timeout_ms) "     \
  "WHERE id = ?1 AND status = " ERGON_SQL_PENDING
constexpr dialect_sql update_job = {ERGON_UPDATE_JOB("max", "?9"),
                                    ERGON_UPDATE_JOB("greatest", "?9::bigint <> 0")};

}  // namespace

result<key_change> update_pending(db& d, const update_pending_args& args,
                                  int64_t now_ms) {
  if (auto st = validate(args.changes, args.max_payload_bytes); !st)
    return st;
  auto found = rows::find_job(d, args.id);
  if (!found)
    return found.error();
  if (found->status != job_status::pending)
    return rows::not_pending_error(args.id, found->status);
  const auto& c = args.changes;
  key_change change{found->key, found->key};
  auto& after = change.after;
  if (c.priority)
    after.priority = *c.priority;
  if (c.weight)
    after.weight = *c.weight;
  if (c.run_at_ms) {
    if (after.deadline && *c.run_at_ms > *after.deadline)
      return invalid_field("run_at", "is after the job's deadline ("
                                       + std::to_string(*after.deadline) + ")");
    after.run_at = *c.run_at_ms;
  }
  auto prepared = d.prepare(update_job);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind(1, found->row);
  if (c.priority) s.bind(2, *c.priority);
  if (c.weight) s.bind(3, *c.weight);
  if (c.run_at_ms) s.bind(4, *c.run_at_ms);
  if (c.payload) s.bind_blob(5, *c.payload);
  if (c.max_retries) s.bind(6, *c.max_retries);
  if (c.timeout_ms) s.bind(7, *c.timeout_ms);
  s.bind(8, now_ms);
  s.bind(9, c.keep_checkpoint ? 1 : 0);
  if (auto st = d.run(s); !st)
    return st;
  if (d.changes() != 1)
    return status{error::internal, "update_pending: job row changed underneath"};
  if (c.run_at_ms && found->tries == 0)
    after.ready_since = std::max(*c.run_at_ms, now_ms);
  return change;
}

}  // namespace ergon::storage
