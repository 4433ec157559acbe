// Dependencies between jobs (job::depends_on): the edges a submit writes,
// and what the end of a job does to the jobs waiting on it and to its
// children. Both run in the writer's transaction, so a release is
// committed with the end that caused it, once.
#include "dependents.hpp"

#include <string>

#include "ergon/storage/pg_db.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* insert_edge =
  "INSERT INTO job_dependencies (depends_on, job_id) VALUES (?1, ?2)";
// SQLite: edges 64 to a statement, which spends a fan-out's time in the
// B-trees rather than in a statement's start per edge.
constexpr size_t edges_per_insert = 64;
const char* insert_edges_sqlite() {
  static const std::string sql = [] {
    std::string s = "INSERT INTO job_dependencies (depends_on, job_id) VALUES ";
    for (size_t i = 0; i < edges_per_insert; ++i)
      s += (i ? ", (?" : "(?") + std::to_string(2 * i + 1) + ", ?" + std::to_string(2 * i + 2)
           + ")";
    return s;
  }();
  return sql.c_str();
}
// PostgreSQL: a batch's edges in one COPY (a fan-in names thousands; an
// INSERT from unnest() spent twice the server's time).
constexpr const char* copy_edges =
  "COPY job_dependencies (depends_on, job_id) FROM STDIN (FORMAT binary)";

constexpr const char* mark_row = "UPDATE jobs SET has_dependents = has_dependents | 1 WHERE id = ?1";
constexpr const char* mark_rows_pg =
  "UPDATE jobs SET has_dependents = has_dependents | 1 WHERE id = ANY(CAST(?1 AS bigint[]))";

constexpr const char* select_waiting_dependents =
  "SELECT e.job_id, j.dependency_policy FROM dependency_edges e "
  "JOIN jobs j ON j.id = e.job_id "
  "WHERE e.depends_on = ?1 AND j.status = " ERGON_SQL_WAITING " ORDER BY e.job_id";

// One dependency done: the last one makes the job pending, its aging clock
// starting now (or at its run_at, if that is later). SET reads the old
// values on both engines.
constexpr const char* count_down =
  "UPDATE jobs SET waiting_on = waiting_on - 1, "
  "status = CASE WHEN waiting_on <= 1 THEN " ERGON_SQL_PENDING " ELSE " ERGON_SQL_WAITING " END, "
  "ready_since = CASE WHEN waiting_on > 1 THEN ready_since WHEN run_at > ?2 THEN run_at "
  "ELSE ?2 END "
  "WHERE id = ?1 AND status = " ERGON_SQL_WAITING " RETURNING status, " ERGON_JOB_KEY_COLUMNS;

constexpr const char* end_waiting_row =
  "UPDATE jobs SET status = ?3, finished_at = ?2, last_message = ?4, dead_letter_status = ?3, "
  "waiting_on = 0, unfinished_instance_of = NULL "
  "WHERE id = ?1 AND status = " ERGON_SQL_WAITING " "
  "RETURNING has_dependents, " ERGON_JOB_KEY_COLUMNS;

constexpr const char* select_unfinished_children =
  "SELECT status, has_dependents, " ERGON_JOB_KEY_COLUMNS " FROM jobs "
  "WHERE parent = ?1 AND status IN (" ERGON_SQL_UNFINISHED ") ORDER BY id";

// The first request's time is kept, as queue::cancel keeps it.
constexpr const char* ask_to_stop =
  "UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, ?2) "
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " RETURNING attempt_token";

// A job that ended, whose waiting dependents (and, if it ended
// unsuccessfully, children) are still to settle.
struct ended_job {
  int64_t row = 0;
  job_id id;
  job_status status = job_status::succeeded;
  bool has_children = false;
};

bool lets_run(job_status dependency, dependency_failure policy) {
  return dependency == job_status::succeeded || policy == dependency_failure::run;
}

// Counts the wait of the job at `row` down; its key if that released it.
result<std::optional<job_key>> count_down_row(db& d, int64_t row, int64_t now_ms) {
  auto s = d.prepare(count_down);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  q.bind(2, now_ms);
  if (!q.step())
    return q.step_status().ok() ? result<std::optional<job_key>>{std::nullopt}
                                : q.step_status();
  bool released = static_cast<job_status>(q.column_int(0)) == job_status::pending;
  std::optional<job_key> key;
  if (released)
    key = rows::read_key(q, 1);
  q.reset();
  return key;
}

