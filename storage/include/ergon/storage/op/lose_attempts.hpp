// lose_attempts: ending the attempts of a remote worker that went away
// (storage/src/lose_attempts.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct lose_attempts_args {
  std::vector<attempt_ref> attempts;  ///< the lost worker's running attempts
};

/// A remote worker went away: each of its attempts that still runs ends as
/// "worker lost" and its job is retried at once (the try is spent), or ends
/// `failed` if it has no retries left. Attempts that already ended, or were
/// claimed again, are skipped.
result<std::vector<attempt_end>> lose_attempts(db& d, const lose_attempts_args& args,
                                               int64_t now_ms);

}  // namespace ergon::storage
