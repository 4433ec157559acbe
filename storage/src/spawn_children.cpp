#include "ergon/storage/op/spawn_children.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ergon/storage/times.hpp"
#include "attempt_end.hpp"
#include "in_batch.hpp"
#include "dependents.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_parent =
  "SELECT current_try, started_at, cancel_requested_at IS NOT NULL, dependency_policy, "
  "has_dependents, " ERGON_JOB_KEY_COLUMNS " "
  "FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2";

// Like a snooze: the try is given back (try_base), the deadline goes (the
// job started in time), and the checkpoint is what it resumes from.
constexpr const char* park_parent =
  "UPDATE jobs SET status = ?3, checkpoint = ?4, waiting_on = ?5, run_at = ?6, "
  "ready_since = ?6, expires_at = NULL, deadline = NULL, try_base = try_base + 1, "
  "has_dependents = has_dependents | 2 "
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2";

constexpr const char* select_waiting_on =
  "SELECT e.job_id FROM dependency_edges e JOIN jobs j ON j.id = e.job_id "
  "WHERE e.depends_on = ?1 AND j.status = " ERGON_SQL_WAITING;

constexpr const char* select_edge =
  "SELECT 1 FROM dependency_edges WHERE depends_on = ?1 AND job_id = ?2";

const failed_attempt after_cancel{attempt_outcome::cancelled,
                                  "submitted children after a cancel request", false};

// A child's deadline is at most its parent's.
status cap_deadlines(std::vector<job>& children, int64_t parent_deadline, int64_t now_ms) {
  for (size_t i = 0; i < children.size(); ++i) {
    auto& c = children[i];
    auto run_at = c.run_at_ms.value_or(add_ms(now_ms, c.delay_ms));
    if (run_at >= parent_deadline)
      return invalid_field("children[" + std::to_string(i) + "].run_at",
                           "is not before the parent's deadline ("
                             + std::to_string(parent_deadline) + " ms): a child's deadline "
                             "is at most its parent's");
    auto most = parent_deadline - run_at;
    if (!c.ttl_ms || *c.ttl_ms > most)
      c.ttl_ms = most;
    c.ttl_from = ttl_start::run_at;  // from a first attempt it could pass the parent's
  }
  return {};
}

// The parent and the jobs waiting on it, directly or through others: a
// child may neither be nor depend on one of them, or the parent would wait
// on itself.
result<std::unordered_set<int64_t>> waiting_on_parent(db& d, int64_t parent, bool depended_on) {
  std::unordered_set<int64_t> out{parent};
  if (!depended_on)
    return out;
  auto s = d.prepare(select_waiting_on);
  if (!s)
    return s.error();
  auto& q = **s;
  std::vector<int64_t> work{parent};
  while (!work.empty()) {
    auto row = work.back();
    work.pop_back();
    q.reset();
    q.bind(1, row);
    while (q.step())
      if (auto r = q.column_int(0); out.insert(r).second)
        work.push_back(r);
    if (!q.step_status())
      return q.step_status();
  }
  q.reset();
  return out;
}

status a_cycle(size_t i, size_t n, const std::string& field, const job_id& id) {
  return in_batch(invalid_field(field, "job " + id.to_string()
                                         + " is the parent or waits on it: the parent would "
                                           "wait on itself"),
                  i, n);
}

// Refuses children that name the parent, or a job waiting on it, as a
// dependency (`field` depends_on).
status refuse_cycles(db& d, const std::vector<std::vector<job_id>>& named,
                     const std::unordered_set<int64_t>& above) {
  for (size_t i = 0; i < named.size(); ++i)
    for (auto& id : named[i]) {
      auto found = rows::find_job(d, id);
      if (!found)
        continue;  // insert_jobs named it already
      if (above.count(found->row))
        return a_cycle(i, named.size(), "depends_on", id);
    }
  return {};
}

result<bool> has_edge(db& d, int64_t depends_on, int64_t job) {
  auto s = d.prepare(select_edge);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, depends_on);
  q.bind(2, job);
  bool found = q.step();
  auto read = q.step_status();
  q.reset();
  if (!read)
    return read;
  return found;
}

}  // namespace

