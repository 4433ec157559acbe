// hold_attempts: keeping the attempts of a remote worker that is away
// (storage/src/hold_attempts.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct hold_attempts_args {
  std::vector<attempt_ref> attempts;
  /// The attempts run at least until then (ms): the worker's grace period
  /// to come back, during which it could not heartbeat.
  int64_t until = 0;
};

/// Moves each running attempt's expiry to at least `until`, never earlier,
/// and only where the row still runs that attempt (its token). One entry per
/// attempt, in order: the expiry now stored, or nullopt for an attempt that
/// no longer runs (stale). Write operation, in the caller's transaction.
result<std::vector<std::optional<int64_t>>> hold_attempts(db& d, const hold_attempts_args& args);

}  // namespace ergon::storage
