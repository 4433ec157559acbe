#include "ergon/storage/op/insert_jobs.hpp"

#include <algorithm>
#include <unordered_map>

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/pg_db.hpp"
#include "idempotency_keys.hpp"
#include "in_batch.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

// The key's holder, if any. LEFT JOIN: a hold may outlive its job's row, so
// the holder's id is kept in unique_keys too.
constexpr const char* select_holder =
  "SELECT k.held_until, k.job, j.status, " ERGON_JOB_KEY_COLUMNS " "
  "FROM unique_keys k LEFT JOIN jobs j ON j.id = k.job_id AND j.external_id = k.job "
  "WHERE k.key = ?1";

constexpr const char* take_key =
  "INSERT INTO unique_keys (key, job_id, job, held_until) VALUES (?1, ?2, ?3, NULL) "
  "ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, job = excluded.job, "
  "held_until = NULL";

// PostgreSQL: a batch's rows in one COPY, in its binary format. The columns
// are insert_job's (job_rows.cpp). An INSERT from unnest() over 25 arrays,
// as before, spent the server's time building a table of the rows first.
constexpr const char* copy_jobs =
  "COPY jobs (external_id, " ERGON_TEMPLATE_COLUMNS ", run_at, deadline, added_at, id, "
  "ready_since, recurring_id, scheduled_at, unique_key, unique_hold_ms, result_ttl_ms, "
  "io_read_bytes, io_write_bytes, status, unfinished_instance_of, " ERGON_BACKOFF_COLUMNS ") "
  "FROM STDIN (FORMAT binary)";
constexpr int16_t copy_fields = 29;

constexpr size_t min_copy_rows = 12;

// Inserts `rows` (jobs and their new keys) with copy_jobs.
status insert_on_postgres(pg_db& d, const std::vector<std::pair<const job*, job_key>>& rows) {
  auto text = [](const std::optional<std::string>& v) {
    return v ? std::optional<std::string_view>{*v} : std::nullopt;
  };
  return d.copy_in(copy_jobs, rows.size(), [&](pg_copy_rows& out, size_t k) {
    auto& [j, key] = rows[k];
    std::optional<std::string_view> recurring;
    if (!key.recurring_id.empty())
      recurring = key.recurring_id;
    out.begin_row(copy_fields);
    out.add(std::optional<std::string_view>{rows::id_bytes(key.id)});
    out.add(std::optional<std::string_view>{j->type});
    out.add(text(j->name));
    out.add(text(j->group));
    out.add(int64_t{j->priority});
    out.add(int64_t{j->weight});
    out.add(std::optional<std::string_view>{j->payload});
    out.add(int64_t{j->max_retries});
    out.add(int64_t{j->backoff.initial_ms});
    out.add(j->backoff.multiplier);
    out.add(j->backoff.randomization);
    out.add(int64_t{j->timeout_ms});
    out.add(int64_t{j->heartbeat_increment_ms});
    out.add(key.run_at);
    out.add(key.deadline);
    out.add(key.added_at);
    out.add(key.row);
    out.add(key.ready_since);
    out.add(recurring);
    out.add(std::optional<int64_t>{});  // scheduled_at: a recurring instance's own insert
    out.add(text(j->unique_key));
    out.add(j->unique_key && j->unique_hold_ms > 0 ? std::optional<int64_t>{j->unique_hold_ms}
                                                   : std::nullopt);
    out.add(j->result_ttl_ms);
    out.add(j->expected_io ? std::optional<int64_t>{j->expected_io->read_bytes} : std::nullopt);
    out.add(j->expected_io ? std::optional<int64_t>{j->expected_io->write_bytes} : std::nullopt);
    out.add(int64_t{0});  // pending
    out.add(recurring);   // unfinished_instance_of
    out.add(int64_t{static_cast<int64_t>(j->backoff.kind)});
    out.add(int64_t{j->backoff.max_ms});
  });
}

status key_taken(const std::string& key, const std::string& holder) {
  return {error::already_exists, "unique key '" + key + "' is held by " + holder,
          "unique_key"};
}

// A job in the file that holds a key.
struct stored_holder {
  job_id id;
  std::optional<int64_t> held_until;  // set once it finished
  job_status status = job_status::pending;
  job_key key;

  std::string describe() const {
    return "job " + id.to_string() + " ("
           + (held_until ? "finished; held until " + std::to_string(*held_until) + " ms"
                         : std::string{to_string(status)})
           + ")";
  }
};

