// Each engine's migrations (schema.cpp, pg_schema.cpp). Internal to storage/.
#pragma once

#include "ergon/error.hpp"

namespace ergon::storage {

class sqlite_db;
class pg_db;

/// Brings the connection's schema to `target` (see migrate).
status migrate_sqlite(sqlite_db& d, int target);
status migrate_postgres(pg_db& d, int target);

/// The version of the schema on `d`; 0 before the first migration.
result<int> postgres_schema_version(pg_db& d);

/// The version pg_schema.cpp's migrations reach.
int current_postgres_schema_version() noexcept;

}  // namespace ergon::storage
