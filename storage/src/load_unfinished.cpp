#include "ergon/storage/op/load_unfinished.hpp"

#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// A rowid range scan from the low mark: finished history below it is never
// read. Waiting jobs hold the mark down but stay out of the dispatcher.
constexpr const char* select_unfinished =
  "SELECT status, " ERGON_JOB_KEY_COLUMNS ", attempt_token, started_at, expires_at, "
  "cancel_requested_at IS NOT NULL, held_by FROM jobs "
  "WHERE id >= ?1 AND status IN (" ERGON_SQL_UNFINISHED ") ORDER BY id";

constexpr const char* select_max_row = "SELECT coalesce(max(id), 0) FROM jobs";

}  // namespace

result<unfinished_jobs> load_unfinished(db& d, int64_t from_row) {
  auto prepared = d.prepare(select_unfinished);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  s.bind(1, from_row);
  unfinished_jobs out;
  bool none = true;
  while (s.step()) {
    auto st = static_cast<job_status>(s.column_int(0));
    if (none)
      out.low_mark = s.column_int(1);
    none = false;
    if (st == job_status::waiting)
      continue;
    auto key = rows::read_key(s, 1);
    if (st == job_status::pending) {
      out.pending.push_back(std::move(key));
      continue;
    }
    // held_by counts only here: a pending row keeps its last holder's name.
    constexpr int attempt = 1 + rows::key_column_count;
    out.running.push_back({std::move(key), s.column_int(attempt), s.column_int(attempt + 1),
                           s.column_int(attempt + 2), s.column_int(attempt + 3) != 0,
                           s.column_text(attempt + 4)});
  }
  if (!s.step_status())
    return s.step_status();
  if (none) {
    auto max_row = d.prepare(select_max_row);
    if (!max_row)
      return max_row.error();
    if (!(*max_row)->step())
      return (*max_row)->step_status();
    out.low_mark = (*max_row)->column_int(0) + 1;
    // An active statement keeps a read snapshot open; the writer that takes
    // this connection over could then never write after another process did.
    (*max_row)->reset();
  }
  return out;
}

}  // namespace ergon::storage
