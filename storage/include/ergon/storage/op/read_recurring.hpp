// read_recurring and list_recurring: reading recurring jobs
// (storage/src/read_recurring.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// A recurring job with its last and unfinished instance, and its pause if
/// one is in force at `now_ms`. Error: not_found.
result<recurring_info> read_recurring(db& d, const std::string& id, int64_t now_ms);

/// Recurring jobs whose id starts with `prefix` (byte for byte: % and _ are
/// ordinary characters), ordered by id. An empty prefix lists all.
result<std::vector<recurring_info>> list_recurring(db& d, const std::string& prefix,
                                                   int64_t now_ms);

}  // namespace ergon::storage
