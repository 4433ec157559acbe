// add_finished_counts: the finished_counts table's share of a transaction
// (storage/src/add_finished_counts.cpp).
#pragma once

#include "ergon/error.hpp"
#include "ergon/storage/count_delta.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// Adds the finished statuses of `delta` (succeeded, failed, cancelled,
/// expired) to the finished_counts table: one UPSERT per (type, status) whose
/// change is not zero. Pending and running changes are skipped, so submits,
/// claims and retries cost nothing here. Runs in the caller's transaction,
/// which must be the one that finished the jobs: the table then always equals
/// a count of the finished jobs.
status add_finished_counts(db& d, const count_delta& delta);

}  // namespace ergon::storage
