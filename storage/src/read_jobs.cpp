#include "ergon/storage/operations.hpp"
#include "ergon/storage/job_ids.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_by_id =
  "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs WHERE id = ?1 AND external_id = ?2";

constexpr const char* select_by_name =
  "SELECT " ERGON_JOB_INFO_COLUMNS " FROM jobs WHERE name = ?1 ORDER BY id LIMIT ?2";

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
  rows::latest_attempt latest;
  auto info = rows::read_info(s, row_id, latest);
  s.reset();
  if (auto st = rows::read_attempts(d, row_id, latest, info); !st)
    return st;
  return info;
}

result<std::vector<job_info>> read_jobs_by_name(db& d, const std::string& name, size_t limit) {
  auto prepared = d.prepare(select_by_name);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind_text(1, name);
  s.bind(2, static_cast<int64_t>(limit));
  struct found_job {
    int64_t row = 0;
    rows::latest_attempt latest;
    job_info info;
  };
  std::vector<found_job> found;
  while (s.step()) {
    found_job f;
    f.info = rows::read_info(s, f.row, f.latest);
    found.push_back(std::move(f));
  }
  if (!s.step_status())
    return s.step_status();
  std::vector<job_info> out;
  out.reserve(found.size());
  for (auto& f : found) {
    if (auto st = rows::read_attempts(d, f.row, f.latest, f.info); !st)
      return st;
    out.push_back(std::move(f.info));
  }
  return out;
}

}  // namespace ergon::storage
