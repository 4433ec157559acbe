#include "ergon/storage/pg_db.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libpq-fe.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

namespace ergon::storage {
namespace {

// Type OIDs (catalog/pg_type_d.h, which Debian's libpq-dev does not ship).
constexpr Oid bool_oid = 16;
constexpr Oid bytea_oid = 17;
constexpr Oid name_oid = 19;
constexpr Oid int8_oid = 20;
constexpr Oid int2_oid = 21;
constexpr Oid int4_oid = 23;
constexpr Oid text_oid = 25;
constexpr Oid float4_oid = 700;
constexpr Oid float8_oid = 701;
constexpr Oid unknown_oid = 705;
constexpr Oid bpchar_oid = 1042;
constexpr Oid varchar_oid = 1043;
constexpr Oid numeric_oid = 1700;

// The fence of every write transaction (pg_lease.hpp), sent with its BEGIN,
// and the transaction's id, to learn its fate if the COMMIT's answer is lost.
constexpr const char* fence_sql =
  "SELECT epoch, host, pid, pg_current_xact_id() FROM lease FOR KEY SHARE";
constexpr const char* fence_name = "ergon_fence";
constexpr const char* xact_status = "SELECT pg_xact_status($1::text::xid8)";

// Each writer session names itself in the lease before its first write
// transaction, so that a successor can end it if it holds the lease row
// past the lease.
constexpr const char* name_writer =
  "UPDATE lease SET writer_pid = pg_backend_pid(), "
  "writer_start = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) "
  "WHERE epoch = ?1";

bool is_text_type(Oid t) {
  return t == text_oid || t == varchar_oid || t == bpchar_oid || t == name_oid
         || t == unknown_oid;
}

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int k = bytes - 1; k >= 0; --k)
    out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

uint64_t get_be(const char* p, int bytes) {
  uint64_t v = 0;
  for (int k = 0; k < bytes; ++k)
    v = (v << 8) | static_cast<unsigned char>(p[k]);
  return v;
}

// SQLite's ?N parameters as PostgreSQL's $N, outside quoted text.
std::string dollar_parameters(const char* sql) {
  std::string out;
  bool quoted = false;
  for (const char* p = sql; *p != '\0'; ++p) {
    if (*p == '\'')
      quoted = !quoted;
    if (*p == '?' && !quoted)
      out.push_back('$');
    else
      out.push_back(*p);
  }
  return out;
}

// Binary NUMERIC (sum() of bigints): base-10000 digits, as an integer.
int64_t numeric_to_int(const char* p, int length) {
  if (length < 8)
    return 0;
  auto ndigits = static_cast<int16_t>(get_be(p, 2));
  auto weight = static_cast<int16_t>(get_be(p + 2, 2));
  auto sign = static_cast<uint16_t>(get_be(p + 4, 2));
  long double v = 0;
  for (int k = 0; k < ndigits && 8 + 2 * k + 2 <= length; ++k)
    v += static_cast<long double>(get_be(p + 8 + 2 * k, 2)) * std::pow(10000.0L, weight - k);
  if (sign == 0x4000)
    v = -v;
  return static_cast<int64_t>(v);
}

std::string result_message(const PGresult* res, const PGconn* conn) {
  std::string m = res != nullptr ? PQresultErrorMessage(res) : "";
  if (m.empty() && conn != nullptr)
    m = PQerrorMessage(conn);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' '))
    m.pop_back();
  return m.empty() ? "the connection to PostgreSQL was lost" : m;
}

