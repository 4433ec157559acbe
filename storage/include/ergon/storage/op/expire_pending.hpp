// expire_pending: ending pending jobs past their deadline
// (storage/src/expire_pending.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct expire_pending_args {
  std::vector<int64_t> rows;
};

struct expire_pending_result {
  std::vector<job_key> expired;
  /// Next instances of the recurring jobs among them.
  std::vector<job_key> next_instances;
  /// What their ends did to the jobs waiting on them.
  dependents_settled dependents;
};

/// Ends pending jobs whose deadline has passed as `expired`. Returns the keys
/// of the jobs it expired; rows no longer pending or not yet past their
/// deadline are skipped.
result<expire_pending_result> expire_pending(db& d, const expire_pending_args& args,
                                             int64_t now_ms);

}  // namespace ergon::storage
