// read_meta, raise_low_mark and lower_low_mark: the meta table; and
// end_of_rows (storage/src/meta.cpp).
#pragma once

#include <cstdint>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

/// Per-database values kept in the meta table.
struct meta_values {
  uint32_t id_tag = 0;
  int64_t unfinished_low_mark = 0;
};
result<meta_values> read_meta(db& d);

/// Records that no unfinished job has a row id below `mark`. Write
/// operation. Never lowers the stored mark.
status raise_low_mark(db& d, int64_t mark);

/// Records that the job at `row` is unfinished again (retry_failed), so
/// the low mark is at most `row`. Write operation.
status lower_low_mark(db& d, int64_t row);

/// One past the highest job row now: where a bulk action stops, so that it
/// leaves the jobs that arrive while it runs.
result<int64_t> end_of_rows(db& d);

}  // namespace ergon::storage
