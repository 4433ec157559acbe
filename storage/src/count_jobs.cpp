#include "ergon/storage/operations.hpp"

namespace ergon::storage {
namespace {

constexpr const char* read_job_counts =
  "SELECT type, status, count FROM job_counts WHERE count <> 0 ORDER BY type, status";

// Every job is read: only for files without job_counts, and to check it.
constexpr const char* count_by_type_and_status =
  "SELECT type, status, count(*) FROM jobs GROUP BY type, status ORDER BY type, status";

}  // namespace

result<std::vector<type_status_count>> count_jobs(db& d, count_source from) {
  auto prepared =
    d.prepare(from == count_source::table ? read_job_counts : count_by_type_and_status);
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
