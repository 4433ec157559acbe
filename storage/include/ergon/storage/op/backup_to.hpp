// backup_to: a consistent copy of the database (storage/src/backup_to.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/sqlite_db.hpp"

namespace ergon::storage {

struct backup_result {
  int64_t pages = 0;
  int64_t bytes = 0;
};
/// Copies the database of `source` (a read-only connection will do: the
/// source is only read) into a new file at `out`, with `file_mode`, as one
/// consistent snapshot; then checks the copy (quick_check) and only then
/// gives it its name, so `out` is never a partial copy. Errors:
/// already_exists (`out` exists; nothing is overwritten), invalid_argument
/// ("out": empty), io_error or read_only (can't write beside `out`),
/// corrupt (the copy fails its check; it is removed), busy.
result<backup_result> backup_to(sqlite_db& source, const std::string& out, uint32_t file_mode);

}  // namespace ergon::storage
