#include "ergon/storage/op/expire_idempotency_keys.hpp"

namespace ergon::storage {
namespace {

// Both engines; the index on expires_at finds the oldest.
constexpr const char* delete_expired =
  "DELETE FROM idempotency_keys WHERE key IN (SELECT key FROM idempotency_keys "
  "WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)";

}  // namespace

result<int64_t> expire_idempotency_keys(db& d, int64_t now_ms, size_t limit) {
  auto s = d.prepare(delete_expired);
  if (!s)
    return s.error();
  (*s)->bind(1, now_ms);
  (*s)->bind(2, static_cast<int64_t>(limit));
  if (auto st = d.run(**s); !st)
    return st;
  return d.changes();
}

}  // namespace ergon::storage
