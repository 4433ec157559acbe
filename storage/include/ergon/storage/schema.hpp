// The database schema and its versioned migrations (PRAGMA user_version).
#pragma once

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// The schema version this build writes. Each migration moves the file one
/// version up; a file with a higher version was written by a newer ergon.
int current_schema_version() noexcept;

/// Brings `d` to `current_schema_version()`, one transaction per migration.
/// Fails with `corrupt` if the file is newer than this build, or is not a
/// database; with `read_only` if it needs migrating and can't be written.
/// Calling it on an up-to-date file changes nothing.
status migrate(db& d);

}  // namespace ergon::storage
