// drain_inbox: taking in the jobs that PostgreSQL transactions enqueued in
// the inbox (include/ergon/pg.hpp; storage/src/drain_inbox.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/op/insert_jobs.hpp"

namespace ergon::storage {

struct drain_inbox_args {
  /// Most entries taken in by one call.
  size_t limit = 500;
  size_t max_payload_bytes = 0;  ///< 0: unlimited
  uint32_t id_tag = 0;           ///< the database's tag (read_meta)
  int64_t next_row = 0;          ///< as insert_jobs_args::next_row
  int64_t idempotency_window_ms = 86'400'000;
  /// Also deletes up to `limit` entries taken in before this time (ms); 0:
  /// none.
  int64_t forget_taken_before = 0;
  /// As insert_jobs_args::retry_policies.
  const std::map<std::string, backoff_policy>* retry_policies = nullptr;
};

/// An entry whose job was refused: recorded on its row.
struct inbox_refusal {
  int64_t entry = 0;
  std::string type;
  status why;
};

struct drain_inbox_result {
  /// The jobs inserted and the pending holders they replaced, as a submit
  /// of the entries in entry order would (its ids are not used).
  insert_jobs_result inserted;
  std::vector<inbox_refusal> refused;
  /// Entries taken in: inserted, skipped to a unique key's holder, or refused.
  size_t taken = 0;
  /// Entries deleted (drain_inbox_args::forget_taken_before).
  int64_t forgotten = 0;
  /// More entries may wait: this call took `limit`, or its byte budget.
  bool more = false;
};

/// Takes in up to `limit` entries that wait in the inbox, oldest first, as
/// one submit would, and records on each row its job's id (or the id of
/// the unique key's holder it was skipped to) or why it was refused. If
/// that submit fails, each entry goes as a submit of its own, and those
/// that fail are refused: invalid_argument naming the field (an entry's
/// payload past `max_payload_bytes` is refused unread), already_exists,
/// job_running, or any error of its own insert that left the transaction
/// usable. The others are still taken in. An error of the session or the
/// database (unreachable, busy, ...) fails the call, and the caller rolls
/// back. A call reads at most 64 MiB of payloads. Every waiting entry is
/// found, whatever the order in which their transactions committed. On
/// SQLite, which has no inbox, it takes nothing.
result<drain_inbox_result> drain_inbox(db& d, const drain_inbox_args& args, int64_t now_ms);

/// Whether drain_inbox would do anything: an entry waits, or (with
/// `forget_taken_before` > 0) one taken in before it is due to go. One read
/// that needs no write transaction, so a sweep that finds nothing costs no
/// commit. False on SQLite.
result<bool> inbox_has_work(db& d, int64_t forget_taken_before);

}  // namespace ergon::storage
