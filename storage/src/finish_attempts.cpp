#include "ergon/storage/op/finish_attempts.hpp"

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
  "expires_at = NULL, last_outcome = 1, last_message = NULL WHERE id = ?1"
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

failed_attempt failure_of(const attempt_report& r) {
  switch (r.kind) {
    case report_kind::failed_permanently:
      return {attempt_outcome::failed_permanently, r.text, false};
    case report_kind::stopped:
      return {attempt_outcome::cancelled, r.text, false};
    default:
      return {attempt_outcome::failed, r.text, true};
  }
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

}  // namespace

result<finish_attempts_result> finish_attempts(db& d, const finish_attempts_args& args,
                                               int64_t now_ms) {
  finish_attempts_result out;
  out.statuses.reserve(args.reports.size());
  for (size_t i = 0; i < args.reports.size(); ++i) {
    const auto& r = args.reports[i];
    if (r.kind == report_kind::succeeded) {
      if (args.max_result_bytes != 0 && r.text.size() > args.max_result_bytes) {
        out.statuses.push_back(invalid_field(
          "result", "is " + std::to_string(r.text.size()) + " bytes; the queue's limit is "
                      + std::to_string(args.max_result_bytes)));
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
        auto cancelled = end_attempt(d, r.row, r.token, after_cancel, retry_timing::backoff, 0.0,
                                     now_ms);
        if (!cancelled)
          return cancelled.error();
        record(out, std::move(*cancelled), r.row, cancelled_first(r.row));
        continue;
      }
      attempt_end end;
      end.row = r.row;
      end.try_number = static_cast<int32_t>(q.column_int(0));
      end.started_at = q.column_int(1);
      end.id = rows::column_id(q, 2);
      end.type = q.column_text(3);
      end.group = q.column_text(4);
      end.outcome = attempt_outcome::succeeded;
      end.status = job_status::succeeded;
      end.key.recurring_id = q.column_text(5);
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
        auto next = on_job_final(d, r.row, job_status::succeeded, now_ms);
        if (!next)
          return next.error();
        end.next_instance = std::move(*next);
      }
      out.statuses.emplace_back();
      out.ended.push_back(std::move(end));
      continue;
    }
    double u = i < args.randoms.size() ? args.randoms[i] : 0.0;
    auto ended = r.kind == report_kind::yielded
                   ? yield_attempt(d, r.row, r.token, now_ms)
                   : end_attempt(d, r.row, r.token, failure_of(r), retry_timing::backoff, u,
                                 now_ms);
    if (!ended)
      return ended.error();
    record(out, std::move(*ended), r.row);
  }
  return out;
}

}  // namespace ergon::storage