bool plain_identifier(std::string_view s) {
  if (s.empty() || s.size() > 63 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

status check_schema_name(std::string_view schema) {
  if (plain_identifier(schema))
    return {};
  return invalid_field("schema", "'" + std::string{schema}
                                   + "' is not a plain lowercase SQL identifier (a-z, 0-9, _; "
                                     "at most 63 bytes)");
}

error error_from_sqlstate(std::string_view s) noexcept {
  if (s.size() != 5)
    return error::unreachable;  // no SQLSTATE: the connection is gone
  auto cls = s.substr(0, 2);
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03")
    return error::unreachable;
  if (s == "57014")
    return error::timeout;  // statement_timeout, or a cancel
  if (s == "25006" || s == "42501")
    return error::read_only;  // a read-only standby or transaction; no privilege
  if (s == "28P01" || s == "28000")
    return error::unauthenticated;
  if (s == "53100" || s == "53200" || s == "54000")
    return error::storage_full;
  if (cls == "53" || cls == "58")
    return error::io_error;
  if (cls == "40" || s == "55P03" || s == "55006")
    return error::busy;  // serialization failure, deadlock, lock not available
  if (cls == "22" || cls == "23")
    return error::invalid_argument;
  if (s == "XX001" || s == "XX002")
    return error::corrupt;
  return error::internal;
}

bool names_postgres(std::string_view location) noexcept {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

result<pg_options> parse_pg_uri(const std::string& uri) {
  if (!names_postgres(uri))
    return invalid_field("db", "'" + uri + "' is not a postgresql:// URI");
  pg_options out;
  auto q = uri.find('?');
  if (q == std::string::npos) {
    out.conninfo = uri;
    return out;
  }
  std::string kept;
  size_t at = q + 1;
  while (at <= uri.size()) {
    auto amp = uri.find('&', at);
    if (amp == std::string::npos)
      amp = uri.size();
    auto part = uri.substr(at, amp - at);
    if (part.rfind("schema=", 0) == 0) {
      out.schema = part.substr(7);
      if (auto st = check_schema_name(out.schema); !st)
        return st;
    } else if (!part.empty()) {
      kept += (kept.empty() ? "" : "&") + part;
    }
    at = amp + 1;
  }
  out.conninfo = uri.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  return out;
}

// -- pg_stmt -------------------------------------------------------------------

pg_stmt::pg_stmt(pg_db& owner, const char* sql, std::string text, std::string name)
    : db_(owner), sql_(sql), text_(std::move(text)), name_(std::move(name)) {}

pg_stmt::~pg_stmt() {
  if (awaiting_)
    db_.forget_rows(*this);
  if (res_ != nullptr)
    PQclear(res_);
}

status pg_stmt::ensure_prepared() {
  if (session_ == db_.session_)
    return {};
  // Preparing waits for its answer, which pipeline mode does not allow.
  if (db_.pipelined_)
    if (auto st = db_.read_pipeline(); !st)
      return st;
  // A parameter the text skips (a filter path that needs no ?2) still gets
  // bound: declared bigint, it takes the value and goes unused.
  std::vector<Oid> declared;
  for (const char* p = text_.c_str(); *p != '\0'; ++p)
    if (*p == '$' && p[1] >= '1' && p[1] <= '9') {
      auto n = static_cast<size_t>(std::strtoul(p + 1, nullptr, 10));
      if (declared.size() < n)
        declared.resize(n, int8_oid);
      declared[n - 1] = 0;  // the server infers it
    }
  PGresult* r = PQprepare(db_.conn_, name_.c_str(), text_.c_str(),
                          static_cast<int>(declared.size()), declared.data());
  bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) {
    auto st = db_.error_status(r, "preparing statement");
    PQclear(r);
    // Text that does not compile is our bug, unless the session is the
    // problem (gone, read-only, no privilege).
    if (st.code() == error::invalid_argument || st.code() == error::internal)
      return status{error::internal, st.message() + ": " + text_};
    return st;
  }
  PQclear(r);
  r = PQdescribePrepared(db_.conn_, name_.c_str());
  if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK) {
    auto st = db_.error_status(r, "describing statement");
    PQclear(r);
    // Free the name, or the next try on this session fails "already exists".
    if (PQstatus(db_.conn_) == CONNECTION_OK)
      PQclear(PQexec(db_.conn_, ("DEALLOCATE " + name_).c_str()));
    return st;
  }
  types_.resize(static_cast<size_t>(PQnparams(r)));
  for (size_t k = 0; k < types_.size(); ++k)
    types_[k] = PQparamtype(r, static_cast<int>(k));
  PQclear(r);
  if (params_.size() < types_.size())
    params_.resize(types_.size());
  session_ = db_.session_;
  return {};
}

pg_stmt::param& pg_stmt::slot(int i) {
  auto k = static_cast<size_t>(i - 1);
  if (params_.size() <= k)
    params_.resize(k + 1);  // past the statement's parameters: the run fails
  reset();
  auto& p = params_[k];
  p.null = false;
  p.format = 1;
  p.own.clear();
  p.data = nullptr;
  return p;
}

unsigned pg_stmt::type_of(int i) const {
  auto k = static_cast<size_t>(i - 1);
  return k < types_.size() ? types_[k] : unknown_oid;
}

void pg_stmt::put_text_form(int i, std::string value) {
  auto& p = slot(i);
  p.own = std::move(value);
  p.format = 0;
  p.data = nullptr;
}

void pg_stmt::bind(int i, int64_t v) {
  switch (type_of(i)) {
    case int8_oid: {
      auto& p = slot(i);
      put_be(p.own, static_cast<uint64_t>(v), 8);
      return;
    }
    case int4_oid:
      if (v >= INT32_MIN && v <= INT32_MAX) {
        auto& p = slot(i);
        put_be(p.own, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
        return;
      }
      break;
    case bool_oid: {
      auto& p = slot(i);
      p.own.push_back(v != 0 ? 1 : 0);
      return;
    }
    case float8_oid:
      bind(i, static_cast<double>(v));
      return;
    default:
      break;
  }
  put_text_form(i, std::to_string(v));  // the server converts, or refuses
}

void pg_stmt::bind(int i, double v) {
  if (type_of(i) == float8_oid) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(bits));
    put_be(slot(i).own, bits, 8);
    return;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  put_text_form(i, text);
}

void pg_stmt::bind_text(int i, std::string_view v) {
  if (!is_text_type(type_of(i)) && type_of(i) != bytea_oid) {
    put_text_form(i, std::string{v});
    return;
  }
  slot(i).own.assign(v.data(), v.size());
}

void pg_stmt::bind_blob(int i, std::string_view v) {
  slot(i).own.assign(v.data(), v.size());
}

void pg_stmt::bind_text_static(int i, std::string_view v) {
  if (!is_text_type(type_of(i)) && type_of(i) != bytea_oid) {
    put_text_form(i, std::string{v});
    return;
  }
  auto& p = slot(i);
  p.data = v.data();
  p.length = static_cast<int>(v.size());
}

void pg_stmt::bind_blob_static(int i, std::string_view v) {
  auto& p = slot(i);
  p.data = v.data();
  p.length = static_cast<int>(v.size());
}

void pg_stmt::bind_null(int i) {
  slot(i).null = true;
}

namespace {

// The binary array format: dimensions, flags, element type, then per
// dimension its length and lower bound, then each element's length and bytes.
template <class Each>
std::string binary_array(Oid element, size_t n, Each&& each) {
  std::string out;
  put_be(out, n == 0 ? 0 : 1, 4);
  put_be(out, 0, 4);
  put_be(out, element, 4);
  if (n > 0) {
    put_be(out, n, 4);
    put_be(out, 1, 4);
  }
  for (size_t k = 0; k < n; ++k)
    each(out, k);
  return out;
}

}  // namespace

namespace {

void put_null(std::string& out) {
  put_be(out, 0xffffffffu, 4);  // length -1
}

void put_int8(std::string& out, int64_t v) {
  put_be(out, 8, 4);
  put_be(out, static_cast<uint64_t>(v), 8);
}

void put_bytes(std::string& out, std::string_view v) {
  put_be(out, v.size(), 4);
  out.append(v);
}

}  // namespace

void pg_stmt::bind_ints(int i, const std::vector<int64_t>& v) {
  slot(i).own = binary_array(int8_oid, v.size(),
                             [&](std::string& out, size_t k) { put_int8(out, v[k]); });
}


void pg_stmt::bind_blobs(int i, const std::vector<std::optional<std::string_view>>& v) {
  slot(i).own = binary_array(bytea_oid, v.size(), [&](std::string& out, size_t k) {
    if (v[k])
      put_bytes(out, *v[k]);
    else
      put_null(out);
  });
}

void pg_stmt::clear() {
  reset();
  for (auto& p : params_)
    p = param{};
}

void pg_stmt::reset() {
  if (awaiting_)
    db_.forget_rows(*this);
  unread_rows_ = false;
  if (res_ != nullptr)
    PQclear(res_);
  res_ = nullptr;
  row_ = -1;
  rows_ = 0;
  ran_ = false;
  status_ = {};
}

status pg_stmt::ready_to_run() {
  if (auto st = db_.reconnect_if_lost(); !st)
    return st;
  if (auto st = ensure_prepared(); !st)
    return st;
  // Binding past the statement's parameters is ergon's bug: the server
  // would answer with a protocol error, which reads as a lost connection.
  if (params_.size() != types_.size())
    return {error::internal, db_.location_ + ": " + std::to_string(params_.size())
                               + " parameters bound for " + std::to_string(types_.size()) + ": "
                               + text_};
  return {};
}

// The bound parameters as libpq takes them.
struct pg_stmt::wire_form {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
};

pg_stmt::wire_form pg_stmt::wire() const {
  wire_form w;
  w.values.resize(params_.size());
  w.lengths.resize(params_.size());
  w.formats.resize(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    auto& p = params_[k];
    w.formats[k] = p.format;
    if (p.null)
      continue;
    if (p.data != nullptr) {
      w.values[k] = p.length == 0 ? "" : p.data;
      w.lengths[k] = p.length;
    } else {
      w.values[k] = p.own.c_str();
      w.lengths[k] = static_cast<int>(p.own.size());
    }
  }
  return w;
}

// Sends the statement into the pipeline; its result comes in binary form.
bool pg_stmt::send_prepared() {
  auto w = wire();
  return PQsendQueryPrepared(db_.conn_, name_.c_str(), static_cast<int>(params_.size()),
                             w.values.data(), w.lengths.data(), w.formats.data(), 1)
         != 0;
}

bool pg_stmt::step() {
  if (awaiting_)
    (void)db_.read_pipeline();  // settles this statement too, with its status
  if (unread_rows_) {
    unread_rows_ = false;
    if (!status_.ok())
      return false;
    if (!take_result())
      return false;
  } else if (!ran_) {
    ran_ = true;
    if (auto st = ready_to_run(); !st) {
      status_ = st;
      return false;
    }
    if (db_.pipelined_) {
      // Goes out with what was sent before it, in one round trip.
      if (!send_prepared()) {
        status_ = db_.error_status(nullptr, "sending a statement");
        (void)db_.read_pipeline();
        return false;
      }
      db_.unread_.push_back({pg_db::unread_kind::effect, "a statement"});
      if (auto st = db_.read_pipeline(&res_); !st) {
        PQclear(res_);
        res_ = nullptr;
        status_ = st;
        return false;
      }
    } else {
      auto w = wire();
      res_ = PQexecPrepared(db_.conn_, name_.c_str(), static_cast<int>(params_.size()),
                            w.values.data(), w.lengths.data(), w.formats.data(), 1);
    }
    if (!take_result())
      return false;
  }
  return ++row_ < rows_;
}

bool pg_stmt::take_result() {
  auto rs = res_ != nullptr ? PQresultStatus(res_) : PGRES_FATAL_ERROR;
  int64_t changed = 0;
  if (rs == PGRES_TUPLES_OK) {
    rows_ = PQntuples(res_);
    changed = rows_;
  } else if (rs == PGRES_COMMAND_OK) {
    changed = std::atoll(PQcmdTuples(res_));
  } else {
    status_ = db_.error_status(res_, "");
    PQclear(res_);
    res_ = nullptr;
    return false;
  }
  db_.note_changes(changed);
  return true;
}

const char* pg_stmt::value(int i, int& length) const {
  if (res_ == nullptr || row_ < 0 || row_ >= rows_ || PQgetisnull(res_, row_, i)) {
    length = 0;
    return nullptr;
  }
  length = PQgetlength(res_, row_, i);
  return PQgetvalue(res_, row_, i);
}

int64_t pg_stmt::column_int(int i) const {
  int n = 0;
  auto p = value(i, n);
  if (p == nullptr)
    return 0;
  switch (PQftype(res_, i)) {
    case int8_oid:
      return static_cast<int64_t>(get_be(p, 8));
    case int4_oid:
      return static_cast<int32_t>(get_be(p, 4));
    case int2_oid:
      return static_cast<int16_t>(get_be(p, 2));
    case bool_oid:
      return p[0] != 0;
    case float8_oid:
    case float4_oid:
      return static_cast<int64_t>(column_double(i));
    case numeric_oid:
      return numeric_to_int(p, n);
    default:
      return std::atoll(std::string(p, static_cast<size_t>(n)).c_str());
  }
}

double pg_stmt::column_double(int i) const {
  int n = 0;
  auto p = value(i, n);
  if (p == nullptr)
    return 0;
  switch (PQftype(res_, i)) {
    case float8_oid: {
      uint64_t bits = get_be(p, 8);
      double v;
      std::memcpy(&v, &bits, sizeof(v));
      return v;
    }
    case float4_oid: {
      auto bits = static_cast<uint32_t>(get_be(p, 4));
      float v;
      std::memcpy(&v, &bits, sizeof(v));
      return v;
    }
    default:
      return static_cast<double>(column_int(i));
  }
}

bool pg_stmt::column_is_null(int i) const {
  return res_ == nullptr || row_ < 0 || row_ >= rows_ || PQgetisnull(res_, row_, i);
}

std::string pg_stmt::column_text(int i) const {
  int n = 0;
  auto p = value(i, n);
  return p == nullptr ? std::string{} : std::string(p, static_cast<size_t>(n));
}

std::string pg_stmt::column_blob(int i) const {
  return column_text(i);
}

// -- pg_db ---------------------------------------------------------------------

pg_db::pg_db(PGconn* conn, pg_options opts, std::string location) noexcept
    : conn_(conn), opts_(std::move(opts)), location_(std::move(location)) {
  keep_socket();
}

pg_db::~pg_db() {
  cache_.clear();
  PQfinish(conn_);
  if (socket_ >= 0)
    ::close(socket_);
}

void pg_db::keep_socket() noexcept {
  std::lock_guard<std::mutex> lock(socket_mtx_);
  if (socket_ >= 0)
    ::close(socket_);
  int fd = PQsocket(conn_);
  socket_ = fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (socket_ >= 0 && interrupted_)
    ::shutdown(socket_, SHUT_RDWR);
}

result<std::unique_ptr<pg_db>> pg_db::open(const pg_options& opts) {
  if (auto st = check_schema_name(opts.schema); !st)
    return st;
  // The session's own options keep the user's, then name the schema.
  std::string options;
  std::vector<std::string> own_keys;  // what the connection string sets
  char* err = nullptr;
  if (PQconninfoOption* given = PQconninfoParse(opts.conninfo.c_str(), &err)) {
    for (auto* o = given; o->keyword != nullptr; ++o) {
      if (o->val == nullptr)
        continue;
      own_keys.emplace_back(o->keyword);
      if (std::strcmp(o->keyword, "options") == 0)
        options = std::string{o->val} + " ";
    }
    PQconninfoFree(given);
  } else {
    std::string why = err != nullptr ? err : "unparsable";
    PQfreemem(err);
    while (!why.empty() && why.back() == '\n')
      why.pop_back();
    return invalid_field("db", "the PostgreSQL connection string: " + why);
  }
  // Generic plans: ergon's statements find rows by key or by a range an
  // index serves whatever the values (test-storage checks the hot ones).
  // PostgreSQL's default planned the batch statements afresh on every run,
  // about 0.15 ms each.
  options += "-c search_path=" + opts.schema + " -c plan_cache_mode=force_generic_plan";
  if (opts.read_only)
    options += " -c default_transaction_read_only=on";
  auto timeout = std::to_string(std::max<int64_t>(2, (opts.connect_timeout.count() + 999) / 1000));
  std::vector<const char*> keys{"dbname", "options", "connect_timeout",
                                "fallback_application_name"};
  std::vector<const char*> values{opts.conninfo.c_str(), options.c_str(), timeout.c_str(),
                                  "ergon"};
  // A silent server: idle sessions probe it, and unacknowledged data gives
  // up, both within about dead_peer_after.
  auto ms = opts.dead_peer_after.count();
  auto idle = std::to_string(std::max<int64_t>(1, ms / 3000));
  auto user_timeout = std::to_string(ms);
  std::pair<const char*, const char*> dead_peer[] = {{"keepalives", "1"},
                                                     {"keepalives_idle", idle.c_str()},
                                                     {"keepalives_interval", "1"},
                                                     {"keepalives_count", "2"},
                                                     {"tcp_user_timeout", user_timeout.c_str()}};
  if (ms > 0)
    for (auto [key, value] : dead_peer)
      if (std::find(own_keys.begin(), own_keys.end(), key) == own_keys.end()) {
        keys.push_back(key);
        values.push_back(value);
      }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), 1);
  if (conn == nullptr)
    return status{error::internal, "libpq could not allocate a connection"};
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = result_message(nullptr, conn);
    PQfinish(conn);
    auto code = why.find("authentication failed") != std::string::npos
                    || why.find("no password supplied") != std::string::npos
                  ? error::unauthenticated
                  : error::unreachable;
    return status{code, "PostgreSQL: " + why};
  }
  // pg_current_xact_id and pg_xact_status (learn_commit) came in 13.
  if (PQserverVersion(conn) < 130000) {
    auto v = std::to_string(PQserverVersion(conn));
    PQfinish(conn);
    return status{error::invalid_argument, "PostgreSQL " + v + " is older than 13", "db"};
  }
  std::string location = std::string{"postgresql://"} + PQuser(conn) + "@" + PQhost(conn) + ":"
                         + PQport(conn) + "/" + PQdb(conn) + "?schema=" + opts.schema;
  return std::unique_ptr<pg_db>{new pg_db(conn, opts, std::move(location))};
}

