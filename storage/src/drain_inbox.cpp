#include "ergon/storage/op/drain_inbox.hpp"

#include <limits>
#include <optional>

#include "ergon/storage/field_rules.hpp"
#include "ergon/storage/op/delete_finished.hpp"
#include "ergon/storage/op/savepoint.hpp"
#include "ergon/storage/pg_db.hpp"
#include "job_rows.hpp"

namespace ergon::storage {
namespace {

// PostgreSQL only: SQLite has no inbox (pg_schema.cpp, version 5). The
// waiting entries are listed with their payloads' sizes first, so that
// an entry past the queue's limit is refused unread, and a drain reads at
// most max_drain_bytes of payloads.
constexpr const char* select_waiting =
  "SELECT id, type, octet_length(payload) FROM inbox WHERE taken_at IS NULL "
  "ORDER BY id LIMIT ?1";

constexpr const char* select_entries =
  "SELECT id, type, payload, name, group_key, priority, weight, run_at, delay_ms, ttl_ms, "
  "max_retries, backoff_initial_ms, backoff_multiplier, backoff_randomization, timeout_ms, "
  "heartbeat_increment_ms, unique_key, on_duplicate, unique_hold_ms, result_ttl_ms, "
  "idempotency_key, io_read_bytes, io_write_bytes, backoff_kind, backoff_max_ms "
  "FROM inbox WHERE id = ANY(CAST(?1 AS bigint[])) ORDER BY id";

constexpr const char* select_has_work =
  "SELECT EXISTS (SELECT 1 FROM inbox WHERE taken_at IS NULL) OR (CAST(?1 AS bigint) > 0 "
  "AND EXISTS (SELECT 1 FROM inbox WHERE taken_at IS NOT NULL AND taken_at < CAST(?1 AS "
  "bigint)))";

constexpr int64_t max_drain_bytes = int64_t{64} << 20;

constexpr const char* mark_taken =
  "UPDATE inbox AS e SET taken_at = ?1, job = CAST(encode(t.job, 'hex') AS uuid) "
  "FROM unnest(CAST(?2 AS bigint[]), CAST(?3 AS bytea[])) AS t(id, job) WHERE e.id = t.id";

constexpr const char* mark_refused =
  "UPDATE inbox SET taken_at = ?1, refused_code = ?2, refused_field = ?3, "
  "refused_message = ?4 WHERE id = ?5";

// An entry and its job, or why its columns make no job.
struct entry {
  int64_t id = 0;
  job j;
  status fault;  // the first column that makes no job field
};

// A bigint column for an int32 field: out of range is the field's fault.
std::optional<int32_t> narrow(const stmt& q, int col, const char* field, status& fault) {
  auto v = q.column_opt_int(col);
  if (!v)
    return std::nullopt;
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    if (fault.ok())
      fault = invalid_field(field, "is " + std::to_string(*v) + ", out of the range of a 32-bit "
                                   "integer");
    return std::nullopt;
  }
  return static_cast<int32_t>(*v);
}

// The job in the row at `q`; NULL columns keep job's defaults.
entry read_entry(const stmt& q) {
  entry e;
  e.id = q.column_int(0);
  auto& j = e.j;
  j.type = q.column_text(1);
  j.payload = q.column_blob(2);
  j.name = q.column_opt_text(3);
  j.group = q.column_opt_text(4);
  auto& fault = e.fault;
  if (auto v = narrow(q, 5, "priority", fault))
    j.priority = *v;
  if (auto v = narrow(q, 6, "weight", fault))
    j.weight = *v;
  j.run_at_ms = q.column_opt_int(7);
  if (auto v = q.column_opt_int(8))
    j.delay_ms = *v;
  j.ttl_ms = q.column_opt_int(9);
  if (auto v = narrow(q, 10, "max_retries", fault))
    j.max_retries = *v;
  if (auto v = q.column_opt_int(11))
    j.backoff.initial_ms = *v;
  if (!q.column_is_null(12))
    j.backoff.multiplier = q.column_double(12);
  if (!q.column_is_null(13))
    j.backoff.randomization = q.column_double(13);
  if (auto v = q.column_opt_int(14))
    j.timeout_ms = *v;
  if (auto v = q.column_opt_int(15))
    j.heartbeat_increment_ms = *v;
  j.unique_key = q.column_opt_text(16);
  if (auto policy = q.column_opt_text(17)) {
    if (*policy == "skip")
      j.on_duplicate = unique_policy::skip;
    else if (*policy == "replace")
      j.on_duplicate = unique_policy::replace;
    else if (*policy == "reject")
      j.on_duplicate = unique_policy::reject;
    else if (fault.ok())
      fault = invalid_field("on_duplicate", "is '" + *policy + "': skip, replace or reject");
  }
  if (auto v = q.column_opt_int(18))
    j.unique_hold_ms = *v;
  j.result_ttl_ms = q.column_opt_int(19);
  j.idempotency_key = q.column_opt_text(20);
  auto read = q.column_opt_int(21);
  auto write = q.column_opt_int(22);
  if (read || write)
    j.expected_io = io_estimate{read.value_or(0), write.value_or(0)};
  if (auto kind = q.column_opt_text(23)) {
    // The table's CHECK allows these three.
    j.backoff.kind = *kind == "constant" ? backoff_kind::constant
                     : *kind == "linear" ? backoff_kind::linear
                                         : backoff_kind::exponential;
  }
  if (auto v = q.column_opt_int(24))
    j.backoff.max_ms = *v;
  return e;
}

// Errors that are the session's or the database's, not an entry's: they
// end the drain, and the entries wait for the next one.
bool ends_drain(db& d, const status& st) {
  switch (st.code()) {
    case error::unreachable:
    case error::busy:
    case error::timeout:
    case error::closed:
    case error::read_only:
    case error::storage_full:
    case error::io_error:
    case error::corrupt:
      return true;
    default:
      return !d.in_transaction();
  }
}

// Inserts `batch` (pointers into the entries) in a savepoint of its own.
// An error that leaves the transaction usable rolls the savepoint back and
// is returned as a value; any other error is the call's.
result<result<insert_jobs_result>> insert_apart(db& d, const std::vector<entry*>& batch,
                                                insert_jobs_args args, int64_t now_ms) {
  for (auto* e : batch)
    args.jobs.push_back(e->j);
  result<insert_jobs_result> r = status{error::internal, "not inserted"};
  {
    savepoint sp{d};
    if (!sp.begin_status())
      return sp.begin_status();
    r = insert_jobs(d, args, now_ms);
    if (r)
      if (auto st = sp.release(); !st)
        return st;
  }
  if (!r && ends_drain(d, r.error()))
    return r.error();
  return r;
}

status record_refusal(db& d, int64_t entry_id, const status& why, int64_t now_ms) {
  auto s = d.prepare(mark_refused);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, now_ms);
  q.bind_text(2, to_string(why.code()));
  if (why.field().empty())
    q.bind_null(3);
  else
    q.bind_text(3, why.field());
  q.bind_text(4, why.message());
  q.bind(5, entry_id);
  return d.run(q);
}

}  // namespace

