#include "ergon/storage/schema.hpp"

#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "schema_steps.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace ergon::storage {
namespace {

// Integers stored here are frozen: status is ergon::job_status, outcome is
// ergon::attempt_outcome. All times are int64 ms since the Unix epoch (UTC).
constexpr const char* migration_1 = R"sql(
CREATE TABLE jobs (
  id                     INTEGER PRIMARY KEY,
  external_id            BLOB    NOT NULL,
  type                   TEXT    NOT NULL,
  name                   TEXT,
  group_key              TEXT,
  priority               INTEGER NOT NULL,
  weight                 INTEGER NOT NULL,
  run_at                 INTEGER NOT NULL,
  ready_since            INTEGER NOT NULL,
  deadline               INTEGER,
  payload                BLOB    NOT NULL,
  checkpoint             BLOB,
  result                 BLOB,
  status                 INTEGER NOT NULL,
  current_try            INTEGER NOT NULL DEFAULT 0,
  max_retries            INTEGER NOT NULL,
  backoff_initial_ms     INTEGER NOT NULL,
  backoff_multiplier     REAL    NOT NULL,
  backoff_randomization  REAL    NOT NULL,
  timeout_ms             INTEGER NOT NULL,
  heartbeat_increment_ms INTEGER NOT NULL,
  attempt_token          INTEGER,
  expires_at             INTEGER,
  added_at               INTEGER NOT NULL,
  started_at             INTEGER,
  finished_at            INTEGER,
  last_outcome           INTEGER,
  last_message           TEXT
);
-- ready_since starts the priority-aging clock: when the job first became
-- due. Retries keep it; a new submission gets its own.
-- No index on external_id: the id embeds the row id (see job_ids.hpp). No
-- index on status either: start-up scans from meta.unfinished_low_mark.
-- Each index costs a page write per commit (measured: 75k -> 39k commits/s).
CREATE INDEX jobs_by_name ON jobs(name) WHERE name IS NOT NULL;
-- One row per attempt that was followed by a retry. The latest attempt lives
-- in jobs (started_at, finished_at, last_outcome, last_message), so a job
-- that succeeds or fails on its last attempt costs no row here.
CREATE TABLE attempts (
  job_id      INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  try         INTEGER NOT NULL,
  started_at  INTEGER NOT NULL,
  finished_at INTEGER NOT NULL,
  outcome     INTEGER NOT NULL,
  message     TEXT    NOT NULL,
  PRIMARY KEY (job_id, try)
) WITHOUT ROWID;
-- id_tag: 30 random bits in every job id of this database.
-- unfinished_low_mark: no pending or running job has a lower row id.
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('id_tag', abs(random()) % 1073741824);
INSERT INTO meta (key, value) VALUES ('unfinished_low_mark', 0);
)sql";

// Counts of finished jobs per (type, status), so that open and the inspector
// never group the finished history: unfinished jobs are counted by a range
// scan from meta.unfinished_low_mark, which open reads anyway. A finished
// status is final, so only the writes that finish jobs add to it
// (add_finished_counts), in their own transaction; submits and claims don't.
// Filled once from the jobs, so a version-1 file arrives with its counts.
constexpr const char* migration_2 = R"sql(
CREATE TABLE finished_counts (
  type   TEXT    NOT NULL,
  status INTEGER NOT NULL,
  count  INTEGER NOT NULL,
  PRIMARY KEY (type, status)
) WITHOUT ROWID;
INSERT INTO finished_counts (type, status, count)
  SELECT type, status, count(*) FROM jobs WHERE status >= 2 GROUP BY type, status;
)sql";

