#include "ergon/storage/operations.hpp"
#include "job_rows.hpp"
#include "recurring_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* delete_row = "DELETE FROM recurring_jobs WHERE id = ?1";

// The recurring job is gone first, so nothing follows the instance.
constexpr const char* cancel_instance =
  "UPDATE jobs SET status = 4, finished_at = ?2, last_message = 'recurring job deleted' "
  "WHERE id = ?1 AND status = 0";

}  // namespace

result<std::optional<job_key>> delete_recurring(db& d, const delete_recurring_args& args,
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
    return std::optional<job_key>{};
  auto c = d.prepare(cancel_instance);
  if (!c)
    return c.error();
  (*c)->bind(1, (*instance)->key.row);
  (*c)->bind(2, now_ms);
  if (auto st = d.run(**c); !st)
    return st;
  return std::optional<job_key>{std::move((*instance)->key)};
}

}  // namespace ergon::storage
