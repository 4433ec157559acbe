/*
 * The PostgreSQL counterpart of ../shared/limit/limit.c (issue 29): the
 * minimal SQL work per job from plain libpq, no framework, with the same
 * table, workloads and output format.
 *
 *   insert:   INSERT INTO ergon_limit_jobs(queue, payload, status, run_at, created_at) ...
 *   claim:    UPDATE ... SET status=1, attempts=attempts+1, locked_at=$2
 *               WHERE id = ANY(ARRAY(SELECT id ... WHERE queue=$1 AND status=0
 *                 AND run_at<=$2 ORDER BY run_at, id LIMIT k FOR UPDATE SKIP LOCKED))
 *             RETURNING id, payload
 *   complete: UPDATE ... SET status=2, done_at=$2 WHERE id = ANY($1)
 *
 * `= ANY(ARRAY(subquery))`, not `IN (subquery)`: PostgreSQL 15 plans the
 * IN form as a hash semi-join over a sequential scan.
 *
 * Modes:
 *   tx-per-op  one job per statement, each its own transaction (k = 1)
 *   batch256   256 jobs per statement and transaction: the inserts as one
 *              INSERT ... SELECT FROM unnest($1::text[]), the claims as one
 *              UPDATE with LIMIT 256, the completions as one UPDATE with
 *              the ids as an array parameter
 *   batchK     the same with K jobs (1 to 256) per statement
 *   cycleK     K jobs per statement, and one transaction per cycle that
 *              completes the last K and claims the next K (BEGIN, both
 *              statements and COMMIT in one round trip, pipelined): the
 *              shape of ergon's drain, whose commits carry a worker's
 *              outcomes and its next claims
 *   pipelined  batch256 in libpq's pipeline mode: up to 4 insert batches in
 *              flight, and each batch's completion sent together with the
 *              next batch's claim (one round trip for both)
 *
 * Usage: pg_limit CONNINFO [N] [RUNS] [MODE]
 *   Without MODE runs tx-per-op, batch256, then pipelined. The table is dropped and
 *   made again for every run. Prints "peer workload jobs_per_s - -" lines
 *   (median of RUNS), per-run details on stderr. The server's settings are
 *   its own: Debian's defaults keep fsync and synchronous_commit on.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 256 /* the largest batch */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
static long long now_ms_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(PGconn *c, const char *what) {
  fprintf(stderr, "%s: %s\n", what, c ? PQerrorMessage(c) : "?");
  exit(1);
}

/* Runs a command; dies unless it returns `want`. The caller clears. */
static PGresult *check(PGconn *c, PGresult *r, ExecStatusType want, const char *what) {
  if (PQresultStatus(r) != want) {
    fprintf(stderr, "%s: %s\n", what, PQresultErrorMessage(r));
    exit(1);
  }
  (void)c;
  return r;
}
static void exec(PGconn *c, const char *sql) {
  PQclear(check(c, PQexec(c, sql), PGRES_COMMAND_OK, sql));
}
static void prepare(PGconn *c, const char *name, const char *sql) {
  PQclear(check(c, PQprepare(c, name, sql, 0, NULL), PGRES_COMMAND_OK, sql));
}
static PGresult *run(PGconn *c, const char *name, int n, const char *const *values,
                     ExecStatusType want) {
  return check(c, PQexecPrepared(c, name, n, values, NULL, NULL, 0), want, name);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A text-format array literal of `n` strings, each quoted and escaped. */
static size_t append_element(char *out, size_t at, const char *s, int first) {
  if (!first) out[at++] = ',';
  out[at++] = '"';
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') out[at++] = '\\';
    out[at++] = *s;
  }
  out[at++] = '"';
  return at;
}