result<std::optional<spawn_children_result>> spawn_children(db& d, spawn_children_args args,
                                                            int64_t now_ms) {
  if (args.children.empty())
    return invalid_field("children", "submit at least one child");
  attempt_end end;
  bool cancel_requested = false;
  auto policy = dependency_failure::cancel;
  bool depended_on = false;
  {
    auto s = d.prepare(select_parent);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, args.row);
    q.bind(2, args.token);
    if (!q.step())
      return q.step_status().ok() ? result<std::optional<spawn_children_result>>{std::nullopt}
                                  : q.step_status();
    end.row = args.row;
    end.try_number = static_cast<int32_t>(q.column_int(0));
    end.started_at = q.column_int(1);
    cancel_requested = q.column_int(2) != 0;
    policy = static_cast<dependency_failure>(q.column_int(3));
    depended_on = (q.column_int(4) & has_dependents_bit) != 0;
    end.key = rows::read_key(q, 5);
    q.reset();
  }
  end.id = end.key.id;
  end.type = end.key.type;
  end.group = end.key.group;
  spawn_children_result out;
  if (cancel_requested) {
    auto ended = end_attempt(d, args.row, args.token, after_cancel, retry_timing::backoff, 0.0,
                             now_ms);
    if (!ended)
      return ended.error();
    if (!*ended)
      return std::optional<spawn_children_result>{};
    out.parent = std::move(**ended);
    return std::optional<spawn_children_result>{std::move(out)};
  }
  if (end.key.deadline)
    if (auto st = cap_deadlines(args.children, *end.key.deadline, now_ms); !st)
      return st;
  auto above = waiting_on_parent(d, args.row, depended_on);
  if (!above)
    return above.error();
  std::vector<std::vector<job_id>> named;
  std::vector<const char*> key_field;  // what resolves a child to an existing job
  for (auto& c : args.children) {
    named.push_back(c.depends_on);
    key_field.push_back(c.unique_key ? "unique_key" : "idempotency_key");
  }
  auto insert = std::move(args.insert);
  insert.jobs = std::move(args.children);
  insert.next_row = 0;
  insert.parent = args.row;
  auto children = insert_jobs(d, insert, now_ms);
  if (!children)
    return children.error();
  if (auto st = refuse_cycles(d, named, *above); !st)
    return st;
  // Each child once, with whether it has ended: new rows from the insert,
  // others (a unique key's holder, an idempotency key's job) looked up.
  std::unordered_map<std::string, std::pair<int64_t, job_status>> state;
  for (auto& k : children->added)
    state[k.id.to_string()] = {k.row, job_status::pending};
  for (auto& k : children->waiting)
    state[k.id.to_string()] = {k.row, job_status::waiting};
  for (auto& e : children->dependents.ended)
    if (auto i = state.find(e.key.id.to_string()); i != state.end())
      i->second.second = e.status;
  std::vector<dependency_edge> edges;
  std::vector<int64_t> depended;
  std::unordered_set<int64_t> seen;
  int32_t unfinished = 0;
  std::optional<std::pair<job_id, job_status>> doomed;
  auto n = children->ids.size();
  for (size_t k = 0; k < n; ++k) {
    auto& id = children->ids[k];
    auto i = state.find(id.to_string());
    std::pair<int64_t, job_status> child;
    bool edge_exists = false;
    if (i != state.end()) {
      child = i->second;
    } else {
      // A job a key skipped to: it may be the parent, wait on it, or be a
      // child of an earlier spawn of this parent.
      auto found = rows::find_job(d, id);
      if (!found)
        return found.error();
      child = {found->row, found->status};
      if (above->count(found->row))
        return a_cycle(k, n, key_field[k], id);
      depended.push_back(found->row);
      auto e = has_edge(d, found->row, args.row);
      if (!e)
        return e.error();
      edge_exists = *e;
    }
    if (!seen.insert(child.first).second)
      continue;
    if (!edge_exists)
      edges.push_back({child.first, args.row});
    if (!is_final(child.second))
      ++unfinished;
    else if (child.second != job_status::succeeded && !doomed)
      doomed = std::pair{id, child.second};
  }
  if (auto st = insert_edges(d, edges); !st)
    return st;
  if (auto st = mark_depended(d, depended); !st)
    return st;
  if (doomed && policy == dependency_failure::run)
    doomed.reset();
  bool waits = unfinished > 0 || doomed;
  end.outcome = attempt_outcome::spawned;
  end.message = "spawned " + std::to_string(children->ids.size()) + " children; waits for "
                + std::to_string(unfinished);
  end.status = waits ? job_status::waiting : job_status::pending;
  if (auto st = record_attempt(d, args.row, end.try_number, end.started_at, now_ms,
                               attempt_outcome::spawned, end.message);
      !st)
    return st;
  auto s = d.prepare(park_parent);
  if (!s)
    return s.error();
  auto& u = **s;
  u.bind(1, args.row);
  u.bind(2, args.token);
  u.bind(3, static_cast<int64_t>(end.status));
  u.bind_blob(4, args.checkpoint);
  u.bind(5, unfinished);
  u.bind(6, now_ms);
  if (auto st = d.run(u); !st)
    return st;
  end.key.run_at = end.key.ready_since = now_ms;
  end.key.deadline.reset();
  if (doomed) {
    auto ended = end_waiting(d, args.row, policy, doomed->first, doomed->second, now_ms);
    if (!ended)
      return ended.error();
    end.dependents = std::move(*ended);
  }
  out.parent = std::move(end);
  out.children = std::move(*children);
  return std::optional<spawn_children_result>{std::move(out)};
}

}  // namespace ergon::storage