// How a dependent ends, by its policy, when `dependency` ended `how`.
std::pair<job_status, std::string> ending_for(dependency_failure policy, const job_id& dependency,
                                              job_status how) {
  return {policy == dependency_failure::fail ? job_status::failed : job_status::cancelled,
          "dependency " + dependency.to_string() + " ended " + to_string(how)};
}

// The end of the job at `row` beyond its row: its key, and the next
// instance if it was one of a recurring job.
status end_row_links(db& d, int64_t row, job_status status, int64_t now_ms,
                     dependents_settled& out) {
  auto links = end_links(d, row, status, now_ms);
  if (!links)
    return links.error();
  if (links->next_instance)
    out.next_instances.push_back(std::move(*links->next_instance));
  return {};
}

// Ends the waiting job at `row` `status` with `message`; what it ended, if
// it still waited.
result<std::optional<dependent_end>> end_row(db& d, int64_t row, job_status status,
                                             std::string message, int64_t now_ms,
                                             dependents_settled& out) {
  dependent_end end;
  end.status = status;
  end.message = std::move(message);
  auto s = d.prepare(end_waiting_row);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  q.bind(2, now_ms);
  q.bind(3, static_cast<int64_t>(end.status));
  q.bind_text(4, end.message);
  if (!q.step())
    return q.step_status().ok() ? result<std::optional<dependent_end>>{std::nullopt}
                                : q.step_status();
  end.has_children = (q.column_int(0) & has_children_bit) != 0;
  end.key = rows::read_key(q, 1);
  q.reset();
  if (auto st = end_row_links(d, row, status, now_ms, out); !st)
    return st;
  return std::optional<dependent_end>{std::move(end)};
}

// A parent that ended unsuccessfully ends its unfinished children: pending
// and waiting ones are cancelled now (and join `work`, whose loop settles
// what waits on them without recursion), running ones are asked to stop,
// and end cancelled when their attempts do.
status stop_children(db& d, const ended_job& parent, int64_t now_ms,
                     std::vector<ended_job>& work, dependents_settled& out) {
  struct child {
    job_status status;
    bool has_children;
    job_key key;
  };
  std::vector<child> children;
  {
    auto s = d.prepare(select_unfinished_children);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, parent.row);
    while (q.step())
      children.push_back({static_cast<job_status>(q.column_int(0)),
                          (q.column_int(1) & has_children_bit) != 0, rows::read_key(q, 2)});
    if (!q.step_status())
      return q.step_status();
    q.reset();
  }
  auto why = "parent " + parent.id.to_string() + " ended " + to_string(parent.status);
  for (auto& c : children) {
    auto row = c.key.row;
    if (c.status == job_status::waiting) {
      auto ended = end_row(d, row, job_status::cancelled, why, now_ms, out);
      if (!ended)
        return ended.error();
      if (*ended) {
        work.push_back({row, c.key.id, job_status::cancelled, c.has_children});
        out.ended.push_back(std::move(**ended));
      }
    } else if (c.status == job_status::pending) {
      auto cancelled = rows::cancel_row(d, row, now_ms, why);
      if (!cancelled)
        return cancelled.error();
      if (!*cancelled)
        continue;
      if (auto st = end_row_links(d, row, job_status::cancelled, now_ms, out); !st)
        return st;
      work.push_back({row, c.key.id, job_status::cancelled, c.has_children});
      out.cancelled.push_back({std::move(c.key), job_status::cancelled, why, c.has_children});
    } else {
      auto s = d.prepare(ask_to_stop);
      if (!s)
        return s.error();
      (*s)->bind(1, row);
      (*s)->bind(2, now_ms);
      if ((*s)->step())
        out.stopping.push_back({{row, (*s)->column_int(0)}, std::move(c.key)});
      if (!(*s)->step_status())
        return (*s)->step_status();
      (*s)->reset();
    }
  }
  return {};
}

