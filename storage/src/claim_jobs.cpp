#include "ergon/storage/op/claim_jobs.hpp"

#include <algorithm>

#include "ergon/storage/pg_db.hpp"
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

// PostgreSQL: the whole batch in one statement and one round trip. Rows are
// found with `id = ANY(array)`, an index lookup each; joined with unnest()
// instead, PostgreSQL 15 hashed the table's rows, or looked them up and
// hashed the requests, both slower (test-storage checks the plan). A row's
// place in the array gives its token and its order.
#define ERGON_CLAIM_PLACE "array_position(CAST(?1 AS bigint[]), id)"
constexpr const char* claim_batch =
  "UPDATE jobs SET status = " ERGON_SQL_RUNNING ", current_try = current_try + 1, "
  "attempt_token = (CAST(?2 AS bigint[]))[" ERGON_CLAIM_PLACE "], started_at = ?3, "
  "expires_at = " ERGON_SQL_ADD_MS("?3", "timeout_ms") ", progress_at = NULL "
  "WHERE id = ANY(CAST(?1 AS bigint[])) AND status = " ERGON_SQL_PENDING " AND run_at <= ?3 "
  "AND (deadline IS NULL OR deadline >= ?3) "
  "RETURNING " ERGON_CLAIM_PLACE ", " ERGON_JOB_KEY_COLUMNS ", current_try, "
  "coalesce(checkpoint, payload), expires_at, attempt_token";

result<claim_jobs_result> claim_on_postgres(pg_db& d, const claim_jobs_args& args,
                                            int64_t now_ms) {
  auto s = d.prepare(claim_batch);
  if (!s)
    return s.error();
  auto& q = static_cast<pg_stmt&>(**s);
  std::vector<int64_t> rows, tokens;
  rows.reserve(args.claims.size());
  tokens.reserve(args.claims.size());
  for (auto& c : args.claims) {
    rows.push_back(c.row);
    tokens.push_back(c.token);
  }
  q.bind_ints(1, rows);
  q.bind_ints(2, tokens);
  q.bind(3, now_ms);
  std::vector<std::pair<int64_t, claimed_job>> taken;
  while (q.step()) {
    claimed_job j;
    j.key = rows::read_key(q, 1);
    j.try_number = static_cast<int32_t>(q.column_int(1 + rows::key_column_count));
    j.payload = q.column_blob(2 + rows::key_column_count);
    j.expires_at = q.column_int(3 + rows::key_column_count);
    j.token = q.column_int(4 + rows::key_column_count);
    j.started_at = now_ms;
    taken.emplace_back(q.column_int(0), std::move(j));
  }
  if (!q.step_status())
    return q.step_status();
  // In the order asked for, as on SQLite; the rest were missed.
  std::sort(taken.begin(), taken.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  claim_jobs_result out;
  out.claimed.reserve(taken.size());
  size_t next = 0;
  for (size_t k = 0; k < args.claims.size(); ++k) {
    if (next < taken.size() && taken[next].first == static_cast<int64_t>(k + 1))
      out.claimed.push_back(std::move(taken[next++].second));
    else
      out.missed.push_back(args.claims[k].row);
  }
  return out;
}

}  // namespace

const char* claim_batch_sql() noexcept {
  return claim_batch;
}

result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms) {
  if (d.engine() == engine::postgres)
    return claim_on_postgres(static_cast<pg_db&>(d), args, now_ms);
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
