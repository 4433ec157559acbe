#include "ergon/storage/op/list_jobs.hpp"

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/op/meta.hpp"
#include "job_filter_sql.hpp"
#include "job_rows.hpp"

namespace ergon::storage {

const char* list_jobs_sql(const job_filter& filter, bool newest_first, engine e) {
  return filter_sql::select(filter_sql::use::info, filter, newest_first, e);
}

result<job_page> list_jobs(db& d, const job_filter& filter, const page_request& page) {
  if (auto st = validate(filter); !st)
    return st;
  if (page.limit < 1 || page.limit > max_page_size)
    return invalid_field("limit", "must be 1 to " + std::to_string(max_page_size) + ", got "
                                    + std::to_string(page.limit));
  filter_sql::range r{page.newest_first ? INT64_MAX : 0, page.newest_first ? 0 : INT64_MAX};
  if (page.after) {
    auto row = row_of(*page.after);
    if (!row)
      return invalid_field("after", page.after->to_string() + " is no job id of ergon's");
    r.after = *row;
  }
  int64_t mark = 0;
  if (filter.status && !is_final(*filter.status)) {
    auto meta = read_meta(d);
    if (!meta)
      return meta.error();
    mark = meta->unfinished_low_mark;
  }
  auto s = d.prepare(list_jobs_sql(filter, page.newest_first, d.engine()));
  if (!s)
    return s.error();
  auto& q = **s;
  // One more than the page, to know whether another page follows.
  filter_sql::bind(q, filter, r, mark, static_cast<int64_t>(page.limit) + 1);
  struct found {
    int64_t row = 0;
    rows::row_details details;
    job_info info;
  };
  std::vector<found> rows_found;
  while (q.step()) {
    found f;
    f.info = rows::read_info(q, f.row, f.details);
    rows_found.push_back(std::move(f));
  }
  auto read = q.step_status();
  q.reset();
  if (!read)
    return read;
  job_page out;
  if (rows_found.size() > page.limit) {
    rows_found.pop_back();
    out.next = rows_found.back().info.id;
  }
  for (auto& f : rows_found) {
    if (auto st = rows::read_attempts(d, f.row, f.details, f.info); !st)
      return st;
    if (auto st = rows::read_dependencies(d, f.row, f.details, f.info); !st)
      return st;
    if (auto st = rows::read_tags(d, f.row, f.details, f.info); !st)
      return st;
    out.jobs.push_back(std::move(f.info));
  }
  return out;
}

}  // namespace ergon::storage
