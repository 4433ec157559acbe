#include "ergon/storage/op/put_recurring.hpp"

#include <algorithm>

#include "ergon/storage/op/insert_jobs.hpp"
#include "ergon/storage/times.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"
#include "recurring_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* insert_recurring =
  "INSERT INTO recurring_jobs (id, schedule, time_zone, catch_up, since, " ERGON_TEMPLATE_COLUMNS
  ", ttl_ms, added_at, updated_at, " ERGON_BACKOFF_COLUMNS ", max_executions) "
  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
  "?19, ?19, ?20, ?21, ?22)";

constexpr const char* update_recurring =
  "UPDATE recurring_jobs SET (schedule, time_zone, catch_up, since, " ERGON_TEMPLATE_COLUMNS
  ", ttl_ms, updated_at, " ERGON_BACKOFF_COLUMNS ", max_executions) = (?2, ?3, ?4, ?5, ?6, "
  "?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22) WHERE id = ?1";

// The pending instance takes the template; a new payload (?7) drops a
// checkpoint an earlier attempt left, as update_pending does.
constexpr const char* update_instance =
  "UPDATE jobs SET checkpoint = CASE WHEN payload = ?7 THEN checkpoint ELSE NULL END, "
  "(" ERGON_TEMPLATE_COLUMNS ", run_at, scheduled_at, ready_since, deadline, "
  ERGON_BACKOFF_COLUMNS ") = "
  "(?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) "
  "WHERE id = ?1 AND status = " ERGON_SQL_PENDING " RETURNING " ERGON_JOB_KEY_COLUMNS;

// Binds ?1 to ?18 and ?20 to ?22 of insert_recurring (update_recurring
// uses the same numbers).
void bind_recurring(stmt& s, const recurring_job& r, int64_t since) {
  s.bind_text(1, r.id);
  s.bind_text(2, r.schedule);
  s.bind_text(3, r.time_zone);
  s.bind(4, static_cast<int64_t>(r.catch_up));
  s.bind(5, since);
  rows::bind_template(s, 6, r.job);
  s.bind(18, r.job.ttl_ms);
  rows::bind_backoff(s, 20, r.job.backoff);
  s.bind(22, r.max_executions);
}

rows::recurring_row row_of(const recurring_job& r, int64_t since) {
  rows::recurring_row row;
  row.id = r.id;
  row.spec = r.schedule;
  row.time_zone = r.time_zone;
  row.mode = r.catch_up;
  row.since = since;
  row.templ = r.job;
  row.max_executions = r.max_executions;
  return row;
}

// Gives the pending instance `before` the template of `r`, at `at` if set.
result<key_change> retemplate(db& d, const recurring_job& r, const rows::instance_state& before,
                              std::optional<int64_t> at, int64_t now_ms) {
  const auto& j = r.job;
  int64_t run_at = at.value_or(before.key.run_at);
  int64_t ready_since = at ? std::max(*at, now_ms) : before.key.ready_since;
  std::optional<int64_t> deadline;
  if (j.ttl_ms && add_ms(run_at, *j.ttl_ms) != never_ms)
    deadline = add_ms(run_at, *j.ttl_ms);
  auto s = d.prepare(update_instance);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, before.key.row);
  rows::bind_template(q, 2, j);
  q.bind(14, run_at);
  q.bind(15, at.value_or(before.scheduled_at));
  q.bind(16, ready_since);
  q.bind(17, deadline);
  rows::bind_backoff(q, 18, j.backoff);
  if (!q.step())
    return q.step_status().ok() ? status{error::internal, "pending instance changed underneath"}
                                : q.step_status();
  key_change change{before.key, rows::read_key(q)};
  q.reset();
  return change;
}

status exists_error(const std::string& id) {
  return {error::already_exists, "a recurring job with id '" + id + "' already exists", "id"};
}

status missing_error(const std::string& id) {
  return {error::not_found, "no recurring job with id '" + id + "'"};
}

}  // namespace

