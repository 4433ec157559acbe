#include "ergon/storage/operations.hpp"
#include "ergon/storage/job_ids.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_by_id =
  "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs WHERE id = ?1 AND external_id = ?2";

constexpr const char* select_by_name =
  "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs WHERE name = ?1 ORDER BY id";

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
  auto info = rows::read_info(s, row_id);
  s.reset();
  if (auto st = rows::read_attempts(d, row_id, info); !st)
    return st;
  return info;
}

result<std::vector<job_info>> read_jobs_by_name(db& d, const std::string& name) {
  auto prepared = d.prepare(select_by_name);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind_text(1, name);
  std::vector<std::pair<int64_t, job_info>> found;
  while (s.step()) {
    int64_t row = 0;
    auto info = rows::read_info(s, row);
    found.emplace_back(row, std::move(info));
  }
  if (!s.step_status())
    return s.step_status();
  std::vector<job_info> out;
  out.reserve(found.size());
  for (auto& [row, info] : found) {
    if (auto st = rows::read_attempts(d, row, info); !st)
      return st;
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ergon::storage
