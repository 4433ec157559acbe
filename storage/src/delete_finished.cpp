#include "ergon/storage/op/delete_finished.hpp"

#include "ergon/storage/pg_db.hpp"
#include "job_filter_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_row_at_or_after =
  "SELECT id, added_at FROM jobs WHERE id >= ?1 ORDER BY id LIMIT 1";

// Two subqueries: SQLite answers a lone min() or max() from the ends of the
// table, but one query with both scans every row.
constexpr const char* select_row_range =
  "SELECT coalesce((SELECT min(id) FROM jobs), 0), coalesce((SELECT max(id) FROM jobs), 0)";

// New rows must come after every row there was (see rows::next_row).
constexpr dialect_sql keep_high_water = {
  "INSERT INTO meta (key, value) VALUES ('row_high_water', "
  "coalesce((SELECT max(id) FROM jobs), 0)) "
  "ON CONFLICT (key) DO UPDATE SET value = max(meta.value, excluded.value)",
  "INSERT INTO meta (key, value) VALUES ('row_high_water', "
  "coalesce((SELECT max(id) FROM jobs), 0)) "
  "ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value, excluded.value)"};

constexpr dialect_sql drop_results = {
  "UPDATE jobs SET result = NULL, result_expires_at = NULL WHERE id IN "
  "(SELECT id FROM jobs INDEXED BY jobs_by_result_expiry "
  "WHERE result_expires_at IS NOT NULL AND result_expires_at <= ?1 LIMIT ?2)",
  "UPDATE jobs SET result = NULL, result_expires_at = NULL WHERE id = ANY(ARRAY("
  "SELECT id FROM jobs WHERE result_expires_at IS NOT NULL AND result_expires_at <= ?1 "
  "LIMIT ?2))"};

// The edges of deleted jobs (schema.cpp, version 10: no foreign keys). On
// SQLite one row a statement, each by one of the table's two keys.
constexpr const char* delete_edges_on = "DELETE FROM job_dependencies WHERE depends_on = ?1";
constexpr const char* delete_edges_of = "DELETE FROM job_dependencies WHERE job_id = ?1";
constexpr const char* delete_edges_pg =
  "DELETE FROM job_dependencies WHERE depends_on = ANY(CAST(?1 AS bigint[])) "
  "OR job_id = ANY(CAST(?1 AS bigint[]))";

status delete_edges(db& d, const std::vector<deleted_job>& jobs) {
  if (jobs.empty())
    return {};
  if (d.engine() == engine::postgres) {
    std::vector<int64_t> rows;
    rows.reserve(jobs.size());
    for (auto& j : jobs)
      rows.push_back(j.row);
    auto s = d.prepare(delete_edges_pg);
    if (!s)
      return s.error();
    static_cast<pg_stmt&>(**s).bind_ints(1, rows);
    return d.send(**s);
  }
  for (auto sql : {delete_edges_on, delete_edges_of}) {
    auto s = d.prepare(sql);
    if (!s)
      return s.error();
    for (auto& j : jobs) {
      (*s)->reset();
      (*s)->bind(1, j.row);
      if (auto st = d.run(**s); !st)
        return st;
    }
  }
  return {};
}

// Both engines; the index on expires_at finds the oldest.
constexpr const char* delete_expired_keys =
  "DELETE FROM idempotency_keys WHERE key IN (SELECT key FROM idempotency_keys "
  "WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)";

// PostgreSQL only (pg_schema.cpp, version 5).
constexpr const char* forget_taken =
  "DELETE FROM inbox WHERE id IN (SELECT id FROM inbox WHERE taken_at IS NOT NULL "
  "AND taken_at < ?1 ORDER BY taken_at LIMIT ?2)";

}  // namespace

result<delete_finished_result> delete_finished(db& d, const delete_finished_args& args) {
  if (!args.filter.status || !is_final(*args.filter.status))
    return invalid_field("status", "only finished jobs are deleted: set a final status");
  if (auto st = validate(args.filter); !st)
    return st;
  auto mark = d.prepare(keep_high_water);
  if (!mark)
    return mark.error();
  if (auto st = d.run(**mark); !st)
    return st;
  auto s = d.prepare(filter_sql::select(filter_sql::use::removal, args.filter, false, d.engine()));
  if (!s)
    return s.error();
  auto& q = **s;
  filter_sql::bind(q, args.filter, {args.after_row, args.before_row}, 0,
                   static_cast<int64_t>(args.limit));
  delete_finished_result out;
  while (q.step())
    out.deleted.push_back(
      {q.column_int(0), q.column_text(1), static_cast<job_status>(q.column_int(2))});
  auto done = q.step_status();
  q.reset();
  if (!done)
    return done;
  if (auto st = delete_edges(d, out.deleted); !st)
    return st;
  if (out.deleted.size() >= args.limit)
    for (auto& j : out.deleted)
      out.resume_after = std::max(out.resume_after, j.row);
  return out;
}

result<int64_t> first_row_submitted_at_or_after(db& d, int64_t at_ms) {
  auto bounds = d.prepare(select_row_range);
  if (!bounds)
    return bounds.error();
  if (!(*bounds)->step())
    return (*bounds)->step_status();
  int64_t lo = (*bounds)->column_int(0);
  int64_t hi = (*bounds)->column_int(1) + 1;  // answer in [lo, hi]
  (*bounds)->reset();
  auto probe = d.prepare(select_row_at_or_after);
  if (!probe)
    return probe.error();
  auto& q = **probe;
  while (lo < hi) {
    auto mid = lo + (hi - lo) / 2;
    q.reset();
    q.bind(1, mid);
    if (!q.step()) {
      if (!q.step_status())
        return q.step_status();
      hi = mid;  // no row at or after mid
      continue;
    }
    auto row = q.column_int(0);
    if (q.column_int(1) >= at_ms)
      hi = mid;
    else
      lo = row + 1;
  }
  q.reset();
  return lo;
}

namespace {

// Runs `sql` with ?1 now and ?2 the limit; how many rows it changed.
template <class Sql>
result<int64_t> delete_due(db& d, const Sql& sql, int64_t now_ms, size_t limit) {
  auto s = d.prepare(sql);
  if (!s)
    return s.error();
  (*s)->bind(1, now_ms);
  (*s)->bind(2, static_cast<int64_t>(limit));
  if (auto st = d.run(**s); !st)
    return st;
  return d.changes();
}

}  // namespace

result<int64_t> drop_expired_results(db& d, int64_t now_ms, size_t limit) {
  return delete_due(d, drop_results, now_ms, limit);
}

result<int64_t> expire_idempotency_keys(db& d, int64_t now_ms, size_t limit) {
  return delete_due(d, delete_expired_keys, now_ms, limit);
}

result<int64_t> forget_inbox_entries(db& d, int64_t before_ms, size_t limit) {
  if (d.engine() != engine::postgres)
    return int64_t{0};
  return delete_due(d, forget_taken, before_ms, limit);
}

}  // namespace ergon::storage
