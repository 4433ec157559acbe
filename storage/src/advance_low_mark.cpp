#include "ergon/storage/op/advance_low_mark.hpp"

#include <algorithm>

#include "ergon/job_info.hpp"
#include "ergon/storage/op/meta.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_from_mark =
  "SELECT id, status FROM jobs "
  "WHERE id >= (SELECT value FROM meta WHERE key = 'unfinished_low_mark') "
  "ORDER BY id LIMIT ?1";

bool unfinished(int64_t status) {
  return status == static_cast<int64_t>(job_status::pending)
         || status == static_cast<int64_t>(job_status::running);
}

}  // namespace

result<int64_t> advance_low_mark(db& d, int64_t max_rows) {
  auto meta = read_meta(d);
  if (!meta)
    return meta.error();
  auto prepared = d.prepare(select_from_mark);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind(1, max_rows);
  int64_t mark = meta->unfinished_low_mark;
  while (s.step()) {
    if (unfinished(s.column_int(1))) {
      mark = s.column_int(0);
      break;
    }
    mark = s.column_int(0) + 1;
  }
  status scanned = s.step_status();
  s.reset();  // the statement stays cached: it must not hold a read open
  if (!scanned)
    return scanned;
  if (mark > meta->unfinished_low_mark)
    if (auto st = raise_low_mark(d, mark); !st)
      return st;
  return std::max(mark, meta->unfinished_low_mark);
}

}  // namespace ergon::storage
