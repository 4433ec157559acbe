// The storage engine a test executable runs on: ERGON_TEST_ENGINE=sqlite
// (the default) or postgres. ctest runs the engine-neutral executables once
// per engine (issue 29). On PostgreSQL, the process starts one server of its
// own on first use (pg_server.hpp), and each test gets a fresh database.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <boost/test/unit_test.hpp>

#include "ergon/storage/db.hpp"
#include "ergon/storage/pg_db.hpp"
#include "ergon/storage/schema.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "support/pg_server.hpp"
#include "support/test_support.hpp"

namespace ergon::test {

/// The engine ERGON_TEST_ENGINE names. Anything but "postgres" or "sqlite"
/// ends the run: a typo must not quietly test the other engine.
inline storage::engine test_engine() {
  static const storage::engine e = [] {
    const char* v = std::getenv("ERGON_TEST_ENGINE");
    std::string name = v != nullptr ? v : "sqlite";
    if (name == "sqlite")
      return storage::engine::sqlite;
    if (name == "postgres")
      return storage::engine::postgres;
    throw std::runtime_error("ERGON_TEST_ENGINE is '" + name + "': sqlite or postgres");
  }();
  return e;
}

inline bool on_postgres() {
  return test_engine() == storage::engine::postgres;
}

/// This process's PostgreSQL server, started on first use and stopped at
/// exit.
inline pg_server& shared_pg_server() {
  static pg_server server;
  return server;
}

/// Where a test's queue lives on the test engine: the file q.db in `dir`,
/// or a fresh PostgreSQL database.
inline std::string test_location(const temp_dir& dir) {
  return on_postgres() ? shared_pg_server().fresh_database() : dir.file("q.db");
}

/// The queue location for `dir`, the same on every call: its q.db, or on
/// PostgreSQL a database made on first use (for tests that reopen a queue
/// by its directory, as servers restarted on the same file do).
inline std::string location_of(const temp_dir& dir) {
  if (!on_postgres())
    return dir.file("q.db");
  static std::mutex mtx;
  static std::map<std::string, std::string> made;
  std::lock_guard<std::mutex> lock{mtx};
  auto& uri = made[dir.file("q.db")];
  if (uri.empty())
    uri = shared_pg_server().fresh_database();
  return uri;
}

/// A connection of its own to the queue data at `location` (a file path or
/// a postgresql:// URI), beside the queue that owns it; a file opens with
/// `file_options`.
inline std::unique_ptr<storage::db> open_db(const std::string& location,
                                            const storage::sqlite_options& file_options = {}) {
  if (storage::names_postgres(location)) {
    auto o = storage::parse_pg_uri(location);
    BOOST_REQUIRE_MESSAGE(o.has_value(), o.error().to_string());
    auto opened = storage::pg_db::open(*o);
    BOOST_REQUIRE_MESSAGE(opened.has_value(), opened.error().to_string());
    return std::move(*opened);
  }
  auto opened = storage::sqlite_db::open(location, file_options);
  BOOST_REQUIRE_MESSAGE(opened.has_value(), opened.error().to_string());
  return std::move(*opened);
}

/// A fresh migrated connection on the test engine: the file `sqlite_path`
/// for SQLite, a new database for PostgreSQL.
inline std::unique_ptr<storage::db> fresh_db(const std::string& sqlite_path) {
  auto d = open_db(on_postgres() ? shared_pg_server().fresh_database() : sqlite_path);
  auto st = storage::migrate(*d);
  BOOST_REQUIRE_MESSAGE(st.ok(), st.to_string());
  return d;
}

/// Another connection to the data of `d` (opened by fresh_db with the same
/// `sqlite_path`), migrated as d is.
inline std::unique_ptr<storage::db> reopen(storage::db& d, const std::string& sqlite_path) {
  if (d.engine() == storage::engine::postgres) {
    auto opened = storage::pg_db::open(static_cast<storage::pg_db&>(d).options());
    BOOST_REQUIRE_MESSAGE(opened.has_value(), opened.error().to_string());
    return std::move(*opened);
  }
  return open_db(sqlite_path);
}

/// Reads and writes a test's data behind ergon's back, on either engine:
/// SQLite through a connection of its own to the file; PostgreSQL on a
/// session of its own to a location's URI, or on the session of a `db`
/// (so it sees what that db has not committed).
class engine_probe {
 public:
  /// The data at `location`: a file path or a postgresql:// URI.
  explicit engine_probe(const std::string& location) {
    if (!storage::names_postgres(location)) {
      path_ = location;
      return;
    }
    auto o = storage::parse_pg_uri(location);
    BOOST_REQUIRE_MESSAGE(o.has_value(), o.error().to_string());
    auto options = "-c search_path=" + o->schema;
    const char* keys[] = {"dbname", "options", nullptr};
    const char* values[] = {o->conninfo.c_str(), options.c_str(), nullptr};
    own_ = PQconnectdbParams(keys, values, 1);
    BOOST_REQUIRE_MESSAGE(PQstatus(own_) == CONNECTION_OK, PQerrorMessage(own_));
  }
  engine_probe(storage::db& d, std::string sqlite_path) : path_(std::move(sqlite_path)) {
    if (d.engine() == storage::engine::postgres)
      borrowed_ = static_cast<storage::pg_db&>(d).raw();
  }
  engine_probe(const engine_probe&) = delete;
  engine_probe& operator=(const engine_probe&) = delete;
  ~engine_probe() {
    if (own_ != nullptr)
      PQfinish(own_);
  }