// Recurring jobs and unique keys.
//  - recurring_jobs: a schedule and a job template. `since` is when the
//    schedule last changed (an `every` schedule counts from it); the last_*
//    columns describe the instance that ended last.
//  - jobs.recurring_id and jobs.scheduled_at mark an instance. The partial
//    unique index lets the database refuse a second unfinished instance of
//    one recurring job, whatever path tried to create it. It holds no entry
//    for other jobs, so they pay nothing for it.
//  - unique_keys: who holds a unique key. held_until is NULL while the job
//    is unfinished, then its finish time plus its hold; a row whose
//    held_until has passed is free and is overwritten by the next holder.
//    `job` is the holder's external id, which outlives a deleted row.
constexpr const char* migration_3 = R"sql(
CREATE TABLE recurring_jobs (
  id                     TEXT    PRIMARY KEY,
  schedule               TEXT    NOT NULL,
  time_zone              TEXT    NOT NULL,
  catch_up               INTEGER NOT NULL,
  since                  INTEGER NOT NULL,
  type                   TEXT    NOT NULL,
  name                   TEXT,
  group_key              TEXT,
  priority               INTEGER NOT NULL,
  weight                 INTEGER NOT NULL,
  ttl_ms                 INTEGER,
  payload                BLOB    NOT NULL,
  max_retries            INTEGER NOT NULL,
  backoff_initial_ms     INTEGER NOT NULL,
  backoff_multiplier     REAL    NOT NULL,
  backoff_randomization  REAL    NOT NULL,
  timeout_ms             INTEGER NOT NULL,
  heartbeat_increment_ms INTEGER NOT NULL,
  added_at               INTEGER NOT NULL,
  updated_at             INTEGER NOT NULL,
  last_job               BLOB,
  last_scheduled_at      INTEGER,
  last_finished_at       INTEGER,
  last_status            INTEGER
) WITHOUT ROWID;
ALTER TABLE jobs ADD COLUMN recurring_id TEXT;
ALTER TABLE jobs ADD COLUMN scheduled_at INTEGER;
ALTER TABLE jobs ADD COLUMN unique_key TEXT;
ALTER TABLE jobs ADD COLUMN unique_hold_ms INTEGER;
CREATE UNIQUE INDEX jobs_one_unfinished_instance ON jobs(recurring_id)
  WHERE recurring_id IS NOT NULL AND status < 2;
CREATE TABLE unique_keys (
  key        TEXT    PRIMARY KEY,
  job_id     INTEGER NOT NULL,
  job        BLOB    NOT NULL,
  held_until INTEGER
) WITHOUT ROWID;
)sql";

// Job outcomes.
//  - cancel_requested_at: cancel(id) of a running job. The attempt then
//    ends `cancelled`, however it ends, unless it succeeds first.
//  - result_ttl_ms / result_expires_at: a result is dropped (the row
//    stays) once result_expires_at passes; set when the job succeeds.
//  - try_base: tries spent before retry_failed last requeued the job; the
//    retry limit and the backoff count from it.
//  - progress_*: the last progress report of the running or finished
//    attempt; progress_eta is the time the reporter expects it to finish.
//  - jobs_unsuccessful: failed, cancelled and expired jobs in id order, for
//    dead letters, listings and the retention sweeper. Partial, so the
//    common path pays nothing: an index that every submit or success
//    touches measured 20% off W2 drain and 45% off single submits (see
//    docs/performance.md). Pending and running jobs are found above the
//    unfinished low mark, succeeded ones in id order, as most rows are.
constexpr const char* migration_4 = R"sql(
ALTER TABLE jobs ADD COLUMN cancel_requested_at INTEGER;
ALTER TABLE jobs ADD COLUMN try_base INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN result_ttl_ms INTEGER;
ALTER TABLE jobs ADD COLUMN result_expires_at INTEGER;
ALTER TABLE jobs ADD COLUMN progress_done INTEGER;
ALTER TABLE jobs ADD COLUMN progress_total INTEGER;
ALTER TABLE jobs ADD COLUMN progress_message TEXT;
ALTER TABLE jobs ADD COLUMN progress_at INTEGER;
ALTER TABLE jobs ADD COLUMN progress_eta INTEGER;
CREATE INDEX jobs_unsuccessful ON jobs(status, id) WHERE status >= 3;
CREATE INDEX jobs_by_result_expiry ON jobs(result_expires_at)
  WHERE result_expires_at IS NOT NULL;
)sql";

