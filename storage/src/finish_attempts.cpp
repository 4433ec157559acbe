#include "ergon/storage/op/finish_attempts.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/op/claim_jobs.hpp"
#include "ergon/storage/op/savepoint.hpp"
#include "ergon/storage/op/spawn_children.hpp"
#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/times.hpp"
#include "attempt_end.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// Read, then written by id (see claim_jobs.cpp: no RETURNING on the hot
// path). A cancel request committed before this outcome wins (see
// after_cancel).
constexpr const char* read_completable =
  "SELECT current_try, started_at, external_id, type, group_key, recurring_id, "
  ERGON_JOB_HAS_LINKS " FROM jobs "
  "WHERE id = ?1 AND status = " ERGON_SQL_RUNNING " AND attempt_token = ?2 "
  "AND cancel_requested_at IS NULL";

// The succeeding attempt stays in the jobs row: no attempts row for it.
// A result_ttl_ms of 0 stores no result; another one sets its expiry.
// PostgreSQL types a parameter that only a CASE returns as text: the result
// parameter is cast to bytea there.
#define ERGON_COMPLETE_JOB(result)                                                      \
  "UPDATE jobs SET status = " ERGON_SQL_SUCCEEDED ", finished_at = ?2, "                \
  "result = CASE WHEN result_ttl_ms = 0 THEN NULL ELSE " result " END, "                \
  "result_expires_at = CASE WHEN ?3 IS NULL OR result_ttl_ms IS NULL OR result_ttl_ms = 0 " \
  "THEN NULL ELSE " ERGON_SQL_ADD_MS("?2", "result_ttl_ms") " END, "                     \
  "expires_at = NULL, last_outcome = 1, last_message = NULL, unfinished_instance_of = NULL "    \
  "WHERE id = ?1"
constexpr dialect_sql complete_job = {ERGON_COMPLETE_JOB("?3"),
                                      ERGON_COMPLETE_JOB("CAST(?3 AS bytea)")};

status stale(int64_t row) {
  return {error::stale_attempt,
          "attempt of job row " + std::to_string(row)
            + " is no longer current (it expired or was recovered); result discarded"};
}

// A success reported after queue::cancel committed its request: the worker
// saw the request too late (its flag arrives after the commit), so the job
// is decided here, in the transaction that records the outcome.
const failed_attempt after_cancel{attempt_outcome::cancelled, "stopped after a cancel request",
                                  false};

status cancelled_first(int64_t row) {
  return {error::cancelled, "job row " + std::to_string(row)
                              + " was cancelled before this outcome committed: it ends "
                                "cancelled and the result is discarded"};
}

static_assert(static_cast<int>(attempt_outcome::snoozed) == 9, "count_snoozes names it");
constexpr const char* count_snoozes =
  "SELECT count(*) FROM attempts WHERE job_id = ?1 AND outcome = 9";

// How a report that is no success ends its attempt. A snooze past the
// job's cap counts as a failure.
result<failed_attempt> failure_of(db& d, const attempt_report& r, int64_t max_snoozes) {
  switch (r.kind) {
    case report_kind::failed_permanently:
      return failed_attempt{attempt_outcome::failed_permanently, as_text(r.text), false};
    case report_kind::stopped:
      return failed_attempt{attempt_outcome::cancelled, as_text(r.text), false};
    case report_kind::snoozed: {
      auto s = d.prepare(count_snoozes);
      if (!s)
        return s.error();
      (*s)->bind(1, r.row);
      if (!(*s)->step())
        return (*s)->step_status();
      auto snoozes = (*s)->column_int(0);
      (*s)->reset();
      if (snoozes >= max_snoozes)
        return failed_attempt{attempt_outcome::failed,
                              "snoozed " + std::to_string(snoozes)
                                + " times, the most a job may (options::max_snoozes): this "
                                  "snooze counts as a failure",
                              true};
      auto delay = std::clamp<int64_t>(r.after_ms, 0, max_retry_delay_ms);
      return failed_attempt{attempt_outcome::snoozed,
                            "snoozed for " + std::to_string(delay) + " ms", true, delay, false};
    }
    default:
      break;
  }
  failed_attempt f{attempt_outcome::failed, as_text(r.text), true};
  if (r.after_ms >= 0)
    f.retry_after_ms = std::min(r.after_ms, max_retry_delay_ms);
  return f;
}

