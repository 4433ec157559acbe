// The database schema and its versioned migrations (PRAGMA user_version).
#pragma once

#include <cstdint>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// The schema version this build writes on engine `e`. Each migration moves
/// the schema one version up; a higher version was written by a newer ergon.
/// The two engines count their own versions.
int current_schema_version(engine e = engine::sqlite) noexcept;

/// The first schema version with the finished_counts table (see count_jobs).
inline constexpr int finished_counts_version = 2;

/// The schema version that added recurring jobs and unique keys (and their
/// columns in jobs).
inline constexpr int recurring_version = 3;

/// The schema version that added cancel requests, result expiry, progress
/// and the listing indexes (and their columns in jobs).
inline constexpr int outcomes_version = 4;

/// The schema version that added the controls table (run-time controls):
/// SQLite's 12, PostgreSQL's 9.
inline constexpr int controls_version(engine e) noexcept {
  return e == engine::sqlite ? 12 : 9;
}

/// The schema version that added job logs: SQLite's 14, PostgreSQL's 11.
/// Reading a job needs it: older schemas lack a table or column this
/// build reads.
inline constexpr int job_logs_version(engine e) noexcept {
  return e == engine::sqlite ? 14 : 11;
}

/// The schema version that added recurring jobs' own pauses: SQLite's 17,
/// PostgreSQL's 14. Reading a recurring job needs it.
inline constexpr int recurring_pauses_version(engine e) noexcept {
  return e == engine::sqlite ? 17 : 14;
}

/// PRAGMA application_id of every ergon database ("ERGN").
inline constexpr int32_t application_id = 0x4552474E;

/// Decides, without changing a byte, whether `path` may become or is an ergon
/// database. Ok: no file, an empty file, a SQLite database with no tables,
/// one marked with `application_id`, or an unmarked one with exactly ergon's
/// version-1 tables (made before the mark existed). Otherwise `corrupt`,
/// naming what the file is; io_error or read_only if it can't be read.
/// With `read_only` it opens no read-write connection, whose close could
/// checkpoint a WAL file that a dead owner left.
status check_ergon_file(const std::string& path, bool read_only = false);

/// Brings `d` to `current_schema_version()`. Fails with `corrupt` if the
/// schema is newer than this build, or is not ergon's; with `read_only` if it
/// needs migrating and can't be written.
///  - SQLite: one transaction per migration; marks the file with
///    `application_id`.
///  - PostgreSQL: creates the schema if it is missing, then migrates in one
///    transaction under an advisory lock. A schema that holds tables but not
///    ergon's `schema_version` is refused, naming them.
/// Calling it on an up-to-date schema changes nothing.
status migrate(db& d);

/// The schema version `d` holds: 0 for a database or schema no queue has
/// migrated yet.
result<int> schema_version(db& d);

/// Like `migrate(d)`, but stops at `version` (tests make older files with
/// it). A schema already past `version` is left as it is.
status migrate(db& d, int version);

}  // namespace ergon::storage