result<put_recurring_result> put_recurring(db& d, const put_recurring_args& args,
                                           int64_t now_ms) {
  if (args.retry_policies && args.job.job.backoff == backoff_policy{}
      && args.retry_policies->count(args.job.job.type) > 0) {
    auto own = args;
    apply_retry_policy(own.job.job, *args.retry_policies);
    own.retry_policies = nullptr;
    return put_recurring(d, own, now_ms);
  }
  const auto& r = args.job;
  if (auto st = validate(r, args.max_payload_bytes); !st)
    return st;
  auto existing = rows::find_recurring(d, r.id);
  if (!existing)
    return existing.error();
  if (*existing && args.mode == put_mode::add)
    return exists_error(r.id);
  if (!*existing && args.mode == put_mode::update)
    return missing_error(r.id);
  // One that has run its limit takes the update, and makes no instance.
  bool exhausted =
    *existing && r.max_executions && (*existing)->executions >= *r.max_executions;
  bool moved = !*existing || (*existing)->spec != r.schedule
               || (*existing)->time_zone != r.time_zone;
  int64_t since = moved ? now_ms : (*existing)->since;
  auto s = d.prepare(*existing ? update_recurring : insert_recurring);
  if (!s)
    return s.error();
  bind_recurring(**s, r, since);
  (*s)->bind(19, now_ms);
  if (auto st = d.run(**s); !st)
    return st;
  auto row = row_of(r, since);
  if (*existing) {  // an update keeps the pause
    row.paused_since = (*existing)->paused_since;
    row.paused_until = (*existing)->paused_until;
  }
  auto sched = rows::schedule_of(row);
  if (!sched)
    return sched.error();
  std::optional<next_slot> at;
  if (!*existing && r.run_now)
    at = next_slot{now_ms, now_ms};
  else if (auto n = sched->next_after(now_ms))
    at = next_slot{*n, *n};
  at = rows::after_pause(row, *sched, at);
  put_recurring_result out;
  // A new recurring job may find an instance too: its deleted namesake's,
  // still running. It adopts it rather than break the one-instance rule.
  auto instance = rows::unfinished_instance(d, r.id);
  if (!instance)
    return instance.error();
  // A pending instance whose type, group or weight changes is replaced: a
  // claim the dispatcher made for the old row then misses, instead of
  // handing a worker a job it was not picked for. One is only cancelled
  // once the limit is reached: an update that lowers max_executions to the
  // count stops the job there.
  auto same_place = [&](const job_key& k) {
    return k.type == r.job.type && k.group == r.job.group.value_or(std::string{})
           && k.weight == r.job.weight;
  };
  // A pending instance is replaced (or, once the limit is reached, only
  // cancelled) when its type, group or weight changes.
  bool replaced = *instance && (*instance)->status == job_status::pending
                  && (exhausted || !same_place((*instance)->key));
  if (replaced) {
    auto& before = **instance;
    auto cancelled =
      rows::cancel_instance(d, before.key,
                            exhausted ? "its recurring job has run max_executions"
                                      : "superseded by an update of its recurring job",
                            now_ms);
    if (!cancelled)
      return cancelled.error();
    out.dependents = std::move(cancelled->dependents);
    out.superseded = before.key;
    if (!exhausted && !row.held()) {
      auto slot = moved && at ? *at : next_slot{before.scheduled_at, before.key.run_at};
      auto k = rows::create_instance(d, row, slot, now_ms);
      if (!k)
        return k.error();
      out.instance = k->id;
      out.created = std::move(*k);
    }
  } else if (*instance && (*instance)->status == job_status::pending) {
    auto change = retemplate(d, r, **instance,
                             moved && at ? std::optional<int64_t>{at->scheduled_at}
                                         : std::nullopt,
                             now_ms);
    if (!change)
      return change.error();
    out.instance = change->after.id;
    out.changed = std::move(*change);
  } else if (*instance) {
    out.instance = (*instance)->key.id;  // running: the template applies to the next one
  } else if (at && !exhausted && !row.held()) {
    auto k = rows::create_instance(d, row, *at, now_ms);
    if (!k)
      return k.error();
    out.instance = k->id;
    out.created = std::move(*k);
  }
  return out;
}

}  // namespace ergon::storage