// Dispatch under pressure (docs/scheduling.md).
//  - yields: attempts that gave their slot to higher-priority work
//    (preemption) and put the job back without spending a try.
//  - io_read_bytes / io_write_bytes: the I/O a job expects to do, for the
//    dispatcher's I/O budget; NULL: none declared.
constexpr const char* migration_5 = R"sql(
ALTER TABLE jobs ADD COLUMN yields INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN io_read_bytes INTEGER;
ALTER TABLE jobs ADD COLUMN io_write_bytes INTEGER;
)sql";

// Indexes that no claim or success changes, so that PostgreSQL can update a
// job row in place (a HOT update: no new index entries) on the hot path.
// An index names its columns, in its keys or in its predicate, and any
// change to such a column rules that out for the whole row. `status`
// changes at every claim and every end, so no index names it any more:
//  - dead_letter_status: the status of a job that ended failed, cancelled
//    or expired, NULL otherwise; jobs_unsuccessful's key;
//  - unfinished_instance_of: a recurring job's id while its instance is
//    pending or running, NULL otherwise; jobs_one_unfinished_instance's
//    key.
constexpr const char* migration_6 =
  "ALTER TABLE jobs ADD COLUMN dead_letter_status INTEGER;\n"
  "ALTER TABLE jobs ADD COLUMN unfinished_instance_of TEXT;\n" ERGON_SQL_STATUS_FREE_INDEXES;

// held_by: who holds a running job's attempt when that is a worker in
// another process, "<node>/<worker>" (claim_jobs_args::holder); NULL for
// the owner's own workers. Meaningful only while the job runs: a later
// claim sets it again. No index names it, so claims stay in place (HOT).
constexpr const char* migration_7 = "ALTER TABLE jobs ADD COLUMN held_by TEXT;\n";

// idempotency_keys: the key a submitted job took (job::idempotency_key),
// the job's id, a fingerprint of its other fields, and when the key is
// free again. Expired rows count as none; the retention sweeper deletes
// them (expire_idempotency_keys).
constexpr const char* migration_8 = R"sql(
CREATE TABLE idempotency_keys (
  key         TEXT PRIMARY KEY,
  job         BLOB NOT NULL,
  fingerprint INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
)sql";

// Version 9: retry policies of a kind (constant, linear, exponential) and
// with a cap (job_info.hpp's backoff_policy), for jobs and the templates
// of recurring jobs. 0 is exponential and no cap, as every row was.
constexpr const char* migration_9 = ERGON_SQL_BACKOFF_KINDS("INTEGER");

// Version 10: dependencies between jobs (job::depends_on).
//  - job_dependencies: one row per edge, the dependency first so that the
//    end of a job finds what waits on it by the key; job_dependencies_of
//    lists a job's own dependencies (job_info). Edges go with either job's
//    row: delete_finished, the one write that deletes jobs, deletes them.
//    No foreign keys: PostgreSQL checks one with a trigger per row, which
//    made a 10,000-job fan-out cost 3.8 times a plain batch.
//  - jobs.waiting_on: how many dependencies of a `waiting` job (status 6)
//    have not ended; the end of the last one releases it.
//  - jobs.dependency_policy: job::on_dependency_failure.
//  - jobs.has_dependents: bit 1 once a job that waits on this one was
//    submitted, so the end of a job looks for dependents only then (a
//    probe of the edges in every success cost the hot path a subplan, and
//    PostgreSQL plans it as a scan while the table is new); bit 2 once it
//    spawned children, whose unfinished ones its unsuccessful end cancels.
//  - jobs.parent: the row of the job whose code submitted this one
//    (job_context::submit_children); jobs_by_parent finds a parent's
//    children. It never changes, so the index keeps updates in place.
// No index names either column, so claims and ends stay in place on
// PostgreSQL (HOT).
constexpr const char* migration_10 = ERGON_SQL_DEPENDENCIES("INTEGER", " WITHOUT ROWID");

