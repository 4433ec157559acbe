// savepoint: a write transaction nested in the caller's (storage/src/savepoint.cpp).
#pragma once

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// RAII SAVEPOINT: rolls back unless `release()` succeeds. SAVEPOINT and
/// RELEASE are sent (db::send): on PostgreSQL their failure surfaces from
/// the next statement and ends the whole transaction.
class savepoint {
 public:
  explicit savepoint(db& d);
  savepoint(const savepoint&) = delete;
  savepoint& operator=(const savepoint&) = delete;
  ~savepoint();
  /// Whether the SAVEPOINT statement itself succeeded.
  const status& begin_status() const noexcept { return begin_; }
  /// Makes the changes part of the enclosing transaction.
  status release();

 private:
  db& db_;
  status begin_;
  bool done_ = false;
};

}  // namespace ergon::storage
