#include "ergon/storage/op/count_jobs.hpp"

#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// Finished jobs from their table; unfinished ones by a rowid range scan from
// the low mark, below which every job is finished.
constexpr const char* read_counts_sql =
  "SELECT type, status, n FROM ("
  "  SELECT type, status, count AS n FROM finished_counts WHERE count <> 0"
  "  UNION ALL"
  "  SELECT type, status, count(*) FROM jobs"
  "  WHERE id >= (SELECT value FROM meta WHERE key = 'unfinished_low_mark')"
  "    AND status IN (" ERGON_SQL_UNFINISHED ") GROUP BY type, status"
  ") AS counts ORDER BY type, status";

// Every job is read: only for files without finished_counts, and to check it.
constexpr const char* count_by_type_and_status =
  "SELECT type, status, count(*) FROM jobs GROUP BY type, status ORDER BY type, status";

constexpr const char* count_unfinished_groups =
  "SELECT coalesce(group_key, ''), status, count(*) FROM jobs"
  " WHERE id >= (SELECT value FROM meta WHERE key = 'unfinished_low_mark')"
  "   AND status IN (" ERGON_SQL_UNFINISHED ") GROUP BY 1, 2 ORDER BY 1, 2";

// Rows of (label, status, count), as `Row`.
template <class Row>
result<std::vector<Row>> read_counts(db& d, const char* sql) {
  auto prepared = d.prepare(sql);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  std::vector<Row> out;
  while (s.step())
    out.push_back({s.column_text(0), static_cast<job_status>(s.column_int(1)),
                   s.column_int(2)});
  if (!s.step_status())
    return s.step_status();
  return out;
}

}  // namespace

result<std::vector<group_status_count>> count_unfinished_by_group(db& d) {
  return read_counts<group_status_count>(d, count_unfinished_groups);
}

result<std::vector<type_status_count>> count_jobs(db& d, count_source from) {
  return read_counts<type_status_count>(
    d, from == count_source::table ? read_counts_sql : count_by_type_and_status);
}

}  // namespace ergon::storage
