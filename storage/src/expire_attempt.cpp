#include "ergon/storage/op/expire_attempt.hpp"

#include "attempt_end.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_expiry =
  "SELECT expires_at FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2";

}  // namespace

result<expire_attempt_result> expire_attempt(db& d, const expire_attempt_args& args,
                                             int64_t now_ms) {
  auto s = d.prepare(select_expiry);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, args.row);
  q.bind(2, args.token);
  expire_attempt_result out;
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return out;  // gone: the attempt already ended
  }
  out.expires_at = q.column_int(0);
  q.reset();
  if (out.expires_at > now_ms) {
    out.what = expire_attempt_result::still_running;
    return out;
  }
  auto ended = end_attempt(d, args.row, args.token, {attempt_outcome::expired, "expired"},
                           retry_timing::backoff, args.random, now_ms);
  if (!ended)
    return ended.error();
  if (*ended) {
    out.what = expire_attempt_result::expired;
    out.ended = std::move(**ended);
  }
  return out;
}

}  // namespace ergon::storage