status pg_db::error_status(const PGresult* res, std::string_view context) const {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  auto code = PQstatus(conn_) == CONNECTION_BAD ? error::unreachable
              : state != nullptr               ? error_from_sqlstate(state)
                                               : error::unreachable;
  std::string text = (context.empty() ? std::string{} : std::string{context} + ": ")
                     + location_ + ": " + result_message(res, conn_);
  return {code, std::move(text)};
}

void pg_db::interrupt() noexcept {
  interrupted_ = true;
  std::lock_guard<std::mutex> lock(socket_mtx_);
  if (socket_ >= 0)
    ::shutdown(socket_, SHUT_RDWR);
}

status pg_db::reconnect_if_lost() {
  if (PQstatus(conn_) != CONNECTION_BAD)
    return {};
  if (interrupted_)
    return {error::unreachable, location_ + ": the session was interrupted"};
  if (in_write_)
    return {error::unreachable, location_ + ": the connection was lost within a transaction"};
  auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_)
    return {error::unreachable, location_ + ": the connection is lost; reconnecting"};
  PQreset(conn_);
  keep_socket();
  if (PQstatus(conn_) != CONNECTION_OK) {
    backoff_ = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds{5'000},
      backoff_.count() == 0 ? std::chrono::milliseconds{100} : 2 * backoff_);
    next_attempt_ = now + backoff_;
    return error_status(nullptr, "reconnecting");
  }
  backoff_ = {};
  forget_session();
  return {};
}

