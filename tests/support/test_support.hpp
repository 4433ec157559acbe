// Helpers shared by the test executables: temporary directories, a raw
// SQLite connection for checking what is on disk, and file attribute tricks
// for storage-failure tests.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace ergon::test {

/// A fresh directory, removed with everything in it when the test ends.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern =
      (std::filesystem::temp_directory_path() / "ergon-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A secret as ergon requires one (32 random bytes as 64 hex digits), fixed
/// so that a child process can be given the same.
inline const std::string test_secret =
  "9f1c4e7a2b8d06f35e91a4c7d2083b6f5a1e9c04d7b2f8631e5a9c0d4b7f2e18";

/// Writes `text` and a line break to `path`, readable by its owner only, as
/// secret, key and passphrase files must be.
inline std::string write_private_file(const std::string& path, const std::string& text) {
  std::ofstream{path} << text << '\n';
  std::filesystem::permissions(path, std::filesystem::perms::owner_read
                                       | std::filesystem::perms::owner_write);
  return path;
}

// SQL that turns a file of the current schema into one of schema `version`
// (1 to 16) as an older ergon left it, jobs included.
inline std::string downgrade_sql(int version) {
  std::string sql;
  if (version < 17)
    sql += "ALTER TABLE recurring_jobs DROP COLUMN paused_since; "
           "ALTER TABLE recurring_jobs DROP COLUMN paused_until; ";
  if (version < 16)
    sql += "ALTER TABLE recurring_jobs DROP COLUMN max_executions; "
           "ALTER TABLE recurring_jobs DROP COLUMN executions; "
           "ALTER TABLE jobs DROP COLUMN ttl_after_start; ";
  if (version < 15)
    sql += "DROP TABLE job_tags; ";
  if (version < 14)
    sql += "DROP TABLE job_logs; DROP TABLE job_log_drops; ";
  if (version < 13)
    sql += "DROP TABLE workers; ALTER TABLE jobs DROP COLUMN worker; "
           "ALTER TABLE attempts DROP COLUMN worker; ";
  if (version < 12)
    sql += "DROP TABLE controls; ";
  if (version < 11)
    sql += "DROP VIEW dependency_edges; DROP INDEX jobs_by_only_dependency; "
           "ALTER TABLE jobs DROP COLUMN only_dependency; ";
  if (version < 10)
    sql += "DROP TABLE job_dependencies; ALTER TABLE jobs DROP COLUMN waiting_on; "
           "ALTER TABLE jobs DROP COLUMN dependency_policy; "
           "ALTER TABLE jobs DROP COLUMN has_dependents; DROP INDEX jobs_by_parent; "
           "ALTER TABLE jobs DROP COLUMN parent; ";
  if (version < 9)
    for (auto table : {"jobs", "recurring_jobs"})
      for (auto column : {"backoff_kind", "backoff_max_ms"})
        sql += std::string{"ALTER TABLE "} + table + " DROP COLUMN " + column + "; ";
  if (version < 8)
    sql += "DROP TABLE idempotency_keys; ";
  if (version < 7)
    sql += "ALTER TABLE jobs DROP COLUMN held_by; ";
  if (version < 6)
    sql +=
      "DROP INDEX jobs_unsuccessful; DROP INDEX jobs_one_unfinished_instance; "
      "ALTER TABLE jobs DROP COLUMN dead_letter_status; "
      "ALTER TABLE jobs DROP COLUMN unfinished_instance_of; "
      "CREATE INDEX jobs_unsuccessful ON jobs(status, id) WHERE status >= 3; "
      "CREATE UNIQUE INDEX jobs_one_unfinished_instance ON jobs(recurring_id) "
      "WHERE recurring_id IS NOT NULL AND status < 2; ";
  if (version < 5)
    for (auto column : {"yields", "io_read_bytes", "io_write_bytes"})
      sql += std::string{"ALTER TABLE jobs DROP COLUMN "} + column + "; ";
  if (version < 4) {
    sql += "DROP INDEX jobs_unsuccessful; DROP INDEX jobs_by_result_expiry; ";
    for (auto column : {"cancel_requested_at", "try_base", "result_ttl_ms", "result_expires_at",
                        "progress_done", "progress_total", "progress_message", "progress_at",
                        "progress_eta"})
      sql += std::string{"ALTER TABLE jobs DROP COLUMN "} + column + "; ";
  }
  if (version < 3)
    sql +=
      "DROP INDEX jobs_one_unfinished_instance; DROP TABLE recurring_jobs; "
      "DROP TABLE unique_keys; ALTER TABLE jobs DROP COLUMN recurring_id; "
      "ALTER TABLE jobs DROP COLUMN scheduled_at; ALTER TABLE jobs DROP COLUMN unique_key; "
      "ALTER TABLE jobs DROP COLUMN unique_hold_ms; ";
  if (version < 2)
    sql += "DROP TABLE finished_counts; ";
  return sql + "PRAGMA user_version = " + std::to_string(version);
}

/// A plain SQLite connection to inspect a database file independently of
/// ergon's own connections.
class sqlite_probe {
 public:
  enum mode { read_only, writable, create };
  explicit sqlite_probe(const std::string& path, mode m = read_only) {
    int flags = m == read_only ? SQLITE_OPEN_READONLY
                : m == writable ? SQLITE_OPEN_READWRITE
                                : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK)
      throw std::runtime_error("probe: cannot open " + path);
    sqlite3_busy_timeout(db_, 5'000);
  }
  sqlite_probe(const sqlite_probe&) = delete;
  sqlite_probe& operator=(const sqlite_probe&) = delete;
  ~sqlite_probe() { sqlite3_close(db_); }

  /// The first column of the first row as text ("" if there is none).
  std::string text(const std::string& sql) const {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error("probe: " + std::string{sqlite3_errmsg(db_)});
    std::string out;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && sqlite3_column_text(s, 0) != nullptr)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      std::string msg = sqlite3_errmsg(db_);
      sqlite3_finalize(s);
      throw std::runtime_error("probe: " + msg);
    }
    sqlite3_finalize(s);
    return out;
  }

  int64_t number(const std::string& sql) const { return std::stoll(text(sql)); }

  /// Runs statements, throwing on error.
  void exec(const std::string& sql) const {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err != nullptr ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error("probe: " + msg);
    }
  }

  /// Every row of jobs and attempts as one string, to prove "unchanged".
  std::string dump() const {
    return text("SELECT coalesce(group_concat(r, '|'), '') FROM ("
                "SELECT id || ',' || hex(external_id) || ',' || type || ',' || status || ','"
                " || priority || ',' || weight || ',' || run_at || ',' || hex(payload)"
                " || ',' || current_try AS r FROM jobs ORDER BY id)")
           + "#"
           + text("SELECT coalesce(group_concat(r, '|'), '') FROM ("
                  "SELECT job_id || ',' || try || ',' || outcome AS r FROM attempts "
                  "ORDER BY job_id, try)");
  }

  sqlite3* raw() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

