#include "ergon/storage/op/retry_failed.hpp"

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/op/meta.hpp"
#include "dependents.hpp"
#include "job_filter_sql.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// The attempt that ended the job lives in the jobs row; it joins the history.
constexpr const char* keep_last_attempt =
  "INSERT INTO attempts (job_id, try, started_at, finished_at, outcome, message, worker) "
  "SELECT id, current_try, started_at, finished_at, last_outcome, coalesce(last_message, ''), "
  "worker "
  "FROM jobs WHERE id = ?1 AND started_at IS NOT NULL AND last_outcome IS NOT NULL";

#define ERGON_SQL_REQUEUE(taken)                                                                    \
  "UPDATE jobs SET status = " ERGON_SQL_PENDING ", try_base = current_try, run_at = ?2, ready_since = ?2, " \
  "deadline = NULL, started_at = NULL, finished_at = NULL, expires_at = NULL, "                    \
  "last_outcome = NULL, last_message = NULL, result = NULL, result_expires_at = NULL, "           \
  "progress_at = NULL, cancel_requested_at = NULL, recurring_id = NULL, "                         \
  "dead_letter_status = NULL "                                                                     \
  "WHERE id = ?1 AND status IN (" taken ") RETURNING " ERGON_JOB_KEY_COLUMNS ", unique_key"

constexpr const char* requeue = ERGON_SQL_REQUEUE(ERGON_SQL_FAILED);
// A replay takes a job of any final status.
constexpr const char* requeue_finished = ERGON_SQL_REQUEUE(
  ERGON_SQL_SUCCEEDED ", " ERGON_SQL_FAILED ", " ERGON_SQL_CANCELLED ", " ERGON_SQL_EXPIRED);

// Who holds the key now: nobody, this job, or another job (held_until
// NULL while it is unfinished, or a hold that has not passed).
constexpr const char* select_key_holder =
  "SELECT job_id, job FROM unique_keys WHERE key = ?1 "
  "AND (held_until IS NULL OR held_until > ?2)";

constexpr const char* select_unique_key =
  "SELECT unique_key, external_id, has_dependents FROM jobs WHERE id = ?1";

// Dependencies: the retried job waits again for those that have not ended
// (the ones that ended unsuccessfully no longer stop it: retrying is the
// operator's word), and the jobs still waiting on it, which counted its
// failure as done (policy run), wait for it again.
constexpr const char* count_unfinished_dependencies =
  "SELECT count(*) FROM dependency_edges e JOIN jobs j ON j.id = e.depends_on "
  "WHERE e.job_id = ?1 AND j.status IN (" ERGON_SQL_UNFINISHED ")";
constexpr const char* wait_again =
  "UPDATE jobs SET status = " ERGON_SQL_WAITING ", waiting_on = ?2 WHERE id = ?1";
constexpr const char* rewait_dependents =
  "UPDATE jobs SET waiting_on = waiting_on + 1 WHERE status = " ERGON_SQL_WAITING " AND id IN "
  "(SELECT job_id FROM dependency_edges WHERE depends_on = ?1)";

constexpr const char* take_key =
  "INSERT INTO unique_keys (key, job_id, job, held_until) VALUES (?1, ?2, ?3, NULL) "
  "ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, job = excluded.job, "
  "held_until = NULL";

// Whether another job holds `key` at `now_ms`.
result<std::optional<job_id>> other_holder(db& d, const std::string& key, int64_t row,
                                           int64_t now_ms) {
  auto s = d.prepare(select_key_holder);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind_text(1, key);
  q.bind(2, now_ms);
  std::optional<job_id> holder;
  if (q.step() && q.column_int(0) != row)
    holder = rows::column_id(q, 1);
  auto read = q.step_status();
  q.reset();
  if (!read)
    return read;
  return holder;
}

status run_on_row(db& d, const char* sql, int64_t row) {
  auto s = d.prepare(sql);
  if (!s)
    return s.error();
  (*s)->bind(1, row);
  return d.run(**s);
}

// Retries the failed job at `row`. Nothing if it is not failed; the key's
// holder if another job holds its unique key (nothing changed then).
struct one_retry {
  std::optional<job_key> requeued;
  std::optional<job_id> held_by;
  job_id id;  ///< the failed job's
};

result<int64_t> unfinished_dependencies(db& d, int64_t row) {
  auto s = d.prepare(count_unfinished_dependencies);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  int64_t n = q.step() ? q.column_int(0) : 0;
  auto read = q.step_status();
  q.reset();
  if (!read)
    return read;
  return n;
}

