// claim_jobs: starting attempts of pending jobs (storage/src/claim_jobs.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct claim_jobs_args {
  /// The jobs the dispatcher wants to start, with the tokens it chose.
  std::vector<attempt_ref> claims;
  /// Who will run them, if that is a worker in another process:
  /// "<node>/<worker>", stored as the jobs' held_by. Empty: the owner's own
  /// worker (held_by NULL).
  std::string holder{};
  /// The worker's id (worker_identity::id), stored as the jobs' worker;
  /// 0: none recorded.
  int64_t worker = 0;
};

struct claim_jobs_result {
  std::vector<claimed_job> claimed;
  /// Rows that were no longer pending and due (cancelled, updated to a later
  /// run_at, or already claimed). Not an error.
  std::vector<int64_t> missed;
};

/// The base the tokens of `attempts` share, if each one is base XOR its row
/// (the dispatcher's tokens of one pick; a single attempt always shares
/// one). PostgreSQL's batches then compute each row's token rather than
/// search for it.
std::optional<int64_t> shared_token_base(const std::vector<attempt_ref>& attempts);

/// PostgreSQL's statement that claims a batch (?1 rows, ?2 tokens or, with
/// `of_base`, their shared base, ?3 now, ?4 holder, ?5 worker), for the plan check in
/// test-storage.
const char* claim_batch_sql(bool of_base = false) noexcept;

/// Marks each requested job running: try + 1, the attempt token, started_at
/// and expires_at = now + timeout. Only jobs still pending and due are taken.
result<claim_jobs_result> claim_jobs(db& d, const claim_jobs_args& args, int64_t now_ms);

/// A claim under way (start_claim).
struct started_claim {
  claim_jobs_args args;
  int64_t now_ms = 0;
  stmt* sent = nullptr;         // PostgreSQL: the claim, its rows not read yet
  claim_jobs_result claimed;    // SQLite: the claim, done
};

/// claim_jobs in two steps, so that the claim shares a round trip with
/// what follows it: PostgreSQL sends it now, and its rows come back with
/// the next statement that is read (pg_db::send_for_rows); SQLite claims
/// at once. Errors at start as claim_jobs's. On PostgreSQL, a failure that
/// comes with the rows has rolled the whole transaction back, and
/// finish_claim returns it; nothing else may read `c`'s statement before.
result<started_claim> start_claim(db& d, claim_jobs_args args, int64_t now_ms);
result<claim_jobs_result> finish_claim(started_claim& c);

}  // namespace ergon::storage
