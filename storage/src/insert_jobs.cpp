#include <algorithm>
#include <unordered_map>

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/operations.hpp"
#include "ergon/storage/times.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

// Read inside the caller's write transaction, so no other process can take
// the same row ids in between.
constexpr const char* select_max_row = "SELECT coalesce(max(id), 0) FROM jobs";

// The key's holder, if any. LEFT JOIN: a hold may outlive its job's row.
// The key's holder, if any. LEFT JOIN: a hold may outlive its job's row, so
// the holder's id is kept in unique_keys too.
constexpr const char* select_holder =
  "SELECT k.held_until, k.job, j.status, " ERGON_JOB_KEY_COLUMNS " "
  "FROM unique_keys k LEFT JOIN jobs j ON j.id = k.job_id WHERE k.key = ?1";

constexpr const char* take_key =
  "INSERT OR REPLACE INTO unique_keys (key, job_id, job, held_until) VALUES (?1, ?2, ?3, NULL)";

constexpr const char* cancel_replaced =
  "UPDATE jobs SET status = 4, finished_at = ?2, last_message = ?3 WHERE id = ?1 AND status = 0";

// Prefixes a failure with the job's position in a batch.
status in_batch(status st, size_t index, size_t size) {
  if (size == 1)
    return st;
  return {st.code(), "job " + std::to_string(index) + " of " + std::to_string(size)
                       + " in the batch: " + st.message(),
          st.field()};
}

status key_taken(const std::string& key, const std::string& holder) {
  return {error::already_exists, "unique key '" + key + "' is held by " + holder,
          "unique_key"};
}

// Where each job of the batch goes: inserted, or folded into the job that
// holds its key (an earlier one of the batch, or one in the database).
struct plan {
  std::vector<int64_t> winner;          // per job: index of the batch job it becomes, or -1
  std::vector<std::optional<job_id>> held_by;  // per job: a holder in the database
};

// Applies the policies among the batch's own jobs, in order.
result<plan> plan_batch(const std::vector<job>& jobs) {
  plan p;
  p.winner.resize(jobs.size());
  p.held_by.resize(jobs.size());
  std::unordered_map<std::string, size_t> holder;  // key -> batch index holding it
  for (size_t i = 0; i < jobs.size(); ++i) {
    p.winner[i] = static_cast<int64_t>(i);
    if (!jobs[i].unique_key)
      continue;
    auto [it, fresh] = holder.emplace(*jobs[i].unique_key, i);
    if (fresh)
      continue;
    size_t h = it->second;
    switch (jobs[i].on_duplicate) {
      case unique_policy::skip:
        p.winner[i] = static_cast<int64_t>(h);
        break;
      case unique_policy::replace:
        for (auto& w : p.winner)
          if (w == static_cast<int64_t>(h))
            w = static_cast<int64_t>(i);
        it->second = i;
        break;
      case unique_policy::reject:
        return in_batch(key_taken(*jobs[i].unique_key,
                                  "job " + std::to_string(h) + " of the same batch"),
                        i, jobs.size());
    }
  }
  return p;
}

}  // namespace

result<insert_jobs_result> insert_jobs(db& d, const insert_jobs_args& args, int64_t now_ms) {
  const auto& jobs = args.jobs;
  if (jobs.empty())
    return invalid_field("jobs", "the batch is empty");
  // Validate everything first: a bad job must not leave earlier ones written.
  for (size_t i = 0; i < jobs.size(); ++i)
    if (auto st = validate(jobs[i], args.max_payload_bytes); !st)
      return in_batch(std::move(st), i, jobs.size());
  auto planned = plan_batch(jobs);
  if (!planned)
    return planned.error();
  auto& p = *planned;
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
  if (next_row + static_cast<int64_t>(jobs.size()) > max_row_id)
    return status{error::storage_full, "the database has used up its job id space"};
  insert_jobs_result out;
  out.ids.resize(jobs.size());
  out.added.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (p.winner[i] != static_cast<int64_t>(i))
      continue;
    const auto& j = jobs[i];
    auto fail = [&](status st) { return in_batch(std::move(st), i, jobs.size()); };
    job_key k = rows::new_key(j, now_ms, args.id_tag, next_row);
    std::optional<job_key> replaced;
    if (j.unique_key) {
      auto s = d.prepare(select_holder);
      if (!s)
        return s.error();
      auto& q = **s;
      q.bind_text(1, *j.unique_key);
      if (q.step()) {
        auto held_until = q.column_opt_int(0);
        auto holder_id = rows::column_id(q, 1);
        auto holder_status = static_cast<job_status>(q.column_int(2));
        // An unfinished holder whose row is gone can't be: the key is free.
        bool held = held_until ? *held_until > now_ms : q.column_opt_int(2).has_value();
        std::string holder = "job " + holder_id.to_string() + " ("
                             + (held_until ? "finished; held until "
                                               + std::to_string(*held_until) + " ms"
                                           : std::string{to_string(holder_status)})
                             + ")";
        if (held && j.on_duplicate == unique_policy::skip)
          p.held_by[i] = holder_id;
        else if (held && (j.on_duplicate == unique_policy::reject || held_until))
          return fail(key_taken(*j.unique_key, holder));
        else if (held && holder_status == job_status::running)
          return fail({error::job_running,
                       "unique key '" + *j.unique_key + "' is held by " + holder
                         + ", which can't be replaced while it runs"});
        else if (held)
          replaced = rows::read_key(q, 3);
      } else if (!q.step_status()) {
        return q.step_status();
      }
      q.reset();
      if (p.held_by[i])
        continue;
      if (replaced) {
        auto c = d.prepare(cancel_replaced);
        if (!c)
          return c.error();
        (*c)->bind(1, replaced->row);
        (*c)->bind(2, now_ms);
        (*c)->bind_text(3, "replaced by " + k.id.to_string());
        if (auto st = d.run(**c); !st)
          return st;
        out.replaced.push_back(std::move(*replaced));
      }
      auto t = d.prepare(take_key);
      if (!t)
        return t.error();
      (*t)->bind_text(1, *j.unique_key);
      (*t)->bind(2, k.row);
      rows::bind_id(**t, 3, k.id);
      if (auto st = d.run(**t); !st)
        return st;
    }
    if (auto st = rows::insert_job(d, j, k, std::nullopt); !st)
      return st;
    ++next_row;
    out.added.push_back(std::move(k));
  }
  // Every job's id: its own, its batch winner's, or its database holder's.
  std::vector<std::optional<job_id>> own(jobs.size());
  size_t a = 0;
  for (size_t i = 0; i < jobs.size(); ++i)
    if (p.winner[i] == static_cast<int64_t>(i) && !p.held_by[i])
      own[i] = out.added[a++].id;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto w = static_cast<size_t>(p.winner[i]);
    out.ids[i] = p.held_by[w] ? *p.held_by[w] : *own[w];
  }
  return out;
}

}  // namespace ergon::storage
