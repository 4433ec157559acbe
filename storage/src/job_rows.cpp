#include "job_rows.hpp"

#include <cstring>

#include <algorithm>

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/op/save_worker.hpp"
#include "ergon/storage/times.hpp"
#include "dependents.hpp"
#include "job_tags.hpp"
#include "status_sql.hpp"

namespace ergon::storage::rows {
namespace {

constexpr const char* select_attempts =
  "SELECT try, started_at, finished_at, outcome, message, worker FROM attempts "
  "WHERE job_id = ?1 ORDER BY try";

constexpr const char* select_depends_on =
  "SELECT j.external_id FROM dependency_edges e JOIN jobs j ON j.id = e.depends_on "
  "WHERE e.job_id = ?1 ORDER BY e.depends_on";
constexpr const char* select_dependents =
  "SELECT j.external_id FROM dependency_edges e JOIN jobs j ON j.id = e.job_id "
  "WHERE e.depends_on = ?1 ORDER BY e.job_id";

constexpr const char* select_parent =
  "SELECT p.external_id FROM jobs c JOIN jobs p ON p.id = c.parent WHERE c.id = ?1";

// Fills in each attempt's worker from its recorded id.
status name_workers(db& d, std::vector<attempt_info>& attempts) {
  std::vector<int64_t> ids;
  for (auto& a : attempts)
    if (a.worker.id != 0)
      ids.push_back(a.worker.id);
  if (ids.empty())
    return {};
  auto found = read_workers(d, ids);
  if (!found)
    return found.error();
  for (auto& a : attempts)
    for (auto& w : *found)
      if (w.id == a.worker.id)
        a.worker = w;
  return {};
}

status read_ids(db& d, const char* sql, int64_t row, std::vector<job_id>& out) {
  auto s = d.prepare(sql);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  while (q.step())
    out.push_back(column_id(q, 0));
  auto st = q.step_status();
  q.reset();
  return st;
}

constexpr const char* select_job_state =
  "SELECT status, current_try, " ERGON_JOB_KEY_COLUMNS " FROM jobs "
  "WHERE id = ?1 AND external_id = ?2";

constexpr const char* insert_row =
  "INSERT INTO jobs (external_id, " ERGON_TEMPLATE_COLUMNS ", run_at, deadline, added_at, id, "
  "ready_since, recurring_id, scheduled_at, unique_key, unique_hold_ms, result_ttl_ms, "
  "io_read_bytes, io_write_bytes, status, unfinished_instance_of, " ERGON_BACKOFF_COLUMNS ", "
  "waiting_on, dependency_policy, has_dependents, parent, only_dependency, ttl_after_start) "
  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
  "?19, ?20, ?21, ?22, ?23, ?24, ?25, ?28, ?19, ?26, ?27, ?29, ?30, ?31, ?32, ?33, ?34)";

constexpr const char* cancel_pending_row =
  "UPDATE jobs SET status = " ERGON_SQL_CANCELLED ", finished_at = ?2, last_message = ?3, "
  "dead_letter_status = " ERGON_SQL_CANCELLED ", unfinished_instance_of = NULL "
  "WHERE id = ?1 AND status = " ERGON_SQL_PENDING;

// Past the highest row there ever was: delete_finished records it before it
// deletes, so row ids never go back below the unfinished low mark.
constexpr dialect_sql select_max_row = {
  "SELECT max(coalesce((SELECT max(id) FROM jobs), 0), "
  "coalesce((SELECT value FROM meta WHERE key = 'row_high_water'), 0))",
  "SELECT greatest(coalesce((SELECT max(id) FROM jobs), 0), "
  "coalesce((SELECT value FROM meta WHERE key = 'row_high_water'), 0))"};

}  // namespace

result<bool> cancel_row(db& d, int64_t row, int64_t now_ms, const std::optional<std::string>& why) {
  auto s = d.prepare(cancel_pending_row);
  if (!s)
    return s.error();
  (*s)->bind(1, row);
  (*s)->bind(2, now_ms);
  (*s)->bind(3, why);
  if (auto st = d.run(**s); !st)
    return st;
  return d.changes() == 1;
}

result<int64_t> next_row(db& d) {
  auto s = d.prepare(select_max_row);
  if (!s)
    return s.error();
  if (!(*s)->step())
    return (*s)->step_status().ok() ? status{error::internal, "the highest row gave no row"}
                                    : (*s)->step_status();
  auto next = (*s)->column_int(0) + 1;
  (*s)->reset();
  return next;
}

job_key new_key(const job& j, int64_t now_ms, uint32_t id_tag, int64_t row) {
  job_key k;
  k.id = make_job_id(now_ms, id_tag, row);
  k.row = row;
  k.type = j.type;
  k.group = j.group.value_or(std::string{});
  k.priority = j.priority;
  k.run_at = j.run_at_ms.value_or(add_ms(now_ms, j.delay_ms));
  k.weight = j.weight;
  k.added_at = now_ms;
  // Aging counts waiting while due: not the time before run_at, nor the
  // past for a run_at in the past.
  k.ready_since = std::max(k.run_at, now_ms);
  // A deadline that saturates at never is no deadline. One from the first
  // attempt is set by the first claim.
  if (j.ttl_ms && j.ttl_from == ttl_start::run_at && add_ms(k.run_at, *j.ttl_ms) != never_ms)
    k.deadline = add_ms(k.run_at, *j.ttl_ms);
  if (j.expected_io) {
    k.io_read = j.expected_io->read_bytes;
    k.io_write = j.expected_io->write_bytes;
  }
  return k;
}

result<stmt*> prepare_insert(db& d) {
  return d.prepare(insert_row);
}

status insert_job(db& d, stmt& s, const job& j, const job_key& k,
                  std::optional<int64_t> scheduled_at, const dependency_links& links) {
  s.reset();
  s.bind_blob_static(1, id_bytes(k.id));
  bind_template(s, 2, j);
  s.bind(14, k.run_at);
  s.bind(15, k.deadline);
  s.bind(16, k.added_at);
  s.bind(17, k.row);
  s.bind(18, k.ready_since);
  if (k.recurring_id.empty())
    s.bind_null(19);
  else
    s.bind_text_static(19, k.recurring_id);
  s.bind(20, scheduled_at);
  s.bind_static(21, j.unique_key);
  if (j.unique_key && j.unique_hold_ms > 0)
    s.bind(22, j.unique_hold_ms);
  else
    s.bind_null(22);
  s.bind(23, j.result_ttl_ms);
  if (j.expected_io) {
    s.bind(24, j.expected_io->read_bytes);
    s.bind(25, j.expected_io->write_bytes);
  } else {
    s.bind_null(24);
    s.bind_null(25);
  }
  bind_backoff(s, 26, j.backoff);
  s.bind(28, static_cast<int64_t>(links.waits ? job_status::waiting : job_status::pending));
  s.bind(29, links.waiting_on);
  s.bind(30, static_cast<int64_t>(j.on_dependency_failure));
  s.bind(31, links.link_bits);
  s.bind(32, links.parent);
  s.bind(33, links.only_dependency);
  s.bind(34, ttl_after_start(j));
  return d.run(s);
}

void bind_backoff(stmt& s, int first, const backoff_policy& b) {
  s.bind(first, static_cast<int64_t>(b.kind));
  s.bind(first + 1, b.max_ms);
}

void read_backoff(const stmt& s, int first, backoff_policy& b) {
  b.kind = static_cast<backoff_kind>(s.column_int(first));
  b.max_ms = s.column_int(first + 1);
}

void bind_template(stmt& s, int first, const job& j) {
  s.bind_text_static(first, j.type);
  s.bind_static(first + 1, j.name);
  s.bind_static(first + 2, j.group);
  s.bind(first + 3, j.priority);
  s.bind(first + 4, j.weight);
  s.bind_blob_static(first + 5, j.payload);
  s.bind(first + 6, j.max_retries);
  s.bind(first + 7, j.backoff.initial_ms);
  s.bind(first + 8, j.backoff.multiplier);
  s.bind(first + 9, j.backoff.randomization);
  s.bind(first + 10, j.timeout_ms);
  s.bind(first + 11, j.heartbeat_increment_ms);
}

job_key read_key(const stmt& s, int first) {
  job_key k;
  k.row = s.column_int(first);
  k.type = s.column_text(first + 1);
  k.group = s.column_text(first + 2);
  k.priority = static_cast<int32_t>(s.column_int(first + 3));
  k.run_at = s.column_int(first + 4);
  k.weight = static_cast<int32_t>(s.column_int(first + 5));
  k.added_at = s.column_int(first + 6);
  k.deadline = s.column_opt_int(first + 7);
  k.id = column_id(s, first + 8);
  k.ready_since = s.column_int(first + 9);
  k.recurring_id = s.column_text(first + 10);
  k.io_read = s.column_int(first + 11);
  k.io_write = s.column_int(first + 12);
  return k;
}

job_info read_info(const stmt& s, int64_t& row, row_details& details) {
  job_info j;
  row = s.column_int(0);
  j.id = column_id(s, 1);
  j.type = s.column_text(2);
  j.name = s.column_opt_text(3);
  j.group = s.column_opt_text(4);
  j.status = static_cast<job_status>(s.column_int(5));
  j.priority = static_cast<int32_t>(s.column_int(6));
  j.weight = static_cast<int32_t>(s.column_int(7));
  j.run_at_ms = s.column_int(8);
  j.deadline_ms = s.column_opt_int(9);
  j.payload = s.column_blob(10);
  j.checkpoint = s.column_opt_blob(11);
  j.result = s.column_opt_blob(12);
  j.tries = static_cast<int32_t>(s.column_int(13));
  j.max_retries = static_cast<int32_t>(s.column_int(14));
  j.backoff.initial_ms = s.column_int(15);
  j.backoff.multiplier = s.column_double(16);
  j.backoff.randomization = s.column_double(17);
  j.timeout_ms = s.column_int(18);
  j.heartbeat_increment_ms = s.column_int(19);
  j.added_at_ms = s.column_int(20);
  j.started_at_ms = s.column_opt_int(21);
  j.finished_at_ms = s.column_opt_int(22);
  j.expires_at_ms = s.column_opt_int(23);
  if (auto outcome = s.column_opt_int(24))
    details.outcome = static_cast<attempt_outcome>(*outcome);
  details.message = s.column_text(25);
  j.ready_since_ms = s.column_int(26);
  j.recurring_id = s.column_opt_text(27);
  j.scheduled_at_ms = s.column_opt_int(28);
  j.unique_key = s.column_opt_text(29);
  j.result_expires_at_ms = s.column_opt_int(30);
  j.tries_before_retry = static_cast<int32_t>(s.column_int(31));
  j.cancel_requested_at_ms = s.column_opt_int(32);
  if (auto at = s.column_opt_int(36)) {
    progress_info p;
    p.done = s.column_int(33);
    p.total = s.column_int(34);
    p.message = s.column_text(35);
    p.reported_at_ms = *at;
    p.eta_ms = s.column_opt_int(37);
    j.progress = std::move(p);
  }
  j.yields = static_cast<int32_t>(s.column_int(38));
  if (!s.column_is_null(39) || !s.column_is_null(40))
    j.expected_io = io_estimate{s.column_int(39), s.column_int(40)};
  read_backoff(s, 41, j.backoff);
  j.waiting_on = static_cast<int32_t>(s.column_int(43));
  j.on_dependency_failure = static_cast<dependency_failure>(s.column_int(44));
  details.link_bits = s.column_int(45);
  details.has_parent = !s.column_is_null(46);
  details.has_only_dependency = !s.column_is_null(47);
  details.worker = s.column_opt_int(48).value_or(0);
  j.effective_priority = j.priority;
  return j;
}

status read_tags(db& d, int64_t row, const row_details& details, job_info& info) {
  if ((details.link_bits & has_tags_bit) == 0)
    return {};
  return storage::read_tags(d, row, info.tags);
}

status read_dependencies(db& d, int64_t row, const row_details& details, job_info& info) {
  if (details.has_only_dependency || (details.link_bits & (has_children_bit | has_edges_bit)))
    if (auto st = read_ids(d, select_depends_on, row, info.depends_on); !st)
      return st;
  if (details.link_bits & has_dependents_bit)
    if (auto st = read_ids(d, select_dependents, row, info.dependents); !st)
      return st;
  if (!details.has_parent)
    return {};
  std::vector<job_id> parent;
  if (auto st = read_ids(d, select_parent, row, parent); !st)
    return st;
  if (!parent.empty())
    info.parent = parent.front();
  return {};
}

status read_attempts(db& d, int64_t row, const row_details& details, job_info& info) {
  auto s = d.prepare(select_attempts);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  while (q.step()) {
    attempt_info a;
    a.try_number = static_cast<int32_t>(q.column_int(0));
    a.started_at_ms = q.column_int(1);
    a.finished_at_ms = q.column_int(2);
    a.outcome = static_cast<attempt_outcome>(q.column_int(3));
    a.message = q.column_text(4);
    a.worker.id = q.column_opt_int(5).value_or(0);
    info.attempts.push_back(std::move(a));
  }
  if (!q.step_status())
    return q.step_status();
  bool running = info.status == job_status::running;
  if ((running || details.outcome) && info.started_at_ms) {
    attempt_info a;
    a.try_number = info.tries;
    a.started_at_ms = *info.started_at_ms;
    if (!running) {
      a.finished_at_ms = info.finished_at_ms;
      a.outcome = *details.outcome;
      a.message = details.message;
    }
    a.worker.id = details.worker;
    info.attempts.push_back(std::move(a));
  }
  return name_workers(d, info.attempts);
}

result<job_state> find_job(db& d, const job_id& id) {
  auto s = d.prepare(select_job_state);
  if (!s)
    return s.error();
  auto row = row_of(id);
  if (!row)
    return status{error::not_found, "no job with id " + id.to_string()};
  auto& q = **s;
  q.bind(1, *row);
  bind_id(q, 2, id);
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return status{error::not_found, "no job with id " + id.to_string()};
  }
  job_state st;
  st.status = static_cast<job_status>(q.column_int(0));
  st.tries = static_cast<int32_t>(q.column_int(1));
  st.key = read_key(q, 2);
  st.row = st.key.row;
  return st;
}

status not_pending_error(const job_id& id, job_status s) {
  if (s == job_status::running)
    return {error::job_running, "job " + id.to_string() + " is running"};
  if (s == job_status::waiting)
    return invalid_field("id", "job " + id.to_string()
                                 + " waits for its dependencies: change it once it is pending "
                                   "(or cancel it)");
  return {error::job_finished,
          "job " + id.to_string() + " already " + to_string(s)};
}

std::string_view id_bytes(const job_id& id) {
  return {reinterpret_cast<const char*>(id.bytes().data()), id.bytes().size()};
}

void bind_id(stmt& s, int i, const job_id& id) {
  s.bind_blob(i, id_bytes(id));
}

job_id column_id(const stmt& s, int i) {
  job_id::bytes_type b{};
  auto blob = s.column_blob(i);
  if (blob.size() == b.size())
    std::memcpy(b.data(), blob.data(), b.size());
  return job_id{b};
}

}  // namespace ergon::storage::rows
