#include "ergon/storage/op/cancel_job.hpp"

#include "ergon/storage/op/cancel_pending.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// The first request's time is kept: a second cancel changes nothing.
constexpr const char* request_cancel =
  "UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, ?2) "
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " RETURNING attempt_token";

}  // namespace

result<cancel_job_result> cancel_job(db& d, const cancel_job_args& args, int64_t now_ms) {
  auto found = rows::find_job(d, args.id);
  if (!found)
    return found.error();
  cancel_job_result out;
  if (found->status == job_status::pending || found->status == job_status::waiting) {
    auto cancelled = cancel_pending(d, cancel_pending_args{args.id}, now_ms);
    if (!cancelled)
      return cancelled.error();
    out.key = cancelled->key;
    out.pending = std::move(*cancelled);
    return out;
  }
  if (found->status != job_status::running)
    return rows::not_pending_error(args.id, found->status);
  auto s = d.prepare(request_cancel);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, found->row);
  q.bind(2, now_ms);
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return status{error::internal, "cancel_job: job row changed underneath"};
  }
  out.running = attempt_ref{found->row, q.column_int(0)};
  q.reset();
  out.key = std::move(found->key);
  return out;
}

}  // namespace ergon::storage
