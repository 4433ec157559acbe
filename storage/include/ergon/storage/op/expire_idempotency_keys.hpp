// expire_idempotency_keys: deleting idempotency keys past their window
// (storage/src/expire_idempotency_keys.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// Deletes up to `limit` idempotency keys whose window ended by `now_ms`,
/// oldest first, and returns how many. Write operation. A key past its
/// window already counts as free; this only gives the space back.
result<int64_t> expire_idempotency_keys(db& d, int64_t now_ms, size_t limit);

}  // namespace ergon::storage