// Version 11: a job's only dependency in its row (jobs.only_dependency,
// found by jobs_by_only_dependency), and the view dependency_edges over
// both places. A 10,000-job fan-out wrote 10,000 edge rows, each a heap
// tuple and two index entries; now each job writes one index entry. The
// column never changes once written, so ends stay HOT; a deleted
// dependency leaves it naming a row no job has (row ids are never used
// twice), which every reader's join skips.
constexpr const char* migration_11 = ERGON_SQL_ONLY_DEPENDENCY("INTEGER");

// Version 12: run-time controls (queue::pause_queue, set_group, ...).
constexpr const char* migration_12 = ERGON_SQL_CONTROLS("INTEGER", "REAL", " WITHOUT ROWID");

// Version 13: the worker of each attempt (schema_steps.hpp).
constexpr const char* migration_13 = ERGON_SQL_WORKERS("INTEGER");

// Version 14: job logs (schema_steps.hpp).
constexpr const char* migration_14 = ERGON_SQL_JOB_LOGS("INTEGER", " WITHOUT ROWID");

// Version 15: job tags (schema_steps.hpp).
constexpr const char* migration_15 = ERGON_SQL_JOB_TAGS("INTEGER", "TEXT", " WITHOUT ROWID");

// Version 16: recurring jobs that stop after N runs, and a ttl from the
// first attempt (schema_steps.hpp).
constexpr const char* migration_16 = ERGON_SQL_SEED_CONTROLS("INTEGER");

// Version 17: pausing one recurring job (schema_steps.hpp).
constexpr const char* migration_17 = ERGON_SQL_RECURRING_PAUSES("INTEGER");

constexpr const char* migrations[] = {migration_1, migration_2, migration_3, migration_4,
                                      migration_5, migration_6, migration_7, migration_8,
                                      migration_9, migration_10, migration_11,
                                      migration_12, migration_13, migration_14, migration_15,
                                      migration_16, migration_17};
constexpr int migration_count = sizeof(migrations) / sizeof(migrations[0]);

constexpr const char* read_version = "PRAGMA user_version";
constexpr const char* read_application_id = "PRAGMA application_id";
constexpr const char* select_tables =
  "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'";

// In the transaction that creates the tables, so no ergon file is ever
// without it. A pragma takes no bound value; the number is our constant.
const std::string mark_application_id =
  "PRAGMA application_id = " + std::to_string(application_id);

// The first 16 bytes of every SQLite database file.
constexpr char sqlite_magic[] = "SQLite format 3";

// Reads the file's marks on a connection that only reads: it takes a shared
// lock, and closing it writes nothing (no pragma ran).
status inspect_marks(const std::string& path, bool read_only, int32_t& app_id, int& version,
                     std::set<std::string>& tables) {
  sqlite3* handle = nullptr;
  // Read-write unless asked not to, so that closing, as the last connection,
  // removes the -wal and -shm files a WAL database gets while it is open.
  int rc = SQLITE_CANTOPEN;
  if (!read_only)
    rc = sqlite3_open_v2(path.c_str(), &handle, SQLITE_OPEN_READWRITE, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_close(handle);
    handle = nullptr;
    rc = sqlite3_open_v2(path.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr);
  }
  auto fail = [&](int code) {
    status st{error_from_sqlite(code), path + ": " + sqlite3_errmsg(handle)};
    sqlite3_close(handle);
    return st;
  };
  if (rc != SQLITE_OK)
    return fail(rc);
  auto query = [&](const char* sql, auto&& row) {
    sqlite3_stmt* s = nullptr;
    int r = sqlite3_prepare_v2(handle, sql, -1, &s, nullptr);
    if (r == SQLITE_OK)
      while ((r = sqlite3_step(s)) == SQLITE_ROW)
        row(s);
    sqlite3_finalize(s);
    return r == SQLITE_DONE ? SQLITE_OK : r;
  };
  if ((rc = query(read_application_id,
                  [&](sqlite3_stmt* s) { app_id = sqlite3_column_int(s, 0); }))
        != SQLITE_OK
      || (rc = query(read_version, [&](sqlite3_stmt* s) { version = sqlite3_column_int(s, 0); }))
           != SQLITE_OK
      || (rc = query(select_tables,
                     [&](sqlite3_stmt* s) {
                       tables.insert(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
                     }))
           != SQLITE_OK)
    return fail(rc);
  sqlite3_close(handle);
  return {};
}

}  // namespace

