#include "ergon/storage/sqlite_db.hpp"

#include "ergon/storage/checkpointer.hpp"

#include <sqlite3.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace ergon::storage {
namespace {

constexpr const char* begin_immediate = "BEGIN IMMEDIATE";
constexpr const char* commit_tx = "COMMIT";
constexpr const char* rollback_tx = "ROLLBACK";
constexpr const char* pragma_journal_wal = "PRAGMA journal_mode = WAL";
constexpr const char* pragma_sync_normal = "PRAGMA synchronous = NORMAL";
constexpr const char* pragma_sync_full = "PRAGMA synchronous = FULL";
constexpr const char* pragma_foreign_keys = "PRAGMA foreign_keys = ON";
constexpr const char* pragma_temp_store = "PRAGMA temp_store = MEMORY";
constexpr const char* read_page_size = "PRAGMA page_size";
constexpr const char* pragma_wal_limit = "PRAGMA journal_size_limit = 4194304";

std::string message_of(sqlite3* handle, int rc) {
  if (handle != nullptr && sqlite3_errcode(handle) == rc)
    return sqlite3_errmsg(handle);
  return sqlite3_errstr(rc);
}

}  // namespace

error error_from_sqlite(int rc) noexcept {
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return error::none;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return error::busy;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return error::read_only;
    case SQLITE_FULL:
      return error::storage_full;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return error::io_error;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_SCHEMA:
      return error::corrupt;
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
      return error::invalid_argument;
    default:
      return error::internal;
  }
}

// -- stmt ----------------------------------------------------------------------

sqlite_stmt::~sqlite_stmt() {
  sqlite3_finalize(s_);
}

void sqlite_stmt::reset() {
  sqlite3_reset(s_);
  status_ = {};
}

void sqlite_stmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
}

void sqlite_stmt::bind(int i, double v) {
  sqlite3_bind_double(s_, i, v);
}

void sqlite_stmt::bind_text(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

void sqlite_stmt::bind_blob(int i, std::string_view v) {
  // A zero-length blob, not NULL: payload columns are NOT NULL.
  sqlite3_bind_blob(s_, i, v.empty() ? "" : v.data(), static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
}

void sqlite_stmt::bind_text_static(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
}

void sqlite_stmt::bind_blob_static(int i, std::string_view v) {
  sqlite3_bind_blob(s_, i, v.empty() ? "" : v.data(), static_cast<int>(v.size()),
                    SQLITE_STATIC);
}

void sqlite_stmt::bind_null(int i) {
  sqlite3_bind_null(s_, i);
}

bool sqlite_stmt::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW)
    return true;
  if (rc != SQLITE_DONE) {
    auto handle = sqlite3_db_handle(s_);
    status_ = status{error_from_sqlite(rc), message_of(handle, rc)};
    sqlite3_reset(s_);
  }
  return false;
}

int64_t sqlite_stmt::column_int(int i) const {
  return sqlite3_column_int64(s_, i);
}

double sqlite_stmt::column_double(int i) const {
  return sqlite3_column_double(s_, i);
}

bool sqlite_stmt::column_is_null(int i) const {
  return sqlite3_column_type(s_, i) == SQLITE_NULL;
}

std::string sqlite_stmt::column_text(int i) const {
  auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
  return p == nullptr ? std::string{}
                      : std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, i)));
}

std::string sqlite_stmt::column_blob(int i) const {
  auto p = static_cast<const char*>(sqlite3_column_blob(s_, i));
  return p == nullptr ? std::string{}
                      : std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, i)));
}

// -- db ------------------------------------------------------------------------

sqlite_db::sqlite_db(sqlite3* handle, std::string path) noexcept
    : db_(handle), path_(std::move(path)) {}

status sqlite_db::checkpoint_truncate() {
  end_reads();
  int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  return rc == SQLITE_OK ? status{} : error_status(rc, "checkpoint at close");
}

sqlite_db::~sqlite_db() {
  checkpoints_.reset();
  cache_.clear();
  sqlite3_close(db_);
}

