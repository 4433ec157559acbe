// cancel_pending: cancelling a pending job (storage/src/cancel_pending.cpp).
#pragma once

#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct cancel_pending_args {
  job_id id;
};

/// Marks a pending job cancelled. Errors: not_found, job_running,
/// job_finished. Returns the key the job had.
result<cancelled_job> cancel_pending(db& d, const cancel_pending_args& args,
                                     int64_t now_ms);

}  // namespace ergon::storage
