#include "ergon/storage/op/cancel_pending.hpp"

#include "dependents.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
result<cancelled_job> cancel_pending(db& d, const cancel_pending_args& args, int64_t now_ms) {
  auto found = rows::find_job(d, args.id);
  if (!found)
    return found.error();
  if (found->status == job_status::waiting) {
    auto ended = end_waiting(d, found->row, job_status::cancelled, "cancelled while waiting",
                             now_ms);
    if (!ended)
      return ended.error();
    return cancelled_job{std::move(found->key), {}, std::move(*ended), true};
  }
  if (found->status != job_status::pending)
    return rows::not_pending_error(args.id, found->status);
  auto cancelled = rows::cancel_row(d, found->row, now_ms);
  if (!cancelled)
    return cancelled.error();
  if (!*cancelled)
    return status{error::internal, "cancel_pending: job row changed underneath"};
  auto effects = on_job_final(d, found->row, job_status::cancelled, now_ms);
  if (!effects)
    return effects.error();
  return cancelled_job{std::move(found->key), std::move(effects->next_instance),
                       std::move(effects->dependents)};
}

}  // namespace ergon::storage
