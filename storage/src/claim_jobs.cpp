#include "ergon/storage/op/claim_jobs.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>

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

// A ttl from the first attempt becomes the deadline here, once; one that
// saturates at never is no deadline.
#define ERGON_SQL_FIRST_DEADLINE(started)                                                   \
  "deadline = coalesce(deadline, nullif(" ERGON_SQL_ADD_MS(started, "ttl_after_start")      \
  ", 9223372036854775807)), ttl_after_start = NULL, "

constexpr const char* claim_job =
  "UPDATE jobs SET status = " ERGON_SQL_RUNNING ", current_try = ?2, attempt_token = ?3, "
  "started_at = ?4, expires_at = ?5, " ERGON_SQL_FIRST_DEADLINE("?4")
  "progress_at = NULL, held_by = ?6, worker = ?7 WHERE id = ?1";

// PostgreSQL: the whole batch in one statement and one round trip. Rows are
// found with `id = ANY(array)`, an index lookup each; joined with unnest()
// instead, PostgreSQL 15 hashed the table's rows, or looked them up and
// hashed the requests, both slower (test-storage checks the plan).
//
// A row's token: where the tokens share a base (each is base XOR row, as
// the dispatcher makes them), computed from the row; otherwise found by
// the row's place in the array, which costs a search of the array per row,
// quadratic in the batch (5 µs a job at 256 claims).
#define ERGON_CLAIM_BATCH(token)                                                            \
  "UPDATE jobs SET status = " ERGON_SQL_RUNNING ", current_try = current_try + 1, "        \
  "attempt_token = " token ", started_at = ?3, "                                          \
  "expires_at = " ERGON_SQL_ADD_MS("?3", "timeout_ms") ", " ERGON_SQL_FIRST_DEADLINE("?3") \
  "progress_at = NULL, "                                                                    \
  "held_by = CAST(?4 AS text), worker = CAST(?5 AS bigint) "                              \
  "WHERE id = ANY(CAST(?1 AS bigint[])) AND status = " ERGON_SQL_PENDING " AND run_at <= ?3 " \
  "AND (deadline IS NULL OR deadline >= ?3) "                                             \
  "RETURNING " ERGON_JOB_KEY_COLUMNS ", current_try, coalesce(checkpoint, payload), "      \
  "expires_at, attempt_token"
constexpr const char* claim_batch =
  ERGON_CLAIM_BATCH("(CAST(?2 AS bigint[]))[array_position(CAST(?1 AS bigint[]), id)]");
constexpr const char* claim_batch_of_base = ERGON_CLAIM_BATCH("(CAST(?2 AS bigint) # id)");

// Binds the claim's holder at `i` and its worker at `i + 1`.
void bind_holder(stmt& q, int i, const claim_jobs_args& args) {
  if (args.holder.empty())
    q.bind_null(i);
  else
    q.bind_text(i, args.holder);
  if (args.worker == 0)
    q.bind_null(i + 1);
  else
    q.bind(i + 1, args.worker);
}

// Binds the batch's claim: `q` is then run by step(), or sent ahead by
// start_claim.
result<stmt*> bind_claim(pg_db& d, const claim_jobs_args& args, int64_t now_ms) {
  std::vector<int64_t> rows, tokens;
  rows.reserve(args.claims.size());
  tokens.reserve(args.claims.size());
  for (auto& c : args.claims) {
    rows.push_back(c.row);
    tokens.push_back(c.token);
  }
  auto base = shared_token_base(args.claims);
  auto s = d.prepare(base ? claim_batch_of_base : claim_batch);
  if (!s)
    return s.error();
  auto& q = static_cast<pg_stmt&>(**s);
  q.bind_ints(1, rows);
  if (base)
    q.bind(2, *base);
  else
    q.bind_ints(2, tokens);
  q.bind(3, now_ms);
  bind_holder(q, 4, args);
  return &q;
}

// The claimed rows of `q`, in the order asked for, as on SQLite.
result<claim_jobs_result> read_claim(stmt& q, const claim_jobs_args& args, int64_t now_ms) {
  std::unordered_map<int64_t, size_t> place;  // row -> index in args.claims
  for (size_t k = 0; k < args.claims.size(); ++k)
    place.emplace(args.claims[k].row, k);
  std::vector<std::optional<claimed_job>> taken(args.claims.size());
  while (q.step()) {
    claimed_job j;
    j.key = rows::read_key(q, 0);
    j.try_number = static_cast<int32_t>(q.column_int(rows::key_column_count));
    j.payload = q.column_blob(1 + rows::key_column_count);
    j.expires_at = q.column_int(2 + rows::key_column_count);
    j.token = q.column_int(3 + rows::key_column_count);
    j.started_at = now_ms;
    taken[place.at(j.key.row)] = std::move(j);
  }
  if (!q.step_status())
    return q.step_status();
  claim_jobs_result out;
  out.claimed.reserve(args.claims.size());
  for (size_t k = 0; k < args.claims.size(); ++k) {
    if (taken[k])
      out.claimed.push_back(std::move(*taken[k]));
    else
      out.missed.push_back(args.claims[k].row);
  }
  return out;
}

// SQLite: each row read, then written by id.
result<claim_jobs_result> claim_rows(db& d, const claim_jobs_args& args, int64_t now_ms) {
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
    bind_holder(w, 6, args);
    if (auto st = d.run(w); !st)
      return st;
    out.claimed.push_back(std::move(j));
  }
  return out;
}

}  // namespace

std::optional<int64_t> shared_token_base(const std::vector<attempt_ref>& attempts) {
  if (attempts.empty())
    return std::nullopt;
  int64_t base = attempts.front().token ^ attempts.front().row;
  for (auto& a : attempts)
    if ((a.token ^ a.row) != base)
      return std::nullopt;
  return base;
}

const char* claim_batch_sql(bool of_base) noexcept {
  return of_base ? claim_batch_of_base : claim_batch;
}

result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms) {
  if (d.engine() != engine::postgres)
    return claim_rows(d, args, now_ms);
  auto q = bind_claim(static_cast<pg_db&>(d), args, now_ms);
  if (!q)
    return q.error();
  return read_claim(**q, args, now_ms);
}

result<started_claim> start_claim(db& d, claim_jobs_args args, int64_t now_ms) {
  started_claim c;
  c.now_ms = now_ms;
  if (d.engine() != engine::postgres) {
    auto done = claim_rows(d, args, now_ms);
    if (!done)
      return done.error();
    c.claimed = std::move(*done);
  } else {
    auto& pg = static_cast<pg_db&>(d);
    auto q = bind_claim(pg, args, now_ms);
    if (!q)
      return q.error();
    if (auto st = pg.send_for_rows(static_cast<pg_stmt&>(**q)); !st)
      return st;
    c.sent = *q;
  }
  c.args = std::move(args);
  return c;
}

result<claim_jobs_result> finish_claim(started_claim& c) {
  if (c.sent == nullptr)
    return std::move(c.claimed);
  auto q = std::exchange(c.sent, nullptr);
  return read_claim(*q, c.args, c.now_ms);
}

}  // namespace ergon::storage
