// insert_jobs: submitting jobs (storage/src/insert_jobs.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct insert_jobs_args {
  std::vector<job> jobs;
  size_t max_payload_bytes = 0;  ///< 0: unlimited
  uint32_t id_tag = 0;           ///< the database's tag (read_meta)
  /// First free row id if the caller knows it (it holds the write lock and
  /// inserted last); 0 makes the operation read max(id) itself.
  int64_t next_row = 0;
  /// How long a job's idempotency key is kept (options::idempotency_window).
  int64_t idempotency_window_ms = 86'400'000;
  /// Per type, the backoff a job left at the defaults takes
  /// (options::retry_policies); null: none.
  const std::map<std::string, backoff_policy>* retry_policies = nullptr;
  /// For children (spawn_children): the parent's row, which waits on
  /// every job inserted; 0: none.
  int64_t parent = 0;
};

/// Gives `j` its type's policy from `policies` if its backoff is left at
/// the defaults; true if it did.
bool apply_retry_policy(job& j, const std::map<std::string, backoff_policy>& policies);

/// What a submit did.
struct insert_jobs_result {
  /// Per input job, in order: its new id, or the id of the job that holds
  /// its unique key (unique_policy::skip, or a later job of the same batch
  /// that replaced it).
  std::vector<job_id> ids;
  /// The jobs inserted pending, in input order.
  std::vector<job_key> added;
  /// The jobs inserted waiting for their dependencies, in input order.
  std::vector<job_key> waiting;
  /// Pending jobs cancelled by unique_policy::replace.
  std::vector<job_key> replaced;
  /// Pending holders a duplicate raised to its priority
  /// (job::raise_holder_priority).
  std::vector<key_change> raised;
  /// What the insert did to waiting jobs: those whose dependency had ended
  /// unsuccessfully ended at once (by their policy), and the jobs waiting
  /// on a replaced job were settled.
  dependents_settled dependents;
  /// The first row id past the rows inserted; 0 if none was.
  int64_t next_row = 0;
};

/// Validates every job, then inserts them as pending with fresh ids, or as
/// waiting if they depend on jobs that have not ended (job::depends_on;
/// invalid_argument "depends_on" for an id that names no job,
/// "depends_on_batch" for a position not before the job's own). A job
/// with a unique key meets a holder as its policy says; within the batch,
/// jobs are taken in order, as if submitted one by one. A job whose
/// idempotency key a job took within the window, with the same fields, is
/// not inserted: its id is that job's (idempotency_keys.hpp). All-or-
/// nothing: an invalid job (invalid_argument, also for one key on two
/// different jobs of the batch), a rejected key (already_exists, also for
/// an idempotency key taken by a different job), or a replace of a running
/// holder (job_running) fails the call, naming the job's position in a
/// batch, and the caller rolls back.
result<insert_jobs_result> insert_jobs(db& d, const insert_jobs_args& args, int64_t now_ms);

}  // namespace ergon::storage
