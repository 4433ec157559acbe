#include "ergon/storage/op/read_jobs.hpp"

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/op/list_jobs.hpp"
#include "ergon/storage/op/record_logs.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_by_id =
  "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs WHERE id = ?1 AND external_id = ?2";

}  // namespace

result<job_info> read_job(db& d, const job_id& id) {
  auto prepared = d.prepare(select_by_id);
  if (!prepared)
    return prepared.error();
  auto row = row_of(id);
  if (!row)
    return status{error::not_found, "no job with id " + id.to_string()};
  auto& s = **prepared;
  s.bind(1, *row);
  rows::bind_id(s, 2, id);
  if (!s.step()) {
    if (!s.step_status())
      return s.step_status();
    return status{error::not_found, "no job with id " + id.to_string()};
  }
  int64_t row_id = 0;
  rows::row_details details;
  auto info = rows::read_info(s, row_id, details);
  s.reset();
  if (auto st = rows::read_attempts(d, row_id, details, info); !st)
    return st;
  if (auto st = read_logs(d, row_id, info.attempts); !st)
    return st;
  if (auto st = rows::read_dependencies(d, row_id, details, info); !st)
    return st;
  if (auto st = rows::read_tags(d, row_id, details, info); !st)
    return st;
  return info;
}

result<std::vector<job_info>> read_jobs_by_name(db& d, const std::string& name, size_t limit) {
  if (name.empty())
    return std::vector<job_info>{};  // no job has an empty name
  job_filter by_name;
  by_name.name = name;
  page_request page;
  page.limit = limit;
  auto listed = list_jobs(d, by_name, page);
  if (!listed)
    return listed.error();
  return std::move(listed->jobs);
}

}  // namespace ergon::storage
