// heartbeat: extending a running attempt, and checkpoints
// (storage/src/heartbeat.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

struct heartbeat_args {
  int64_t row = 0;
  int64_t token = 0;
  /// Set for a checkpoint: the payload the next attempt receives.
  std::optional<std::string> checkpoint;
  size_t max_payload_bytes = 0;
};

/// Extends the running attempt: expires_at = max(expires_at, now +
/// heartbeat_increment); a checkpoint also stores the payload. Returns the new
/// expires_at. Errors, and nothing changes: stale_attempt; cancelled (a
/// cancel was requested: the attempt is no longer extended, so code that
/// ignores the request is fenced when it expires).
result<int64_t> heartbeat(db& d, const heartbeat_args& args, int64_t now_ms);

}  // namespace ergon::storage
