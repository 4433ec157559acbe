// The database schema and its versioned migrations (PRAGMA user_version).
#pragma once

#include <cstdint>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// The schema version this build writes. Each migration moves the file one
/// version up; a file with a higher version was written by a newer ergon.
int current_schema_version() noexcept;

/// The first schema version with the finished_counts table (see count_jobs).
inline constexpr int finished_counts_version = 2;

/// The schema version that added recurring jobs and unique keys (and their
/// columns in jobs).
inline constexpr int recurring_version = 3;

/// The schema version that added cancel requests, result expiry, progress
/// and the listing indexes (and their columns in jobs).
inline constexpr int outcomes_version = 4;

/// The schema version that added yields and declared I/O (their columns in
/// jobs). Job rows of older files lack columns this build reads.
inline constexpr int pressure_version = 5;

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

/// Brings `d` to `current_schema_version()`, one transaction per migration.
/// Fails with `corrupt` if the file is newer than this build, or is not a
/// database; with `read_only` if it needs migrating and can't be written.
/// Marks the file with `application_id`. Calling it on an up-to-date file
/// changes nothing.
status migrate(db& d);

/// Like `migrate(d)`, but stops at `version` (tests make older files with
/// it). A file already past `version` is left as it is.
status migrate(db& d, int version);

}  // namespace ergon::storage
