// Each engine's migrations (schema.cpp, pg_schema.cpp). Internal to storage/.
#pragma once

#include "ergon/error.hpp"

// SQLite's version 9 and PostgreSQL's 6 (schema.cpp says why), with the
// engine's integer type.
#define ERGON_SQL_BACKOFF_KINDS(integer)                                              \
  "ALTER TABLE jobs ADD COLUMN backoff_kind " integer " NOT NULL DEFAULT 0;\n"         \
  "ALTER TABLE jobs ADD COLUMN backoff_max_ms " integer " NOT NULL DEFAULT 0;\n"       \
  "ALTER TABLE recurring_jobs ADD COLUMN backoff_kind " integer " NOT NULL DEFAULT 0;\n" \
  "ALTER TABLE recurring_jobs ADD COLUMN backoff_max_ms " integer " NOT NULL DEFAULT 0;\n"

// SQLite's version 10 and PostgreSQL's 7 (schema.cpp says why), with the
// engine's integer type and the end of a table's definition.
#define ERGON_SQL_DEPENDENCIES(integer, table_end)                                      \
  "ALTER TABLE jobs ADD COLUMN waiting_on " integer " NOT NULL DEFAULT 0;\n"             \
  "ALTER TABLE jobs ADD COLUMN dependency_policy " integer " NOT NULL DEFAULT 0;\n"      \
  "ALTER TABLE jobs ADD COLUMN has_dependents " integer " NOT NULL DEFAULT 0;\n"         \
  "ALTER TABLE jobs ADD COLUMN parent " integer ";\n"                                   \
  "CREATE INDEX jobs_by_parent ON jobs (parent, id) WHERE parent IS NOT NULL;\n"        \
  "CREATE TABLE job_dependencies (\n"                                                  \
  "  depends_on " integer " NOT NULL,\n"                                                \
  "  job_id     " integer " NOT NULL,\n"                                                \
  "  PRIMARY KEY (depends_on, job_id)\n"                                               \
  ")" table_end ";\n"                                                                  \
  "CREATE INDEX job_dependencies_of ON job_dependencies (job_id, depends_on);\n"

// A job's only dependency in its own row (jobs.only_dependency) instead of
// an edge: a fan-out's jobs each write one index entry rather than an edge
// row and its two. dependency_edges is every edge either way; readers use
// it, and only the writes know the two places. has_dependents' bits 1
// (depended on, now also by jobs that came after it ended) and 4 (its own
// dependencies are edges) tell listings where to look.
#define ERGON_SQL_ONLY_DEPENDENCY(integer)                                                 \
  "ALTER TABLE jobs ADD COLUMN only_dependency " integer ";\n"                             \
  "CREATE INDEX jobs_by_only_dependency ON jobs (only_dependency, id)\n"                  \
  "  WHERE only_dependency IS NOT NULL;\n"                                                \
  "CREATE VIEW dependency_edges (depends_on, job_id) AS\n"                                \
  "  SELECT depends_on, job_id FROM job_dependencies UNION ALL\n"                         \
  "  SELECT only_dependency, id FROM jobs WHERE only_dependency IS NOT NULL;\n"            \
  "UPDATE jobs SET has_dependents = has_dependents | 1\n"                                  \
  "  WHERE id IN (SELECT depends_on FROM job_dependencies);\n"                             \
  "UPDATE jobs SET has_dependents = has_dependents | 4\n"                                  \
  "  WHERE id IN (SELECT job_id FROM job_dependencies);\n"

// SQLite's version 12 and PostgreSQL's 9: run-time controls (pauses of the
// queue, a group or a type, and settings changed while the queue runs),
// kept so that they survive a reopen and a takeover. A NULL setting is
// the configured one; max_running 0 and rate_per_second 0 mean "none".
#define ERGON_SQL_CONTROLS(integer, real, table_end)                                      \
  "CREATE TABLE controls (\n"                                                             \
  "  scope           " integer " NOT NULL,\n"                                             \
  "  name            TEXT NOT NULL,\n"                                                    \
  "  paused_since    " integer ",\n"                                                      \
  "  paused_until    " integer ",\n"                                                      \
  "  weight          " integer ",\n"                                                      \
  "  min_slots       " integer ",\n"                                                      \
  "  max_running     " integer ",\n"                                                      \
  "  rate_per_second " real ",\n"                                                         \
  "  rate_burst      " integer ",\n"                                                      \
  "  changed_at      " integer " NOT NULL,\n"                                             \
  "  PRIMARY KEY (scope, name)\n"                                                         \
  ")" table_end ";\n"

// SQLite's version 13 and PostgreSQL's 10: which worker ran each attempt.
// A row per registration (its id is the dispatcher's worker id, which
// counts on from the highest here at every open); jobs.worker and
// attempts.worker name it. No index names jobs.worker, so claims stay in
// place (HOT). left_at: when it unregistered or went down, or when the
// next open found it gone; the retention sweeper deletes rows by it.
#define ERGON_SQL_WORKERS(integer)                                                       \
  "CREATE TABLE workers (\n"                                                             \
  "  id            " integer " PRIMARY KEY,\n"                                           \
  "  name          TEXT NOT NULL,\n"                                                     \
  "  host          TEXT NOT NULL,\n"                                                     \
  "  pid           " integer " NOT NULL,\n"                                              \
  "  node          TEXT,\n"                                                              \
  "  registered_at " integer " NOT NULL,\n"                                              \
  "  left_at       " integer "\n"                                                        \
  ");\n"                                                                                 \
  "CREATE INDEX workers_by_left_at ON workers (left_at) WHERE left_at IS NOT NULL;\n"    \
  "ALTER TABLE jobs ADD COLUMN worker " integer ";\n"                                    \
  "ALTER TABLE attempts ADD COLUMN worker " integer ";\n"

