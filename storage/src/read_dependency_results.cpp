#include "ergon/storage/op/read_dependency_results.hpp"

#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_current =
  "SELECT 1 FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2";

constexpr const char* select_results =
  "SELECT e.depends_on, j.external_id, j.status, j.result FROM job_dependencies e "
  "JOIN jobs j ON j.id = e.depends_on WHERE e.job_id = ?1 AND e.depends_on > ?2 "
  "ORDER BY e.job_id, e.depends_on";

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
  read_dependency_results_result out;
  size_t bytes = 0;
  int64_t last = 0;
  while (q.step()) {
    if (!out.results.empty() && bytes >= args.max_bytes) {
      out.next_after = last;  // another row follows
      break;
    }
    last = q.column_int(0);
    dependency_result r;
    r.id = rows::column_id(q, 1);
    r.status = static_cast<job_status>(q.column_int(2));
    r.result = q.column_opt_blob(3);
    bytes += r.result ? r.result->size() : 0;
    out.results.push_back(std::move(r));
  }
  if (!q.step_status())
    return q.step_status();
  q.reset();
  return out;
}

}  // namespace ergon::storage