result<drain_inbox_result> drain_inbox(db& d, const drain_inbox_args& args, int64_t now_ms) {
  drain_inbox_result out;
  if (d.engine() != engine::postgres || args.limit == 0)
    return out;
  // Which entries to read: those within the payload limit, up to the
  // byte budget (at least one).
  std::vector<int64_t> wanted;
  {
    auto s = d.prepare(select_waiting);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind(1, static_cast<int64_t>(args.limit));
    int64_t bytes = 0;
    size_t listed = 0;
    while (q.step()) {
      ++listed;
      auto id = q.column_int(0);
      auto size = q.column_int(2);
      if (auto st = check_payload_size("payload", static_cast<size_t>(size),
                                       args.max_payload_bytes);
          !st) {
        out.refused.push_back({id, q.column_text(1), st});
        continue;
      }
      if (!wanted.empty() && bytes + size > max_drain_bytes) {
        out.more = true;
        break;
      }
      bytes += size;
      wanted.push_back(id);
    }
    if (!q.step_status())
      return q.step_status();
    q.reset();
    out.more = out.more || listed == args.limit;
  }
  std::vector<entry> entries;
  entries.reserve(wanted.size());
  if (!wanted.empty()) {
    auto s = d.prepare(select_entries);
    if (!s)
      return s.error();
    auto& q = static_cast<pg_stmt&>(**s);
    q.bind_ints(1, wanted);
    while (q.step())
      entries.push_back(read_entry(q));
    if (!q.step_status())
      return q.step_status();
    q.reset();
  }
  out.taken = out.refused.size() + entries.size();
  std::vector<entry*> good;
  for (auto& e : entries) {
    if (e.fault.ok())
      good.push_back(&e);
    else
      out.refused.push_back({e.id, e.j.type, e.fault});
  }
  insert_jobs_args base{{}, args.max_payload_bytes, args.id_tag, args.next_row,
                        args.idempotency_window_ms, args.retry_policies};
  std::vector<int64_t> taken_ids;
  std::vector<job_id> job_ids;
  auto took = [&](const std::vector<entry*>& batch, insert_jobs_result& r) {
    for (size_t i = 0; i < batch.size(); ++i) {
      taken_ids.push_back(batch[i]->id);
      job_ids.push_back(r.ids[i]);
    }
    if (!r.added.empty())
      base.next_row = r.added.back().row + 1;
    for (auto& k : r.added)
      out.inserted.added.push_back(std::move(k));
    for (auto& k : r.replaced)
      out.inserted.replaced.push_back(std::move(k));
  };
  // All at once, as one submit; if that fails, one by one, so that only
  // the entries that fail are refused. An entry's own error is recorded on
  // its row whatever its kind (a refusal as a submit would get it, or
  // anything else that left the transaction usable): one entry must not
  // hold up the inbox.
  if (!good.empty()) {
    auto all = insert_apart(d, good, base, now_ms);
    if (!all)
      return all.error();
    if (*all) {
      took(good, **all);
    } else {
      for (auto* e : good) {
        auto one = insert_apart(d, {e}, base, now_ms);
        if (!one)
          return one.error();
        if (*one)
          took({e}, **one);
        else
          out.refused.push_back({e->id, e->j.type, one->error()});
      }
    }
  }
  if (!taken_ids.empty()) {
    std::vector<std::optional<std::string_view>> ids;
    for (auto& id : job_ids)
      ids.push_back(rows::id_bytes(id));
    auto s = d.prepare(mark_taken);
    if (!s)
      return s.error();
    auto& q = static_cast<pg_stmt&>(**s);
    q.bind(1, now_ms);
    q.bind_ints(2, taken_ids);
    q.bind_blobs(3, ids);
    if (auto st = d.run(q); !st)
      return st;
  }
  for (auto& r : out.refused)
    if (auto st = record_refusal(d, r.entry, r.why, now_ms); !st)
      return st;
  if (args.forget_taken_before > 0) {
    auto gone = forget_inbox_entries(d, args.forget_taken_before, args.limit);
    if (!gone)
      return gone.error();
    out.forgotten = *gone;
  }
  return out;
}

result<bool> inbox_has_work(db& d, int64_t forget_taken_before) {
  if (d.engine() != engine::postgres)
    return false;
  auto s = d.prepare(select_has_work);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind(1, forget_taken_before);
  if (!q.step())
    return q.step_status().ok() ? status{error::internal, "EXISTS gave no row"} : q.step_status();
  bool work = q.column_int(0) != 0;
  q.reset();
  return work;
}

}  // namespace ergon::storage
