#include "ergon/storage/op/save_worker.hpp"

#include <algorithm>

namespace ergon::storage {
namespace {

constexpr const char* upsert =
  "INSERT INTO workers (id, name, host, pid, node, registered_at, left_at)"
  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
  " ON CONFLICT (id) DO UPDATE SET left_at = excluded.left_at";

constexpr const char* select_next = "SELECT coalesce(max(id), 0) + 1 FROM workers";

constexpr const char* end_all =
  "UPDATE workers SET left_at = ?1 WHERE left_at IS NULL";

// The partial index on left_at finds the oldest. The highest id stays: the
// next registration counts on from it (next_worker_id), so an id that
// attempts still name is never given again.
constexpr const char* delete_departed =
  "DELETE FROM workers WHERE id IN (SELECT id FROM workers WHERE left_at IS NOT NULL"
  " AND left_at < ?1 AND id < (SELECT max(id) FROM workers) ORDER BY left_at LIMIT ?2)";

constexpr const char* select_one =
  "SELECT id, name, host, pid, node FROM workers WHERE id = ?1";

}  // namespace

status save_worker(db& d, const worker_row& w) {
  auto s = d.prepare(upsert);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, w.identity.id);
  q.bind_text(2, w.identity.name);
  q.bind_text(3, w.identity.host);
  q.bind(4, w.identity.pid);
  if (w.identity.node.empty())
    q.bind_null(5);
  else
    q.bind_text(5, w.identity.node);
  q.bind(6, w.registered_at);
  q.bind(7, w.left_at);
  return d.run(q);
}

result<int64_t> next_worker_id(db& d) {
  auto s = d.prepare(select_next);
  if (!s)
    return s.error();
  auto& q = **s;
  if (!q.step())
    return q.step_status().ok() ? status{error::internal, "max(workers.id) gave no row"}
                                : q.step_status();
  auto next = q.column_int(0);
  q.reset();
  return next;
}

status end_registrations(db& d, int64_t now) {
  auto s = d.prepare(end_all);
  if (!s)
    return s.error();
  (*s)->bind(1, now);
  return d.run(**s);
}

result<int64_t> delete_departed_workers(db& d, int64_t before, int64_t limit) {
  auto s = d.prepare(delete_departed);
  if (!s)
    return s.error();
  (*s)->bind(1, before);
  (*s)->bind(2, limit);
  if (auto st = d.run(**s); !st)
    return st;
  return d.changes();
}

result<std::vector<worker_identity>> read_workers(db& d, const std::vector<int64_t>& ids) {
  auto s = d.prepare(select_one);
  if (!s)
    return s.error();
  auto& q = **s;
  std::vector<int64_t> wanted = ids;
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  std::vector<worker_identity> out;
  for (auto id : wanted) {
    q.reset();
    q.bind(1, id);
    if (q.step()) {
      worker_identity w;
      w.id = q.column_int(0);
      w.name = q.column_text(1);
      w.host = q.column_text(2);
      w.pid = q.column_int(3);
      w.node = q.column_opt_text(4).value_or(std::string{});
      out.push_back(std::move(w));
    }
    if (!q.step_status())
      return q.step_status();
  }
  q.reset();
  return out;
}

}  // namespace ergon::storage
