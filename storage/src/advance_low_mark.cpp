#include "ergon/storage/op/advance_low_mark.hpp"

#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// One statement, and the scan stops at the first unfinished row: read row by
// row from the client, PostgreSQL sent the whole window (about 5,000 rows,
// 1.8 ms a move in a drain). COALESCE reads the window's last row only when
// no row in it is unfinished. Both engines keep the outer ORDER BY on the
// index order, so LIMIT 1 stops the scan (test-storage checks the plan).
#define ERGON_MARK_WINDOW                                                      \
  "(SELECT id, status FROM jobs WHERE id >= meta.value ORDER BY id LIMIT ?1)"
constexpr const char* advance_mark =
  "UPDATE meta SET value = coalesce("
  "(SELECT id FROM " ERGON_MARK_WINDOW " AS w WHERE status IN (" ERGON_SQL_UNFINISHED ") "
  "ORDER BY id LIMIT 1), "
  "(SELECT max(id) + 1 FROM " ERGON_MARK_WINDOW " AS w), value) "
  "WHERE key = 'unfinished_low_mark' RETURNING value";

}  // namespace

const char* advance_low_mark_sql() noexcept {
  return advance_mark;
}

result<int64_t> advance_low_mark(db& d, int64_t max_rows) {
  auto prepared = d.prepare(advance_mark);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind(1, max_rows);
  if (!s.step()) {
    if (!s.step_status())
      return s.step_status();
    return status{error::corrupt, d.location() + ": the meta table has no low mark"};
  }
  auto mark = s.column_int(0);
  if (auto st = d.run(s); !st)
    return st;
  return mark;
}

}  // namespace ergon::storage