void pg_db::forget_session() noexcept {
  ++session_;  // statements prepare themselves again
  pipelined_ = false;  // PQreset left pipeline mode
  settle_rows({error::unreachable, location_ + ": the session ended before the rows came"});
  unread_.clear();
}

void pg_db::settle_rows(const status& failed) noexcept {
  for (auto& u : unread_) {
    if (u.stmt == nullptr)
      continue;
    auto& s = *u.stmt;
    u.stmt = nullptr;
    s.awaiting_ = false;
    s.unread_rows_ = true;
    if (!failed.ok()) {
      if (s.res_ != nullptr)
        PQclear(s.res_);
      s.res_ = nullptr;
      s.status_ = failed;
    } else if (s.res_ == nullptr) {
      s.status_ = {error::internal, location_ + ": no result came for " + u.what};
    }
  }
}

void pg_db::forget_rows(pg_stmt& s) noexcept {
  for (auto& u : unread_)
    if (u.stmt == &s)
      u.stmt = nullptr;
  s.awaiting_ = false;
}

bool pg_db::fence_unread() const noexcept {
  return std::any_of(unread_.begin(), unread_.end(),
                     [](const unread& u) { return u.kind == unread_kind::fence; });
}

result<stmt*> pg_db::prepare(const char* sql) {
  auto i = cache_.find(sql);
  if (i != cache_.end()) {
    i->second->clear();
    return i->second.get();
  }
  auto s = std::make_unique<pg_stmt>(*this, sql, dollar_parameters(sql),
                                     "ergon_" + std::to_string(next_name_++));
  if (auto st = reconnect_if_lost(); !st)
    return st;
  if (auto st = s->ensure_prepared(); !st)
    return st;
  auto [pos, added] = cache_.emplace(sql, std::move(s));
  return pos->second.get();
}

