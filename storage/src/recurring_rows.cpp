#include "recurring_rows.hpp"

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/op/meta.hpp"
#include "ergon/storage/times.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage::rows {
namespace {

#define ERGON_RECURRING_COLUMNS                                              \
  "id, schedule, time_zone, catch_up, since, " ERGON_TEMPLATE_COLUMNS ", ttl_ms, " \
  "added_at, updated_at, last_job, last_scheduled_at, last_finished_at, last_status, " \
  ERGON_BACKOFF_COLUMNS ", max_executions, executions, paused_since, paused_until"

constexpr const char* select_recurring =
  "SELECT " ERGON_RECURRING_COLUMNS " FROM recurring_jobs WHERE id = ?1";

// A byte-exact prefix: LIKE would fold ASCII case and need % and _
// escaped, and substr() on TEXT counts characters and stops at a NUL.
// On PostgreSQL the prefix is bound as bytes: it may end inside a character,
// which PostgreSQL's text can't hold. Ids sort by bytes on both (COLLATE "C").
constexpr dialect_sql select_with_prefix = {
  "SELECT " ERGON_RECURRING_COLUMNS " FROM recurring_jobs "
  "WHERE id >= ?1 AND substr(CAST(id AS BLOB), 1, length(CAST(?1 AS BLOB))) = CAST(?1 AS BLOB) "
  "ORDER BY id",
  "SELECT " ERGON_RECURRING_COLUMNS " FROM recurring_jobs "
  "WHERE convert_to(id, 'UTF8') >= CAST(?1 AS bytea) "
  "AND substr(convert_to(id, 'UTF8'), 1, length(CAST(?1 AS bytea))) = CAST(?1 AS bytea) "
  "ORDER BY id"};


#define ERGON_MOVE_INSTANCE(greater)                                                       \
  "UPDATE jobs SET run_at = ?2, scheduled_at = ?2, "                                        \
  "ready_since = " greater "(CAST(?2 AS BIGINT), CAST(?3 AS BIGINT)), "                     \
  "deadline = ?4 WHERE id = ?1 AND status = " ERGON_SQL_PENDING " RETURNING " ERGON_JOB_KEY_COLUMNS
constexpr dialect_sql move_pending = {ERGON_MOVE_INSTANCE("max"),
                                      ERGON_MOVE_INSTANCE("greatest")};

// Served by the partial index jobs_one_unfinished_instance.
constexpr const char* select_unfinished =
  "SELECT status, scheduled_at, started_at IS NOT NULL, " ERGON_JOB_KEY_COLUMNS " FROM jobs "
  "WHERE unfinished_instance_of = ?1";

recurring_row read_row(const stmt& s) {
  recurring_row r;
  r.id = s.column_text(0);
  r.spec = s.column_text(1);
  r.time_zone = s.column_text(2);
  r.mode = s.column_int(3) == 1 ? catch_up::skip : catch_up::once;
  r.since = s.column_int(4);
  auto& j = r.templ;
  j.type = s.column_text(5);
  j.name = s.column_opt_text(6);
  j.group = s.column_opt_text(7);
  j.priority = static_cast<int32_t>(s.column_int(8));
  j.weight = static_cast<int32_t>(s.column_int(9));
  j.payload = s.column_blob(10);
  j.max_retries = static_cast<int32_t>(s.column_int(11));
  j.backoff.initial_ms = s.column_int(12);
  j.backoff.multiplier = s.column_double(13);
  j.backoff.randomization = s.column_double(14);
  j.timeout_ms = s.column_int(15);
  j.heartbeat_increment_ms = s.column_int(16);
  j.ttl_ms = s.column_opt_int(17);
  r.added_at = s.column_int(18);
  r.updated_at = s.column_int(19);
  if (s.column_opt_blob(20))
    r.last_job = column_id(s, 20);
  r.last_scheduled_at = s.column_opt_int(21);
  r.last_finished_at = s.column_opt_int(22);
  if (auto st = s.column_opt_int(23))
    r.last_status = static_cast<job_status>(*st);
  read_backoff(s, 24, j.backoff);
  r.max_executions = s.column_opt_int(26);
  r.executions = s.column_int(27);
  r.paused_since = s.column_opt_int(28);
  r.paused_until = s.column_opt_int(29);
  return r;
}

// The one row `q` (bound) yields, read by `read`, or nothing.
template <class Read>
auto optional_row(stmt& q, Read read) -> result<std::optional<decltype(read(q))>> {
  using row = decltype(read(q));
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return std::optional<row>{};
  }
  auto r = read(q);
  q.reset();
  return std::optional<row>{std::move(r)};
}

}  // namespace