static int make_payload(char *out, size_t size, int i) {
  return snprintf(out, size,
                  "{\"i\":%d,\"user\":\"user-%06d\",\"action\":\"send-email\",\"pad\":\"%s\"}",
                  i, i % 100000, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
}

/* Pipeline mode: sends a prepared statement and a sync (its own
 * transaction), and reads one such pair back. */
static void send_synced(PGconn *c, const char *name, int n, const char *const *values) {
  if (!PQsendQueryPrepared(c, name, n, values, NULL, NULL, 0) || !PQpipelineSync(c))
    die(c, name);
}
/* Pipeline mode: one statement's result, then the NULL that ends it. */
static PGresult *read_one(PGconn *c, ExecStatusType want, const char *what) {
  PGresult *r = check(c, PQgetResult(c), want, what);
  if (PQgetResult(c) != NULL) die(c, "pipeline: more than one result");
  return r;
}
static void send_text(PGconn *c, const char *sql) {
  if (!PQsendQueryParams(c, sql, 0, NULL, NULL, NULL, NULL, 0)) die(c, sql);
}
static void read_sync(PGconn *c) {
  PGresult *sync = PQgetResult(c);
  if (PQresultStatus(sync) != PGRES_PIPELINE_SYNC) die(c, "pipeline: no sync");
  PQclear(sync);
}
static PGresult *read_synced(PGconn *c, ExecStatusType want, const char *what) {
  PGresult *r = read_one(c, want, what);
  read_sync(c);
  return r;
}

/* Writes the claimed ids as an array literal into `array`; returns the
 * payload bytes (touching each payload, as a handler would). */
static long long ids_of(const PGresult *claimed, char *array) {
  long long bytes = 0;
  size_t at = 0;
  array[at++] = '{';
  for (int j = 0; j < PQntuples(claimed); ++j) {
    if (j) array[at++] = ',';
    const char *id = PQgetvalue(claimed, j, 0);
    size_t len = strlen(id);
    memcpy(array + at, id, len);
    at += len;
    bytes += PQgetlength(claimed, j, 1);
  }
  array[at++] = '}';
  array[at] = 0;
  return bytes;
}

typedef struct { double insert_s, cc_s; } result;

/* batch: jobs per statement, 0 for tx-per-op; cycle: claims and
 * completions share a transaction (cycleK). */
static result run_once(const char *conninfo, int n, int batch, int pipelined, int cycle) {
  int batched = batch > 0;
  PGconn *c = PQconnectdb(conninfo);
  if (PQstatus(c) != CONNECTION_OK) die(c, "connect");
  PQclear(PQexec(c, "SET client_min_messages = warning"));
  exec(c, "DROP TABLE IF EXISTS ergon_limit_jobs");
  exec(c,
       "CREATE TABLE ergon_limit_jobs("
       " id bigserial PRIMARY KEY,"
       " queue text NOT NULL,"
       " payload text NOT NULL,"
       " status int NOT NULL DEFAULT 0," /* 0 pending 1 running 2 done */
       " attempts int NOT NULL DEFAULT 0,"
       " run_at bigint NOT NULL,"
       " created_at bigint NOT NULL,"
       " locked_at bigint,"
       " done_at bigint)");
  exec(c, "CREATE INDEX ergon_limit_ready ON ergon_limit_jobs(queue, run_at, id) WHERE status = 0");
  prepare(c, "ins1",
          "INSERT INTO ergon_limit_jobs(queue, payload, status, run_at, created_at) "
          "VALUES($1, $2, 0, $3, $3)");
  prepare(c, "insn",
          "INSERT INTO ergon_limit_jobs(queue, payload, status, run_at, created_at) "
          "SELECT $1, p, 0, $3, $3 FROM unnest($2::text[]) AS p");
  char claim_sql[512];
  snprintf(claim_sql, sizeof claim_sql,
           "UPDATE ergon_limit_jobs SET status = 1, attempts = attempts + 1, locked_at = $2 "
           "WHERE id = ANY(ARRAY(SELECT id FROM ergon_limit_jobs WHERE queue = $1 AND status = 0 "
           "AND run_at <= $2 ORDER BY run_at, id LIMIT %d FOR UPDATE SKIP LOCKED)) "
           "RETURNING id, payload",
           batched ? batch : 1);
  prepare(c, "claim", claim_sql);
  prepare(c, "done", "UPDATE ergon_limit_jobs SET status = 2, done_at = $2 WHERE id = ANY($1::bigint[])");

  char payload[256];
  char t[32];
  char *array = malloc((size_t)BATCH * 2 * sizeof payload + 16);
  result r;

  if (pipelined && !PQenterPipelineMode(c)) die(c, "pipeline mode");
  /* Each batch's array stays alive until its result is read. */
  enum { depth = 4 };
  char *arrays[depth];
  for (int d = 0; d < depth; ++d) arrays[d] = malloc((size_t)BATCH * 2 * 256 + 16);

  /* ---- insert N ---- */
  double t0 = now_s();
  int in_flight = 0;
  for (int i = 0, b = 0; pipelined && i < n; ++b) {
    if (in_flight == depth) {
      PQclear(read_synced(c, PGRES_COMMAND_OK, "insert"));
      --in_flight;
    }
    char *a = arrays[b % depth];
    size_t at = 0;
    a[at++] = '{';
    for (int k = 0; k < batch && i < n; ++k, ++i) {
      make_payload(payload, sizeof payload, i);
      at = append_element(a, at, payload, k == 0);
    }
    a[at++] = '}';
    a[at] = 0;
    snprintf(t, sizeof t, "%lld", now_ms_wall());
    const char *v[3] = {"bench", a, t};
    send_synced(c, "insn", 3, v);
    ++in_flight;
  }
  for (; in_flight > 0; --in_flight) PQclear(read_synced(c, PGRES_COMMAND_OK, "insert"));
  for (int i = pipelined ? n : 0; i < n;) {
    snprintf(t, sizeof t, "%lld", now_ms_wall());
    if (!batched) {
      make_payload(payload, sizeof payload, i);
      const char *v[3] = {"bench", payload, t};
      PQclear(run(c, "ins1", 3, v, PGRES_COMMAND_OK));
      ++i;
      continue;
    }
    size_t at = 0;
    array[at++] = '{';
    int k = 0;
    for (; k < batch && i < n; ++k, ++i) {
      make_payload(payload, sizeof payload, i);
      at = append_element(array, at, payload, k == 0);
    }
    array[at++] = '}';
    array[at] = 0;
    const char *v[3] = {"bench", array, t};
    PQclear(run(c, "insn", 3, v, PGRES_COMMAND_OK));
  }
  r.insert_s = now_s() - t0;

  /* ---- claim + complete N ---- */
  long long checksum = 0;
  int claimed_total = 0;
  t0 = now_s();
  if (pipelined) {
    snprintf(t, sizeof t, "%lld", now_ms_wall());
    const char *cv[2] = {"bench", t};
    send_synced(c, "claim", 2, cv);
    for (int done_sent = 0;;) {
      /* Results come back in the order sent: the completion first. */
      if (done_sent) PQclear(read_synced(c, PGRES_COMMAND_OK, "done"));
      PGresult *claimed = read_synced(c, PGRES_TUPLES_OK, "claim");
      int k = PQntuples(claimed);
      if (k == 0) { PQclear(claimed); break; }
      checksum += ids_of(claimed, array);
      PQclear(claimed);
      claimed_total += k;
      /* This batch's completion and the next batch's claim, one round trip. */
      snprintf(t, sizeof t, "%lld", now_ms_wall());
      const char *dv[2] = {array, t};
      send_synced(c, "done", 2, dv);
      send_synced(c, "claim", 2, cv);
      done_sent = 1;
    }
  }
  if (cycle) {
    if (!PQenterPipelineMode(c)) die(c, "pipeline mode");
    for (int have_done = 0;;) {
      snprintf(t, sizeof t, "%lld", now_ms_wall());
      const char *cv[2] = {"bench", t};
      const char *dv[2] = {array, t};
      send_text(c, "BEGIN");
      if (have_done && !PQsendQueryPrepared(c, "done", 2, dv, NULL, NULL, 0)) die(c, "done");
      if (!PQsendQueryPrepared(c, "claim", 2, cv, NULL, NULL, 0)) die(c, "claim");
      send_text(c, "COMMIT");
      if (!PQpipelineSync(c)) die(c, "sync");
      PQclear(read_one(c, PGRES_COMMAND_OK, "BEGIN"));
      if (have_done) PQclear(read_one(c, PGRES_COMMAND_OK, "done"));
      PGresult *claimed = read_one(c, PGRES_TUPLES_OK, "claim");
      PQclear(read_one(c, PGRES_COMMAND_OK, "COMMIT"));
      read_sync(c);
      int k = PQntuples(claimed);
      if (k == 0) { PQclear(claimed); break; }
      checksum += ids_of(claimed, array);
      PQclear(claimed);
      claimed_total += k;
      have_done = 1;
    }
    if (!PQexitPipelineMode(c)) die(c, "leaving pipeline mode");
  }
  while (!pipelined && !cycle && claimed_total < n) {
    snprintf(t, sizeof t, "%lld", now_ms_wall());
    const char *cv[2] = {"bench", t};
    PGresult *claimed = run(c, "claim", 2, cv, PGRES_TUPLES_OK);
    int k = PQntuples(claimed);
    if (k == 0) { PQclear(claimed); break; }
    /* the (no-op) handler would run here */
    checksum += ids_of(claimed, array);
    PQclear(claimed);
    snprintf(t, sizeof t, "%lld", now_ms_wall());
    const char *dv[2] = {array, t};
    PQclear(run(c, "done", 2, dv, PGRES_COMMAND_OK));
    claimed_total += k;
  }
  r.cc_s = now_s() - t0;
  free(array);
  for (int d = 0; d < depth; ++d) free(arrays[d]);
  if (pipelined && !PQexitPipelineMode(c)) die(c, "leaving pipeline mode");

  /* verify */
  PGresult *cnt = check(c, PQexec(c, "SELECT count(*) FROM ergon_limit_jobs WHERE status = 2"),
                        PGRES_TUPLES_OK, "count");
  int ndone = atoi(PQgetvalue(cnt, 0, 0));
  PQclear(cnt);
  if (ndone != n || claimed_total != n || checksum <= 0) {
    fprintf(stderr, "verification failed: done=%d claimed=%d\n", ndone, claimed_total);
    exit(1);
  }
  exec(c, "DROP TABLE ergon_limit_jobs");
  PQfinish(c);
  return r;
}

static void bench(const char *conninfo, int n, int runs, int batch, int pipelined, int cycle) {
  char peer[96];
  if (pipelined)
    snprintf(peer, sizeof peer, "limit-pg(pipelined)");
  else if (cycle)
    snprintf(peer, sizeof peer, "limit-pg(cycle%d)", batch);
  else if (batch > 0)
    snprintf(peer, sizeof peer, "limit-pg(batch%d)", batch);
  else
    snprintf(peer, sizeof peer, "limit-pg(tx-per-op)");
  double *life = malloc(sizeof(double) * runs), *ins = malloc(sizeof(double) * runs),
         *cc = malloc(sizeof(double) * runs);
  for (int r = 0; r < runs; r++) {
    result x = run_once(conninfo, n, batch, pipelined, cycle);
    ins[r] = n / x.insert_s;
    cc[r] = n / x.cc_s;
    life[r] = n / (x.insert_s + x.cc_s);
    fprintf(stderr, "# %s lifecycle run%d: {\"jobs_per_s\":%.1f,\"secs\":%.4f}\n", peer, r + 1, life[r], x.insert_s + x.cc_s);
    fprintf(stderr, "# %s insert_only run%d: {\"jobs_per_s\":%.1f,\"secs\":%.4f}\n", peer, r + 1, ins[r], x.insert_s);
    fprintf(stderr, "# %s claim_complete_only run%d: {\"jobs_per_s\":%.1f,\"secs\":%.4f}\n", peer, r + 1, cc[r], x.cc_s);
  }
  printf("%s lifecycle %.0f - -\n", peer, median(life, runs));
  printf("%s insert_only %.0f - -\n", peer, median(ins, runs));
  printf("%s claim_complete_only %.0f - -\n", peer, median(cc, runs));
  fflush(stdout);
  free(life); free(ins); free(cc);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CONNINFO [N] [RUNS] [tx-per-op|batchK|cycleK|pipelined]\n",
            argv[0]);
    return 2;
  }
  const char *conninfo = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 20000;
  int runs = argc > 3 ? atoi(argv[3]) : 3;
  if (n <= 0 || runs <= 0) {
    fprintf(stderr, "N and RUNS must be positive\n");
    return 2;
  }
  fprintf(stderr, "# limit-pg: libpq %d, N=%d, RUNS=%d\n", PQlibVersion(), n, runs);
  if (argc > 4) {
    const char *mode = argv[4];
    int batch = 0;
    char rest = 0;
    if (strcmp(mode, "pipelined") == 0) {
      bench(conninfo, n, runs, BATCH, 1, 0);
    } else if (strcmp(mode, "tx-per-op") == 0) {
      bench(conninfo, n, runs, 0, 0, 0);
    } else if (sscanf(mode, "batch%d%c", &batch, &rest) == 1 && batch >= 1 && batch <= BATCH) {
      bench(conninfo, n, runs, batch, 0, 0);
    } else if (sscanf(mode, "cycle%d%c", &batch, &rest) == 1 && batch >= 1 && batch <= BATCH) {
      bench(conninfo, n, runs, batch, 0, 1);
    } else {
      fprintf(stderr, "MODE must be tx-per-op, batchK, cycleK (K 1 to %d) or pipelined, got %s\n",
              BATCH, mode);
      return 2;
    }
  } else {
    bench(conninfo, n, runs, 0, 0, 0);
    bench(conninfo, n, runs, BATCH, 0, 0);
    bench(conninfo, n, runs, BATCH, 1, 0);
  }
  return 0;
}
