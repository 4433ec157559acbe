#include "ergon/storage/op/read_dependency_results.hpp"

#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_current =
  "SELECT 1 FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2";

// A page's rows are chosen in SQL, by the bytes before each (its result
// and a row's cost), so neither engine hands the client more than a page:
// PostgreSQL would send every row of an unbounded query at once. length()
// of a blob reads no more than its size on either engine.
constexpr const char* select_results =
  "SELECT depends_on, external_id, status, result, remaining FROM ("
  "SELECT e.depends_on, j.external_id, j.status, j.result, count(*) OVER () AS remaining, "
  "sum(coalesce(length(j.result), 0) + 64) OVER (ORDER BY e.depends_on) "
  "- (coalesce(length(j.result), 0) + 64) AS before "
  "FROM dependency_edges e JOIN jobs j ON j.id = e.depends_on "
  "WHERE e.job_id = ?1 AND e.depends_on > ?2) page "
  "WHERE before < ?3 ORDER BY depends_on LIMIT ?4";

}  // namespace

result<read_dependency_results_result> read_dependency_results(
  db& d, const read_dependency_results_args& args) {
  {
    auto s = d.prepare(select_current);
    if (!s)
      return s.error();
    (*s)->bind(1, args.row);
    (*s)->bind(2, args.token);
    bool current = (*s)->step();
    if (!(*s)->step_status())
      return (*s)->step_status();
    (*s)->reset();
    if (!current)
      return status{error::stale_attempt,
                    "attempt of job row " + std::to_string(args.row) + " is no longer current"};
  }
  auto s = d.prepare(select_results);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, args.row);
  q.bind(2, args.after);
  q.bind(3, static_cast<int64_t>(args.max_bytes));
  q.bind(4, static_cast<int64_t>(args.max_rows));
  read_dependency_results_result out;
  int64_t last = 0;
  int64_t remaining = 0;  // rows from this page's first on
  while (q.step()) {
    last = q.column_int(0);
    remaining = q.column_int(4);
    dependency_result r;
    r.id = rows::column_id(q, 1);
    r.status = static_cast<job_status>(q.column_int(2));
    r.result = q.column_opt_blob(3);
    out.results.push_back(std::move(r));
  }
  if (!q.step_status())
    return q.step_status();
  q.reset();
  if (remaining > static_cast<int64_t>(out.results.size()))
    out.next_after = last;
  return out;
}

}  // namespace ergon::storage
