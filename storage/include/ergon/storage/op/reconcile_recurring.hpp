// reconcile_recurring: putting recurring jobs' instances right at open
// (storage/src/reconcile_recurring.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct reconcile_recurring_result {
  std::vector<key_change> moved;   ///< skip-mode instances moved past missed slots
  std::vector<job_key> created;    ///< instances for recurring jobs that had none
};

/// At open, in the recovery transaction: a pending instance of a recurring
/// job in catch_up::skip mode that missed a later slot while the queue was
/// down moves to the first slot after now; a recurring job with no
/// unfinished instance (its time zone was missing from the tz database
/// when the last one ended) gets one. In catch_up::once mode a late
/// instance stays due: it is the one catch-up run.
result<reconcile_recurring_result> reconcile_recurring(db& d, int64_t now_ms);

}  // namespace ergon::storage
