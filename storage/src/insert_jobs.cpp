#include "ergon/storage/op/insert_jobs.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ergon/storage/job_ids.hpp"
#include "ergon/storage/pg_db.hpp"
#include "dependents.hpp"
#include "idempotency_keys.hpp"
#include "in_batch.hpp"
#include "job_final.hpp"
#include "job_rows.hpp"
#include "job_tags.hpp"
#include "status_sql.hpp"

namespace ergon::storage {
namespace {

// The key's holder, if any. LEFT JOIN: a hold may outlive its job's row, so
// the holder's id is kept in unique_keys too.
constexpr const char* select_holder =
  "SELECT k.held_until, k.job, j.status, j.has_dependents, " ERGON_JOB_KEY_COLUMNS " "
  "FROM unique_keys k LEFT JOIN jobs j ON j.id = k.job_id AND j.external_id = k.job "
  "WHERE k.key = ?1";

constexpr const char* take_key =
  "INSERT INTO unique_keys (key, job_id, job, held_until) VALUES (?1, ?2, ?3, NULL) "
  "ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, job = excluded.job, "
  "held_until = NULL";

// The waiting job has not run: it has no checkpoint to drop.
constexpr const char* take_payload =
  "UPDATE jobs SET payload = ?2 WHERE id = ?1 AND status = " ERGON_SQL_WAITING;

constexpr const char* raise_priority =
  "UPDATE jobs SET priority = ?2 WHERE id = ?1 AND priority < ?2 AND status IN ("
  ERGON_SQL_PENDING ", " ERGON_SQL_WAITING ") RETURNING status, " ERGON_JOB_KEY_COLUMNS;

// PostgreSQL: a batch's rows in one COPY, in its binary format. The columns
// are insert_job's (job_rows.cpp). An INSERT from unnest() over 25 arrays,
// as before, spent the server's time building a table of the rows first.
constexpr const char* copy_jobs =
  "COPY jobs (external_id, " ERGON_TEMPLATE_COLUMNS ", run_at, deadline, added_at, id, "
  "ready_since, recurring_id, scheduled_at, unique_key, unique_hold_ms, result_ttl_ms, "
  "io_read_bytes, io_write_bytes, status, unfinished_instance_of, " ERGON_BACKOFF_COLUMNS ", "
  "waiting_on, dependency_policy, has_dependents, parent, only_dependency, ttl_after_start) "
  "FROM STDIN (FORMAT binary)";
constexpr int16_t copy_fields = 35;

constexpr size_t min_copy_rows = 12;

// A new row: its job, its key, and what it says of its dependencies.
struct new_row {
  const job* j = nullptr;
  job_key key;
  rows::dependency_links links;
};

// Inserts `rows` with copy_jobs.
status insert_on_postgres(pg_db& d, const std::vector<new_row>& rows) {
  auto text = [](const std::optional<std::string>& v) {
    return v ? std::optional<std::string_view>{*v} : std::nullopt;
  };
  return d.copy_in(copy_jobs, rows.size(), [&](pg_copy_rows& out, size_t k) {
    const auto* j = rows[k].j;
    const auto& key = rows[k].key;
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
    const auto& links = rows[k].links;
    out.add(int64_t{static_cast<int64_t>(links.waits ? job_status::waiting
                                                         : job_status::pending)});
    out.add(recurring);   // unfinished_instance_of
    out.add(int64_t{static_cast<int64_t>(j->backoff.kind)});
    out.add(int64_t{j->backoff.max_ms});
    out.add(int64_t{links.waiting_on});
    out.add(int64_t{static_cast<int64_t>(j->on_dependency_failure)});
    out.add(links.link_bits);
    out.add(links.parent);
    out.add(links.only_dependency);
    out.add(rows::ttl_after_start(*j));
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
  int64_t link_bits = 0;  // jobs.has_dependents
  job_key key;

  bool started() const noexcept { return held_until || status == job_status::running; }
  // Waits behind a running holder of the key (unique_policy::requeue).
  bool requeued() const noexcept {
    return !held_until && status == job_status::waiting && (link_bits & requeued_bit) != 0;
  }

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
    h.link_bits = q.column_int(3);
    h.key = rows::read_key(q, 4);
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
  std::unordered_map<std::string, stored_holder> replaced;
  // Per job: the running holder it waits behind (unique_policy::requeue).
  std::vector<std::optional<stored_holder>> behind;
  // Requeued holders in the file, by row: the batch job whose payload they
  // take (the latest duplicate's).
  std::map<int64_t, size_t> refreshed;
  // Holders in the file not started yet, by row, and the priority a
  // duplicate raises them to (job::raise_holder_priority).
  std::map<int64_t, std::pair<stored_holder, int32_t>> raised;
};

// Where a position of the submitted batch went: a job of this insert (its
// index in new_jobs), or a job already in the queue.
struct position_target {
  std::optional<size_t> fresh;
  job_id existing;
};

// The jobs to insert: all of a batch, or those its idempotency keys left
// (`position` says where each stands in the batch, for messages, and
// `targets` where each position of the batch went; empty: position p is
// jobs[p]).
struct new_jobs {
  std::vector<const job*> jobs;
  std::vector<size_t> position;
  size_t batch_size = 0;
  std::vector<position_target> targets;

  status fail(status st, size_t i) const {
    return in_batch(std::move(st), position[i], batch_size);
  }
  position_target target(size_t p) const { return targets.empty() ? position_target{p, {}} : targets[p]; }
};

// What a new job waits on: each dependency's row, once, with whether it
// has not ended yet. A dependency that ended unsuccessfully dooms the job
// unless its policy runs it anyway.
struct wait_plan {
  std::vector<std::pair<int64_t, bool>> rows;
  std::optional<std::pair<job_id, job_status>> doomed;

  int32_t unfinished() const noexcept {
    return static_cast<int32_t>(std::count_if(rows.begin(), rows.end(),
                                              [](auto& r) { return r.second; }));
  }
  bool waits() const noexcept { return !rows.empty() && (unfinished() > 0 || doomed); }
};

status no_such_dependency(const job_id& id) {
  return invalid_field("depends_on", "no job " + id.to_string() + " in the queue");
}

// Adds the existing job `id` to `w`, as it stands now.
status count_existing(db& d, const job_id& id, const job& j, wait_plan& w) {
  auto found = rows::find_job(d, id);
  if (!found)
    return found.error().code() == error::not_found ? no_such_dependency(id) : found.error();
  auto s = found->status;
  w.rows.emplace_back(found->row, !is_final(s));
  if (is_final(s) && s != job_status::succeeded
      && j.on_dependency_failure != dependency_failure::run && !w.doomed)
    w.doomed = std::pair{id, s};
  return {};
}

// The dependencies of batch job `i` (a new row), resolved to rows: new rows
// of this insert by `row_of`, the rest looked up.
result<wait_plan> plan_wait(db& d, const new_jobs& batch, const plan& p,
                            const std::vector<int64_t>& row_of, size_t i) {
  const auto& j = *batch.jobs[i];
  wait_plan w;
  if (p.behind[i])
    w.rows.emplace_back(p.behind[i]->key.row, true);
  auto fail = [&](status st) { return batch.fail(std::move(st), i); };
  for (auto& id : j.depends_on)
    if (auto st = count_existing(d, id, j, w); !st)
      return fail(std::move(st));
  auto own = batch.position[i];
  for (auto pos : j.depends_on_batch) {
    if (pos >= own)
      return fail(invalid_field("depends_on_batch",
                                "position " + std::to_string(pos)
                                  + " is not before this job's own (" + std::to_string(own)
                                  + "): a job may depend only on earlier jobs of its batch"));
    auto t = batch.target(pos);
    if (!t.fresh || p.held_by[*t.fresh]) {
      auto id = t.fresh ? *p.held_by[*t.fresh] : t.existing;
      if (auto st = count_existing(d, id, j, w); !st)
        return fail(std::move(st));
      continue;
    }
    auto winner = p.winner[*t.fresh];
    if (winner >= i)
      return fail(invalid_field("depends_on_batch",
                                "job " + std::to_string(pos)
                                  + " of the batch was replaced by a later job of it (its "
                                    "unique key): depend on that job's position instead"));
    w.rows.emplace_back(row_of[winner], true);
  }
  // A job named twice counts once.
  std::sort(w.rows.begin(), w.rows.end());
  w.rows.erase(std::unique(w.rows.begin(), w.rows.end(),
                           [](auto& a, auto& b) { return a.first == b.first; }),
               w.rows.end());
  return w;
}

result<plan> plan_batch(db& d, const new_jobs& batch, int64_t now_ms) {
  const auto& jobs = batch.jobs;
  plan p;
  p.winner.resize(jobs.size());
  p.held_by.resize(jobs.size());
  p.behind.resize(jobs.size());
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
    if (j.raise_holder_priority && !h.batch && !h.stored->started()
        && h.stored->key.priority < j.priority) {
      auto [r, fresh] = p.raised.try_emplace(h.stored->key.row, *h.stored, j.priority);
      if (!fresh)
        r->second.second = std::max(r->second.second, j.priority);
    }
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
        // Replacing a job that waits behind a running holder would let the
        // replacement start beside that holder.
        if ((h.batch && p.behind[*h.batch]) || (!h.batch && h.stored->requeued()))
          return fail({error::job_running,
                       "unique key '" + *j.unique_key + "' is held by " + by
                         + ", which waits behind a running job of the key (requeue) and can't "
                           "be replaced until that job ends"});
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
          p.replaced.emplace(*j.unique_key, *h.stored);
          h.stored.reset();
        }
        h.batch = i;
        break;
      case unique_policy::requeue:
        if (h.batch && p.behind[*h.batch]) {
          // The latest duplicate of the batch waits instead of an earlier one.
          for (auto& w : p.winner)
            if (w == *h.batch)
              w = i;
          p.behind[i] = std::move(p.behind[*h.batch]);
          p.behind[*h.batch].reset();
          h.batch = i;
        } else if (h.batch) {
          p.winner[i] = *h.batch;
        } else if (!h.stored->held_until && h.stored->status == job_status::running) {
          p.behind[i] = std::move(*h.stored);
          h.stored.reset();
          h.batch = i;
        } else {
          if (h.stored->requeued())
            p.refreshed[h.stored->key.row] = i;
          p.held_by[i] = h.stored->id;
        }
        break;
    }
  }
  return p;
}

// The latest duplicate's payload is the one a requeued job runs: it stands
// for every change made while the holder ran.
status refresh_requeued(db& d, const plan& p, const std::vector<const job*>& jobs) {
  for (auto& [row, i] : p.refreshed) {
    auto s = d.prepare(take_payload);
    if (!s)
      return s.error();
    (*s)->bind(1, row);
    (*s)->bind_blob(2, jobs[i]->payload);
    if (auto st = d.run(**s); !st)
      return st;
  }
  return {};
}

// A pending holder's new key goes to the dispatcher, which orders its index
// by priority. One that a later job of the batch replaced has ended, and
// its UPDATE finds no row.
status raise_holders(db& d, const plan& p, insert_jobs_result& out) {
  for (auto& [row, raise] : p.raised) {
    auto s = d.prepare(raise_priority);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, row);
    q.bind(2, int64_t{raise.second});
    if (q.step()) {
      auto after = rows::read_key(q, 1);
      if (q.column_int(0) == static_cast<int64_t>(job_status::pending))
        out.raised.push_back({raise.first.key, std::move(after)});
    } else if (!q.step_status()) {
      return q.step_status();
    }
    q.reset();
  }
  return {};
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
  // The rows new jobs get, in insertion order, so dependencies on jobs of
  // this batch are known before any row is written.
  std::vector<int64_t> row_of(jobs.size(), 0);
  std::vector<wait_plan> waits;
  // Rows that a job of this batch waits on: new ones are inserted so
  // marked, the others are marked after.
  const int64_t first_row = next_row;
  std::vector<char> depended_new(jobs.size(), 0);  // by row - first_row
  std::unordered_set<int64_t> depended_before_set;
  std::vector<int64_t> depended_before;
  bool has_dependencies =
    std::any_of(jobs.begin(), jobs.end(),
                [](const job* j) { return !j->depends_on.empty() || !j->depends_on_batch.empty(); })
    || std::any_of(p.behind.begin(), p.behind.end(), [](auto& b) { return b.has_value(); });
  if (has_dependencies) {
    waits.resize(jobs.size());
    auto r = next_row;
    for (size_t i = 0; i < jobs.size(); ++i)
      if (p.winner[i] == i && !p.held_by[i])
        row_of[i] = r++;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (row_of[i] == 0)
        continue;
      auto w = plan_wait(d, batch, p, row_of, i);
      if (!w)
        return w.error();
      // Finished ones too: the mark is what tells a listing to look for
      // dependents.
      for (auto& [on, unfinished] : w->rows)
        if (on >= first_row)
          depended_new[static_cast<size_t>(on - first_row)] = 1;
        else if (depended_before_set.insert(on).second)
          depended_before.push_back(on);
      waits[i] = std::move(*w);
    }
  }
  std::vector<std::optional<job_id>> own(jobs.size());
  auto insert = rows::prepare_insert(d);
  if (!insert)
    return insert.error();
  bool on_postgres = d.engine() == engine::postgres;
  std::vector<new_row> batched;
  std::vector<dependency_edge> edges;
  std::vector<std::pair<int64_t, std::string>> replaced_waiting;
  std::vector<row_tags> tagged;
  // A requeued job runs after its holder however the holder ends.
  std::deque<job> behind_copies;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (p.winner[i] != i || p.held_by[i])
      continue;
    const job* jp = jobs[i];
    if (p.behind[i]) {
      behind_copies.push_back(*jp);
      behind_copies.back().on_dependency_failure = dependency_failure::run;
      jp = &behind_copies.back();
    }
    const auto& j = *jp;
    new_row row{&j, rows::new_key(j, now_ms, args.id_tag, next_row++), {}};
    auto& k = row.key;
    auto& links = row.links;
    if (args.parent != 0)
      links.parent = args.parent;
    bool depended = args.parent != 0;  // a child: its parent waits on it
    if (has_dependencies) {
      depended = depended || depended_new[static_cast<size_t>(k.row - first_row)];
      links.waits = waits[i].waits();
      links.waiting_on = waits[i].unfinished();
      // One dependency (a fan-out's jobs, a chain's) stays in the row.
      if (waits[i].rows.size() == 1) {
        links.only_dependency = waits[i].rows[0].first;
      } else if (!waits[i].rows.empty()) {
        links.link_bits |= has_edges_bit;
        for (auto& [on, unfinished] : waits[i].rows)
          edges.push_back({on, k.row});
      }
    }
    if (depended)
      links.link_bits |= has_dependents_bit;
    if (!j.tags.empty()) {
      links.link_bits |= has_tags_bit;
      tagged.push_back({k.row, &j.tags});
    }
    if (p.behind[i])
      links.link_bits |= requeued_bit;
    if (j.unique_key) {
      if (auto old = p.replaced.find(*j.unique_key); old != p.replaced.end()) {
        auto& replaced = old->second.key;
        auto why = "replaced by " + k.id.to_string();
        if (old->second.status == job_status::waiting) {
          replaced_waiting.emplace_back(replaced.row, std::move(why));  // after the edges
        } else {
          auto cancelled = rows::cancel_row(d, replaced.row, now_ms, why);
          if (!cancelled)
            return cancelled.error();
          if (!*cancelled)
            return status{error::internal, "a replaced job changed underneath"};
          out.replaced.push_back(std::move(replaced));
        }
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
      batched.push_back(row);
    else if (auto st = rows::insert_job(d, **insert, j, k, std::nullopt, links); !st)
      return st;
    if (links.waits)
      out.waiting.push_back(std::move(k));
    else
      out.added.push_back(std::move(k));
  }
  out.next_row = next_row;
  // A few rows go one statement each: a batch statement (COPY, and the
  // array INSERT before it) costs more to start than it saves in round
  // trips below about a dozen.
  if (batched.size() >= min_copy_rows) {
    if (auto st = insert_on_postgres(static_cast<pg_db&>(d), batched); !st)
      return st;
  } else {
    for (auto& r : batched)
      if (auto st = rows::insert_job(d, **insert, *r.j, r.key, std::nullopt, r.links); !st)
        return st;
  }
  if (auto st = insert_tags(d, tagged); !st)
    return st;
  if (auto st = insert_edges(d, edges); !st)
    return st;
  if (auto st = mark_depended(d, depended_before); !st)
    return st;
  // After the edges: a job of this batch may wait on a job it replaced.
  for (auto& replaced : out.replaced) {
    auto settled = settle_dependents(d, replaced.row, replaced.id, job_status::cancelled, now_ms);
    if (!settled)
      return settled.error();
    out.dependents.append(std::move(*settled));
  }
  for (auto& [row, why] : replaced_waiting) {
    auto ended = end_waiting(d, row, job_status::cancelled, std::move(why), now_ms);
    if (!ended)
      return ended.error();
    out.dependents.append(std::move(*ended));
  }
  // A dependency that had ended unsuccessfully ends its dependent now, and
  // what waits on that in this batch.
  for (size_t i = 0; has_dependencies && i < jobs.size(); ++i) {
    if (row_of[i] == 0 || !waits[i].doomed)
      continue;
    auto& [on, how] = *waits[i].doomed;
    auto ended = end_waiting(d, row_of[i], jobs[i]->on_dependency_failure, on, how, now_ms);
    if (!ended)
      return ended.error();
    out.dependents.append(std::move(*ended));
  }
  if (auto st = refresh_requeued(d, p, jobs); !st)
    return st;
  if (auto st = raise_holders(d, p, out); !st)
    return st;
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
  batch.targets.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    switch (sorted->what[i]) {
      case kind::fresh:
        fresh_at[i] = batch.jobs.size();
        batch.targets[i].fresh = batch.jobs.size();
        batch.jobs.push_back(&jobs[i]);
        batch.position.push_back(i);
        break;
      case kind::known: batch.targets[i].existing = sorted->known_id[i]; break;
      case kind::same_as: batch.targets[i] = batch.targets[sorted->same_as[i]]; break;
    }
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
