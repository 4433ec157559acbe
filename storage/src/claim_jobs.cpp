#include "ergon/storage/op/claim_jobs.hpp"

#include "ergon/storage/times.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// The claim is the durable start of an attempt: the try counter is spent
// before any job code runs, so a job that kills its process can't loop.
// Read, then written by id, in the writer's transaction: an UPDATE with
// RETURNING builds a temporary table per row, which cost the writer about a
// tenth of its time in a drain.
constexpr const char* read_claimable =
  "SELECT " ERGON_JOB_KEY_COLUMNS ", current_try + 1, coalesce(checkpoint, payload), "
  ERGON_SQL_ADD_MS("?2", "timeout_ms") " FROM jobs "
  "WHERE id = ?1 AND status = " ERGON_SQL_PENDING " AND run_at <= ?2 "
  "AND (deadline IS NULL OR deadline >= ?2)";

constexpr const char* claim_job =
  "UPDATE jobs SET status = " ERGON_SQL_RUNNING ", current_try = ?2, attempt_token = ?3, "
  "started_at = ?4, expires_at = ?5, progress_at = NULL WHERE id = ?1";

}  // namespace

result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms) {
  auto read = d.prepare(read_claimable);
  if (!read)
    return read.error();
  auto write = d.prepare(claim_job);
  if (!write)
    return write.error();
  auto& r = **read;
  auto& w = **write;
  claim_jobs_result out;
  out.claimed.reserve(args.claims.size());
  for (auto& c : args.claims) {
    r.reset();
    r.bind(1, c.row);
    r.bind(2, now_ms);
    if (!r.step()) {
      if (!r.step_status())
        return r.step_status();
      out.missed.push_back(c.row);
      continue;
    }
    claimed_job j;
    j.key = rows::read_key(r, 0);
    j.try_number = static_cast<int32_t>(r.column_int(rows::key_column_count + 0));
    j.payload = r.column_blob(rows::key_column_count + 1);
    j.expires_at = r.column_int(rows::key_column_count + 2);
    j.token = c.token;
    j.started_at = now_ms;
    r.reset();
    w.reset();
    w.bind(1, c.row);
    w.bind(2, int64_t{j.try_number});
    w.bind(3, c.token);
    w.bind(4, now_ms);
    w.bind(5, j.expires_at);
    if (auto st = d.run(w); !st)
      return st;
    out.claimed.push_back(std::move(j));
  }
  return out;
}

}  // namespace ergon::storage
