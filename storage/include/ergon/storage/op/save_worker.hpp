// save_worker and the other writes of the workers table: who ran each
// attempt (storage/src/save_worker.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// A worker's registration (worker_identity) and when it started and ended.
struct worker_row {
  worker_identity identity;
  int64_t registered_at = 0;
  std::optional<int64_t> left_at;
};

/// Writes the row of `w.identity.id`, replacing one with that id: a
/// registration, then its end.
status save_worker(db& d, const worker_row& w);

/// The id the next registration gets: one past the highest recorded, so
/// that ids count on across reopens and takeovers.
result<int64_t> next_worker_id(db& d);

/// Every worker still recorded as registered left at `now`: an open finds
/// the last owner's workers gone (a remote one joins again under a new id).
status end_registrations(db& d, int64_t now);

/// Deletes up to `limit` workers that left before `before`, but never the
/// one with the highest id; returns how many.
result<int64_t> delete_departed_workers(db& d, int64_t before, int64_t limit);

/// The recorded identities of these worker ids; an id without a row is
/// left out.
result<std::vector<worker_identity>> read_workers(db& d, const std::vector<int64_t>& ids);

}  // namespace ergon::storage