// Records how a report went: its attempt ended (answered `ok`), or it was
// stale (nothing matched its token).
void record(finish_attempts_result& out, std::optional<attempt_end> ended, int64_t row,
            status ok = {}) {
  if (!ended) {
    out.statuses.push_back(stale(row));
    return;
  }
  out.statuses.push_back(std::move(ok));
  out.ended.push_back(std::move(*ended));
}

// PostgreSQL: a run of successes in one statement and one round trip. What
// it does not complete (stale, or cancel requested) goes the row-by-row way.
// Rows are found by index with `id = ANY(array)` (see claim_jobs.cpp). A
// row's token and result are found by its place in the arrays, a search
// per row; a run without results whose tokens share a base (claimed
// together) computes the token instead, and sets no result.
#define ERGON_DONE_PLACE "array_position(CAST(?1 AS bigint[]), id)"
#define ERGON_DONE_RESULT "(CAST(?4 AS bytea[]))[" ERGON_DONE_PLACE "]"
#define ERGON_COMPLETE_BATCH(result, expiry, token)                                         \
  "UPDATE jobs SET status = " ERGON_SQL_SUCCEEDED ", finished_at = ?2, result = " result ", " \
  "result_expires_at = " expiry ", expires_at = NULL, last_outcome = 1, "                   \
  "last_message = NULL, unfinished_instance_of = NULL "                                     \
  "WHERE id = ANY(CAST(?1 AS bigint[])) AND status = " ERGON_SQL_RUNNING " "                \
  "AND attempt_token = " token " AND cancel_requested_at IS NULL "                          \
  "RETURNING id, current_try, started_at, external_id, type, group_key, recurring_id, "     \
  ERGON_JOB_HAS_LINKS
constexpr const char* complete_batch = ERGON_COMPLETE_BATCH(
  "CASE WHEN result_ttl_ms = 0 THEN NULL ELSE " ERGON_DONE_RESULT " END",
  "CASE WHEN " ERGON_DONE_RESULT " IS NULL OR result_ttl_ms IS NULL OR result_ttl_ms = 0 "
  "THEN NULL ELSE " ERGON_SQL_ADD_MS("?2", "result_ttl_ms") " END",
  "(CAST(?3 AS bigint[]))[" ERGON_DONE_PLACE "]");
constexpr const char* complete_batch_of_base =
  ERGON_COMPLETE_BATCH("NULL", "NULL", "(CAST(?3 AS bigint) # id)");

// The success of `r`, whose attempt the caller found current and completed
// (columns of read_completable or complete_batch from `first`).
attempt_end succeeded_end(const attempt_report& r, const stmt& q, int first) {
  attempt_end end;
  end.row = r.row;
  end.try_number = static_cast<int32_t>(q.column_int(first));
  end.started_at = q.column_int(first + 1);
  end.id = rows::column_id(q, first + 2);
  end.type = q.column_text(first + 3);
  end.group = q.column_text(first + 4);
  end.outcome = attempt_outcome::succeeded;
  end.status = job_status::succeeded;
  end.key.recurring_id = q.column_text(first + 5);
  return end;
}

// Whether the job succeeded under this very attempt: its success was sent
// again because the answer was lost with the connection (a restart).
constexpr const char* read_succeeded_under =
  "SELECT 1 FROM jobs WHERE id = ?1 AND status = " ERGON_SQL_SUCCEEDED " AND attempt_token = ?2";

result<bool> succeeded_under(db& d, const attempt_report& r) {
  auto s = d.prepare(read_succeeded_under);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, r.row);
  q.bind(2, r.token);
  bool found = q.step();
  if (!found && !q.step_status())
    return q.step_status();
  q.reset();
  return found;
}

