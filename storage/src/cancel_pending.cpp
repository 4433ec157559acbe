#include "ergon/storage/operations.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* cancel_job =
  "UPDATE jobs SET status = 4, finished_at = ?2 WHERE id = ?1 AND status = 0";

}  // namespace

result<cancelled_job> cancel_pending(db& d, const cancel_pending_args& args, int64_t now_ms) {
  auto found = rows::find_job(d, args.id);
  if (!found)
    return found.error();
  if (found->status != job_status::pending)
    return rows::not_pending_error(args.id, found->status);
  auto prepared = d.prepare(cancel_job);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind(1, found->row);
  s.bind(2, now_ms);
  if (auto st = d.run(s); !st)
    return st;
  if (d.changes() != 1)
    return status{error::internal, "cancel_pending: job row changed underneath"};
  auto next = on_job_final(d, found->row, job_status::cancelled, now_ms);
  if (!next)
    return next.error();
  return cancelled_job{std::move(found->key), std::move(*next)};
}

}  // namespace ergon::storage
