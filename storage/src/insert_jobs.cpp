#include <algorithm>

#include "ergon/storage/operations.hpp"
#include "ergon/storage/times.hpp"
#include "ergon/storage/job_ids.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

constexpr const char* insert_job =
  "INSERT INTO jobs (external_id, type, name, group_key, priority, weight, run_at, "
  "deadline, payload, status, max_retries, backoff_initial_ms, backoff_multiplier, "
  "backoff_randomization, timeout_ms, heartbeat_increment_ms, added_at, id, ready_since) "
  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)";

// Read inside the caller's write transaction, so no other process can take
// the same row ids in between.
constexpr const char* select_max_row = "SELECT coalesce(max(id), 0) FROM jobs";

// Prefixes a validation failure with the job's position in a batch.
status in_batch(status st, size_t index, size_t size) {
  if (size == 1)
    return st;
  return {st.code(), "job " + std::to_string(index) + " of " + std::to_string(size)
                       + " in the batch: " + st.message(),
          st.field()};
}

}  // namespace

result<std::vector<job_key>> insert_jobs(db& d, const insert_jobs_args& args,
                                         int64_t now_ms) {
  if (args.jobs.empty())
    return invalid_field("jobs", "the batch is empty");
  // Validate everything first: a bad job must not leave earlier ones written.
  for (size_t i = 0; i < args.jobs.size(); ++i)
    if (auto st = validate(args.jobs[i], args.max_payload_bytes); !st)
      return in_batch(std::move(st), i, args.jobs.size());
  int64_t next_row = args.next_row;
  if (next_row == 0) {
    auto max_row = d.prepare(select_max_row);
    if (!max_row)
      return max_row.error();
    if (!(*max_row)->step())
      return (*max_row)->step_status();
    next_row = (*max_row)->column_int(0) + 1;
    (*max_row)->reset();
  }
  if (next_row + static_cast<int64_t>(args.jobs.size()) > max_row_id)
    return status{error::storage_full, "the database has used up its job id space"};
  auto prepared = d.prepare(insert_job);
  if (!prepared)
    return prepared.error();
  auto& s = **prepared;
  std::vector<job_key> out;
  out.reserve(args.jobs.size());
  for (size_t i = 0; i < args.jobs.size(); ++i) {
    const auto& j = args.jobs[i];
    job_key k;
    k.id = make_job_id(now_ms, args.id_tag, next_row);
    k.row = next_row++;
    k.type = j.type;
    k.group = j.group.value_or(std::string{});
    k.priority = j.priority;
    k.run_at = j.run_at_ms.value_or(add_ms(now_ms, j.delay_ms));
    k.weight = j.weight;
    k.added_at = now_ms;
    // Aging counts waiting while due: not the time before run_at, nor the
    // past for a run_at in the past.
    k.ready_since = std::max(k.run_at, now_ms);
    // A deadline that saturates at never is no deadline.
    if (j.ttl_ms && add_ms(k.run_at, *j.ttl_ms) != never_ms)
      k.deadline = add_ms(k.run_at, *j.ttl_ms);
    if (i > 0)
      s.reset();
    rows::bind_id(s, 1, k.id);
    s.bind_text(2, j.type);
    s.bind(3, j.name);
    s.bind(4, j.group);
    s.bind(5, j.priority);
    s.bind(6, j.weight);
    s.bind(7, k.run_at);
    s.bind(8, k.deadline);
    s.bind_blob(9, j.payload);
    s.bind(10, j.max_retries);
    s.bind(11, j.backoff.initial_ms);
    s.bind(12, j.backoff.multiplier);
    s.bind(13, j.backoff.randomization);
    s.bind(14, j.timeout_ms);
    s.bind(15, j.heartbeat_increment_ms);
    s.bind(16, now_ms);
    s.bind(17, k.row);
    s.bind(18, k.ready_since);
    if (auto st = d.run(s); !st)
      return st;
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace ergon::storage