// SQLite's version 14 and PostgreSQL's 11: the lines job code wrote to
// its attempts (job_context::log), keyed by the attempt's try, its token
// (a yielded attempt resumes on the same try, numbering its lines from 0
// again) and the line's number within that run; and the count of lines
// each run dropped past its worker's bounds. Both go with their job (ON
// DELETE CASCADE).
#define ERGON_SQL_JOB_LOGS(integer, table_end)                                        \
  "CREATE TABLE job_logs (\n"                                                         \
  "  job_id " integer " NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,\n"            \
  "  try    " integer " NOT NULL,\n"                                                  \
  "  token  " integer " NOT NULL,\n"                                                  \
  "  seq    " integer " NOT NULL,\n"                                                  \
  "  at     " integer " NOT NULL,\n"                                                  \
  "  level  " integer " NOT NULL,\n"                                                  \
  "  text   TEXT NOT NULL,\n"                                                         \
  "  PRIMARY KEY (job_id, try, token, seq)\n"                                         \
  ")" table_end ";\n"                                                                 \
  "CREATE TABLE job_log_drops (\n"                                                    \
  "  job_id  " integer " NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,\n"           \
  "  try     " integer " NOT NULL,\n"                                                 \
  "  token   " integer " NOT NULL,\n"                                                 \
  "  dropped " integer " NOT NULL,\n"                                                 \
  "  PRIMARY KEY (job_id, try, token)\n"                                              \
  ")" table_end ";\n"

// SQLite's version 15 and PostgreSQL's 12: job tags (job::tags), a row
// per tag, found by key and value through job_tags_by_value and by key
// prefix through its key column. They go with their job (ON DELETE
// CASCADE); jobs.has_dependents' bit 8 says a job has some, so a listing
// reads them only then. PostgreSQL compares keys as bytes ("C"), which a
// prefix's range needs.
#define ERGON_SQL_JOB_TAGS(integer, text, table_end)                                  \
  "CREATE TABLE job_tags (\n"                                                         \
  "  job_id " integer " NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,\n"            \
  "  key    " text " NOT NULL,\n"                                                     \
  "  value  " text " NOT NULL,\n"                                                     \
  "  PRIMARY KEY (job_id, key)\n"                                                     \
  ")" table_end ";\n"                                                                 \
  "CREATE INDEX job_tags_by_value ON job_tags (key, value, job_id);\n"

// SQLite's version 16 and PostgreSQL's 13: recurring_job::max_executions
// and how many instances have run; and a ttl that counts from the first
// attempt (job::ttl_from): jobs.ttl_after_start holds it until the first
// claim turns it into the deadline.
#define ERGON_SQL_SEED_CONTROLS(integer)                                              \
  "ALTER TABLE recurring_jobs ADD COLUMN max_executions " integer ";\n"               \
  "ALTER TABLE recurring_jobs ADD COLUMN executions " integer " NOT NULL DEFAULT 0;\n" \
  "ALTER TABLE jobs ADD COLUMN ttl_after_start " integer ";\n"

// SQLite's version 17 and PostgreSQL's 14: a recurring job's own pause
// (queue::pause_recurring): its start and end, in the recurring job's row
// because it acts on the job's chain of instances.
#define ERGON_SQL_RECURRING_PAUSES(integer)                                  \
  "ALTER TABLE recurring_jobs ADD COLUMN paused_since " integer ";\n"        \
  "ALTER TABLE recurring_jobs ADD COLUMN paused_until " integer ";\n"

// The indexes that name no status (SQLite's version 6, PostgreSQL's 2; see
// schema.cpp), once their two columns are there: the columns are filled in
// before the old indexes go, with their help.
#define ERGON_SQL_STATUS_FREE_INDEXES                                                   \
  "UPDATE jobs SET dead_letter_status = status WHERE status >= 3;\n"                   \
  "UPDATE jobs SET unfinished_instance_of = recurring_id\n"                            \
  "  WHERE recurring_id IS NOT NULL AND status < 2;\n"                                 \
  "DROP INDEX jobs_unsuccessful;\n"                                                    \
  "DROP INDEX jobs_one_unfinished_instance;\n"                                         \
  "CREATE INDEX jobs_unsuccessful ON jobs(dead_letter_status, id)\n"                   \
  "  WHERE dead_letter_status IS NOT NULL;\n"                                          \
  "CREATE UNIQUE INDEX jobs_one_unfinished_instance ON jobs(unfinished_instance_of)\n" \
  "  WHERE unfinished_instance_of IS NOT NULL;\n"

namespace ergon::storage {

class sqlite_db;
class pg_db;

/// Brings the connection's schema to `target` (see migrate).
status migrate_sqlite(sqlite_db& d, int target);
status migrate_postgres(pg_db& d, int target);

/// The version of the schema on `d`; 0 before the first migration.
result<int> postgres_schema_version(pg_db& d);

/// The version pg_schema.cpp's migrations reach.
int current_postgres_schema_version() noexcept;

}  // namespace ergon::storage
