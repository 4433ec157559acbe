// idempotency_keys: the keys of submitted jobs (job::idempotency_key),
// kept for the queue's window, so a job submitted again under its key gets
// the first one's id and nothing is written. insert_jobs asks here first.
// Internal to storage/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage::idempotency {

/// 64-bit FNV-1a over every field of `j` but its idempotency key, each
/// length-prefixed: two submits of one job match, and a job that differs
/// in any field does not.
int64_t fingerprint(const job& j);

/// What each job of a batch is to the keys.
struct sorted {
  enum class kind : uint8_t {
    fresh,    ///< to insert (a key, if it has one, is recorded with it)
    known,    ///< its key is live with the same job: `known_id` is its id
    same_as,  ///< the same job as an earlier one of the batch, `same_as`
  };
  std::vector<kind> what;
  std::vector<job_id> known_id;
  std::vector<size_t> same_as;
  std::vector<int64_t> fingerprints;  ///< of keyed jobs
};

/// Sorts `jobs` out against the keys live at `now_ms`. Errors:
/// invalid_argument (one key on two different jobs of the batch, naming
/// both), already_exists (a live key that a different job took, naming it;
/// field "idempotency_key"), the database's.
result<sorted> sort_out(db& d, const std::vector<job>& jobs, int64_t now_ms);

/// Records that `key` names job `id` until `expires_at_ms`, replacing an
/// expired record of it. Write operation.
status record(db& d, const std::string& key, const job_id& id, int64_t fingerprint,
              int64_t expires_at_ms);

}  // namespace ergon::storage::idempotency
