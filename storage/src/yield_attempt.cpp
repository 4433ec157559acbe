#include "attempt_end.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// Like release_claims, but for code that ran: the try is given back, so the
// attempt that resumes the job has the same number.
constexpr const char* yield_job =
  "UPDATE jobs SET status = " ERGON_SQL_PENDING ", current_try = current_try - 1, attempt_token = NULL, "
  "expires_at = NULL, deadline = NULL, yields = yields + 1 "
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2 AND cancel_requested_at IS NULL "
  "RETURNING current_try + 1, started_at, " ERGON_JOB_KEY_COLUMNS;

}  // namespace

result<std::optional<attempt_end>> yield_attempt(db& d, int64_t row, int64_t token,
                                                 int64_t now_ms) {
  auto prepared = d.prepare(yield_job);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind(1, row);
  s.bind(2, token);
  if (!s.step()) {
    if (!s.step_status())
      return s.step_status();
    // Asked to stop while it ran: the request wins, as for any other end.
    return end_attempt(d, row, token,
                       {attempt_outcome::cancelled, "yielded after a cancel request", false},
                       retry_timing::immediate, 0.0, now_ms);
  }
  attempt_end end;
  end.row = row;
  end.try_number = static_cast<int32_t>(s.column_int(0));
  end.started_at = s.column_int(1);
  end.key = rows::read_key(s, 2);
  end.id = end.key.id;
  end.type = end.key.type;
  end.group = end.key.group;
  end.outcome = attempt_outcome::yielded;
  end.status = job_status::pending;
  s.reset();
  return std::optional<attempt_end>{std::move(end)};
}

}  // namespace ergon::storage