// Settles what waits on each job of `work`, and on the jobs that ends in
// turn, breadth first: a chain of any length uses no stack.
status settle(db& d, std::vector<ended_job> work, int64_t now_ms, dependents_settled& out) {
  struct waiter {
    int64_t row;
    dependency_failure policy;
  };
  std::vector<waiter> waiting;
  for (size_t next = 0; next < work.size(); ++next) {
    auto done = work[next];
    auto s = d.prepare(select_waiting_dependents);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, done.row);
    waiting.clear();
    while (q.step())
      waiting.push_back({q.column_int(0), static_cast<dependency_failure>(q.column_int(1))});
    if (!q.step_status())
      return q.step_status();
    q.reset();
    for (auto& w : waiting) {
      if (lets_run(done.status, w.policy)) {
        auto released = count_down_row(d, w.row, now_ms);
        if (!released)
          return released.error();
        if (*released)
          out.released.push_back(std::move(**released));
        continue;
      }
      auto [status, message] = ending_for(w.policy, done.id, done.status);
      auto ended = end_row(d, w.row, status, std::move(message), now_ms, out);
      if (!ended)
        return ended.error();
      if (!*ended)
        continue;
      work.push_back({w.row, (*ended)->key.id, (*ended)->status, (*ended)->has_children});
      out.ended.push_back(std::move(**ended));
    }
    if (done.has_children && done.status != job_status::succeeded)
      if (auto st = stop_children(d, done, now_ms, work, out); !st)
        return st;
  }
  return {};
}

}  // namespace

const char* waiting_dependents_sql() noexcept {
  return select_waiting_dependents;
}

status insert_edges(db& d, const std::vector<dependency_edge>& edges) {
  if (edges.empty())
    return {};
  if (d.engine() == engine::postgres)
    return static_cast<pg_db&>(d).copy_in(copy_edges, edges.size(),
                                          [&](pg_copy_rows& out, size_t k) {
                                            out.begin_row(2);
                                            out.add(edges[k].depends_on);
                                            out.add(edges[k].job);
                                          });
  size_t whole = edges.size() / edges_per_insert * edges_per_insert;
  if (whole > 0) {
    auto s = d.prepare(insert_edges_sqlite());
    if (!s)
      return s.error();
    auto& q = **s;
    for (size_t from = 0; from < whole; from += edges_per_insert) {
      q.reset();
      for (size_t i = 0; i < edges_per_insert; ++i) {
        q.bind(static_cast<int>(2 * i + 1), edges[from + i].depends_on);
        q.bind(static_cast<int>(2 * i + 2), edges[from + i].job);
      }
      if (auto st = d.run(q); !st)
        return st;
    }
  }
  auto s = d.prepare(insert_edge);
  if (!s)
    return s.error();
  auto& q = **s;
  for (size_t i = whole; i < edges.size(); ++i) {
    q.reset();
    q.bind(1, edges[i].depends_on);
    q.bind(2, edges[i].job);
    if (auto st = d.run(q); !st)
      return st;
  }
  return {};
}

status mark_depended(db& d, const std::vector<int64_t>& rows) {
  if (rows.empty())
    return {};
  if (d.engine() == engine::postgres) {
    auto s = d.prepare(mark_rows_pg);
    if (!s)
      return s.error();
    static_cast<pg_stmt&>(**s).bind_ints(1, rows);
    return d.send(**s);
  }
  auto s = d.prepare(mark_row);
  if (!s)
    return s.error();
  for (auto row : rows) {
    (*s)->reset();
    (*s)->bind(1, row);
    if (auto st = d.run(**s); !st)
      return st;
  }
  return {};
}

result<dependents_settled> end_waiting(db& d, int64_t row, dependency_failure policy,
                                       const job_id& dependency, job_status dependency_status,
                                       int64_t now_ms) {
  auto [status, message] = ending_for(policy, dependency, dependency_status);
  return end_waiting(d, row, status, std::move(message), now_ms);
}

result<dependents_settled> end_waiting(db& d, int64_t row, job_status status,
                                       std::string message, int64_t now_ms) {
  dependents_settled out;
  auto ended = end_row(d, row, status, std::move(message), now_ms, out);
  if (!ended)
    return ended.error();
  if (!*ended)
    return out;
  std::vector<ended_job> work{{row, (*ended)->key.id, (*ended)->status,
                               (*ended)->has_children}};
  out.ended.push_back(std::move(**ended));
  if (auto st = settle(d, std::move(work), now_ms, out); !st)
    return st;
  return out;
}

result<dependents_settled> settle_dependents(db& d, int64_t row, const job_id& id,
                                             job_status final_status, int64_t now_ms,
                                             bool has_children) {
  dependents_settled out;
  if (auto st = settle(d, {{row, id, final_status, has_children}}, now_ms, out); !st)
    return st;
  return out;
}

}  // namespace ergon::storage
