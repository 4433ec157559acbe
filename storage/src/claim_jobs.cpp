#include "ergon/storage/op/claim_jobs.hpp"

#include "ergon/storage/times.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// The claim is the durable start of an attempt: the try counter is spent
// before any job code runs, so a job that kills its process can't loop.
constexpr const char* claim_job =
  "UPDATE jobs SET status = " ERGON_SQL_RUNNING ", current_try = current_try + 1, attempt_token = ?2, "
  "started_at = ?3, expires_at = " ERGON_SQL_ADD_MS("?3", "timeout_ms") ", "
  "progress_at = NULL "
  "WHERE id = ?1 AND status = " ERGON_SQL_PENDING " AND run_at <= ?3 AND (deadline IS NULL OR deadline >= ?3) "
  "RETURNING " ERGON_JOB_KEY_COLUMNS ", current_try, "
  "coalesce(checkpoint, payload), expires_at";

}  // namespace

result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms) {
  auto prepared = d.prepare(claim_job);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  claim_jobs_result out;
  out.claimed.reserve(args.claims.size());
  for (auto& c : args.claims) {
    s.reset();
    s.bind(1, c.row);
    s.bind(2, c.token);
    s.bind(3, now_ms);
    if (!s.step()) {
      if (!s.step_status())
        return s.step_status();
      out.missed.push_back(c.row);
      continue;
    }
    claimed_job j;
    j.key = rows::read_key(s, 0);
    j.try_number = static_cast<int32_t>(s.column_int(rows::key_column_count + 0));
    j.payload = s.column_blob(rows::key_column_count + 1);
    j.expires_at = s.column_int(rows::key_column_count + 2);
    j.token = c.token;
    j.started_at = now_ms;
    // Step past the end so the UPDATE completes before the next bind.
    if (s.step() || !s.step_status())
      return s.step_status().ok() ? status{error::internal, "claim returned two rows"}
                                  : s.step_status();
    out.claimed.push_back(std::move(j));
  }
  return out;
}

}  // namespace ergon::storage