result<std::unique_ptr<sqlite_db>> sqlite_db::open(const std::string& path,
                                     const sqlite_options& opts) {
  // SQLite creates files 0644 less the umask, and gives the -wal and -shm
  // files its main file's mode: made here first, all three are private.
  if (!opts.read_only && !names_private_database(path)) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    opts.file_mode);
    if (fd >= 0) {
      ::fchmod(fd, opts.file_mode);  // past the umask
      ::close(fd);
    }
  }
  sqlite3* handle = nullptr;
  int flags = SQLITE_OPEN_NOMUTEX
              | (opts.read_only ? SQLITE_OPEN_READONLY
                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &handle, flags, nullptr);
  if (rc != SQLITE_OK) {
    status st{error_from_sqlite(rc), path + ": " + message_of(handle, rc)};
    sqlite3_close(handle);
    return st;
  }
  std::unique_ptr<sqlite_db> d{new sqlite_db(handle, path)};
  sqlite3_extended_result_codes(handle, 1);
  // SQLite takes an int: longer waits are as good as forever.
  sqlite3_busy_timeout(handle, static_cast<int>(std::clamp<int64_t>(opts.busy_timeout_ms, 0,
                                                                     INT32_MAX)));
  // SQLite silently opens a write-protected file read-only; a writer must know.
  if (!opts.read_only && sqlite3_db_readonly(handle, "main") == 1)
    return status{error::read_only, path + ": the database file is not writable"};
  bool in_memory = path == ":memory:";
  if (!opts.read_only) {
    auto mode = d->pragma_text(pragma_journal_wal);
    if (!mode)
      return mode.error();
    // Effectum's "PRAGMA journal=wal" was silently ignored; read it back.
    auto expected = in_memory ? "memory" : "wal";
    if (*mode != expected)
      return status{error::io_error, path + ": journal_mode reads back as '" + *mode
                                       + "', expected 'wal'"};
  }
  for (auto sql : {opts.synchronous_full ? pragma_sync_full : pragma_sync_normal,
                   pragma_foreign_keys, pragma_temp_store}) {
    if (auto st = d->exec(sql); !st)
      return st;
  }
  auto cache = "PRAGMA cache_size = -" + std::to_string(opts.cache_kib);
  if (auto st = d->exec(cache.c_str()); !st)
    return st;
  if (opts.max_bytes > 0) {
    auto page_size = d->pragma_text(read_page_size);
    if (!page_size)
      return page_size.error();
    auto pages = opts.max_bytes / std::stoll(*page_size);
    auto limit = "PRAGMA max_page_count = " + std::to_string(pages < 1 ? 1 : pages);
    if (auto st = d->exec(limit.c_str()); !st)
      return st;
    // max_page_count bounds the main file only. Without this the WAL keeps
    // its largest size for good; with it, checkpoints cut it back.
    if (auto st = d->exec(pragma_wal_limit); !st)
      return st;
  }
  return d;
}

result<stmt*> sqlite_db::prepare(const char* sql) {
  auto i = cache_.find(sql);
  if (i != cache_.end()) {
    i->second->reset();
    sqlite3_clear_bindings(i->second->raw());
    return i->second.get();
  }
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  if (rc != SQLITE_OK) {
    auto code = error_from_sqlite(rc);
    // A statement that doesn't compile is our bug, unless the file itself is
    // the problem (corrupt, locked, unreadable).
    if (code == error::invalid_argument)
      code = error::internal;
    return status{code, std::string{"preparing statement: "} + message_of(db_, rc)};
  }
  auto [pos, added] = cache_.emplace(sql, std::make_unique<sqlite_stmt>(raw));
  return pos->second.get();
}

status sqlite_db::exec(const char* sql) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &msg);
  if (rc == SQLITE_OK)
    return {};
  std::string text = msg != nullptr ? msg : sqlite3_errstr(rc);
  sqlite3_free(msg);
  return {error_from_sqlite(rc), path_ + ": " + text};
}

void sqlite_db::end_reads() noexcept {
  for (auto* s = sqlite3_next_stmt(db_, nullptr); s != nullptr; s = sqlite3_next_stmt(db_, s))
    if (sqlite3_stmt_busy(s))
      sqlite3_reset(s);
}

// Cached: each is run per batch, and exec() would parse it every time.
status sqlite_db::run_cached(const char* sql) {
  auto s = prepare(sql);
  return s ? run(**s) : s.error();
}

status sqlite_db::begin_write() {
  return run_cached(begin_immediate);
}

status sqlite_db::commit() {
  return run_cached(commit_tx);
}

void sqlite_db::rollback() noexcept {
  if (in_transaction())
    (void)run_cached(rollback_tx);
}

status sqlite_db::checkpoint_apart(const sqlite_options& opts) {
  auto started = checkpointer::start(*this, opts);
  if (!started)
    return started.error();
  checkpoints_ = std::move(*started);
  return {};
}

status sqlite_db::settle() {
  checkpoints_.reset();
  return names_private_database(path_) ? status{} : checkpoint_truncate();
}

bool sqlite_db::in_transaction() const noexcept {
  return sqlite3_get_autocommit(db_) == 0;
}

int64_t sqlite_db::changes() const noexcept {
  return sqlite3_changes(db_);
}

status sqlite_db::error_status(int rc, std::string_view context) const {
  return {error_from_sqlite(rc), std::string{context} + ": " + message_of(db_, rc)};
}

result<std::string> sqlite_db::pragma_text(const char* sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr);
  if (rc != SQLITE_OK)
    return error_status(rc, path_);
  std::string value;
  rc = sqlite3_step(raw);
  if (rc == SQLITE_ROW) {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(raw, 0));
    value = p != nullptr ? p : "";
    rc = SQLITE_DONE;
  }
  sqlite3_finalize(raw);
  if (rc != SQLITE_DONE)
    return error_status(rc, path_);
  return value;
}

}  // namespace ergon::storage