status pg_db::ready_to_exec() {
  if (pipelined_)
    if (auto st = read_pipeline(); !st)
      return st;
  return reconnect_if_lost();
}

status pg_db::exec(const char* sql) {
  if (auto st = ready_to_exec(); !st)
    return st;
  PGresult* r = PQexec(conn_, sql);
  auto rs = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  status st;
  if (rs == PGRES_COMMAND_OK || rs == PGRES_TUPLES_OK)
    changes_ = std::atoll(PQcmdTuples(r));
  else
    st = error_status(r, "");
  PQclear(r);
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE)
    in_write_ = false;
  return st;
}

void pg_copy_rows::begin_row(int16_t fields) {
  put_be(data_, static_cast<uint16_t>(fields), 2);
}

void pg_copy_rows::add(int64_t v) {
  put_int8(data_, v);
}

void pg_copy_rows::add(std::optional<int64_t> v) {
  if (v)
    put_int8(data_, *v);
  else
    put_null(data_);
}

void pg_copy_rows::add(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_be(data_, 8, 4);
  put_be(data_, bits, 8);
}

void pg_copy_rows::add(std::optional<std::string_view> v) {
  if (v)
    put_bytes(data_, *v);
  else
    put_null(data_);
}

status pg_db::copy_in(const char* copy_sql, size_t count,
                      const std::function<void(pg_copy_rows&, size_t)>& add_row) {
  if (auto st = ready_to_exec(); !st)
    return st;
  PGresult* r = PQexec(conn_, copy_sql);
  if (r == nullptr || PQresultStatus(r) != PGRES_COPY_IN) {
    auto st = error_status(r, "starting COPY");
    PQclear(r);
    return st;
  }
  PQclear(r);
  status st;
  auto send_piece = [&] {
    // In pieces of at most 1 MiB: PQputCopyData takes an int.
    constexpr size_t most = size_t{1} << 20;
    for (size_t at = 0; st && at < copy_data_.size(); at += most) {
      auto n = std::min(most, copy_data_.size() - at);
      if (PQputCopyData(conn_, copy_data_.data() + at, static_cast<int>(n)) != 1)
        st = error_status(nullptr, "sending COPY data");
    }
    copy_data_.clear();
  };
  copy_data_.clear();
  copy_data_.append("PGCOPY\n\377\r\n\0", 11);
  put_be(copy_data_, 0, 4);  // flags
  put_be(copy_data_, 0, 4);  // no header extension
  pg_copy_rows rows{copy_data_};
  // libpq sends what it holds once that passes 8 KiB.
  constexpr size_t piece = 32 * 1024;
  try {
    for (size_t k = 0; st && k < count; ++k) {
      add_row(rows, k);
      if (copy_data_.size() >= piece)
        send_piece();
    }
  } catch (...) {
    // The session must not stay in COPY: the server rolls it back.
    (void)PQputCopyEnd(conn_, "ergon stopped making rows");
    while (PGresult* res = PQgetResult(conn_))
      PQclear(res);
    copy_data_.clear();
    throw;
  }
  put_be(copy_data_, 0xffff, 2);  // -1 fields: the end
  send_piece();
  if (copy_data_.capacity() > size_t{1} << 20)
    std::string{}.swap(copy_data_);  // after a huge row: not kept for good
  if (PQputCopyEnd(conn_, st ? nullptr : "ergon stopped sending") != 1 && st)
    st = error_status(nullptr, "ending COPY");
  while (PGresult* res = PQgetResult(conn_)) {
    if (st && PQresultStatus(res) != PGRES_COMMAND_OK)
      st = error_status(res, "");
    else if (st)
      changes_ = std::atoll(PQcmdTuples(res));
    PQclear(res);
  }
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE)
    in_write_ = false;
  return st;
}

