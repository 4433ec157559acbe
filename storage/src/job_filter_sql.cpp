#include "job_filter_sql.hpp"

#include <array>

#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage::filter_sql {
namespace {

// Every optional field is a bound parameter that filters only when set. The
// casts give PostgreSQL each parameter's type where it is tested for NULL.
constexpr const char* residual =
  " AND (CAST(?3 AS BIGINT) IS NULL OR status = ?3) AND (CAST(?4 AS TEXT) IS NULL OR type = ?4)"
  " AND (CAST(?5 AS TEXT) IS NULL OR group_key = ?5) AND (CAST(?6 AS TEXT) IS NULL OR name = ?6)"
  " AND (CAST(?7 AS BIGINT) IS NULL OR added_at >= ?7) AND (CAST(?8 AS BIGINT) IS NULL OR added_at < ?8)"
  " AND (CAST(?9 AS BIGINT) IS NULL OR finished_at >= ?9)"
  " AND (CAST(?10 AS BIGINT) IS NULL OR finished_at < ?10)";

bool is_unsuccessful(job_status s) {
  return s == job_status::failed || s == job_status::cancelled || s == job_status::expired;
}

enum path : size_t { by_name, unsuccessful, unfinished, by_row, path_count };

path path_of(const job_filter& f) {
  if (f.name)
    return by_name;
  if (f.status && is_unsuccessful(*f.status))
    return unsuccessful;
  if (f.status && !is_final(*f.status))
    return unfinished;
  return by_row;
}

std::string build(use u, path p, bool newest_first, engine e) {
  // PostgreSQL plans its own way to the same indexes: it has no INDEXED BY.
  bool sqlite = e == engine::sqlite;
  std::string select = u == use::info ? "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs"
                                      : "SELECT id FROM jobs";
  // `dead_letter_status = ?3` and `name = ?6` imply their partial index's
  // `IS NOT NULL` by themselves.
  switch (p) {
    case by_name:
      select += sqlite ? " INDEXED BY jobs_by_name" : "";
      select += " WHERE name = ?6 AND ";
      break;
    case unsuccessful:
      select += sqlite ? " INDEXED BY jobs_unsuccessful" : "";
      select += " WHERE dead_letter_status = ?3 AND ";
      break;
    case unfinished: select += " WHERE id >= ?2 AND "; break;
    default: select += " WHERE "; break;
  }
  select += newest_first ? "id < ?1 AND id > ?12" : "id > ?1 AND id < ?12";
  select += residual;
  select += newest_first ? " ORDER BY id DESC LIMIT ?11" : " ORDER BY id LIMIT ?11";
  if (u == use::removal)
    return "DELETE FROM jobs WHERE id IN (" + select + ") RETURNING id, type, status";
  return select;
}

constexpr size_t use_count = 3;
constexpr size_t engine_count = 2;
using table = std::array<std::string, use_count * path_count * 2 * engine_count>;

size_t slot(use u, path p, bool newest_first, engine e) {
  return ((static_cast<size_t>(u) * path_count + p) * 2 + (newest_first ? 1 : 0)) * engine_count
         + static_cast<size_t>(e);
}

const table& statements() {
  static const table all = [] {
    table t;
    for (auto u : {use::info, use::rows, use::removal})
      for (size_t p = 0; p < path_count; ++p)
        for (bool desc : {false, true})
          for (auto e : {engine::sqlite, engine::postgres})
            t[slot(u, static_cast<path>(p), desc, e)] = build(u, static_cast<path>(p), desc, e);
    return t;
  }();
  return all;
}

}  // namespace

const char* select(use u, const job_filter& f, bool newest_first, engine e) {
  return statements()[slot(u, path_of(f), newest_first, e)].c_str();
}

void bind(stmt& s, const job_filter& f, range r, int64_t low_mark, int64_t limit) {
  s.bind(1, r.after);
  s.bind(2, low_mark);
  if (f.status)
    s.bind(3, static_cast<int64_t>(*f.status));
  else
    s.bind_null(3);
  s.bind(4, f.type);
  s.bind(5, f.group);
  s.bind(6, f.name);
  s.bind(7, f.submitted_from_ms);
  s.bind(8, f.submitted_before_ms);
  s.bind(9, f.finished_from_ms);
  s.bind(10, f.finished_before_ms);
  s.bind(11, limit);
  s.bind(12, r.far_end);
}

}  // namespace ergon::storage::filter_sql