// A success whose attempt is not current: cancelled first, recorded
// already (acknowledged again, changing nothing), or stale.
status not_completed(db& d, const attempt_report& r, int64_t now_ms,
                     finish_attempts_result& out) {
  auto cancelled = end_attempt(d, r.row, r.token, after_cancel, retry_timing::backoff, 0.0,
                               now_ms);
  if (!cancelled)
    return cancelled.error();
  if (!*cancelled) {
    auto again = succeeded_under(d, r);
    if (!again)
      return again.error();
    if (*again) {
      out.statuses.emplace_back();
      return {};
    }
  }
  record(out, std::move(*cancelled), r.row, cancelled_first(r.row));
  return {};
}

// Completes the successes reports[from, to) in one statement.
status complete_on_postgres(pg_db& d, const finish_attempts_args& args, size_t from, size_t to,
                            int64_t now_ms, finish_attempts_result& out) {
  std::vector<int64_t> rows, tokens;
  std::vector<std::optional<std::string_view>> results;
  std::vector<attempt_ref> attempts;
  std::unordered_map<int64_t, size_t> place;  // row -> index in the run
  bool no_results = true;
  for (size_t i = from; i < to; ++i) {
    const auto& r = args.reports[i];
    place.emplace(r.row, rows.size());
    rows.push_back(r.row);
    tokens.push_back(r.token);
    attempts.push_back({r.row, r.token});
    no_results = no_results && r.text.empty();
    results.push_back(r.text.empty() ? std::nullopt : std::optional<std::string_view>{r.text});
  }
  auto base = no_results ? shared_token_base(attempts) : std::nullopt;
  auto s = d.prepare(base ? complete_batch_of_base : complete_batch);
  if (!s)
    return s.error();
  auto& q = static_cast<pg_stmt&>(**s);
  q.bind_ints(1, rows);
  q.bind(2, now_ms);
  if (base) {
    q.bind(3, *base);
  } else {
    q.bind_ints(3, tokens);
    q.bind_blobs(4, results);
  }
  std::vector<std::optional<attempt_end>> done(to - from);
  std::vector<bool> linked(to - from, false);
  while (q.step()) {
    auto k = place.at(q.column_int(0));
    done[k] = succeeded_end(args.reports[from + k], q, 1);
    linked[k] = q.column_int(7) != 0;
  }
  if (!q.step_status())
    return q.step_status();
  for (size_t k = 0; k < done.size(); ++k) {
    const auto& r = args.reports[from + k];
    if (!done[k]) {
      if (auto st = not_completed(d, r, now_ms, out); !st)
        return st;
      continue;
    }
    if (linked[k]) {
      auto effects = on_job_final(d, r.row, job_status::succeeded, now_ms);
      if (!effects)
        return effects.error();
      done[k]->next_instance = std::move(effects->next_instance);
      done[k]->dependents = std::move(effects->dependents);
    }
    out.statuses.emplace_back();
    out.ended.push_back(std::move(*done[k]));
  }
  return {};
}

// A child the queue refused fails the attempt, not the batch.
bool refused(const status& st) {
  switch (st.code()) {
    case error::invalid_argument:
    case error::already_exists:
    case error::job_running:
    case error::not_found:
      return true;
    default:
      return false;
  }
}

// A spawned report: its children, checkpoint and wait in a savepoint of
// their own, so a refused child leaves only the attempt's failure.
status spawn(db& d, const finish_attempts_args& args, const attempt_report& r, double u,
             int64_t now_ms, finish_attempts_result& out) {
  result<std::optional<spawn_children_result>> spawned =
    std::optional<spawn_children_result>{};
  {
    savepoint sp{d};
    if (!sp.begin_status())
      return sp.begin_status();
    spawned = spawn_children(d, {r.row, r.token, r.children, r.text, args.children}, now_ms);
    if (spawned)
      if (auto st = sp.release(); !st)
        return st;
  }
  if (!spawned) {
    if (!refused(spawned.error()) || !d.in_transaction())
      return spawned.error();
    failed_attempt how{attempt_outcome::failed, "submit_children: " + spawned.error().message(),
                       true};
    auto ended = end_attempt(d, r.row, r.token, how, retry_timing::backoff, u, now_ms);
    if (!ended)
      return ended.error();
    record(out, std::move(*ended), r.row, spawned.error());
    return {};
  }
  if (!*spawned) {
    record(out, std::nullopt, r.row);
    return {};
  }
  auto& s = **spawned;
  status answer;
  if (s.parent.outcome == attempt_outcome::cancelled)
    answer = cancelled_first(r.row);
  else
    out.spawned.push_back(std::move(s.children));
  record(out, std::move(s.parent), r.row, std::move(answer));
  return {};
}

}  // namespace

