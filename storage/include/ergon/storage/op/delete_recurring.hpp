// delete_recurring: deleting a recurring job (storage/src/delete_recurring.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct delete_recurring_args {
  std::string id;
};

/// Deletes a recurring job. Its pending instance is cancelled (and
/// returned, with what that did to the jobs waiting on it); a running
/// instance finishes, and no instance follows it. Error: not_found.
result<std::optional<cancelled_job>> delete_recurring(db& d, const delete_recurring_args& args,
                                                      int64_t now_ms);

}  // namespace ergon::storage
