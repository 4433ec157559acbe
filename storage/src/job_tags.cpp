#include "job_tags.hpp"

#include <optional>
#include <string_view>

#include "ergon/storage/pg_db.hpp"

namespace ergon::storage {
namespace {

constexpr const char* insert_one = "INSERT INTO job_tags (job_id, key, value) VALUES (?1, ?2, ?3)";

// Text travels as bytea, the one array of strings pg_stmt binds; the keys
// and values were checked to be UTF-8.
constexpr const char* insert_all =
  "INSERT INTO job_tags (job_id, key, value) "
  "SELECT r, convert_from(k, 'UTF8'), convert_from(v, 'UTF8') "
  "FROM unnest(CAST(?1 AS bigint[]), CAST(?2 AS bytea[]), CAST(?3 AS bytea[])) AS t(r, k, v)";

constexpr const char* select_tags = "SELECT key, value FROM job_tags WHERE job_id = ?1";

}  // namespace

status insert_tags(db& d, const std::vector<row_tags>& rows) {
  if (rows.empty())
    return {};
  if (d.engine() == engine::postgres) {
    std::vector<int64_t> ids;
    std::vector<std::optional<std::string_view>> keys, values;
    for (auto& r : rows)
      for (auto& [k, v] : *r.tags) {
        ids.push_back(r.row);
        keys.emplace_back(k);
        values.emplace_back(v);
      }
    auto s = d.prepare(insert_all);
    if (!s)
      return s.error();
    auto& q = static_cast<pg_stmt&>(**s);
    q.bind_ints(1, ids);
    q.bind_blobs(2, keys);
    q.bind_blobs(3, values);
    return d.send(q);
  }
  auto s = d.prepare(insert_one);
  if (!s)
    return s.error();
  auto& q = **s;
  for (auto& r : rows)
    for (auto& [k, v] : *r.tags) {
      q.reset();
      q.bind(1, r.row);
      q.bind_text_static(2, k);
      q.bind_text_static(3, v);
      if (auto st = d.run(q); !st)
        return st;
    }
  return {};
}

status read_tags(db& d, int64_t row, std::map<std::string, std::string>& out) {
  auto s = d.prepare(select_tags);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  while (q.step())
    out.emplace(q.column_text(0), q.column_text(1));
  auto read = q.step_status();
  q.reset();
  return read;
}

}  // namespace ergon::storage
