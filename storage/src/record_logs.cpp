#include "ergon/storage/op/record_logs.hpp"

#include "ergon/storage/field_rules.hpp"

namespace ergon::storage {
namespace {

// The try comes from the job, where the token says the attempt is its
// latest. The casts type PostgreSQL's parameters in the select list.
constexpr const char* insert_line =
  "INSERT INTO job_logs (job_id, try, token, seq, at, level, text)"
  " SELECT id, current_try, attempt_token, CAST(?3 AS bigint), CAST(?4 AS bigint),"
  " CAST(?5 AS bigint), CAST(?6 AS text) FROM jobs WHERE id = ?1 AND attempt_token = ?2"
  " ON CONFLICT (job_id, try, token, seq) DO NOTHING";

constexpr const char* upsert_dropped =
  "INSERT INTO job_log_drops (job_id, try, token, dropped)"
  " SELECT id, current_try, attempt_token, CAST(?3 AS bigint) FROM jobs"
  " WHERE id = ?1 AND attempt_token = ?2"
  " ON CONFLICT (job_id, try, token) DO UPDATE SET dropped = excluded.dropped"
  " WHERE excluded.dropped > job_log_drops.dropped";

// A try's runs (a yield and its resumption) in the order they began, each
// run's lines by number.
constexpr const char* select_lines =
  "SELECT try, seq, at, level, text FROM job_logs WHERE job_id = ?1"
  " ORDER BY try, (SELECT min(r.at) FROM job_logs r WHERE r.job_id = job_logs.job_id"
  " AND r.try = job_logs.try AND r.token = job_logs.token), token, seq";

constexpr const char* select_dropped =
  "SELECT try, CAST(sum(dropped) AS bigint) FROM job_log_drops WHERE job_id = ?1 GROUP BY try";

attempt_info* attempt_of(std::vector<attempt_info>& attempts, int64_t try_number) {
  for (auto& a : attempts)
    if (a.try_number == try_number)
      return &a;
  return nullptr;
}

}  // namespace

status record_logs(db& d, const std::vector<attempt_logs>& logs) {
  auto lines = d.prepare(insert_line);
  if (!lines)
    return lines.error();
  auto& q = **lines;
  for (auto& a : logs)
    for (auto& l : a.lines) {
      q.reset();
      q.bind(1, a.row);
      q.bind(2, a.token);
      q.bind(3, int64_t{l.seq});
      q.bind(4, l.at_ms);
      q.bind(5, int64_t{static_cast<uint8_t>(l.level)});
      q.bind_text(6, log_text(l.text));  // a remote worker's bytes, kept as text
      if (auto st = d.run(q); !st)
        return st;
    }
  q.reset();
  auto drops = d.prepare(upsert_dropped);
  if (!drops)
    return drops.error();
  auto& r = **drops;
  for (auto& a : logs) {
    if (a.dropped <= 0)
      continue;
    r.reset();
    r.bind(1, a.row);
    r.bind(2, a.token);
    r.bind(3, a.dropped);
    if (auto st = d.run(r); !st)
      return st;
  }
  r.reset();
  return {};
}

status read_logs(db& d, int64_t row, std::vector<attempt_info>& attempts) {
  auto s = d.prepare(select_lines);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, row);
  while (q.step())
    if (auto* a = attempt_of(attempts, q.column_int(0))) {
      log_line l;
      l.seq = static_cast<int32_t>(q.column_int(1));
      l.at_ms = q.column_int(2);
      l.level = static_cast<log_level>(q.column_int(3));
      l.text = q.column_text(4);
      a->logs.push_back(std::move(l));
    }
  auto st = q.step_status();
  q.reset();
  if (!st)
    return st;
  auto drops = d.prepare(select_dropped);
  if (!drops)
    return drops.error();
  auto& r = **drops;
  r.bind(1, row);
  while (r.step())
    if (auto* a = attempt_of(attempts, r.column_int(0)))
      a->logs_dropped = r.column_int(1);
  st = r.step_status();
  r.reset();
  return st;
}

}  // namespace ergon::storage
