#include "ergon/storage/op/heartbeat.hpp"

#include "ergon/storage/times.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// A checkpoint counts as a heartbeat.
#define ERGON_EXTEND_EXPIRY(greater)                                                        \
  "UPDATE jobs SET expires_at = " greater "(expires_at, "                                    \
  ERGON_SQL_ADD_MS("?3", "heartbeat_increment_ms") "), checkpoint = coalesce(?4, checkpoint) " \
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2 "               \
  "AND cancel_requested_at IS NULL RETURNING expires_at"
constexpr dialect_sql extend_expiry = {ERGON_EXTEND_EXPIRY("max"),
                                       ERGON_EXTEND_EXPIRY("greatest")};

constexpr const char* select_cancel_requested =
  "SELECT 1 FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2 "
  "AND cancel_requested_at IS NOT NULL";

}  // namespace

result<int64_t> heartbeat(db& d, const heartbeat_args& args, int64_t now_ms) {
  if (args.checkpoint && args.max_payload_bytes != 0
      && args.checkpoint->size() > args.max_payload_bytes)
    return invalid_field("payload", "checkpoint is " + std::to_string(args.checkpoint->size())
                                      + " bytes; the queue's limit is "
                                      + std::to_string(args.max_payload_bytes));
  auto s = d.prepare(extend_expiry);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, args.row);
  q.bind(2, args.token);
  q.bind(3, now_ms);
  if (args.checkpoint)
    q.bind_blob(4, *args.checkpoint);
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    auto c = d.prepare(select_cancel_requested);
    if (!c)
      return c.error();
    (*c)->bind(1, args.row);
    (*c)->bind(2, args.token);
    bool requested = (*c)->step();
    auto read = (*c)->step_status();
    (*c)->reset();
    if (!read)
      return read;
    if (requested)
      return status{error::cancelled, "job row " + std::to_string(args.row)
                                        + " was asked to stop (cancel); its attempt is no "
                                          "longer extended"};
    return status{error::stale_attempt, "attempt of job row " + std::to_string(args.row)
                                          + " is no longer current; heartbeat ignored"};
  }
  auto expires_at = q.column_int(0);
  q.reset();
  return expires_at;
}

}  // namespace ergon::storage
