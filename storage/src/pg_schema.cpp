// The PostgreSQL schema and its versioned migrations. The tables and columns
// are SQLite's (schema.cpp explains each), so both engines share most SQL:
// integers are bigint, REAL is double precision, BLOB is bytea, text
// compares bytes (COLLATE "C", SQLite's BINARY), and all times are int64 ms
// since the Unix epoch, as on SQLite.
#include <set>
#include <string>

#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/schema.hpp"
#include "schema_steps.hpp"

namespace ergon::storage {
namespace {

// Version 1 is SQLite's version 5, plus:
//  - schema_version: the mark of an ergon schema (SQLite's application_id)
//    and its version (SQLite's user_version);
//  - lease: the one owner of the queue and its epoch (pg_lease.hpp), with the
//    server pids of its lease's and its writer's sessions;
//  - listener: where the owner of an epoch takes remote connections, so that
//    tools find it (SQLite keeps these in the lock file).
constexpr const char* migration_1 = R"sql(
CREATE TABLE jobs (
  id                     bigint  PRIMARY KEY,
  external_id            bytea   NOT NULL,
  type                   text COLLATE "C"    NOT NULL,
  name                   text COLLATE "C",
  group_key              text COLLATE "C",
  priority               bigint  NOT NULL,
  weight                 bigint  NOT NULL,
  run_at                 bigint  NOT NULL,
  ready_since            bigint  NOT NULL,
  deadline               bigint,
  payload                bytea   NOT NULL,
  checkpoint             bytea,
  result                 bytea,
  status                 bigint  NOT NULL,
  current_try            bigint  NOT NULL DEFAULT 0,
  max_retries            bigint  NOT NULL,
  backoff_initial_ms     bigint  NOT NULL,
  backoff_multiplier     double precision NOT NULL,
  backoff_randomization  double precision NOT NULL,
  timeout_ms             bigint  NOT NULL,
  heartbeat_increment_ms bigint  NOT NULL,
  attempt_token          bigint,
  expires_at             bigint,
  added_at               bigint  NOT NULL,
  started_at             bigint,
  finished_at            bigint,
  last_outcome           bigint,
  last_message           text COLLATE "C",
  recurring_id           text COLLATE "C",
  scheduled_at           bigint,
  unique_key             text COLLATE "C",
  unique_hold_ms         bigint,
  cancel_requested_at    bigint,
  try_base               bigint  NOT NULL DEFAULT 0,
  result_ttl_ms          bigint,
  result_expires_at      bigint,
  progress_done          bigint,
  progress_total         bigint,
  progress_message       text COLLATE "C",
  progress_at            bigint,
  progress_eta           bigint,
  yields                 bigint  NOT NULL DEFAULT 0,
  io_read_bytes          bigint,
  io_write_bytes         bigint
);
CREATE INDEX jobs_by_name ON jobs(name) WHERE name IS NOT NULL;
CREATE UNIQUE INDEX jobs_one_unfinished_instance ON jobs(recurring_id)
  WHERE recurring_id IS NOT NULL AND status < 2;
CREATE INDEX jobs_unsuccessful ON jobs(status, id) WHERE status >= 3;
CREATE INDEX jobs_by_result_expiry ON jobs(result_expires_at)
  WHERE result_expires_at IS NOT NULL;
CREATE TABLE attempts (
  job_id      bigint NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  try         bigint NOT NULL,
  started_at  bigint NOT NULL,
  finished_at bigint NOT NULL,
  outcome     bigint NOT NULL,
  message     text COLLATE "C"   NOT NULL,
  PRIMARY KEY (job_id, try)
);
CREATE TABLE meta (
  key   text COLLATE "C"   PRIMARY KEY,
  value bigint NOT NULL
);
INSERT INTO meta (key, value) VALUES ('id_tag', floor(random() * 1073741824)::bigint);
INSERT INTO meta (key, value) VALUES ('unfinished_low_mark', 0);
CREATE TABLE finished_counts (
  type   text COLLATE "C"   NOT NULL,
  status bigint NOT NULL,
  count  bigint NOT NULL,
  PRIMARY KEY (type, status)
);
CREATE TABLE recurring_jobs (
  id                     text COLLATE "C"    PRIMARY KEY,
  schedule               text COLLATE "C"    NOT NULL,
  time_zone              text COLLATE "C"    NOT NULL,
  catch_up               bigint  NOT NULL,
  since                  bigint  NOT NULL,
  type                   text COLLATE "C"    NOT NULL,
  name                   text COLLATE "C",
  group_key              text COLLATE "C",
  priority               bigint  NOT NULL,
  weight                 bigint  NOT NULL,
  ttl_ms                 bigint,
  payload                bytea   NOT NULL,
  max_retries            bigint  NOT NULL,
  backoff_initial_ms     bigint  NOT NULL,
  backoff_multiplier     double precision NOT NULL,
  backoff_randomization  double precision NOT NULL,
  timeout_ms             bigint  NOT NULL,
  heartbeat_increment_ms bigint  NOT NULL,
  added_at               bigint  NOT NULL,
  updated_at             bigint  NOT NULL,
  last_job               bytea,
  last_scheduled_at      bigint,
  last_finished_at       bigint,
  last_status            bigint
);
CREATE TABLE unique_keys (
  key        text COLLATE "C"   PRIMARY KEY,
  job_id     bigint NOT NULL,
  job        bytea  NOT NULL,
  held_until bigint
);
CREATE TABLE lease (
  one           boolean PRIMARY KEY DEFAULT true CHECK (one),
  epoch         bigint  NOT NULL,
  host          text COLLATE "C"    NOT NULL,
  pid           bigint  NOT NULL,
  backend_pid   bigint  NOT NULL,
  backend_start timestamptz,
  writer_pid    bigint,
  writer_start  timestamptz,
  expires_at    timestamptz NOT NULL
);
CREATE TABLE listener (
  epoch        bigint  NOT NULL,
  address      text COLLATE "C" NOT NULL,
  port         bigint  NOT NULL,
  needs_secret boolean NOT NULL,
  needs_tls    boolean NOT NULL
);
)sql";

// Version 2 is SQLite's version 6 (schema.cpp says why), and room in each
// page of jobs for a new version of a row: a HOT update stays on its page.
constexpr const char* migration_2 =
  "ALTER TABLE jobs ADD COLUMN dead_letter_status bigint;\n"
  "ALTER TABLE jobs ADD COLUMN unfinished_instance_of text COLLATE \"C\";\n"
  ERGON_SQL_STATUS_FREE_INDEXES
  "ALTER TABLE jobs SET (fillfactor = 80);\n";

// Version 3 is SQLite's version 7 (schema.cpp says why).
constexpr const char* migration_3 = "ALTER TABLE jobs ADD COLUMN held_by text COLLATE \"C\";\n";

// Version 4 is SQLite's version 8 (schema.cpp says why).
constexpr const char* migration_4 = R"sql(
CREATE TABLE idempotency_keys (
  key         text COLLATE "C" PRIMARY KEY,
  job         bytea  NOT NULL,
  fingerprint bigint NOT NULL,
  expires_at  bigint NOT NULL
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
)sql";

// Version 5: the inbox, where any PostgreSQL transaction enqueues jobs
// (include/ergon/pg.hpp). Entries are columns, not packed bytes, so SQL of
// any language can write and read them; NULL is the job field's default.
// The owner's writer takes committed entries in, in its own fenced
// transactions, and records each entry's job or refusal on its row. A
// sequence's values commit out of order, so the writer takes whatever is
// not taken rather than what lies past a mark. The CHECKs bound what an
// enqueuer can make the owner read (job.hpp's limits); validate() has the
// last word. submit() and entry() are SECURITY DEFINER: a role needs
// EXECUTE on them alone, not rights on the table. {schema} is the queue's
// schema quoted, {schema_name} as it is (a checked plain identifier).
constexpr const char* migration_5 = R"sql(
CREATE TABLE inbox (
  id                     bigserial PRIMARY KEY,
  type                   text COLLATE "C" NOT NULL CHECK (octet_length(type) <= 256),
  payload                bytea   NOT NULL DEFAULT '\x',
  name                   text COLLATE "C" CHECK (octet_length(name) <= 256),
  group_key              text COLLATE "C" CHECK (octet_length(group_key) <= 256),
  priority               bigint,
  weight                 bigint,
  run_at                 bigint,
  delay_ms               bigint,
  ttl_ms                 bigint,
  max_retries            bigint,
  backoff_initial_ms     bigint,
  backoff_multiplier     double precision,
  backoff_randomization  double precision,
  backoff_kind           text COLLATE "C" CHECK (backoff_kind IN ('exponential', 'constant',
                                                                  'linear')),
  backoff_max_ms         bigint,
  timeout_ms             bigint,
  heartbeat_increment_ms bigint,
  unique_key             text COLLATE "C" CHECK (octet_length(unique_key) <= 256),
  on_duplicate           text COLLATE "C" CHECK (on_duplicate IN ('skip', 'replace', 'reject')),
  unique_hold_ms         bigint,
  result_ttl_ms          bigint,
  idempotency_key        text COLLATE "C" CHECK (octet_length(idempotency_key) <= 256),
  io_read_bytes          bigint,
  io_write_bytes         bigint,
  submitted_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
  taken_at               bigint,
  job                    uuid,
  refused_code           text COLLATE "C",
  refused_field          text COLLATE "C",
  refused_message        text COLLATE "C"
);
CREATE INDEX inbox_waiting ON inbox (id) WHERE taken_at IS NULL;
CREATE INDEX inbox_by_taken_at ON inbox (taken_at) WHERE taken_at IS NOT NULL;
CREATE FUNCTION submit(
  type text, payload bytea DEFAULT '\x', name text DEFAULT NULL, "group" text DEFAULT NULL,
  priority bigint DEFAULT NULL, weight bigint DEFAULT NULL, run_at_ms bigint DEFAULT NULL,
  delay_ms bigint DEFAULT NULL, ttl_ms bigint DEFAULT NULL, max_retries bigint DEFAULT NULL,
  backoff_initial_ms bigint DEFAULT NULL, backoff_multiplier double precision DEFAULT NULL,
  backoff_randomization double precision DEFAULT NULL, backoff_kind text DEFAULT NULL,
  backoff_max_ms bigint DEFAULT NULL, timeout_ms bigint DEFAULT NULL,
  heartbeat_increment_ms bigint DEFAULT NULL, unique_key text DEFAULT NULL,
  on_duplicate text DEFAULT NULL, unique_hold_ms bigint DEFAULT NULL,
  result_ttl_ms bigint DEFAULT NULL, idempotency_key text DEFAULT NULL,
  io_read_bytes bigint DEFAULT NULL, io_write_bytes bigint DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  entry bigint;
BEGIN
  INSERT INTO {schema}.inbox (type, payload, name, group_key, priority, weight, run_at,
    delay_ms, ttl_ms, max_retries, backoff_initial_ms, backoff_multiplier,
    backoff_randomization, backoff_kind, backoff_max_ms, timeout_ms, heartbeat_increment_ms,
    unique_key, on_duplicate,
    unique_hold_ms, result_ttl_ms, idempotency_key, io_read_bytes, io_write_bytes)
  VALUES (submit.type, coalesce(submit.payload, '\x'), submit.name, submit."group",
    submit.priority, submit.weight, submit.run_at_ms, submit.delay_ms, submit.ttl_ms,
    submit.max_retries, submit.backoff_initial_ms, submit.backoff_multiplier,
    submit.backoff_randomization, submit.backoff_kind, submit.backoff_max_ms, submit.timeout_ms,
    submit.heartbeat_increment_ms,
    submit.unique_key, submit.on_duplicate, submit.unique_hold_ms, submit.result_ttl_ms,
    submit.idempotency_key, submit.io_read_bytes, submit.io_write_bytes)
  RETURNING id INTO entry;
  -- Delivered at commit, and not at all on rollback.
  PERFORM pg_notify('ergon_inbox', '{schema_name}');
  RETURN entry;
END
$fn$;
REVOKE ALL ON FUNCTION submit FROM PUBLIC;
CREATE FUNCTION entry(number bigint)
RETURNS TABLE (taken_at bigint, job uuid, refused_code text, refused_field text,
               refused_message text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT e.taken_at, e.job, e.refused_code, e.refused_field, e.refused_message
  FROM {schema}.inbox AS e WHERE e.id = number
$fn$;
REVOKE ALL ON FUNCTION entry FROM PUBLIC;
)sql";

// Version 6 is SQLite's version 9 (schema.cpp says why).
constexpr const char* migration_6 = ERGON_SQL_BACKOFF_KINDS("bigint");

// Version 7 is SQLite's version 10 (schema.cpp says why).
constexpr const char* migration_7 = ERGON_SQL_DEPENDENCIES("bigint", "");

// Version 8 is SQLite's version 11 (schema.cpp says why).
constexpr const char* migration_8 = ERGON_SQL_ONLY_DEPENDENCY("bigint");

// Version 9 is SQLite's version 12.
constexpr const char* migration_9 = ERGON_SQL_CONTROLS("bigint", "double precision", "");

// Version 10 is SQLite's version 13.
constexpr const char* migration_10 = ERGON_SQL_WORKERS("bigint");

// Version 11 is SQLite's version 14.
constexpr const char* migration_11 = ERGON_SQL_JOB_LOGS("bigint", "");

// Version 12 is SQLite's version 15.
constexpr const char* migration_12 = ERGON_SQL_JOB_TAGS("bigint", "text COLLATE \"C\"", "");

// Version 13 is SQLite's version 16.
constexpr const char* migration_13 = ERGON_SQL_SEED_CONTROLS("bigint");

// Version 14 is SQLite's version 17.
constexpr const char* migration_14 = ERGON_SQL_RECURRING_PAUSES("bigint");

constexpr const char* migrations[] = {migration_1, migration_2, migration_3, migration_4,
                                      migration_5, migration_6, migration_7, migration_8,
                                      migration_9, migration_10, migration_11, migration_12,
                                      migration_13, migration_14};
constexpr int migration_count = sizeof(migrations) / sizeof(migrations[0]);

constexpr const char* create_schema_version =
  "CREATE TABLE schema_version (version bigint NOT NULL)";
constexpr const char* read_version = "SELECT version FROM schema_version";
constexpr const char* set_version = "UPDATE schema_version SET version = ?1";
constexpr const char* first_version = "INSERT INTO schema_version (version) VALUES (0)";
constexpr const char* list_tables =
  "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1";
constexpr const char* read_schema = "SELECT current_schema() IS NOT NULL";
constexpr const char* find_schema = "SELECT 1 FROM pg_namespace WHERE nspname = ?1";
// One migrating process at a time, whatever else runs.
constexpr const char* lock_migrations =
  "SELECT pg_advisory_xact_lock(hashtext('ergon migrate ' || current_setting('search_path')))";

// `sql` with each {schema} replaced by `schema` quoted (a reserved word
// such as "order" is a plain identifier too), and each {schema_name} by
// `schema` as it is.
std::string with_schema(std::string sql, const std::string& schema) {
  auto put = [&](std::string_view mark, const std::string& value) {
    for (auto at = sql.find(mark); at != std::string::npos;
         at = sql.find(mark, at + value.size()))
      sql.replace(at, mark.size(), value);
  };
  put("{schema}", '"' + schema + '"');
  put("{schema_name}", schema);
  return sql;
}

template <class Body>
status run_in_tx(pg_db& d, Body&& body) {
  if (auto st = d.exec("BEGIN"); !st)
    return st;
  auto st = body();
  if (st)
    st = d.exec("COMMIT");
  if (!st)
    d.rollback();
  return st;
}

result<std::set<std::string>> tables_of(pg_db& d) {
  auto s = d.prepare(list_tables);
  if (!s)
    return s.error();
  std::set<std::string> out;
  while ((*s)->step())
    out.insert((*s)->column_text(0));
  if (!(*s)->step_status())
    return (*s)->step_status();
  return out;
}

}  // namespace

int current_postgres_schema_version() noexcept {
  return migration_count;
}

result<int> postgres_schema_version(pg_db& d) {
  auto tables = tables_of(d);
  if (!tables)
    return tables.error();
  if (!tables->count("schema_version"))
    return 0;
  auto read = d.prepare(read_version);
  if (!read)
    return read.error();
  if (!(*read)->step())
    return (*read)->step_status() ? 0 : result<int>{(*read)->step_status()};
  auto v = static_cast<int>((*read)->column_int(0));
  (*read)->reset();
  return v;
}

status migrate_postgres(pg_db& d, int target) {
  const auto& schema = d.options().schema;
  // Only a missing schema is created: CREATE SCHEMA IF NOT EXISTS needs
  // CREATE on the database even when the schema is there.
  auto exists = d.prepare(find_schema);
  if (!exists)
    return exists.error();
  (*exists)->bind_text(1, schema);
  bool missing = !(*exists)->step();
  if (!(*exists)->step_status())
    return (*exists)->step_status();
  (*exists)->reset();
  if (missing) {
    // The schema's name is a checked plain identifier (pg_db::open).
    auto create = "CREATE SCHEMA IF NOT EXISTS \"" + schema + "\"";
    if (auto st = d.exec(create.c_str()); !st)
      return st;
  }
  auto has_schema = d.prepare(read_schema);
  if (!has_schema)
    return has_schema.error();
  if (!(*has_schema)->step() || (*has_schema)->column_int(0) == 0)
    return (*has_schema)->step_status()
             ? status{error::internal, d.location() + ": schema " + schema + " is not searched"}
             : (*has_schema)->step_status();
  (*has_schema)->reset();
  return run_in_tx(d, [&]() -> status {
    auto locked = d.prepare(lock_migrations);
    if (!locked)
      return locked.error();
    if (auto st = d.run(**locked); !st)
      return st;
    auto tables = tables_of(d);
    if (!tables)
      return tables.error();
    if (!tables->count("schema_version")) {
      if (!tables->empty()) {
        std::string names;
        for (auto& t : *tables)
          names += (names.empty() ? "" : ", ") + t;
        return {error::corrupt, d.location() + ": schema " + schema
                                  + " is not an ergon schema: it holds other tables (" + names
                                  + "); ergon leaves it unchanged"};
      }
      if (auto st = d.exec(create_schema_version); !st)
        return st;
      if (auto st = d.exec(first_version); !st)
        return st;
    }
    auto read = d.prepare(read_version);
    if (!read)
      return read.error();
    if (!(*read)->step())
      return (*read)->step_status() ? status{error::corrupt, d.location()
                                                               + ": schema_version is empty"}
                                    : (*read)->step_status();
    auto version = (*read)->column_int(0);
    (*read)->reset();
    if (version > migration_count)
      return {error::corrupt, d.location() + ": schema version " + std::to_string(version)
                                + " is newer than this ergon build supports ("
                                + std::to_string(migration_count) + ")"};
    for (auto v = version; v < std::min<int64_t>(target, migration_count); ++v) {
      if (auto st = d.exec(with_schema(migrations[v], schema).c_str()); !st)
        return st;
      auto set = d.prepare(set_version);
      if (!set)
        return set.error();
      (*set)->bind(1, v + 1);
      if (auto st = d.run(**set); !st)
        return st;
    }
    return status{};
  });
}

}  // namespace ergon::storage