status pg_db::begin_write() {
  in_write_ = false;
  if (epoch_ && !halted_)
    return halted_;
  xact_.clear();
  if (pipelined_)
    if (auto st = read_pipeline(); !st)
      return st;
  if (auto st = reconnect_if_lost(); !st)
    return st;
  if (epoch_ && named_session_ != session_) {
    auto s = prepare(name_writer);
    if (!s)
      return s.error();
    (*s)->bind(1, *epoch_);
    if (auto st = run(**s); !st)
      return st;
    if (changes_ != 1)
      return halt({error::busy, location_ + ": another process took the queue over"});
    named_session_ = session_;
  }
  if (epoch_)
    if (auto st = prepare_fence(); !st)
      return st;
  // Both go out with the transaction's first statement.
  status st = send_text("BEGIN", unread_kind::effect);
  in_write_ = st.ok();
  if (st && epoch_)
    st = send_text(fence_sql, unread_kind::fence);
  if (!st)
    rollback();
  return st;
}

status pg_db::check_fence(const PGresult* r) {
  if (PQntuples(r) != 1)
    return halt({error::busy, location_ + ": the lease row is gone"});
  if (auto held = std::atoll(PQgetvalue(r, 0, 0)); held != *epoch_)
    return halt({error::busy, location_ + ": another process took the queue over: pid "
                                + PQgetvalue(r, 0, 2) + " on " + PQgetvalue(r, 0, 1)
                                + " (lease epoch " + std::to_string(held) + "; this one held "
                                + std::to_string(*epoch_) + ")"});
  xact_ = PQgetvalue(r, 0, 3);
  return {};
}

