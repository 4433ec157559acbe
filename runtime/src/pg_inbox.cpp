// ergon::pg (include/ergon/pg.hpp): the C++ side of the inbox. The SQL
// function and the table are the inbox's definition (storage/src/
// pg_schema.cpp, version 5); this calls and reads them.
#include "ergon/pg.hpp"

#include <libpq-fe.h>

#include <array>
#include <charconv>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "ergon/storage/pg_db.hpp"

namespace ergon::pg {
namespace {

constexpr unsigned bytea_oid = 17;

// Named notation: the function's parameters may grow without breaking
// this call.
constexpr const char* submit_call =
  ".submit(type => $1, payload => $2, name => $3, \"group\" => $4, priority => $5, "
  "weight => $6, run_at_ms => $7, delay_ms => $8, ttl_ms => $9, max_retries => $10, "
  "backoff_initial_ms => $11, backoff_multiplier => $12, backoff_randomization => $13, "
  "timeout_ms => $14, heartbeat_increment_ms => $15, unique_key => $16, "
  "on_duplicate => $17, unique_hold_ms => $18, result_ttl_ms => $19, "
  "idempotency_key => $20, io_read_bytes => $21, io_write_bytes => $22, "
  "backoff_kind => $23, backoff_max_ms => $24)";
constexpr int submit_params = 24;

// Through the SECURITY DEFINER function: a role that may only enqueue
// reads its entries too.
constexpr const char* entry_columns =
  "SELECT taken_at IS NOT NULL, job::text, refused_code, refused_field, refused_message FROM ";
constexpr const char* read_entry = ".entry($1::bigint)";

// The schema as SQL names it: quoted, so a reserved word such as "order"
// is a schema too (it is a checked plain identifier).
std::string quoted(const std::string& schema) {
  return '"' + schema + '"';
}

std::optional<std::string> text(int64_t v) {
  return std::to_string(v);
}
std::optional<std::string> text(const std::optional<int64_t>& v) {
  return v ? text(*v) : std::nullopt;
}
std::optional<std::string> text(double v) {
  std::array<char, 32> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), end);
}

status check_conn(pg_conn* conn) {
  if (conn == nullptr)
    return invalid_field("conn", "is null");
  if (PQstatus(conn) != CONNECTION_OK)
    return invalid_field("conn", std::string{"is not connected: "} + PQerrorMessage(conn));
  return {};
}

// The status for a failed statement of `what` on the inbox of `schema`.
status failure(const PGresult* res, pg_conn* conn, const std::string& what,
               const std::string& schema) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  std::string message = res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
    message.pop_back();
  // No schema, no function, no table: not an ergon inbox (yet).
  if (sqlstate == "3F000" || sqlstate == "42883" || sqlstate == "42P01")
    return invalid_field("schema", "schema '" + schema + "' holds no ergon inbox (" + message
                                     + "): open the queue on it once with this ergon version");
  auto code = storage::error_from_sqlstate(sqlstate);
  auto text = what + " on schema '" + schema + "': " + message;
  if (sqlstate == "42501")
    text += " (GRANT USAGE ON SCHEMA " + schema + " and EXECUTE ON FUNCTION " + schema
            + ".submit, " + schema + ".entry to the role)";
  return {code, text};
}

using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

error error_named(const std::string& name) {
  for (int c = 0; c <= static_cast<int>(error::already_exists); ++c)
    if (name == ergon::to_string(static_cast<error>(c)))
      return static_cast<error>(c);
  return error::internal;
}

}  // namespace

