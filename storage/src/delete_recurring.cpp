#include "ergon/storage/op/delete_recurring.hpp"

#include "job_rows.hpp"
#include "recurring_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* delete_row = "DELETE FROM recurring_jobs WHERE id = ?1";

}  // namespace

result<std::optional<cancelled_job>> delete_recurring(db& d, const delete_recurring_args& args,
                                                      int64_t now_ms) {
  auto s = d.prepare(delete_row);
  if (!s)
    return s.error();
  (*s)->bind_text(1, args.id);
  if (auto st = d.run(**s); !st)
    return st;
  if (d.changes() == 0)
    return status{error::not_found, "no recurring job with id '" + args.id + "'"};
  auto instance = rows::unfinished_instance(d, args.id);
  if (!instance)
    return instance.error();
  if (!*instance || (*instance)->status != job_status::pending)
    return std::optional<cancelled_job>{};
  // The recurring job is gone already, so nothing follows the instance.
  auto cancelled = rows::cancel_instance(d, (*instance)->key, "recurring job deleted", now_ms);
  if (!cancelled)
    return cancelled.error();
  return std::optional<cancelled_job>{std::move(*cancelled)};
}

}  // namespace ergon::storage