status check_ergon_file(const std::string& path, bool read_only) {
  auto refuse = [&](const std::string& what) {
    return status{error::corrupt, path + " is not an ergon database: " + what
                                    + "; ergon leaves it unchanged"};
  };
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return {};  // no file yet: SQLite reports a path it can't create
  char header[16] = {};
  auto n = std::fread(header, 1, sizeof(header), f);
  std::fclose(f);
  if (n == 0)
    return {};
  if (n < sizeof(header) || std::memcmp(header, sqlite_magic, sizeof(sqlite_magic)) != 0)
    return refuse("it is not a SQLite file");
  int32_t app_id = 0;
  int version = 0;
  std::set<std::string> tables;
  if (auto st = inspect_marks(path, read_only, app_id, version, tables); !st)
    return st;
  if (app_id == application_id)
    return {};
  if (app_id != 0)
    return refuse("its application_id is " + std::to_string(app_id) + ", not ergon's");
  if (tables.empty())
    return {};
  if (version == 1 && tables == std::set<std::string>{"attempts", "jobs", "meta"})
    return {};
  std::string names;
  for (auto& t : tables)
    names += (names.empty() ? "" : ", ") + t;
  return refuse("it holds other tables (" + names + ")");
}

int current_schema_version(engine e) noexcept {
  return e == engine::sqlite ? migration_count : current_postgres_schema_version();
}

status migrate(db& d) {
  return migrate(d, current_schema_version(d.engine()));
}

result<int> schema_version(db& d) {
  if (d.engine() == engine::postgres)
    return postgres_schema_version(static_cast<pg_db&>(d));
  auto text = static_cast<sqlite_db&>(d).pragma_text(read_version);
  if (!text)
    return text.error();
  return std::stoi(*text);
}

status migrate(db& d, int target) {
  if (d.engine() == engine::postgres)
    return migrate_postgres(static_cast<pg_db&>(d), target);
  return migrate_sqlite(static_cast<sqlite_db&>(d), target);
}

status migrate_sqlite(sqlite_db& d, int target) {
  auto version_text = d.pragma_text(read_version);
  if (!version_text)
    return version_text.error();
  int version = std::stoi(*version_text);
  if (version > migration_count)
    return {error::corrupt,
            d.location() + ": schema version " + std::to_string(version)
              + " is newer than this ergon build supports ("
              + std::to_string(migration_count) + ")"};
  for (int v = version; v < std::min(target, migration_count); ++v) {
    if (auto st = d.exec("BEGIN IMMEDIATE"); !st)
      return st;
    auto st = d.exec(migrations[v]);
    if (st) {
      // user_version can't be a bound parameter; the value is our own integer.
      auto set_version = "PRAGMA user_version = " + std::to_string(v + 1);
      st = d.exec(set_version.c_str());
    }
    if (st)
      st = d.exec(mark_application_id.c_str());
    if (st)
      st = d.exec("COMMIT");
    if (!st) {
      d.exec("ROLLBACK");
      return st;
    }
  }
  auto id_text = d.pragma_text(read_application_id);
  if (!id_text)
    return id_text.error();
  // Files made before the mark existed get it now.
  if (std::stoll(*id_text) != application_id)
    return d.exec(mark_application_id.c_str());
  return {};
}

}  // namespace ergon::storage
