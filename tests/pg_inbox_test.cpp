// Enqueue from any PostgreSQL transaction (issue 30, item 4): the inbox,
// ergon.submit() and ergon::pg. Application transactions run on
// connections of the test's own, beside a queue that owns the schema; the
// test waits on the queue's events and its jobs' code, never on sleeps.
#define BOOST_TEST_MODULE pg_inbox
#include <boost/test/unit_test.hpp>

#include <libpq-fe.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ergon/job_builder.hpp"
#include "ergon/pg.hpp"
#include "ergon/queue.hpp"
#include "support/child_process.hpp"
#include "support/run_support.hpp"
#include "support/test_engine.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// An application's own connection.
class app_conn {
 public:
  explicit app_conn(const std::string& uri) : c_(PQconnectdb(uri.c_str())) {
    BOOST_REQUIRE_MESSAGE(PQstatus(c_) == CONNECTION_OK, PQerrorMessage(c_));
  }
  ~app_conn() { PQfinish(c_); }
  app_conn(const app_conn&) = delete;
  app_conn& operator=(const app_conn&) = delete;

  PGconn* get() const { return c_; }

  // Runs `sql`; the first column of its first row, or "".
  std::string exec(const std::string& sql) {
    PGresult* r = PQexec(c_, sql.c_str());
    auto st = PQresultStatus(r);
    std::string out = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    std::string why = PQresultErrorMessage(r);
    PQclear(r);
    BOOST_REQUIRE_MESSAGE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, sql + ": " + why);
    return out;
  }

 private:
  PGconn* c_;
};

job make_job(const std::string& type, const std::string& payload) {
  auto j = job_builder(type).payload(payload).build();
  BOOST_REQUIRE_MESSAGE(j.has_value(), j.error().to_string());
  return *j;
}

int64_t submit_in(app_conn& c, const job& j) {
  auto entry = pg::submit(c.get(), j);
  BOOST_REQUIRE_MESSAGE(entry.has_value(), entry.error().to_string());
  return *entry;
}

pg::inbox_entry entry_of(app_conn& c, int64_t number) {
  auto e = pg::find_entry(c.get(), number);
  BOOST_REQUIRE_MESSAGE(e.has_value(), e.error().to_string());
  return *e;
}

// The payloads that job code ran, in order.
struct ran_payloads {
  std::mutex mtx;
  std::condition_variable grew;
  std::vector<std::string> payloads;
  std::map<std::string, job_id> ids;

  worker_options worker(const std::string& type) {
    worker_options w;
    w.max_concurrency = 4;
    w.runners[type] = [this](job_context& ctx) {
      std::lock_guard<std::mutex> lock{mtx};
      payloads.push_back(ctx.payload());
      ids[ctx.payload()] = ctx.id();
      grew.notify_all();
    };
    return w;
  }
  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock{mtx};
    return grew.wait_for(lock, hang_guard, [&] { return payloads.size() >= n; });
  }
};

std::unique_ptr<queue> open_queue(const std::string& uri, options o = {}) {
  auto q = queue::open(uri, std::move(o));
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  return std::make_unique<queue>(std::move(*q));
}

// Options for a queue on `clock` that keeps taken entries for 1 s.
options on_clock(std::shared_ptr<manual_clock> clock) {
  options o;
  o.clock = std::move(clock);
  o.idempotency_window = 1s;
  return o;
}

// A shop: a queue that runs "ship" jobs, and an application with its own
// orders table.
struct shop {
  std::string uri = shared_pg_server().fresh_database();
  std::unique_ptr<queue> q = open_queue(uri);
  ran_payloads ran;
  result<worker> w = q->start_worker(ran.worker("ship"));
  app_conn app{uri};