status pg_db::start_pipeline() {
  if (pipelined_)
    return {};
  if (PQenterPipelineMode(conn_) == 0)
    return {error::internal,
            location_ + ": entering pipeline mode: " + result_message(nullptr, conn_)};
  pipelined_ = true;
  return {};
}

status pg_db::prepare_fence() {
  if (fence_session_ == session_)
    return {};
  PGresult* r = PQprepare(conn_, fence_name, fence_sql, 0, nullptr);
  status st;
  if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK)
    st = error_status(r, "preparing the lease check");
  else
    fence_session_ = session_;
  PQclear(r);
  return st;
}

status pg_db::send_text(const char* sql, unread_kind kind) {
  if (auto st = start_pipeline(); !st)
    return st;
  // Text results: the fence is read with PQgetvalue.
  int sent = kind == unread_kind::fence
               ? PQsendQueryPrepared(conn_, fence_name, 0, nullptr, nullptr, nullptr, 0)
               : PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0);
  if (sent == 0) {
    auto st = error_status(nullptr, "sending");
    (void)read_pipeline();
    return st;
  }
  unread_.push_back({kind, sql});
  return {};
}

status pg_db::send(stmt& s) {
  auto& q = static_cast<pg_stmt&>(s);
  if (auto st = q.ready_to_run(); !st)
    return st;
  if (auto st = start_pipeline(); !st)
    return st;
  if (!q.send_prepared()) {
    auto st = error_status(nullptr, "sending");
    (void)read_pipeline();
    return st;
  }
  unread_.push_back({unread_kind::effect, q.sql_});
  return {};
}

status pg_db::send_for_rows(pg_stmt& q) {
  if (auto st = send(q); !st)
    return st;
  unread_.back().kind = unread_kind::rows;
  unread_.back().stmt = &q;
  q.ran_ = true;
  q.awaiting_ = true;
  return {};
}

