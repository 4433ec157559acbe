#include "ergon/storage/schema.hpp"

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

constexpr const char* migrations[] = {migration_1};
constexpr int migration_count = sizeof(migrations) / sizeof(migrations[0]);

constexpr const char* read_version = "PRAGMA user_version";

}  // namespace

int current_schema_version() noexcept {
  return migration_count;
}

status migrate(db& d) {
  auto version_text = d.pragma_text(read_version);
  if (!version_text)
    return version_text.error();
  int version = std::stoi(*version_text);
  if (version > migration_count)
    return {error::corrupt,
            d.path() + ": schema version " + std::to_string(version)
              + " is newer than this ergon build supports ("
              + std::to_string(migration_count) + ")"};
  for (int v = version; v < migration_count; ++v) {
    if (auto st = d.exec("BEGIN IMMEDIATE"); !st)
      return st;
    auto st = d.exec(migrations[v]);
    if (st) {
      // user_version can't be a bound parameter; the value is our own integer.
      auto set_version = "PRAGMA user_version = " + std::to_string(v + 1);
      st = d.exec(set_version.c_str());
    }
    if (st)
      st = d.exec("COMMIT");
    if (!st) {
      d.exec("ROLLBACK");
      return st;
    }
  }
  return {};
}

}  // namespace ergon::storage
