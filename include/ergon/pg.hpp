// pg: enqueue jobs from your own PostgreSQL transaction, on your own
// connection. The job exists if and only if that transaction commits.
//
//   PQexec(conn, "BEGIN");
//   PQexec(conn, "INSERT INTO orders ...");
//   auto entry = ergon::pg::submit(conn, *ergon::job_builder("ship").payload(p).build());
//   PQexec(conn, "COMMIT");  // the owner takes the job in within milliseconds
//
// The job goes to the queue's inbox, a table in the queue's schema. At
// commit, PostgreSQL notifies the queue's owner (NOTIFY), and its writer
// takes the entry in, in a transaction of its own, as a submit would: it
// validates the job, applies its unique key and idempotency key, and gives
// it an id. A sweep every options::inbox_sweep covers a notification that
// got lost. Programs in other languages call the SQL function directly:
//
//   SELECT ergon.submit('ship', '\x0102', priority => 5);
//
// (docs/distribution.md lists its parameters.) A role needs USAGE on the
// schema and EXECUTE on the functions submit and entry (revoked from
// PUBLIC), nothing else.
//
// An entry the owner can't take in (a field out of range, a unique key
// held under unique_policy::reject) is refused: the refusal is recorded on
// the entry's row (find_entry) and sent as an event_kind::inbox_refused
// event. Entries taken in or refused are kept for
// options::idempotency_window, then deleted.
//
// pg.hpp does not include libpq's header: include <libpq-fe.h> yourself,
// and link libpq.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"

struct pg_conn;  // libpq's PGconn

namespace ergon::pg {

/// Which queue on the connection's database.
struct inbox_options {
  /// The queue's schema: the `schema` parameter of its URI.
  std::string schema = "ergon";
};

/// Adds `j` to the inbox of the queue in `options.schema`, within the
/// transaction under way on `conn` (without one, the entry commits at
/// once). Returns the entry's number, for find_entry. The job is checked
/// first, as `validate(j)` does; the owner checks it again when it takes
/// it in, with its own payload limit, and a delay (job::delay_ms) counts
/// from then. Nothing is sent on an error found here. Errors:
/// invalid_argument naming the job's field ("depends_on": the inbox
/// carries no dependencies), or "conn" (null, or not
/// connected), or "schema" (not a plain identifier, or it holds no ergon
/// inbox: a queue of this version must have opened it once); read_only
/// (the role may not execute the function, or the session is read-only);
/// unreachable (the connection failed); internal (any other error of the
/// server, its message included). A failed statement aborts your
/// transaction, as in PostgreSQL it always does.
result<int64_t> submit(pg_conn* conn, const job& j, const inbox_options& options = {});

/// Where an inbox entry stands.
enum class entry_state : uint8_t {
  waiting,  ///< committed, not yet taken in by the owner
  taken,    ///< taken in: `id` names its job
  refused,  ///< refused: `refusal` says why; no job was made
};

const char* to_string(entry_state s) noexcept;
std::ostream& operator<<(std::ostream& out, entry_state s);

/// An inbox entry, as find_entry reads it.
struct inbox_entry {
  int64_t number = 0;
  entry_state state = entry_state::waiting;
  /// Taken: the job's id, or the id of the job that held its unique key
  /// (unique_policy::skip) or its idempotency key.
  job_id id;
  /// Refused: the owner's error, with its code, message and field.
  status refusal;
};

/// Reads entry `number` on `conn`, as the transaction under way sees it
/// (through the SQL function `entry`).
/// Errors: not_found (no such entry: its transaction did not commit, or it
/// was deleted after options::idempotency_window); the rest as submit's.
result<inbox_entry> find_entry(pg_conn* conn, int64_t number,
                               const inbox_options& options = {});

}  // namespace ergon::pg