  shop() { app.exec("CREATE TABLE orders (id bigint PRIMARY KEY)"); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_rollback_leaves_nothing_and_a_commit_runs_the_job, shop) {

  app.exec("BEGIN");
  app.exec("INSERT INTO orders VALUES (1)");
  auto dropped = submit_in(app, make_job("ship", "1"));
  app.exec("ROLLBACK");

  app.exec("BEGIN");
  app.exec("INSERT INTO orders VALUES (2)");
  auto kept = submit_in(app, make_job("ship", "2"));
  app.exec("COMMIT");

  BOOST_REQUIRE(ran.wait_for(1));
  BOOST_TEST(ran.payloads == std::vector<std::string>{"2"});
  // The rolled-back entry's number was below the committed one's: a drain
  // that took the committed one would have taken it too.
  BOOST_TEST(dropped < kept);
  auto gone = pg::find_entry(app.get(), dropped);
  BOOST_REQUIRE(!gone.has_value());
  BOOST_TEST(gone.error().code() == error::not_found);
  auto taken = entry_of(app, kept);
  BOOST_TEST(taken.state == pg::entry_state::taken);
  BOOST_TEST(taken.id == ran.ids.at("2"));
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.jobs") == "1");
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.inbox") == "1");
  BOOST_TEST(app.exec("SELECT count(*) FROM orders") == "1");
  // The code ran; its success commits after.
  auto info = q->wait(taken.id, hang_guard);
  BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
  BOOST_TEST(info->status == job_status::succeeded);
}

BOOST_FIXTURE_TEST_CASE(eight_concurrent_transactions_commit_or_roll_back_their_jobs, shop) {
  auto& setup = app;

  // Each takes its entry number in turn, and all eight hold one before any
  // ends; then they end in reverse order, so later numbers commit first.
  constexpr int n = 8;
  std::mutex mtx;
  std::condition_variable cv;
  int opened = 0;
  int next_to_submit = 0;
  int next_to_end = n - 1;
  std::vector<std::thread> apps;
  std::vector<std::string> failures;
  std::vector<int64_t> numbers(n, 0);
  std::vector<job> jobs;
  for (int i = 0; i < n; ++i)
    jobs.push_back(make_job("ship", std::to_string(i)));
  auto job_for = [&jobs](int i) { return jobs[static_cast<size_t>(i)]; };
  std::set<std::string> committed;
  for (int i = 0; i < n; ++i) {
    bool commit = i % 3 != 0;
    if (commit)
      committed.insert(std::to_string(i));
    // Boost.Test's checks are for the main thread: these threads collect
    // their failures instead.
    apps.emplace_back([&, i, commit] {
      PGconn* c = PQconnectdb(uri.c_str());
      auto run = [&](const std::string& sql) {
        PGresult* r = PQexec(c, sql.c_str());
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
          std::lock_guard<std::mutex> lock{mtx};
          failures.push_back(sql + ": " + PQresultErrorMessage(r));
        }
        PQclear(r);
      };
      run("BEGIN");
      run("INSERT INTO orders VALUES (" + std::to_string(i) + ")");
      std::unique_lock<std::mutex> lock{mtx};
      cv.wait(lock, [&] { return next_to_submit == i; });
      auto entry = pg::submit(c, job_for(i));
      if (!entry)
        failures.push_back(entry.error().to_string());
      else
        numbers[static_cast<size_t>(i)] = *entry;
      ++next_to_submit;
      ++opened;
      cv.notify_all();
      cv.wait(lock, [&] { return opened == n && next_to_end == i; });
      lock.unlock();
      run(commit ? "COMMIT" : "ROLLBACK");
      PQfinish(c);
      lock.lock();
      --next_to_end;
      cv.notify_all();
    });
  }
  for (auto& t : apps)
    t.join();
  BOOST_TEST(failures.empty(), (failures.empty() ? std::string{} : failures.front()));
  for (int i = 1; i < n; ++i)
    BOOST_TEST(numbers[static_cast<size_t>(i) - 1] < numbers[static_cast<size_t>(i)]);  // so the commits went out of order

  BOOST_REQUIRE(ran.wait_for(committed.size()));
  std::set<std::string> seen(ran.payloads.begin(), ran.payloads.end());
  BOOST_TEST(seen == committed);
  BOOST_TEST(ran.payloads.size() == committed.size());  // each once
  std::set<std::string> orders;
  for (int i = 0; i < n; ++i)
    if (setup.exec("SELECT count(*) FROM orders WHERE id = " + std::to_string(i)) == "1")
      orders.insert(std::to_string(i));
  BOOST_TEST(orders == committed);
  BOOST_TEST(setup.exec("SELECT count(*) FROM ergon.jobs") == std::to_string(committed.size()));
  BOOST_TEST(setup.exec("SELECT count(*) FROM ergon.inbox WHERE job IS NULL") == "0");
}

