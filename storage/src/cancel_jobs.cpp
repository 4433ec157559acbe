#include "ergon/storage/op/cancel_jobs.hpp"

#include <algorithm>

#include "ergon/storage/op/cancel_pending.hpp"
#include "ergon/storage/op/meta.hpp"
#include "job_filter_sql.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// Only a first request: a job asked to stop before is not touched again.
constexpr const char* request_cancel =
  "UPDATE jobs SET cancel_requested_at = ?2 WHERE id = ?1 AND status = " ERGON_SQL_RUNNING
  " AND cancel_requested_at IS NULL RETURNING attempt_token";

}  // namespace

result<cancel_jobs_result> cancel_jobs(db& d, const cancel_jobs_args& args, int64_t now_ms) {
  const auto& f = args.filter;
  if (f.status && is_final(*f.status))
    return invalid_field("status", std::string{"a cancel takes unfinished jobs, not "}
                                     + to_string(*f.status) + " ones");
  if (auto st = validate(f); !st)
    return st;
  auto meta = read_meta(d);
  if (!meta)
    return meta.error();
  cancel_jobs_result out;
  out.before_row = args.before_row;
  if (out.before_row == 0) {
    auto end = end_of_rows(d);
    if (!end)
      return end.error();
    out.before_row = *end;
  }
  // Every unfinished job lies at or above the mark.
  auto after = std::max(args.after_row, meta->unfinished_low_mark - 1);
  auto s = d.prepare(filter_sql::select(filter_sql::use::rows, f, false, d.engine()));
  if (!s)
    return s.error();
  auto& q = **s;
  filter_sql::bind(q, f, {after, out.before_row}, meta->unfinished_low_mark,
                   static_cast<int64_t>(args.limit));
  std::vector<std::pair<int64_t, job_id>> found;
  while (q.step())
    found.emplace_back(q.column_int(0), rows::column_id(q, 1));
  auto read = q.step_status();
  q.reset();
  if (!read)
    return read;
  if (found.size() >= args.limit)
    out.resume_after = found.back().first;
  auto request = d.prepare(request_cancel);
  if (!request)
    return request.error();
  for (auto& [row, id] : found) {
    auto state = rows::find_job(d, id);
    if (!state)
      return state.error();
    if (state->status == job_status::pending || state->status == job_status::waiting) {
      auto cancelled = cancel_pending(d, cancel_pending_args{id}, now_ms);
      if (!cancelled)
        return cancelled.error();
      out.cancelled.push_back(std::move(*cancelled));
    } else if (state->status == job_status::running) {
      auto& r = **request;
      r.reset();
      r.bind(1, row);
      r.bind(2, now_ms);
      if (r.step())
        out.stop_requested.push_back({attempt_ref{row, r.column_int(0)}, std::move(state->key)});
      auto done = r.step_status();
      r.reset();
      if (!done)
        return done;
    }
  }
  return out;
}

}  // namespace ergon::storage
