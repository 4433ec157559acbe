// claim_jobs: starting attempts of pending jobs (storage/src/claim_jobs.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct claim_jobs_args {
  /// The jobs the dispatcher wants to start, with the tokens it chose.
  std::vector<attempt_ref> claims;
};

struct claim_jobs_result {
  std::vector<claimed_job> claimed;
  /// Rows that were no longer pending and due (cancelled, updated to a later
  /// run_at, or already claimed). Not an error.
  std::vector<int64_t> missed;
};

/// PostgreSQL's statement that claims a batch (?1 rows, ?2 tokens, ?3 now),
/// for the plan check in test-storage.
const char* claim_batch_sql() noexcept;

/// Marks each requested job running: try + 1, the attempt token, started_at
/// and expires_at = now + timeout. Only jobs still pending and due are taken.
result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms);

}  // namespace ergon::storage
