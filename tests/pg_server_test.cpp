// The PostgreSQL harness the PostgreSQL engine's tests run on (issue 29):
// a real PostgreSQL 15 of the test's own, on loopback only, with durable
// defaults, a fresh database per test, and nothing left once it stops.
#define BOOST_TEST_MODULE pg_server
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>
#include <memory>
#include <string>

#include "support/pg_server.hpp"

using ergon::test::pg_server;

namespace {

// One answer of `sql` on `conninfo`.
std::string one_value(const std::string& conninfo, const std::string& sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  BOOST_REQUIRE_MESSAGE(PQstatus(c) == CONNECTION_OK, PQerrorMessage(c));
  PGresult* r = PQexec(c, sql.c_str());
  BOOST_REQUIRE_MESSAGE(PQresultStatus(r) == PGRES_TUPLES_OK, PQresultErrorMessage(r));
  std::string v = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(c);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_server_is_postgresql_15_on_loopback_with_durable_defaults) {
  pg_server pg;
  BOOST_TEST(one_value(pg.uri(), "SHOW server_version_num").substr(0, 2) == "15");
  BOOST_TEST(one_value(pg.uri(), "SHOW listen_addresses") == "127.0.0.1");
  BOOST_TEST(one_value(pg.uri(), "SHOW port") == std::to_string(pg.port()));
  BOOST_TEST(one_value(pg.uri(), "SHOW fsync") == "on");
  BOOST_TEST(one_value(pg.uri(), "SHOW synchronous_commit") == "on");
}

BOOST_AUTO_TEST_CASE(each_fresh_database_is_empty_and_apart_from_the_others) {
  pg_server pg;
  auto a = pg.fresh_database();
  auto b = pg.fresh_database();
  BOOST_TEST(a != b);
  pg_server::run_sql(a, "CREATE TABLE only_here (x int)");
  auto tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'";
  BOOST_TEST(one_value(a, tables) == "1");
  BOOST_TEST(one_value(b, tables) == "0");
  BOOST_CHECK_THROW(pg_server::run_sql(a, "SELECT * FROM no_such_table"), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_stopped_server_refuses_connections_and_leaves_no_folder) {
  std::string uri;
  std::string folder;
  {
    pg_server pg;
    uri = pg.uri();
    folder = pg.folder();
    BOOST_TEST(one_value(uri, "SELECT 1") == "1");
    BOOST_TEST(std::filesystem::exists(folder + "/data/PG_VERSION"));
  }
  PGconn* c = PQconnectdb(uri.c_str());
  BOOST_TEST(PQstatus(c) == CONNECTION_BAD);
  PQfinish(c);
  BOOST_TEST(!std::filesystem::exists(folder), folder);
}

BOOST_AUTO_TEST_CASE(a_test_process_killed_outright_leaves_no_server_behind) {
  // The child starts a server, says where, and waits to be SIGKILLed: no
  // destructor runs, so the watchdog must stop the server.
  int out[2];
  BOOST_REQUIRE(::pipe(out) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    try {
      pg_server pg;
      auto line = pg.uri() + " " + pg.folder() + "\n";
      if (::write(out[1], line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        ::_exit(1);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(out[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) {
    said.append(buf, static_cast<size_t>(n));
    if (said.find('\n') != std::string::npos)
      break;
  }
  ::close(out[0]);
  auto space = said.find(' ');
  BOOST_REQUIRE_MESSAGE(space != std::string::npos, "the child started no server");
  auto uri = said.substr(0, space);
  auto folder = said.substr(space + 1, said.find('\n') - space - 1);
  BOOST_TEST(one_value(uri, "SELECT 1") == "1");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // The watchdog works on its own: wait for its effect, with a bound.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::filesystem::exists(folder) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  BOOST_TEST(!std::filesystem::exists(folder), folder);
  PGconn* c = PQconnectdb(uri.c_str());
  BOOST_TEST(PQstatus(c) == CONNECTION_BAD);
  PQfinish(c);
}
