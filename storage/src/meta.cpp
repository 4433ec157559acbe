#include "ergon/storage/op/meta.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_meta =
  "SELECT key, value FROM meta WHERE key IN ('id_tag', 'unfinished_low_mark')";

constexpr dialect_sql update_low_mark = {
  "UPDATE meta SET value = max(value, ?1) WHERE key = 'unfinished_low_mark'",
  "UPDATE meta SET value = greatest(value, ?1) WHERE key = 'unfinished_low_mark'"};

constexpr dialect_sql lower_mark = {
  "UPDATE meta SET value = min(value, ?1) WHERE key = 'unfinished_low_mark'",
  "UPDATE meta SET value = least(value, ?1) WHERE key = 'unfinished_low_mark'"};

}  // namespace

result<meta_values> read_meta(db& d) {
  auto prepared = d.prepare(select_meta);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  meta_values out;
  int found = 0;
  while (s.step()) {
    auto key = s.column_text(0);
    if (key == "id_tag")
      out.id_tag = static_cast<uint32_t>(s.column_int(1));
    else
      out.unfinished_low_mark = s.column_int(1);
    ++found;
  }
  if (!s.step_status())
    return s.step_status();
  if (found != 2)
    return status{error::corrupt, d.location() + ": the meta table is incomplete"};
  return out;
}

namespace {

status move_low_mark(db& d, const dialect_sql& sql, int64_t mark) {
  auto prepared = d.prepare(sql);
  if (!prepared)
    return prepared.error();
  (*prepared)->bind(1, mark);
  return d.run(**prepared);
}

}  // namespace

status raise_low_mark(db& d, int64_t mark) {
  return move_low_mark(d, update_low_mark, mark);
}

result<int64_t> end_of_rows(db& d) {
  auto s = d.prepare("SELECT coalesce(max(id), 0) + 1 FROM jobs");
  if (!s)
    return s.error();
  int64_t end = 1;
  if ((*s)->step())
    end = (*s)->column_int(0);
  auto read = (*s)->step_status();
  (*s)->reset();
  if (!read)
    return read;
  return end;
}

status lower_low_mark(db& d, int64_t row) {
  return move_low_mark(d, lower_mark, row);
}

}  // namespace ergon::storage
