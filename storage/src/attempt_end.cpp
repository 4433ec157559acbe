#include "attempt_end.hpp"

#include <cmath>

#include "ergon/storage/times.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

constexpr const char* select_running =
  "SELECT current_try, max_retries, backoff_initial_ms, backoff_multiplier, "
  "backoff_randomization, started_at, " ERGON_JOB_HAS_LINKS ", try_base, "
  "cancel_requested_at IS NOT NULL, " ERGON_JOB_KEY_COLUMNS ", " ERGON_BACKOFF_COLUMNS " "
  "FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND (CAST(?2 AS BIGINT) IS NULL OR attempt_token = ?2)";

constexpr const char* insert_attempt =
  "INSERT INTO attempts (job_id, try, started_at, finished_at, outcome, message, worker) "
  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, (SELECT worker FROM jobs WHERE id = ?1))";

// Both updates name the row: Effectum's retry had a second UPDATE without a
// WHERE clause that reset every job.
constexpr const char* requeue_job =
  "UPDATE jobs SET status = " ERGON_SQL_PENDING ", run_at = ?2, expires_at = NULL WHERE id = ?1";
// A snooze: the try it used is given back by counting one more try as
// before the job's tries (the attempt keeps its number in the history).
// Like a yield, it drops the deadline: the job did start in time.
constexpr const char* requeue_job_unspent =
  "UPDATE jobs SET status = " ERGON_SQL_PENDING ", run_at = ?2, expires_at = NULL, "
  "deadline = NULL, try_base = try_base + 1 WHERE id = ?1";

// The job's last attempt stays in the jobs row: no attempts row for it.
// ?5 is failed or cancelled: a dead letter, and no unfinished instance.
constexpr const char* end_job =
  "UPDATE jobs SET status = ?5, finished_at = ?2, expires_at = NULL, last_outcome = ?3, "
  "last_message = ?4, dead_letter_status = ?5, unfinished_instance_of = NULL WHERE id = ?1";


}  // namespace

status record_attempt(db& d, int64_t row, int32_t try_number, int64_t started_at,
                      int64_t finished_at, attempt_outcome outcome,
                      const std::string& message) {
  auto s = d.prepare(insert_attempt);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  q.bind(2, try_number);
  q.bind(3, started_at);
  q.bind(4, finished_at);
  q.bind(5, static_cast<int64_t>(outcome));
  q.bind_text(6, message);
  return d.run(q);
}

int64_t retry_delay(const backoff_policy& b, int32_t failed_try, double u) noexcept {
  if (b.initial_ms <= 0)
    return 0;  // 0 * an infinite growth would be NaN
  double n = failed_try > 1 ? failed_try : 1;
  double growth = b.kind == backoff_kind::constant ? 1.0
                  : b.kind == backoff_kind::linear ? n
                                                   : std::pow(b.multiplier, n - 1);
  double delay = static_cast<double>(b.initial_ms) * growth * (1.0 + u * b.randomization);
  double cap = b.max_ms > 0 ? static_cast<double>(std::min(b.max_ms, max_retry_delay_ms))
                            : static_cast<double>(max_retry_delay_ms);
  if (!(delay < cap))
    return static_cast<int64_t>(cap);
  return static_cast<int64_t>(delay);
}

result<std::optional<attempt_end>> end_attempt(db& d, int64_t row,
                                               std::optional<int64_t> token,
                                               const failed_attempt& how,
                                               retry_timing timing, double random,
                                               int64_t now_ms) {
  auto s = d.prepare(select_running);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  q.bind(2, token);
  if (!q.step()) {
    if (!q.step_status())
      return q.step_status();
    return std::optional<attempt_end>{};
  }
  attempt_end end;
  end.row = row;
  end.try_number = static_cast<int32_t>(q.column_int(0));
  auto max_retries = static_cast<int32_t>(q.column_int(1));
  backoff_policy backoff{q.column_int(2), q.column_double(3), q.column_double(4)};
  rows::read_backoff(q, 9 + rows::key_column_count, backoff);
  end.started_at = q.column_int(5);
  bool linked = q.column_int(6) != 0;
  auto tries_before = static_cast<int32_t>(q.column_int(7));
  bool cancel_requested = q.column_int(8) != 0;
  end.key = rows::read_key(q, 9);
  end.id = end.key.id;
  end.type = end.key.type;
  end.group = end.key.group;
  q.reset();
  // A snooze after a cancel request ends the job as any other end would.
  failed_attempt after_cancel;
  const failed_attempt* ending = &how;
  if (cancel_requested && !how.spends_try) {
    after_cancel = {attempt_outcome::cancelled, "snoozed after a cancel request", false};
    ending = &after_cancel;
  }
  end.outcome = ending->outcome;
  end.message = ending->message;
  // Tries count attempts started; 1 + max_retries are allowed since the
  // last retry_failed.
  auto tries = end.try_number - tries_before;
  bool retry = !cancel_requested && how.retryable && (!how.spends_try || tries <= max_retries);
  if (retry) {
    if (auto st = record_attempt(d, row, end.try_number, end.started_at, now_ms,
                                 ending->outcome, ending->message);
        !st)
      return st;
  }
  auto u = d.prepare(!retry ? end_job : how.spends_try ? requeue_job : requeue_job_unspent);
  if (!u)
    return u.error();
  (*u)->bind(1, row);
  if (retry) {
    if (!how.spends_try)
      end.key.deadline.reset();
    if (how.retry_after_ms)
      end.key.run_at = add_ms(now_ms, *how.retry_after_ms);
    else if (timing == retry_timing::immediate)
      end.key.run_at = now_ms;
    else
      end.key.run_at = add_ms(now_ms, retry_delay(backoff, tries, random));
    (*u)->bind(2, end.key.run_at);
    end.status = job_status::pending;
  } else {
    end.status = cancel_requested ? job_status::cancelled : job_status::failed;
    (*u)->bind(2, now_ms);
    (*u)->bind(3, static_cast<int64_t>(ending->outcome));
    (*u)->bind_text(4, ending->message);
    (*u)->bind(5, static_cast<int64_t>(end.status));
  }
  if (auto st = d.run(**u); !st)
    return st;
  if (!retry && linked) {
    auto effects = on_job_final(d, row, end.status, now_ms);
    if (!effects)
      return effects.error();
    end.next_instance = std::move(effects->next_instance);
    end.dependents = std::move(effects->dependents);
  }
  return std::optional<attempt_end>{std::move(end)};
}

}  // namespace ergon::storage