/// Sets or clears the immutable attribute (chattr +i). Root ignores file
/// modes, so this is how tests make a file unwritable for everyone. Returns
/// false where the file system or privileges don't allow it.
inline bool set_immutable(const std::string& path, bool on) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return false;
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (ok) {
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  ::close(fd);
  return ok;
}

/// Makes `path` unwritable for this process: mode 0444, plus the immutable
/// attribute when running as root. Returns false if neither took effect.
inline bool make_unwritable(const std::string& path) {
  std::filesystem::permissions(path, std::filesystem::perms::owner_read
                                       | std::filesystem::perms::group_read
                                       | std::filesystem::perms::others_read);
  if (::access(path.c_str(), W_OK) != 0)
    return true;
  return set_immutable(path, true);
}

/// Undoes make_unwritable so the temp dir can be removed.
inline void make_writable(const std::string& path) {
  set_immutable(path, false);
  std::filesystem::permissions(path, std::filesystem::perms::owner_read
                                       | std::filesystem::perms::owner_write);
}

// How many times each line occurs in a file: how often each job's code ran,
// for workers that append their payload to a side file.
inline std::map<std::string, int> runs_in(const std::string& side_file) {
  std::map<std::string, int> out;
  std::ifstream in{side_file};
  for (std::string line; std::getline(in, line);)
    ++out[line];
  return out;
}

}  // namespace ergon::test
