// sqlite_db: a db on one SQLite file (storage/src/sqlite_db.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace ergon::storage {

class checkpointer;

/// How a SQLite connection is opened.
struct sqlite_options {
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

/// Whether SQLite gives every connection to `path` a private database of its
/// own ("" or ":memory:"): a queue's connections could not share it.
inline bool names_private_database(const std::string& path) {
  return path.empty() || path == ":memory:";
}

/// A prepared SQLite statement.
class sqlite_stmt final : public stmt {
 public:
  explicit sqlite_stmt(sqlite3_stmt* s) noexcept : s_(s) {}
  ~sqlite_stmt() override;

  void bind(int i, int64_t v) override;
  void bind(int i, double v) override;
  using stmt::bind;
  void bind_text(int i, std::string_view v) override;
  void bind_blob(int i, std::string_view v) override;
  void bind_null(int i) override;
  void bind_text_static(int i, std::string_view v) override;
  void bind_blob_static(int i, std::string_view v) override;
  bool step() override;
  int64_t column_int(int i) const override;
  double column_double(int i) const override;
  bool column_is_null(int i) const override;
  std::string column_text(int i) const override;
  std::string column_blob(int i) const override;
  void reset() override;

  sqlite3_stmt* raw() const noexcept { return s_; }

 private:
  sqlite3_stmt* s_;
};

/// An open SQLite connection.
class sqlite_db final : public db {
 public:
  /// Opens `path` with the pragmas ergon requires. For a file, journal_mode
  /// must read back as "wal", or opening fails with `io_error`. The special
  /// path ":memory:" gives a private in-memory database (unit tests only).
  static result<std::unique_ptr<sqlite_db>> open(const std::string& path,
                                                 const sqlite_options& opts);

  ~sqlite_db() override;

  storage::engine engine() const noexcept override { return engine::sqlite; }
  const std::string& location() const noexcept override { return path_; }
  using db::prepare;
  result<stmt*> prepare(const char* sql) override;
  status exec(const char* sql) override;
  status begin_write() override;
  status commit() override;
  void rollback() noexcept override;
  bool in_transaction() const noexcept override;
  void end_reads() noexcept override;
  int64_t changes() const noexcept override;
  /// Stops the checkpointer, then checkpoint_truncate(); nothing for a
  /// private database.
  status settle() override;

  /// Folds the WAL in on a thread and connection of its own, opened with
  /// `opts` (storage::checkpointer), rather than within commits. Errors are
  /// the checkpointer's; the connection then keeps SQLite's autocheckpoint.
  status checkpoint_apart(const sqlite_options& opts);

  /// Copies every committed page from the WAL into the database file and
  /// empties the WAL, so the database file alone holds the data (a user
  /// may copy it). Waits for readers as busy_timeout allows. Errors: busy
  /// (a reader kept it from finishing), io_error.
  status checkpoint_truncate();

  /// Converts the connection's last error (or `rc`) to an ergon status.
  status error_status(int rc, std::string_view context) const;

  /// The value of a pragma, e.g. "journal_mode".
  result<std::string> pragma_text(const char* sql);

  const std::string& path() const noexcept { return path_; }
  sqlite3* raw() const noexcept { return db_; }

 private:
  sqlite_db(sqlite3* handle, std::string path) noexcept;
  status run_cached(const char* sql);
  sqlite3* db_;
  std::string path_;
  std::unordered_map<const char*, std::unique_ptr<sqlite_stmt>> cache_;
  std::unique_ptr<checkpointer> checkpoints_;
};

/// Maps an SQLite result code to an ergon error code.
error error_from_sqlite(int rc) noexcept;

}  // namespace ergon::storage
