// inspector: reads a queue's database without owning it.
//
//   auto in = ergon::queue::inspect("jobs.db");   // even while a program runs it
//   if (!in) { std::cerr << in.error() << '\n'; return 1; }
//   auto counts = in->counts();
//   auto job = in->job_info(id);
//
// An inspector takes no ownership, runs no recovery and writes no database
// content, so it works beside the process that owns the file. Operator tools
// use it. What it reads is the last committed state; scheduling state (group
// allocations, aging, pauses) lives in the owner's memory and is not visible.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/listing.hpp"
#include "ergon/recurring.hpp"
#include "ergon/scheduling.hpp"

namespace ergon {

/// A read-only view of a queue's database. Move-only; thread-safe.
class inspector {
 public:
  inspector(inspector&&) noexcept;
  inspector& operator=(inspector&&) noexcept;
  ~inspector();

  /// The job with its attempt history, as last committed. Its
  /// effective_priority is the stored priority: aging is the owner's.
  /// Errors: not_found; closed on a moved-from inspector; corrupt for a
  /// file that no queue of this version has opened yet (an inspector
  /// doesn't migrate; the reads below need schema version 4).
  result<ergon::job_info> job_info(const job_id& id) const;

  /// Jobs submitted with this name, oldest first, at most `limit` (1 to
  /// max_page_size); empty if none. Error: invalid_argument ("limit").
  result<std::vector<ergon::job_info>> jobs_by_name(const std::string& name,
                                                    size_t limit = max_page_size) const;

  /// One page of a listing, as queue::list_jobs gives it (same filters,
  /// order and errors), as last committed.
  result<job_page> list_jobs(const job_filter& filter, const page_request& page = {}) const;

  /// Dead letters, as queue::list_failed gives them.
  result<job_page> list_failed(job_filter filter, const page_request& page = {}) const;

  /// A recurring job as last committed (see queue::recurring_info).
  /// Errors: not_found, closed, corrupt (as job_info).
  result<ergon::recurring_info> recurring_info(const std::string& id) const;

  /// Recurring jobs whose id starts with `prefix` (see queue::list_recurring).
  result<std::vector<ergon::recurring_info>> list_recurring(const std::string& prefix = {}) const;

  /// Number of jobs in each status, counted from the file (a full scan).
  result<status_counts> counts() const;

  /// Job counts per status and type, and the run-time controls stored.
  /// The other scheduling fields stay empty.
  result<metrics_snapshot> metrics() const;

  /// The run-time controls stored (see queue::controls), as last committed;
  /// a timed pause whose end passed (by the system clock) is left out. A
  /// file no queue of this version has opened yet has none.
  result<std::vector<control_info>> controls() const;

  /// Writes a copy of the database, as last committed, to a new file at
  /// `out` (mode 0600), with SQLite's online backup: one consistent
  /// snapshot, taken beside a live owner that goes on writing, and nothing
  /// is written to the source. The copy is checked (quick_check) before it
  /// takes its name, so `out` is whole or absent; it is one file, with no
  /// WAL, and queue::open takes it like the original. Returns its size in
  /// bytes. Errors: already_exists (`out` exists: nothing is overwritten),
  /// invalid_argument ("out" empty), read_only or io_error (can't write
  /// there), corrupt (the copy failed its check and was removed), closed.
  result<int64_t> backup(const std::string& out) const;


 private:
  struct impl;
  friend class queue;
  friend struct runtime_access;  // the runtime's own code (runtime/src)
  explicit inspector(std::unique_ptr<impl> p) noexcept;
  std::unique_ptr<impl> impl_;
};

/// Who owns a database file: the process whose queue has it open.
struct owner_info {
  int64_t pid = 0;
  std::string host;
  /// Where the owner takes remote connections (options::listen, publish,
  /// ergon-server), in the order it opened them; empty if it takes none.
  struct listener {
    std::string address;  ///< as bound: 0.0.0.0 means any address of its host
    uint16_t port = 0;
    bool needs_secret = false;  ///< connect with credentials::secret
    bool needs_tls = false;     ///< connect through use_tls
  };
  std::vector<listener> listeners;
};

/// The owner of the database at `path` now, or empty if no open queue owns
/// it (none did, it closed, or it crashed). Reads the owner's lock file and
/// takes no lock, so it never gets in the way of an open; an owner on
/// another host (a shared file system) is taken at its word. A lock file
/// that anyone but this user or the database's owner could have written
/// (a symlink, another user's file, one writable by group or others) is
/// ignored, so nobody can point tools at their own listener. Errors:
/// invalid_argument ("path" empty), io_error (the lock file can't be read).
///
/// For a postgresql:// URI, the owner is the holder of the schema's lease,
/// if it has not passed and its session lives, with the listeners it
/// recorded there; a role that may write the schema could record others, so
/// give tools' roles to people you trust. Errors: the connection's
/// (unreachable, unauthenticated, ...).
result<std::optional<owner_info>> find_owner(const std::string& path);

}  // namespace ergon