result<std::optional<recurring_row>> find_recurring(db& d, const std::string& id) {
  auto s = d.prepare(select_recurring);
  if (!s)
    return s.error();
  (*s)->bind_text(1, id);
  return optional_row(**s, read_row);
}

result<std::vector<recurring_row>> recurring_with_prefix(db& d, const std::string& prefix) {
  auto s = d.prepare(select_with_prefix);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind_text(1, prefix);
  std::vector<recurring_row> out;
  while (q.step())
    out.push_back(read_row(q));
  if (!q.step_status())
    return q.step_status();
  return out;
}

result<schedule> schedule_of(const recurring_row& r) {
  return schedule::parse(r.spec, r.time_zone, r.since);
}

result<job_key> create_instance(db& d, const recurring_row& r, const next_slot& at,
                                int64_t now_ms) {
  auto meta = read_meta(d);
  if (!meta)
    return meta.error();
  auto row = next_row(d);
  if (!row)
    return row.error();
  if (*row > max_row_id)
    return status{error::storage_full, "the database has used up its job id space"};
  job j = r.templ;
  j.run_at_ms = at.run_at;
  auto k = new_key(j, now_ms, meta->id_tag, *row);
  k.recurring_id = r.id;
  auto insert = prepare_insert(d);
  if (!insert)
    return insert.error();
  if (auto st = insert_job(d, **insert, j, k, at.scheduled_at); !st)
    return st;
  return k;
}

std::optional<next_slot> after_pause(const recurring_row& r, const schedule& s,
                                     std::optional<next_slot> n) {
  if (!n || !r.paused_since || !r.paused_until || n->scheduled_at >= *r.paused_until
      || n->scheduled_at < *r.paused_since)
    return n;
  auto first = s.next_after(*r.paused_until - 1);
  if (!first)
    return std::nullopt;
  return next_slot{*first, *first};
}

result<key_change> move_instance(db& d, const recurring_row& r, const job_key& inst, int64_t to,
                                 int64_t now_ms) {
  auto s = d.prepare(move_pending);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, inst.row);
  q.bind(2, to);
  q.bind(3, now_ms);
  auto& ttl = r.templ.ttl_ms;
  if (ttl && add_ms(to, *ttl) != never_ms)
    q.bind(4, add_ms(to, *ttl));
  else
    q.bind_null(4);
  if (!q.step())
    return q.step_status().ok() ? status{error::internal, "instance changed underneath"}
                                : q.step_status();
  key_change out{inst, read_key(q)};
  q.reset();
  return out;
}

result<cancelled_job> cancel_instance(db& d, const job_key& k, const std::string& why,
                                      int64_t now_ms) {
  auto cancelled = cancel_row(d, k.row, now_ms, why);
  if (!cancelled)
    return cancelled.error();
  auto settled = settle_dependents(d, k.row, k.id, job_status::cancelled, now_ms);
  if (!settled)
    return settled.error();
  return cancelled_job{k, {}, std::move(*settled)};
}

result<std::optional<instance_state>> unfinished_instance(db& d, const std::string& id) {
  auto s = d.prepare(select_unfinished);
  if (!s)
    return s.error();
  (*s)->bind_text(1, id);
  return optional_row(**s, [](const stmt& q) {
    instance_state st;
    st.status = static_cast<job_status>(q.column_int(0));
    st.scheduled_at = q.column_int(1);
    st.started = q.column_int(2) != 0;
    st.key = read_key(q, 3);
    return st;
  });
}

}  // namespace ergon::storage::rows
