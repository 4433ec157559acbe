#include "job_rows.hpp"

#include <cstring>

#include "ergon/storage/job_ids.hpp"

namespace ergon::storage::rows {
namespace {

constexpr const char* select_attempts =
  "SELECT try, started_at, finished_at, outcome, message FROM attempts "
  "WHERE job_id = ?1 ORDER BY try";

constexpr const char* select_job_state =
  "SELECT status, current_try, " ERGON_JOB_KEY_COLUMNS " FROM jobs "
  "WHERE id = ?1 AND external_id = ?2";

}  // namespace

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
  return k;
}

job_info read_info(const stmt& s, int64_t& row, latest_attempt& latest) {
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
    latest.outcome = static_cast<attempt_outcome>(*outcome);
  latest.message = s.column_text(25);
  j.ready_since_ms = s.column_int(26);
  j.effective_priority = j.priority;
  return j;
}

status read_attempts(db& d, int64_t row, const latest_attempt& latest, job_info& info) {
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
    info.attempts.push_back(std::move(a));
  }
  if (!q.step_status())
    return q.step_status();
  if (info.status == job_status::running && info.started_at_ms) {
    attempt_info a;
    a.try_number = info.tries;
    a.started_at_ms = *info.started_at_ms;
    info.attempts.push_back(std::move(a));
  } else if (latest.outcome && info.started_at_ms) {
    attempt_info a;
    a.try_number = info.tries;
    a.started_at_ms = *info.started_at_ms;
    a.finished_at_ms = info.finished_at_ms;
    a.outcome = *latest.outcome;
    a.message = latest.message;
    info.attempts.push_back(std::move(a));
  }
  return {};
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
  return {error::job_finished,
          "job " + id.to_string() + " already " + to_string(s)};
}

void bind_id(stmt& s, int i, const job_id& id) {
  s.bind_blob(i, std::string_view{reinterpret_cast<const char*>(id.bytes().data()),
                                  id.bytes().size()});
}

job_id column_id(const stmt& s, int i) {
  job_id::bytes_type b{};
  auto blob = s.column_blob(i);
  if (blob.size() == b.size())
    std::memcpy(b.data(), blob.data(), b.size());
  return job_id{b};
}

}  // namespace ergon::storage::rows