result<int64_t> submit(pg_conn* conn, const job& j, const inbox_options& options) {
  if (auto st = validate(j); !st)
    return st;
  if (!j.tags.empty())
    return invalid_field("tags", "the inbox carries no tags: submit the job through the queue");
  if (j.ttl_from != ttl_start::run_at)
    return invalid_field("ttl_from", "the inbox counts a ttl from run_at only: submit the job "
                                     "through the queue");
  if (!j.depends_on.empty() || !j.depends_on_batch.empty())
    return invalid_field(j.depends_on.empty() ? "depends_on_batch" : "depends_on",
                         "the inbox carries no dependencies: submit the job through the "
                         "queue, or enqueue its dependencies' last one and submit it from "
                         "that job's code");
  if (auto st = storage::check_schema_name(options.schema); !st)
    return st;
  if (auto st = check_conn(conn); !st)
    return st;
  std::vector<std::optional<std::string>> v(submit_params);
  v[0] = j.type;
  v[1] = j.payload;
  v[2] = j.name;
  v[3] = j.group;
  v[4] = text(int64_t{j.priority});
  v[5] = text(int64_t{j.weight});
  v[6] = text(j.run_at_ms);
  v[7] = text(j.delay_ms);
  v[8] = text(j.ttl_ms);
  v[9] = text(int64_t{j.max_retries});
  v[10] = text(j.backoff.initial_ms);
  v[11] = text(j.backoff.multiplier);
  v[12] = text(j.backoff.randomization);
  v[13] = text(j.timeout_ms);
  v[14] = text(j.heartbeat_increment_ms);
  v[15] = j.unique_key;
  v[16] = to_string(j.on_duplicate);
  v[17] = text(j.unique_hold_ms);
  v[18] = text(j.result_ttl_ms);
  v[19] = j.idempotency_key;
  if (j.expected_io) {
    v[20] = text(j.expected_io->read_bytes);
    v[21] = text(j.expected_io->write_bytes);
  }
  v[22] = to_string(j.backoff.kind);
  v[23] = text(j.backoff.max_ms);
  std::vector<const char*> values(submit_params);
  std::vector<int> lengths(submit_params, 0);
  std::vector<int> formats(submit_params, 0);
  std::vector<unsigned> types(submit_params, 0);
  for (int i = 0; i < submit_params; ++i) {
    values[i] = v[i] ? v[i]->data() : nullptr;
    lengths[i] = v[i] ? static_cast<int>(v[i]->size()) : 0;
  }
  formats[1] = 1;  // the payload's bytes as they are
  types[1] = bytea_oid;
  auto sql = "SELECT " + quoted(options.schema) + submit_call;
  result_ptr res{PQexecParams(conn, sql.c_str(), submit_params, types.data(), values.data(),
                              lengths.data(), formats.data(), 0),
                 &PQclear};
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK || PQntuples(res.get()) != 1)
    return failure(res.get(), conn, "ergon.submit", options.schema);
  return static_cast<int64_t>(std::stoll(PQgetvalue(res.get(), 0, 0)));
}

const char* to_string(entry_state s) noexcept {
  switch (s) {
    case entry_state::waiting: return "waiting";
    case entry_state::taken: return "taken";
    case entry_state::refused: return "refused";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, entry_state s) {
  return out << to_string(s);
}

result<inbox_entry> find_entry(pg_conn* conn, int64_t number, const inbox_options& options) {
  if (auto st = storage::check_schema_name(options.schema); !st)
    return st;
  if (auto st = check_conn(conn); !st)
    return st;
  auto sql = std::string{entry_columns} + quoted(options.schema) + read_entry;
  auto id = std::to_string(number);
  const char* values[] = {id.c_str()};
  result_ptr res{PQexecParams(conn, sql.c_str(), 1, nullptr, values, nullptr, nullptr, 0),
                 &PQclear};
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
    return failure(res.get(), conn, "reading an inbox entry", options.schema);
  if (PQntuples(res.get()) == 0)
    return status{error::not_found, "inbox entry " + id + " is not in schema '"
                                      + options.schema
                                      + "': its transaction did not commit, or it was "
                                        "deleted after the idempotency window"};
  auto* r = res.get();
  inbox_entry e;
  e.number = number;
  if (PQgetvalue(r, 0, 0)[0] != 't')
    return e;
  if (!PQgetisnull(r, 0, 2)) {
    e.state = entry_state::refused;
    e.refusal = status{error_named(PQgetvalue(r, 0, 2)), PQgetvalue(r, 0, 4),
                       PQgetisnull(r, 0, 3) ? "" : PQgetvalue(r, 0, 3)};
    return e;
  }
  e.state = entry_state::taken;
  auto parsed = job_id::parse(PQgetvalue(r, 0, 1));
  if (!parsed)
    return status{error::corrupt, "inbox entry " + id + " names job '"
                                    + std::string{PQgetvalue(r, 0, 1)} + "'"};
  e.id = *parsed;
  return e;
}

}  // namespace ergon::pg