BOOST_AUTO_TEST_CASE(psql_enqueues_with_sql_alone) {
  auto uri = shared_pg_server().fresh_database();
  auto q = open_queue(uri);
  ran_payloads ran;
  auto worker = q->start_worker(ran.worker("ship"));
  child_process psql{{"/usr/lib/postgresql/15/bin/psql", uri, "-X", "-q", "-t", "-A", "-v",
                      "ON_ERROR_STOP=1", "-c", "BEGIN",
                      "-c", "SELECT ergon.submit('ship', 'hello'::bytea, priority => 3, "
                            "name => 'from psql')",
                      "-c", "COMMIT"}};
  auto entry = psql.read_line();
  BOOST_TEST(psql.wait() == 0);
  BOOST_TEST(!entry.empty());

  BOOST_REQUIRE(ran.wait_for(1));
  BOOST_TEST(ran.payloads.at(0) == "hello");
  auto info = q->job_info(ran.ids.at("hello"));
  BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
  BOOST_TEST(info->priority == 3);
  BOOST_TEST(info->name.value_or("") == "from psql");
  app_conn app{uri};
  BOOST_TEST(entry_of(app, std::stoll(entry)).id == info->id);
}

BOOST_AUTO_TEST_CASE(a_unique_key_conflict_between_a_transaction_and_a_submit) {
  auto uri = shared_pg_server().fresh_database();
  auto q = open_queue(uri);
  event_log log{*q};
  app_conn app{uri};
  auto keyed = [](const std::string& key, const std::string& payload) {
    auto j = job_builder("ship").payload(payload).unique_key(key, unique_policy::reject).build();
    BOOST_REQUIRE_MESSAGE(j.has_value(), j.error().to_string());
    return *j;
  };

  // A submit holds the key first: the transaction's entry is refused.
  auto first = q->submit(keyed("order-1", "by submit"));
  BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
  app.exec("BEGIN");
  auto refused = submit_in(app, keyed("order-1", "by transaction"));
  app.exec("COMMIT");
  BOOST_REQUIRE(log.wait_for(event_kind::inbox_refused));
  auto ev = log.of(event_kind::inbox_refused).at(0);
  BOOST_TEST(ev.inbox_entry == refused);
  BOOST_TEST(ev.type == "ship");
  BOOST_TEST(ev.message.find("already_exists") != std::string::npos);
  BOOST_TEST(ev.message.find(first->to_string()) != std::string::npos);
  auto e = entry_of(app, refused);
  BOOST_TEST(e.state == pg::entry_state::refused);
  BOOST_TEST(e.refusal.code() == error::already_exists);
  BOOST_TEST(e.refusal.field() == "unique_key");

  // The transaction holds the key first: the submit is refused.
  app.exec("BEGIN");
  auto won = submit_in(app, keyed("order-2", "by transaction"));
  app.exec("COMMIT");
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 2));
  auto holder = entry_of(app, won);
  BOOST_TEST(holder.state == pg::entry_state::taken);
  auto second = q->submit(keyed("order-2", "by submit"));
  BOOST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().code() == error::already_exists);
  BOOST_TEST(second.error().message().find(holder.id.to_string()) != std::string::npos);
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.jobs") == "2");
}

BOOST_AUTO_TEST_CASE(a_refused_entry_names_its_field_and_the_rest_are_taken) {
  auto uri = shared_pg_server().fresh_database();
  auto q = open_queue(uri);
  event_log log{*q};
  app_conn app{uri};
  app.exec("BEGIN");
  int64_t light = std::stoll(app.exec("SELECT ergon.submit('ship', weight => 0)"));
  int64_t good = std::stoll(app.exec("SELECT ergon.submit('ship', 'fine'::bytea)"));
  int64_t odd = std::stoll(app.exec("SELECT ergon.submit('ship', max_retries => -1)"));
  int64_t huge = std::stoll(app.exec("SELECT ergon.submit('ship', priority => 4294967296)"));
  app.exec("COMMIT");
  BOOST_REQUIRE(log.wait_for(event_kind::inbox_refused, 3));
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 1));
  std::map<int64_t, std::string> fields;
  for (auto n : {light, odd, huge}) {
    auto e = entry_of(app, n);
    BOOST_TEST(e.state == pg::entry_state::refused);
    BOOST_TEST(e.refusal.code() == error::invalid_argument);
    fields[n] = e.refusal.field();
  }
  BOOST_TEST(fields[light] == "weight");
  BOOST_TEST(fields[odd] == "max_retries");
  BOOST_TEST(fields[huge] == "priority");
  auto taken = entry_of(app, good);
  BOOST_TEST(taken.state == pg::entry_state::taken);
  auto info = q->job_info(taken.id);
  BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
  BOOST_TEST(info->payload == "fine");
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.jobs") == "1");
}

