#include "ergon/storage/op/release_claims.hpp"

#include "attempt_end.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// Undoes claim_jobs for an attempt whose code never started: the try is not
// spent. Only that attempt (token) of a running job is released.
constexpr const char* release_job =
  "UPDATE jobs SET status = " ERGON_SQL_PENDING ", current_try = current_try - 1, attempt_token = NULL, "
  "expires_at = NULL WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2 "
  "AND cancel_requested_at IS NULL RETURNING " ERGON_JOB_KEY_COLUMNS;

}  // namespace

result<release_claims_result> release_claims(db& d, const release_claims_args& args,
                                             int64_t now_ms) {
  auto prepared = d.prepare(release_job);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  release_claims_result out;
  for (auto& a : args.attempts) {
    s.reset();
    s.bind(1, a.row);
    s.bind(2, a.token);
    if (!s.step()) {
      if (!s.step_status())
        return s.step_status();
      // Asked to stop: it never starts. Otherwise the attempt already
      // ended (expired), and there is nothing to give back.
      auto ended = end_attempt(d, a.row, a.token,
                               {attempt_outcome::cancelled, "cancelled before its code started",
                                false},
                               retry_timing::immediate, 0.0, now_ms);
      if (!ended)
        return ended.error();
      if (*ended)
        out.cancelled.push_back(std::move(**ended));
      continue;
    }
    out.released.push_back({a.token, rows::read_key(s, 0)});
    if (s.step() || !s.step_status())
      return s.step_status().ok() ? status{error::internal, "release returned two rows"}
                                  : s.step_status();
  }
  return out;
}

}  // namespace ergon::storage
