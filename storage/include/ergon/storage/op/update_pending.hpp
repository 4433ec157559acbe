// update_pending: changing a pending job (storage/src/update_pending.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct update_pending_args {
  job_id id;
  job_update changes;
  size_t max_payload_bytes = 0;
};

/// Applies `changes` to a pending job. Errors: invalid_argument, not_found,
/// job_running, job_finished. Nothing changes on error.
result<key_change> update_pending(db& d, const update_pending_args& args,
                                  int64_t now_ms);

}  // namespace ergon::storage