status pg_db::read_pipeline(PGresult** last) {
  status failed;  // the first failure that is not the caller's
  if (PQpipelineSync(conn_) == 0)
    failed = error_status(nullptr, "sending");
  for (size_t k = 0; PQstatus(conn_) != CONNECTION_BAD && k < unread_.size(); ++k) {
    PGresult* got = nullptr;  // a command answers with one result, then NULL
    while (PGresult* r = PQgetResult(conn_)) {
      if (got == nullptr)
        got = r;
      else
        PQclear(r);
    }
    if (last != nullptr && k + 1 == unread_.size()) {
      *last = got;
    } else {
      auto rs = got != nullptr ? PQresultStatus(got) : PGRES_FATAL_ERROR;
      if (rs == PGRES_PIPELINE_ABORTED) {
        // after an earlier failure
      } else if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
        if (failed)
          failed = error_status(got, std::string{"running "} + unread_[k].what);
      } else if (unread_[k].kind == unread_kind::fence && failed) {
        failed = check_fence(got);
      } else if (auto* rows = unread_[k].stmt; rows != nullptr) {
        if (rows->res_ != nullptr)
          PQclear(rows->res_);
        rows->res_ = got;  // its rows, for step()
        got = nullptr;
      }
      PQclear(got);
    }
    if (PQstatus(conn_) == CONNECTION_BAD && failed)
      failed = error_status(nullptr, "");
  }
  if (PQstatus(conn_) != CONNECTION_BAD) {
    PGresult* sync = PQgetResult(conn_);
    bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    if (!synced && failed)
      failed = error_status(sync, "");
    PQclear(sync);
    // Not synced: the server ended the session (a shutdown, say), and what
    // is left to read is out of step with what was sent. The session is
    // dropped, its transaction with it; the next use reconnects.
    if (!synced || PQexitPipelineMode(conn_) == 0) {
      if (failed)
        failed = {error::unreachable, location_ + ": the session is out of step with the "
                                        "server: " + result_message(nullptr, conn_)};
      settle_rows(failed);
      drop_session();
    }
  }
  settle_rows(failed);
  unread_.clear();
  // A lost connection leaves pipeline mode when it is reset.
  pipelined_ = PQstatus(conn_) != CONNECTION_BAD && PQpipelineStatus(conn_) != PQ_PIPELINE_OFF;
  if (!failed && in_transaction() && !pipelined_)
    (void)exec("ROLLBACK");
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE)
    in_write_ = false;
  return failed;
}

void pg_db::drop_session() noexcept {
  if (!interrupted_) {
    PQreset(conn_);  // fails to a lost connection, which reconnect_if_lost retries
    keep_socket();
  }
  forget_session();
  in_write_ = false;
}

void pg_db::rollback() noexcept {
  if (pipelined_)
    (void)read_pipeline();
  if (in_transaction())
    (void)exec("ROLLBACK");
}

status pg_db::halt(status why) {
  if (halted_) {
    halted_ = why;
    if (on_halt_)
      on_halt_(why);
  }
  return why;
}

// The COMMIT's answer was lost with the connection: the transaction may have
// committed or not. Reconnects and asks, with backoff; a transaction still
// in progress is the old session finishing.
status pg_db::learn_commit(status lost) {
  auto xact = std::move(xact_);
  xact_.clear();
  in_write_ = false;
  auto deadline = std::chrono::steady_clock::now() + opts_.commit_outcome_wait;
  status why = lost;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_until(std::max(next_attempt_, std::chrono::steady_clock::now()
                                                            + std::chrono::milliseconds{20}));
    if (auto st = reconnect_if_lost(); !st) {
      why = st;
      continue;
    }
    const char* values[] = {xact.c_str()};
    PGresult* r = PQexecParams(conn_, xact_status, 1, nullptr, values, nullptr, nullptr, 0);
    std::string fate = r != nullptr && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                           && !PQgetisnull(r, 0, 0)
                         ? PQgetvalue(r, 0, 0)
                         : "";
    if (fate.empty())
      why = r != nullptr && PQresultStatus(r) == PGRES_TUPLES_OK
              ? status{error::unreachable, location_ + ": the server no longer knows transaction "
                                             + xact}
              : error_status(r, "asking for a transaction's fate");
    PQclear(r);
    if (fate == "committed")
      return {};
    if (fate == "aborted")
      return {error::unreachable,
              lost.message() + "; the transaction did not commit (the connection is back)"};
  }
  return halt({error::unreachable, lost.message()
                                     + "; whether the transaction committed is unknown ("
                                     + why.message() + ")"});
}

status pg_db::commit() {
  // COMMIT goes out only once the fence has held.
  if (fence_unread())
    if (auto st = read_pipeline(); !st)
      return st;
  if (auto st = reconnect_if_lost(); !st)
    return st;
  // A transaction that a failure already rolled back (its status went to
  // whoever read it): PostgreSQL would answer COMMIT with a mere warning.
  if (!in_transaction())
    return {error::internal, location_ + ": nothing to commit: the transaction had ended"};
  PGresult* r = nullptr;
  status st;
  if (pipelined_) {
    // What was sent after the last read goes out with it.
    st = send_text("COMMIT", unread_kind::effect);
    if (st)
      st = read_pipeline(&r);
  } else {
    r = PQexec(conn_, "COMMIT");
  }
  // Unless an earlier command failed (the transaction is then rolled back,
  // or lost). A transaction that had failed answers COMMIT with ROLLBACK.
  if (st) {
    if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK)
      st = error_status(r, "committing");
    else if (std::strcmp(PQcmdStatus(r), "COMMIT") != 0)
      st = {error::internal, location_ + ": COMMIT rolled back a failed transaction"};
  }
  PQclear(r);
  if (!st && PQstatus(conn_) == CONNECTION_BAD && !xact_.empty())
    return learn_commit(st);
  xact_.clear();
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE)
    in_write_ = false;
  return st;
}

bool pg_db::in_transaction() const noexcept {
  auto t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

}  // namespace ergon::storage
