// release_claims: giving back claims whose code never started
// (storage/src/release_claims.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct release_claims_args {
  std::vector<attempt_ref> attempts;
};

/// Puts claimed jobs whose code never started back to pending, as if the
/// claim had not happened: the try is not spent. An attempt that is no
/// longer running (it expired meanwhile) is skipped.
struct release_claims_result {
  std::vector<released_claim> released;
  /// Claims of jobs asked to stop (cancel_job): they end `cancelled`
  /// instead, so a cancel acknowledged before the release is not lost.
  std::vector<attempt_end> cancelled;
};
result<release_claims_result> release_claims(db& d, const release_claims_args& args,
                                             int64_t now_ms);

}  // namespace ergon::storage
