// cancel_job: cancelling a pending or running job (storage/src/cancel_job.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

/// What cancel_job did.
struct cancel_job_result {
  /// Set if the job was pending: it is cancelled now.
  std::optional<cancelled_job> pending;
  /// Set if it was running: the attempt asked to stop, and the job's key.
  /// Its end (stop, failure, expiry, recovery) will end the job
  /// `cancelled`; a success that commits first still wins.
  std::optional<attempt_ref> running;
  job_key key;
};

/// Cancels a pending job as cancel_pending does, or records a cancel
/// request (cancel_requested_at, kept from the first request) for a running
/// one. Errors: not_found, job_finished. Nothing changes on error.
struct cancel_job_args {
  job_id id;
};
result<cancel_job_result> cancel_job(db& d, const cancel_job_args& args, int64_t now_ms);

}  // namespace ergon::storage
