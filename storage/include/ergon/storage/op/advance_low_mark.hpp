// advance_low_mark: moving the unfinished low mark up while the queue runs
// (storage/src/advance_low_mark.cpp).
#pragma once

#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// Moves the low mark up past finished jobs while the queue runs, so the next
/// open scans the unfinished jobs, not the history since the previous open.
/// Reads at most `max_rows` rows from the mark and stops at the first pending
/// or running one. Returns the mark now stored. Write operation, in the
/// caller's transaction. Correct because a finished job never becomes
/// unfinished again and new jobs get higher row ids; an operation that breaks
/// either must lower the mark.
result<int64_t> advance_low_mark(db& d, int64_t max_rows);

/// Its statement (?1 max_rows), for the plan check in test-storage.
const char* advance_low_mark_sql() noexcept;

}  // namespace ergon::storage