BOOST_AUTO_TEST_CASE(the_sweep_takes_an_entry_whose_notice_was_lost_and_forgets_old_ones) {
  auto uri = shared_pg_server().fresh_database();
  auto clock = std::make_shared<manual_clock>();
  auto o = on_clock(clock);
  o.inbox_sweep = 500ms;
  auto q = open_queue(uri, o);
  event_log log{*q};
  app_conn app{uri};
  // Taken at its notice: the listener is up.
  auto noticed = submit_in(app, make_job("ship", "noticed"));
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 1));
  // A row without a notice waits for the sweep.
  int64_t silent = std::stoll(app.exec("INSERT INTO ergon.inbox (type) VALUES ('ship') RETURNING id"));
  BOOST_TEST(entry_of(app, silent).state == pg::entry_state::waiting);
  clock->advance(500ms);
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 2));
  BOOST_TEST(entry_of(app, silent).state == pg::entry_state::taken);

  // Past the window, a sweep deletes both. The drain that the next notice
  // asks for runs after it.
  clock->advance(1500ms);
  submit_in(app, make_job("ship", "later"));
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 3));
  for (auto n : {noticed, silent}) {
    auto gone = pg::find_entry(app.get(), n);
    BOOST_REQUIRE(!gone.has_value());
    BOOST_TEST(gone.error().code() == error::not_found);
  }
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.inbox") == "1");
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.jobs") == "3");
}

BOOST_AUTO_TEST_CASE(a_listening_session_that_drops_comes_back_and_takes_what_it_missed) {
  auto uri = shared_pg_server().fresh_database();
  options o;
  o.clock = std::make_shared<manual_clock>();  // no sweep unless the test advances it
  auto q = open_queue(uri, o);
  event_log log{*q};
  app_conn app{uri};
  submit_in(app, make_job("ship", "before"));
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 1));
  auto ended = app.exec(
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE query = 'LISTEN ergon_inbox' AND datname = current_database()");
  BOOST_TEST(ended == "1");
  // Committed while the session is gone or coming back: its notice may be
  // lost, and the new session drains once it listens.
  auto missed = submit_in(app, make_job("ship", "after"));
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 2));
  BOOST_TEST(entry_of(app, missed).state == pg::entry_state::taken);
}

BOOST_AUTO_TEST_CASE(entries_committed_while_no_owner_runs_are_taken_at_open) {
  auto uri = shared_pg_server().fresh_database();
  open_queue(uri)->close();  // migrates the schema
  app_conn app{uri};
  app.exec("BEGIN");
  for (auto p : {"a", "b", "c"})
    submit_in(app, make_job("ship", p));
  app.exec("COMMIT");
  auto q = open_queue(uri);
  ran_payloads ran;
  auto worker = q->start_worker(ran.worker("ship"));
  BOOST_REQUIRE(ran.wait_for(3));
  std::set<std::string> seen(ran.payloads.begin(), ran.payloads.end());
  BOOST_TEST(seen == (std::set<std::string>{"a", "b", "c"}));
}

BOOST_AUTO_TEST_CASE(pg_submit_checks_its_input_and_names_what_is_wrong) {
  auto uri = shared_pg_server().fresh_database();
  app_conn app{uri};
  auto fine = make_job("ship", "x");

  auto no_conn = pg::submit(nullptr, fine);
  BOOST_REQUIRE(!no_conn.has_value());
  BOOST_TEST(no_conn.error().field() == "conn");

  job empty_type = fine;
  empty_type.type.clear();
  auto bad_job = pg::submit(app.get(), empty_type);
  BOOST_REQUIRE(!bad_job.has_value());
  BOOST_TEST(bad_job.error().field() == "type");

  auto bad_schema = pg::submit(app.get(), fine, {"Ergon; DROP"});
  BOOST_REQUIRE(!bad_schema.has_value());
  BOOST_TEST(bad_schema.error().field() == "schema");

  // No queue opened this database yet.
  auto no_inbox = pg::submit(app.get(), fine);
  BOOST_REQUIRE(!no_inbox.has_value());
  BOOST_TEST(no_inbox.error().code() == error::invalid_argument);
  BOOST_TEST(no_inbox.error().field() == "schema");
  BOOST_TEST(no_inbox.error().message().find("holds no ergon inbox") != std::string::npos);

  open_queue(uri)->close();
  // A role may execute the function only once it is granted.
  app.exec("CREATE ROLE shop LOGIN");
  auto shop_uri = uri;
  shop_uri.replace(shop_uri.find("ergon@"), 6, "shop@");
  app_conn shop{shop_uri};
  auto denied = pg::submit(shop.get(), fine);
  BOOST_REQUIRE(!denied.has_value());
  BOOST_TEST(denied.error().code() == error::read_only);
  BOOST_TEST(denied.error().message().find("GRANT") != std::string::npos);
  app.exec("GRANT USAGE ON SCHEMA ergon TO shop");
  app.exec("GRANT EXECUTE ON FUNCTION ergon.submit, ergon.entry TO shop");
  auto granted = pg::submit(shop.get(), fine);
  BOOST_REQUIRE_MESSAGE(granted.has_value(), granted.error().to_string());
  auto own = pg::find_entry(shop.get(), *granted);
  BOOST_REQUIRE_MESSAGE(own.has_value(), own.error().to_string());
  BOOST_TEST(own->state == pg::entry_state::waiting);
  // It may not touch the tables themselves.
  PGresult* r = PQexec(shop.get(), "SELECT count(*) FROM ergon.inbox");
  BOOST_TEST(PQresultStatus(r) == PGRES_FATAL_ERROR);
  PQclear(r);

  auto missing = pg::find_entry(app.get(), -1);
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().code() == error::not_found);
  BOOST_TEST(entry_of(app, *granted).state == pg::entry_state::waiting);
}