// The holder of `key` in the file, if the key is held at `now_ms`.
result<std::optional<stored_holder>> find_holder(db& d, const std::string& key, int64_t now_ms) {
  auto s = d.prepare(select_holder);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind_text(1, key);
  if (!q.step())
    return q.step_status().ok() ? result<std::optional<stored_holder>>{std::nullopt}
                                : q.step_status();
  stored_holder h;
  h.held_until = q.column_opt_int(0);
  h.id = rows::column_id(q, 1);
  // An unfinished holder whose row is gone can't be: the key is free.
  bool held = h.held_until ? *h.held_until > now_ms : q.column_opt_int(2).has_value();
  if (held && !h.held_until) {
    h.status = static_cast<job_status>(q.column_int(2));
    h.key = rows::read_key(q, 3);
  }
  q.reset();
  if (!held)
    return std::optional<stored_holder>{};
  return std::optional<stored_holder>{std::move(h)};
}

// Where each job of a batch goes, decided in input order before anything is
// written, as if the jobs were submitted one by one, except that a batch
// job a later one replaces is dropped rather than inserted and cancelled
// (its position gets the id of the job that replaced it).
struct plan {
  std::vector<size_t> winner;                    // per job: the batch job it became
  std::vector<std::optional<job_id>> held_by;    // per job: a holder in the file it skipped to
  // Pending holders in the file to cancel, by key: the batch job that ends
  // up with the key replaces them.
  std::unordered_map<std::string, job_key> replaced;
};

// The jobs to insert: all of a batch, or those its idempotency keys left
// (`position` says where each stands in the batch, for messages).
struct new_jobs {
  std::vector<const job*> jobs;
  std::vector<size_t> position;
  size_t batch_size = 0;

  status fail(status st, size_t i) const {
    return in_batch(std::move(st), position[i], batch_size);
  }
};

result<plan> plan_batch(db& d, const new_jobs& batch, int64_t now_ms) {
  const auto& jobs = batch.jobs;
  plan p;
  p.winner.resize(jobs.size());
  p.held_by.resize(jobs.size());
  // Per key: the batch job holding it, or the holder in the file.
  struct holder {
    std::optional<size_t> batch;
    std::optional<stored_holder> stored;
  };
  std::unordered_map<std::string, holder> holders;
  for (size_t i = 0; i < jobs.size(); ++i) {
    p.winner[i] = i;
    const auto& j = *jobs[i];
    if (!j.unique_key)
      continue;
    auto fail = [&](status st) { return batch.fail(std::move(st), i); };
    auto it = holders.find(*j.unique_key);
    if (it == holders.end()) {
      auto stored = find_holder(d, *j.unique_key, now_ms);
      if (!stored)
        return stored.error();
      it = holders.emplace(*j.unique_key, holder{std::nullopt, std::move(*stored)}).first;
      if (!it->second.stored) {
        it->second.batch = i;
        continue;
      }
    }
    auto& h = it->second;
    std::string by = h.batch ? "job " + std::to_string(batch.position[*h.batch])
                                 + " of the same batch"
                             : h.stored->describe();
    switch (j.on_duplicate) {
      case unique_policy::skip:
        if (h.batch)
          p.winner[i] = *h.batch;
        else
          p.held_by[i] = h.stored->id;
        break;
      case unique_policy::reject:
        return fail(key_taken(*j.unique_key, by));
      case unique_policy::replace:
        if (h.batch) {
          for (auto& w : p.winner)
            if (w == *h.batch)
              w = i;
        } else if (h.stored->held_until) {
          return fail(key_taken(*j.unique_key, by));
        } else if (h.stored->status == job_status::running) {
          return fail({error::job_running, "unique key '" + *j.unique_key + "' is held by "
                                             + by + ", which can't be replaced while it runs"});
        } else {
          p.replaced.emplace(*j.unique_key, h.stored->key);
          h.stored.reset();
        }
        h.batch = i;
        break;
    }
  }
  return p;
}

