// db: one connection to the queue's storage, whatever the engine (SQLite or
// PostgreSQL), with a cache of prepared statements.
//
// Every statement in ergon is a named constexpr string passed to
// `db::prepare`; parameters are always bound, never spliced into SQL. Both
// engines take SQLite's `?N` parameters. Where their SQL differs, the
// operation names both texts in one `dialect_sql` beside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ergon/error.hpp"

namespace ergon::storage {

/// Which engine a connection talks to.
enum class engine : uint8_t {
  sqlite,    ///< one file, one host: the embedded default
  postgres,  ///< a PostgreSQL server (libpq)
};

/// One statement in each engine's SQL. Both must be string constants: the
/// statement cache is keyed by address.
struct dialect_sql {
  const char* sqlite;
  const char* postgres;
};

/// A prepared statement owned by a db's cache. Reset, with cleared bindings,
/// on every `db::prepare`, so callers never see a previous caller's state.
class stmt {
 public:
  stmt() = default;
  stmt(const stmt&) = delete;
  stmt& operator=(const stmt&) = delete;
  virtual ~stmt() = default;

  // Binding; indexes start at 1 as in SQLite.
  virtual void bind(int i, int64_t v) = 0;
  void bind(int i, int32_t v) { bind(i, static_cast<int64_t>(v)); }
  virtual void bind(int i, double v) = 0;
  virtual void bind_text(int i, std::string_view v) = 0;
  /// A zero-length value binds an empty blob, not NULL.
  virtual void bind_blob(int i, std::string_view v) = 0;
  virtual void bind_null(int i) = 0;
  /// As bind_text and bind_blob, without a copy: `v` must stay alive and
  /// unchanged until the statement's next step has ended. The insert path
  /// binds so: on SQLite each copy is a malloc and a free per column and job.
  virtual void bind_text_static(int i, std::string_view v) = 0;
  virtual void bind_blob_static(int i, std::string_view v) = 0;
  void bind_static(int i, const std::optional<std::string>& v) {
    if (v) bind_text_static(i, *v); else bind_null(i);
  }
  void bind(int i, const std::optional<std::string>& v) {
    if (v) bind_text(i, *v); else bind_null(i);
  }
  void bind(int i, const std::optional<int64_t>& v) {
    if (v) bind(i, *v); else bind_null(i);
  }

  /// Runs one step: true if a row is available, false when done or failed.
  virtual bool step() = 0;
  /// The status of the last `step()`: ok unless it failed.
  const status& step_status() const noexcept { return status_; }

  virtual int64_t column_int(int i) const = 0;
  virtual double column_double(int i) const = 0;
  virtual bool column_is_null(int i) const = 0;
  virtual std::string column_text(int i) const = 0;
  virtual std::string column_blob(int i) const = 0;
  std::optional<int64_t> column_opt_int(int i) const {
    return column_is_null(i) ? std::nullopt : std::optional<int64_t>{column_int(i)};
  }
  std::optional<std::string> column_opt_text(int i) const {
    return column_is_null(i) ? std::nullopt : std::optional<std::string>{column_text(i)};
  }
  std::optional<std::string> column_opt_blob(int i) const {
    return column_is_null(i) ? std::nullopt : std::optional<std::string>{column_blob(i)};
  }

  /// Makes the statement runnable again, keeping its bindings.
  virtual void reset() = 0;

 protected:
  status status_;
};

/// An open connection. Not thread-safe: each thread or actor owns its own.
class db {
 public:
  db() = default;
  db(const db&) = delete;
  db& operator=(const db&) = delete;
  virtual ~db() = default;

  virtual storage::engine engine() const noexcept = 0;

  /// Where the data lives, for messages: a file's path, or a PostgreSQL
  /// URI without its password.
  virtual const std::string& location() const noexcept = 0;

  /// Returns the cached statement for `sql`, reset and unbound. The cache is
  /// keyed by the string's address, so `sql` must be a string constant.
  /// A statement that fails to compile is a bug in ergon: `internal` error.
  virtual result<stmt*> prepare(const char* sql) = 0;
  /// This engine's text of `sql`.
  result<stmt*> prepare(const dialect_sql& sql) {
    return prepare(engine() == engine::sqlite ? sql.sqlite : sql.postgres);
  }

  /// Runs SQL without parameters or results (BEGIN, schema). Statement text
  /// is always a constant, never user input.
  virtual status exec(const char* sql) = 0;

  /// Steps `s` to completion, discarding rows; returns the first error.
  status run(stmt& s) {
    while (s.step()) {
      // Drain rows; callers that want them use step() directly.
    }
    return s.step_status();
  }

  /// Runs `s` for its effect alone: no rows, no changes(). PostgreSQL sends
  /// it with the next statement that is read (pipelined), so its error
  /// surfaces there or from commit(), and then the whole transaction is
  /// rolled back (in_transaction() turns false). SQLite runs it at once.
  virtual status send(stmt& s) { return run(s); }

  /// Opens the writer's transaction: SQLite takes the write lock at once
  /// (BEGIN IMMEDIATE); PostgreSQL checks that this connection still owns
  /// the queue, sending BEGIN and that check with the first statement (as
  /// send() does). Errors as for any write.
  virtual status begin_write() = 0;
  /// Commits the open transaction. An error leaves it open on SQLite (for
  /// rollback) and ended on PostgreSQL.
  virtual status commit() = 0;
  /// Ends the open transaction, if any, without its changes.
  virtual void rollback() noexcept = 0;

  /// Whether a transaction is open. SQLite may roll back a whole transaction
  /// on its own after SQLITE_FULL, IOERR, BUSY or NOMEM; PostgreSQL's is
  /// dead after any failed statement but a savepoint's. Callers that batch
  /// requests check this after every failure.
  virtual bool in_transaction() const noexcept = 0;

  /// Ends every read still mid-step. A statement that was not run to its end
  /// holds a read snapshot on SQLite: a reader would keep seeing old data,
  /// and a writer could not write again once another connection had.
  virtual void end_reads() noexcept = 0;

  /// Rows changed by the last INSERT/UPDATE/DELETE.
  virtual int64_t changes() const noexcept = 0;

  /// Makes the stored data whole before the writer's last close: SQLite
  /// folds its WAL into the file, so the file alone holds every commit.
  /// Errors lose nothing (the WAL stays beside the file).
  virtual status settle() { return {}; }
};

}  // namespace ergon::storage
