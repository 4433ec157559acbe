// options: how a queue opens its database and runs. Every field has a
// default; set only what you need.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ergon/clock.hpp"

namespace ergon {

/// What happens at open to jobs a dead process left running.
enum class recovery_mode : uint8_t {
  /// The interrupted attempt counts as failed; the job waits its backoff delay.
  retry_with_backoff,
  /// The interrupted attempt counts as failed; the job is due at once.
  retry_immediately,
};

/// Options for `queue::open`.
struct options {
  // -- behaviour ------------------------------------------------------------------

  /// Where time comes from. Empty: the system clock. Tests pass a
  /// manual_clock so retries and timeouts fire when the test advances it.
  std::shared_ptr<ergon::clock> clock;

  /// Largest payload (and checkpoint) accepted, in bytes. Larger ones fail
  /// with invalid_argument naming "payload".
  size_t max_payload_bytes = 1 << 20;

  /// What to do at open with jobs that were running when a process died.
  recovery_mode recovery = recovery_mode::retry_with_backoff;

  /// synchronous=FULL: an acknowledged job survives power loss, not just a
  /// process crash. Costs an fsync per commit (single submits get ~10x slower).
  bool synchronous_full = false;

  /// How long a write waits for a lock held by another process before it
  /// fails with `busy`.
  std::chrono::milliseconds busy_timeout{5'000};

  /// Upper bound on the database file, in bytes; 0 means no limit. Writes
  /// beyond it fail with `storage_full` and change nothing.
  int64_t max_database_bytes = 0;

  // -- performance ------------------------------------------------------------------

  /// Most write requests the writer folds into one transaction. Larger
  /// batches raise throughput under load; each waits for the whole batch.
  size_t writer_batch_limit = 1'024;

  /// How long the writer spins on an empty mailbox before it sleeps. Spinning
  /// saves the ~25 us wake-up on the next request (a claim usually follows a
  /// submit within this time), at the cost of up to this much CPU after each
  /// burst of writes.
  std::chrono::microseconds writer_idle_spin{300};

  /// Read-only connections for job_info and listing calls. Each holds its
  /// own page cache.
  size_t read_connections = 4;

  /// SQLite page cache per connection, in KiB. More memory, fewer reads.
  int64_t cache_kib = 64 * 1024;

  /// Scheduler threads when the queue owns its actor system. When you pass
  /// your own system, consider also setting
  /// "work-stealing.moderate-poll-attempts" to 0 in its config, as the queue
  /// does for its own (see docs/performance.md).
  size_t scheduler_threads = 2;
};

}  // namespace ergon