// Inserts `batch`, its unique keys taken as they say.
result<insert_jobs_result> insert_new(db& d, const new_jobs& batch, const insert_jobs_args& args,
                                      int64_t now_ms) {
  const auto& jobs = batch.jobs;
  auto planned = plan_batch(d, batch, now_ms);
  if (!planned)
    return planned.error();
  auto& p = *planned;
  int64_t next_row = args.next_row;
  if (next_row == 0) {
    auto first_free = rows::next_row(d);
    if (!first_free)
      return first_free.error();
    next_row = *first_free;
  }
  if (next_row + static_cast<int64_t>(jobs.size()) > max_row_id)
    return status{error::storage_full, "the database has used up its job id space"};
  insert_jobs_result out;
  out.ids.resize(jobs.size());
  out.added.reserve(jobs.size());
  std::vector<std::optional<job_id>> own(jobs.size());
  auto insert = rows::prepare_insert(d);
  if (!insert)
    return insert.error();
  bool on_postgres = d.engine() == engine::postgres;
  std::vector<std::pair<const job*, job_key>> batched;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (p.winner[i] != i || p.held_by[i])
      continue;
    const auto& j = *jobs[i];
    auto k = rows::new_key(j, now_ms, args.id_tag, next_row++);
    if (j.unique_key) {
      if (auto old = p.replaced.find(*j.unique_key); old != p.replaced.end()) {
        auto cancelled = rows::cancel_row(d, old->second.row, now_ms,
                                          "replaced by " + k.id.to_string());
        if (!cancelled)
          return cancelled.error();
        if (!*cancelled)
          return status{error::internal, "a replaced job changed underneath"};
        out.replaced.push_back(std::move(old->second));
      }
      auto take = d.prepare(take_key);
      if (!take)
        return take.error();
      (*take)->bind_text(1, *j.unique_key);
      (*take)->bind(2, k.row);
      rows::bind_id(**take, 3, k.id);
      if (auto st = d.run(**take); !st)
        return st;
    }
    own[i] = k.id;
    if (on_postgres)
      batched.emplace_back(&j, k);
    else if (auto st = rows::insert_job(d, **insert, j, k, std::nullopt); !st)
      return st;
    out.added.push_back(std::move(k));
  }
  // A few rows go one statement each: a batch statement (COPY, and the
  // array INSERT before it) costs more to start than it saves in round
  // trips below about a dozen.
  if (batched.size() >= min_copy_rows) {
    if (auto st = insert_on_postgres(static_cast<pg_db&>(d), batched); !st)
      return st;
  } else {
    for (auto& [j, k] : batched)
      if (auto st = rows::insert_job(d, **insert, *j, k, std::nullopt); !st)
        return st;
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    out.ids[i] = p.held_by[i] ? *p.held_by[i] : *own[p.winner[i]];
  return out;
}

}  // namespace

bool apply_retry_policy(job& j, const std::map<std::string, backoff_policy>& policies) {
  if (j.backoff != backoff_policy{})
    return false;
  auto p = policies.find(j.type);
  if (p == policies.end())
    return false;
  j.backoff = p->second;
  return true;
}

result<insert_jobs_result> insert_jobs(db& d, const insert_jobs_args& args, int64_t now_ms) {
  const auto& jobs = args.jobs;
  if (jobs.empty())
    return invalid_field("jobs", "the batch is empty");
  if (args.retry_policies && !args.retry_policies->empty()) {
    // A copy only when a type's policy applies.
    auto takes_policy = [&](const job& j) {
      return j.backoff == backoff_policy{} && args.retry_policies->count(j.type) > 0;
    };
    if (std::any_of(jobs.begin(), jobs.end(), takes_policy)) {
      insert_jobs_args own = args;
      for (auto& j : own.jobs)
        apply_retry_policy(j, *args.retry_policies);
      own.retry_policies = nullptr;
      return insert_jobs(d, own, now_ms);
    }
  }
  // Validate everything first: a bad job must not leave earlier ones written.
  for (size_t i = 0; i < jobs.size(); ++i)
    if (auto st = validate(jobs[i], args.max_payload_bytes); !st)
      return in_batch(std::move(st), i, jobs.size());
  new_jobs batch;
  batch.batch_size = jobs.size();
  bool keyed = std::any_of(jobs.begin(), jobs.end(),
                           [](const job& j) { return j.idempotency_key.has_value(); });
  if (!keyed) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      batch.jobs.push_back(&jobs[i]);
      batch.position.push_back(i);
    }
    return insert_new(d, batch, args, now_ms);
  }
  // Jobs whose key is live, or that repeat an earlier job of the batch,
  // are not inserted; they get that job's id.
  using kind = idempotency::sorted::kind;
  auto sorted = idempotency::sort_out(d, jobs, now_ms);
  if (!sorted)
    return sorted.error();
  std::vector<size_t> fresh_at(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    if (sorted->what[i] == kind::fresh) {
      fresh_at[i] = batch.jobs.size();
      batch.jobs.push_back(&jobs[i]);
      batch.position.push_back(i);
    }
  insert_jobs_result out;
  if (!batch.jobs.empty()) {
    auto added = insert_new(d, batch, args, now_ms);
    if (!added)
      return added.error();
    out = std::move(*added);
  }
  std::vector<job_id> ids(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    switch (sorted->what[i]) {
      case kind::fresh:
        ids[i] = out.ids[fresh_at[i]];
        if (jobs[i].idempotency_key)
          if (auto st = idempotency::record(d, *jobs[i].idempotency_key, ids[i],
                                            sorted->fingerprints[i],
                                            now_ms + args.idempotency_window_ms);
              !st)
            return st;
        break;
      case kind::known: ids[i] = sorted->known_id[i]; break;
      case kind::same_as: ids[i] = ids[sorted->same_as[i]]; break;
    }
  }
  out.ids = std::move(ids);
  return out;
}

}  // namespace ergon::storage