  /// The first column of the first row as text ("" if there is none); the
  /// SQL for the engine in use.
  std::string text(const std::string& sqlite_sql, const std::string& postgres_sql) const {
    if (!pg())
      return sqlite_probe{path_}.text(sqlite_sql);
    PGresult* r = PQexec(pg(), postgres_sql.c_str());
    BOOST_REQUIRE_MESSAGE(PQresultStatus(r) == PGRES_TUPLES_OK,
                          postgres_sql + ": " + PQresultErrorMessage(r));
    std::string out = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return out;
  }
  std::string text(const std::string& sql) const { return text(sql, sql); }
  int64_t number(const std::string& sqlite_sql, const std::string& postgres_sql) const {
    auto t = text(sqlite_sql, postgres_sql);
    return t.empty() ? 0 : std::stoll(t);
  }
  int64_t number(const std::string& sql) const { return number(sql, sql); }

  void exec(const std::string& sqlite_sql, const std::string& postgres_sql) const {
    if (!pg()) {
      sqlite_probe{path_, sqlite_probe::writable}.exec(sqlite_sql);
      return;
    }
    PGresult* r = PQexec(pg(), postgres_sql.c_str());
    auto st = PQresultStatus(r);
    std::string why = PQresultErrorMessage(r);
    PQclear(r);
    BOOST_REQUIRE_MESSAGE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK,
                          postgres_sql + ": " + why);
  }
  void exec(const std::string& sql) const { exec(sql, sql); }

  /// Every job and attempt row, for "nothing changed" checks.
  std::string dump() const {
    if (!pg())
      return sqlite_probe{path_}.dump();
    return text("",
                "SELECT coalesce(string_agg(r, '|' ORDER BY id), '') FROM ("
                "SELECT id, id || ',' || encode(external_id, 'hex') || ',' || type || ',' || status"
                " || ',' || priority || ',' || weight || ',' || run_at || ','"
                " || encode(payload, 'hex') || ',' || current_try AS r FROM jobs) j")
           + "#"
           + text("", "SELECT coalesce(string_agg(job_id || ',' || try || ',' || outcome, '|' "
                      "ORDER BY job_id, try), '') FROM attempts");
  }

 private:
  PGconn* pg() const { return own_ != nullptr ? own_ : borrowed_; }
  std::string path_;
  PGconn* own_ = nullptr;
  PGconn* borrowed_ = nullptr;
};

/// A test precondition: runs the test on one engine only, and says why in
/// the skip message.
struct only_on {
  storage::engine engine;
  const char* why;
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    boost::test_tools::assertion_result r{test_engine() == engine};
    r.message() << "skipped on this engine: " << why;
    return r;
  }
};

inline auto sqlite_only(const char* why) {
  return boost::unit_test::precondition(only_on{storage::engine::sqlite, why});
}
inline auto postgres_only(const char* why) {
  return boost::unit_test::precondition(only_on{storage::engine::postgres, why});
}

}  // namespace ergon::test