const char* complete_batch_sql(bool of_base) noexcept {
  return of_base ? complete_batch_of_base : complete_batch;
}

result<finish_attempts_result> finish_attempts(db& d, const finish_attempts_args& args,
                                               int64_t now_ms) {
  finish_attempts_result out;
  out.statuses.reserve(args.reports.size());
  for (size_t i = 0; i < args.reports.size(); ++i) {
    const auto& r = args.reports[i];
    if (r.kind == report_kind::succeeded) {
      if (auto st = check_payload_size("result", r.text.size(), args.max_result_bytes); !st) {
        out.statuses.push_back(std::move(st));
        continue;
      }
      if (d.engine() == engine::postgres) {
        // The run of successes that starts here, each within the limit and
        // each of a row of its own: the statement matches a row's first token.
        std::unordered_set<int64_t> rows_in_run{r.row};
        size_t end = i + 1;
        while (end < args.reports.size() && args.reports[end].kind == report_kind::succeeded
               && (args.max_result_bytes == 0
                   || args.reports[end].text.size() <= args.max_result_bytes)
               && rows_in_run.insert(args.reports[end].row).second)
          ++end;
        if (auto st = complete_on_postgres(static_cast<pg_db&>(d), args, i, end, now_ms, out);
            !st)
          return st;
        i = end - 1;
        continue;
      }
      auto s = d.prepare(read_completable);
      if (!s)
        return s.error();
      auto& q = **s;
      q.bind(1, r.row);
      q.bind(2, r.token);
      if (!q.step()) {
        if (!q.step_status())
          return q.step_status();
        q.reset();
        if (auto st = not_completed(d, r, now_ms, out); !st)
          return st;
        continue;
      }
      auto end = succeeded_end(r, q, 0);
      bool linked = q.column_int(6) != 0;
      q.reset();
      auto w = d.prepare(complete_job);
      if (!w)
        return w.error();
      auto& u = **w;
      u.bind(1, r.row);
      u.bind(2, now_ms);
      if (r.text.empty())
        u.bind_null(3);
      else
        u.bind_blob(3, r.text);
      if (auto st = d.run(u); !st)
        return st;
      if (linked) {
        auto effects = on_job_final(d, r.row, job_status::succeeded, now_ms);
        if (!effects)
          return effects.error();
        end.next_instance = std::move(effects->next_instance);
        end.dependents = std::move(effects->dependents);
      }
      out.statuses.emplace_back();
      out.ended.push_back(std::move(end));
      continue;
    }
    double u = i < args.randoms.size() ? args.randoms[i] : 0.0;
    if (r.kind == report_kind::spawned) {
      if (auto st = spawn(d, args, r, u, now_ms, out); !st)
        return st;
      continue;
    }
    if (r.kind == report_kind::yielded) {
      auto ended = yield_attempt(d, r.row, r.token, now_ms);
      if (!ended)
        return ended.error();
      record(out, std::move(*ended), r.row);
      continue;
    }
    auto how = failure_of(d, r, args.max_snoozes);
    if (!how)
      return how.error();
    auto ended = end_attempt(d, r.row, r.token, *how, retry_timing::backoff, u, now_ms);
    if (!ended)
      return ended.error();
    record(out, std::move(*ended), r.row);
  }
  return out;
}

}  // namespace ergon::storage