BOOST_AUTO_TEST_CASE(hostile_entries_are_bounded_and_an_oversized_payload_is_refused_unread) {
  auto uri = shared_pg_server().fresh_database();
  options o;
  o.max_payload_bytes = 1'024;
  auto q = open_queue(uri, o);
  event_log log{*q};
  app_conn app{uri};
  // What the table itself refuses, at once and in the enqueuer's transaction.
  for (auto sql : {"SELECT ergon.submit(repeat('t', 257))",
                   "SELECT ergon.submit('ship', unique_key => repeat('k', 257))",
                   "SELECT ergon.submit('ship', on_duplicate => 'ignore')"}) {
    PGresult* r = PQexec(app.get(), sql);
    BOOST_TEST(PQresultStatus(r) == PGRES_FATAL_ERROR, sql);
    BOOST_TEST(std::string{PQresultErrorField(r, PG_DIAG_SQLSTATE)} == "23514", sql);
    PQclear(r);
  }
  // Past the queue's own limit: refused by the owner, its payload unread.
  int64_t big = std::stoll(app.exec("SELECT ergon.submit('ship', decode(repeat('ab', 1025), "
                                    "'hex'))"));
  int64_t fine = std::stoll(app.exec("SELECT ergon.submit('ship', 'small'::bytea)"));
  BOOST_REQUIRE(log.wait_for(event_kind::inbox_refused, 1));
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 1));
  auto refused = entry_of(app, big);
  BOOST_TEST(refused.state == pg::entry_state::refused);
  BOOST_TEST(refused.refusal.code() == error::invalid_argument);
  BOOST_TEST(refused.refusal.field() == "payload");
  BOOST_TEST(refused.refusal.message().find("1025 bytes") != std::string::npos);
  BOOST_TEST(entry_of(app, fine).state == pg::entry_state::taken);
}

BOOST_AUTO_TEST_CASE(a_sweep_forgets_more_old_entries_than_one_batch) {
  auto uri = shared_pg_server().fresh_database();
  auto clock = std::make_shared<manual_clock>();
  auto o = on_clock(clock);
  auto q = open_queue(uri, o);
  event_log log{*q};
  app_conn app{uri};
  // 1,200 entries taken in long ago (more than the drain's batch of 500).
  app.exec("INSERT INTO ergon.inbox (type, taken_at, refused_code, refused_message) "
           "SELECT 'ship', 1, 'invalid_argument', 'old' FROM generate_series(1, 1200)");
  clock->advance(o.inbox_sweep);
  BOOST_REQUIRE(log.wait([](const std::vector<event>& es) {
    int64_t deleted = 0;
    for (auto& e : es)
      if (e.kind == event_kind::swept)
        deleted += e.inbox_entries_deleted;
    return deleted == 1200;
  }));
  BOOST_TEST(app.exec("SELECT count(*) FROM ergon.inbox") == "0");
}

BOOST_AUTO_TEST_CASE(a_schema_named_by_a_reserved_word_has_an_inbox_too) {
  auto db = shared_pg_server().fresh_database();
  auto q = open_queue(db + "?schema=order");
  event_log log{*q};
  app_conn app{db};
  auto entry = pg::submit(app.get(), make_job("ship", "x"), {"order"});
  BOOST_REQUIRE_MESSAGE(entry.has_value(), entry.error().to_string());
  BOOST_REQUIRE(log.wait_for(event_kind::submitted, 1));
  auto e = pg::find_entry(app.get(), *entry, {"order"});
  BOOST_REQUIRE_MESSAGE(e.has_value(), e.error().to_string());
  BOOST_TEST(e->state == pg::entry_state::taken);
}
