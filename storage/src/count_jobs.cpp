#include "ergon/storage/operations.hpp"

namespace ergon::storage {
namespace {

// Finished jobs from their table; unfinished ones by a rowid range scan from
// the low mark, below which every job is finished.
constexpr const char* read_counts =
  "SELECT type, status, n FROM ("
  "  SELECT type, status, count AS n FROM finished_counts WHERE count <> 0"
  "  UNION ALL"
  "  SELECT type, status, count(*) FROM jobs"
  "  WHERE id >= (SELECT value FROM meta WHERE key = 'unfinished_low_mark')"
  "    AND status IN (0, 1) GROUP BY type, status"
  ") ORDER BY type, status";

// Every job is read: only for files without finished_counts, and to check it.
constexpr const char* count_by_type_and_status =
  "SELECT type, status, count(*) FROM jobs GROUP BY type, status ORDER BY type, status";

}  // namespace

result<std::vector<type_status_count>> count_jobs(db& d, count_source from) {
  auto prepared =
    d.prepare(from == count_source::table ? read_counts : count_by_type_and_status);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  std::vector<type_status_count> out;
  while (s.step())
    out.push_back({s.column_text(0), static_cast<job_status>(s.column_int(1)),
                   s.column_int(2)});
  if (!s.step_status())
    return s.step_status();
  return out;
}

}  // namespace ergon::storage