// The requeued job at `row` waits again if dependencies of it have not
// ended; true if so. After every row of a retry is requeued, so a parent
// retried with its children waits for them whatever the rows' order.
result<bool> wait_for_unfinished(db& d, int64_t row) {
  auto waits_on = unfinished_dependencies(d, row);
  if (!waits_on)
    return waits_on.error();
  if (*waits_on == 0)
    return false;
  auto w = d.prepare(wait_again);
  if (!w)
    return w.error();
  (*w)->bind(1, row);
  (*w)->bind(2, *waits_on);
  if (auto st = d.run(**w); !st)
    return st;
  return true;
}

// Files each requeued key as pending or, once it waits again, waiting.
status place(db& d, std::vector<job_key> requeued, retry_failed_result& out) {
  for (auto& k : requeued) {
    auto waits = wait_for_unfinished(d, k.row);
    if (!waits)
      return waits.error();
    (*waits ? out.waiting : out.requeued).push_back(std::move(k));
  }
  return {};
}

result<one_retry> retry_row(db& d, int64_t row, int64_t now_ms, bool any_final = false) {
  auto k = d.prepare(select_unique_key);
  if (!k)
    return k.error();
  (*k)->bind(1, row);
  std::optional<std::string> key;
  one_retry out;
  bool depended_on = false;
  if ((*k)->step()) {
    key = (*k)->column_opt_text(0);
    out.id = rows::column_id(**k, 1);
    depended_on = ((*k)->column_int(2) & has_dependents_bit) != 0;
  }
  auto read = (*k)->step_status();
  (*k)->reset();
  if (!read)
    return read;
  if (key) {
    auto holder = other_holder(d, *key, row, now_ms);
    if (!holder)
      return holder.error();
    if (*holder) {
      out.held_by = **holder;
      return out;
    }
  }
  if (auto st = run_on_row(d, keep_last_attempt, row); !st)
    return st;
  auto s = d.prepare(any_final ? requeue_finished : requeue);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  q.bind(2, now_ms);
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return out;
  }
  auto requeued = rows::read_key(q, 0);
  q.reset();
  if (key) {
    auto t = d.prepare(take_key);
    if (!t)
      return t.error();
    (*t)->bind_text(1, *key);
    (*t)->bind(2, row);
    rows::bind_id(**t, 3, requeued.id);
    if (auto st = d.run(**t); !st)
      return st;
  }
  if (depended_on)
    if (auto st = run_on_row(d, rewait_dependents, row); !st)
      return st;
  // A finished job below the mark is unfinished again.
  if (auto st = lower_low_mark(d, row); !st)
    return st;
  out.requeued = std::move(requeued);
  return out;
}

}  // namespace

result<retry_failed_result> retry_failed(db& d, const retry_failed_args& args, int64_t now_ms) {
  retry_failed_result out;
  if (args.id) {
    auto found = rows::find_job(d, *args.id);
    if (!found)
      return found.error();
    auto name = "job " + args.id->to_string();
    auto verb = args.replay ? "replay" : "retry";
    switch (found->status) {
      case job_status::failed: break;
      case job_status::running: return status{error::job_running, name + " is running"};
      case job_status::pending:
      case job_status::waiting:
        return status{error::invalid_argument,
                      name + " is " + to_string(found->status) + ": nothing to " + verb, "id"};
      default:
        if (!args.replay)
          return status{error::job_finished,
                        name + " ended " + to_string(found->status) + ", it did not fail"};
    }
    out.from = found->status;
    auto r = retry_row(d, found->row, now_ms, args.replay);
    if (!r)
      return r.error();
    if (r->held_by)
      return status{error::already_exists,
                    name + " stays " + to_string(found->status) + ": its unique key is held by "
                      + r->held_by->to_string(),
                    "unique_key"};
    if (r->requeued)
      if (auto st = place(d, {std::move(*r->requeued)}, out); !st)
        return st;
    return out;
  }
  auto filter = args.filter;
  filter.status = job_status::failed;
  if (auto st = validate(filter); !st)
    return st;
  auto s = d.prepare(filter_sql::select(filter_sql::use::rows, filter, false, d.engine()));
  if (!s)
    return s.error();
  auto& q = **s;
  // Rows retried leave the failed index, so the next step starts after the
  // last row this one saw: a skipped job is not seen twice.
  filter_sql::bind(q, filter, {args.after_row, args.before_row}, 0,
                   static_cast<int64_t>(args.limit));
  std::vector<int64_t> rows_found;
  while (q.step())
    rows_found.push_back(q.column_int(0));
  auto read = q.step_status();
  q.reset();
  if (!read)
    return read;
  std::vector<job_key> requeued;
  for (auto row : rows_found) {
    auto r = retry_row(d, row, now_ms);
    if (!r)
      return r.error();
    if (r->requeued)
      requeued.push_back(std::move(*r->requeued));
    else if (r->held_by)
      out.skipped.push_back(r->id);
  }
  if (rows_found.size() >= args.limit)
    out.resume_after = rows_found.back();
  if (auto st = place(d, std::move(requeued), out); !st)
    return st;
  return out;
}

}  // namespace ergon::storage
