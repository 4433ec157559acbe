#include "ergon/storage/op/record_progress.hpp"

#include "ergon/storage/field_rules.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

// Any status: the last report of an attempt may commit after its outcome.
// The token keeps a late report of an earlier attempt off a retried job.
constexpr const char* store_progress =
  "UPDATE jobs SET progress_done = ?3, progress_total = ?4, progress_message = ?5, "
  "progress_at = ?6, progress_eta = ?7 WHERE id = ?1 AND attempt_token = ?2 "
  "RETURNING external_id, type, group_key, recurring_id";

}  // namespace

result<std::vector<progress_stored>> record_progress(db& d,
                                                     const std::vector<progress_report>& reports) {
  auto s = d.prepare(store_progress);
  if (!s)
    return s.error();
  auto& q = **s;
  std::vector<progress_stored> out;
  for (auto r : reports) {
    r.message = as_text(std::move(r.message));
    q.reset();
    q.bind(1, r.row);
    q.bind(2, r.token);
    q.bind(3, r.done);
    q.bind(4, r.total);
    if (r.message.empty())
      q.bind_null(5);
    else
      q.bind_text(5, r.message);
    q.bind(6, r.at);
    q.bind(7, r.eta);
    if (!q.step()) {
      if (!q.step_status())
        return q.step_status();
      continue;
    }
    progress_stored p;
    p.id = rows::column_id(q, 0);
    p.type = q.column_text(1);
    p.group = q.column_text(2);
    p.recurring_id = q.column_text(3);
    p.report = r;
    out.push_back(std::move(p));
  }
  q.reset();
  return out;
}

}  // namespace ergon::storage
