#include "ergon/storage/operations.hpp"

namespace ergon::storage {
namespace {

constexpr const char* count_by_type_and_status =
  "SELECT type, status, count(*) FROM jobs GROUP BY type, status";

}  // namespace

result<std::vector<type_status_count>> count_jobs(db& d) {
  auto prepared = d.prepare(count_by_type_and_status);
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
