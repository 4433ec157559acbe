// db: one SQLite connection with a cache of prepared statements.
//
// Every statement in ergon is a named constexpr string passed to
// `db::prepare`; parameters are always bound, never spliced into SQL.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ergon/error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace ergon::storage {

/// How a connection is opened.
struct db_options {
  /// synchronous=FULL instead of NORMAL: survives power loss, costs an fsync
  /// per commit.
  bool synchronous_full = false;
  /// How long a write waits for another process's lock before failing `busy`.
  int64_t busy_timeout_ms = 5'000;
  /// Page cache per connection, in KiB.
  int64_t cache_kib = 64 * 1024;
  /// Upper bound on the main database file; 0 means unlimited. A write past
  /// it fails with `storage_full`. With a bound, the WAL is cut back to
  /// 4 MiB at checkpoints (journal_size_limit).
  int64_t max_bytes = 0;
  /// Open read-only (for query connections).
  bool read_only = false;
  /// Permissions of the file when this open creates it.
  unsigned file_mode = 0600;
};

class db;

/// Whether SQLite gives every connection to `path` a private database of its
/// own ("" or ":memory:"): a queue's connections could not share it.
inline bool names_private_database(const std::string& path) {
  return path.empty() || path == ":memory:";
}

/// A prepared statement owned by a db's cache. Reset and cleared bindings on
/// every `db::prepare`, so callers never see a previous caller's state.
class stmt {
 public:
  explicit stmt(sqlite3_stmt* s) noexcept : s_(s) {}
  stmt(const stmt&) = delete;
  stmt& operator=(const stmt&) = delete;
  ~stmt();

  // Binding; indexes start at 1 as in SQLite.
  void bind(int i, int64_t v);
  void bind(int i, int32_t v) { bind(i, static_cast<int64_t>(v)); }
  void bind(int i, double v);
  void bind_text(int i, std::string_view v);
  void bind_blob(int i, std::string_view v);
  void bind_null(int i);
  /// As bind_text and bind_blob, without SQLite's copy: `v` must stay alive
  /// and unchanged until the statement's next step has ended. The insert
  /// path binds so: each copy is a malloc and a free per column and job.
  void bind_text_static(int i, std::string_view v);
  void bind_blob_static(int i, std::string_view v);
  void bind_static(int i, const std::optional<std::string>& v) {
    if (v) bind_text_static(i, *v); else bind_null(i);
  }
  void bind(int i, const std::optional<std::string>& v) {
    if (v) bind_text(i, *v); else bind_null(i);
  }
  void bind(int i, const std::optional<int64_t>& v) {
    if (v) bind(i, *v); else bind_null(i);
  }

  /// Runs one step: true if a row is available, false when done.
  /// Errors are returned through `db::last_status()` via `step_status`.
  bool step();
  /// The status of the last `step()`: ok unless it failed.
  const status& step_status() const noexcept { return status_; }

  int64_t column_int(int i) const;
  double column_double(int i) const;
  bool column_is_null(int i) const;
  std::string column_text(int i) const;
  std::string column_blob(int i) const;
  std::optional<int64_t> column_opt_int(int i) const;
  std::optional<std::string> column_opt_text(int i) const;
  std::optional<std::string> column_opt_blob(int i) const;

  /// Makes the statement runnable again, keeping its bindings.
  void reset();

  sqlite3_stmt* raw() const noexcept { return s_; }

 private:
  sqlite3_stmt* s_;
  status status_;
};

/// An open SQLite connection. Not thread-safe: each thread or actor owns its own.
class db {
 public:
  /// Opens `path` with the pragmas ergon requires. For a file, journal_mode
  /// must read back as "wal", or opening fails with `io_error`. The special
  /// path ":memory:" gives a private in-memory database (unit tests only).
  static result<std::unique_ptr<db>> open(const std::string& path,
                                          const db_options& opts);

  db(const db&) = delete;
  db& operator=(const db&) = delete;
  ~db();

  /// Returns the cached statement for `sql`, reset and unbound. The cache is
  /// keyed by the string's address, so `sql` must be a string constant.
  /// A statement that fails to compile is a bug in ergon: `internal` error.
  result<stmt*> prepare(const char* sql);

  /// Runs SQL without results (pragmas, BEGIN, schema). Statement text is
  /// always a constant, never user input.
  status exec(const char* sql);

  /// Steps `s` to completion, discarding rows; returns the first error.
  status run(stmt& s);

  /// Whether a transaction is open. SQLite may roll back a whole transaction
  /// on its own after SQLITE_FULL, IOERR, BUSY or NOMEM; callers that batch
  /// requests check this after every failure.
  bool in_transaction() const noexcept;

  /// Resets every statement still mid-step. A statement that was not run to
  /// its end holds a read snapshot: a reader would keep seeing old data, and
  /// a writer could not write again once another connection had written.
  void end_reads() noexcept;

  /// Copies every committed page from the WAL into the database file and
  /// empties the WAL, so the database file alone holds the data (a user
  /// may copy it). Waits for readers as busy_timeout allows. Errors: busy
  /// (a reader kept it from finishing), io_error.
  status checkpoint_truncate();

  /// Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const noexcept;
  int64_t last_insert_rowid() const noexcept;

  /// Converts the connection's last error (or `rc`) to an ergon status.
  status error_status(int rc, std::string_view context) const;

  /// The value of a pragma, e.g. "journal_mode".
  result<std::string> pragma_text(const char* sql);

  const std::string& path() const noexcept { return path_; }
  sqlite3* raw() const noexcept { return db_; }

 private:
  db(sqlite3* handle, std::string path) noexcept;
  sqlite3* db_;
  std::string path_;
  std::unordered_map<const char*, std::unique_ptr<stmt>> cache_;
};

/// Maps an SQLite result code to an ergon error code.
error error_from_sqlite(int rc) noexcept;

}  // namespace ergon::storage
