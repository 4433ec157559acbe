#include "ergon/storage/op/expire_pending.hpp"

#include "job_final.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* expire_job =
  "UPDATE jobs SET status = " ERGON_SQL_EXPIRED ", finished_at = ?2, "
  "dead_letter_status = " ERGON_SQL_EXPIRED ", unfinished_instance_of = NULL "
  "WHERE id = ?1 AND status = " ERGON_SQL_PENDING " AND deadline IS NOT NULL AND deadline < ?2 "
  "RETURNING " ERGON_JOB_KEY_COLUMNS;

}  // namespace

result<expire_pending_result> expire_pending(db& d, const expire_pending_args& args,
                                             int64_t now_ms) {
  auto s = d.prepare(expire_job);
  if (!s)
    return s.error();
  auto& q = **s;
  expire_pending_result out;
  for (auto row : args.rows) {
    q.reset();
    q.bind(1, row);
    q.bind(2, now_ms);
    if (q.step()) {
      out.expired.push_back(rows::read_key(q));
      if (q.step() || !q.step_status())
        return q.step_status().ok() ? status{error::internal, "expire returned two rows"}
                                    : q.step_status();
      auto effects = on_job_final(d, row, job_status::expired, now_ms);
      if (!effects)
        return effects.error();
      if (effects->next_instance)
        out.next_instances.push_back(std::move(*effects->next_instance));
      out.dependents.append(std::move(effects->dependents));
    } else if (!q.step_status()) {
      return q.step_status();
    }
  }
  return out;
}

}  // namespace ergon::storage
