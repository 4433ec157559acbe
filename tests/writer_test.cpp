// db_writer batching, and storage failures reaching the caller as errors.
// On both engines (ERGON_TEST_ENGINE); the file failures are SQLite's.
#define BOOST_TEST_MODULE writer
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <optional>

#include "ergon/actors/db_writer.hpp"
#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/schema.hpp"
#include "support/child_process.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::engine_probe;
using ergon::test::sqlite_probe;
using ergon::test::temp_dir;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

job make(const std::string& type = "t", std::string payload = "p") {
  return *job_builder(type).payload(std::move(payload)).build();
}

// A writer spawned directly, so a test can line up several requests and see
// them committed in one transaction.
struct writer_fixture {
  temp_dir dir;
  std::string location = test::location_of(dir);
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  actors::db_writer_actor writer;
  std::shared_ptr<actors::job_counters> counters = std::make_shared<actors::job_counters>();
  std::shared_ptr<actors::feed_channel> feeds = std::make_shared<actors::feed_channel>();

  void start(storage::sqlite_options db_opts = {}) {
    db_opts.busy_timeout_ms = 20'000;
    auto d = test::open_db(location, db_opts);
    BOOST_REQUIRE(storage::migrate(*d).ok());
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
    actors::db_writer_config wcfg;
    wcfg.db = std::move(d);
    wcfg.clock = std::make_shared<manual_clock>(t0);
    wcfg.counters = counters;
    wcfg.feeds = feeds;
    writer = actors::spawn_db_writer(*sys, std::move(wcfg));
  }

  // The feeds of every write sent so far, once they are committed.
  std::vector<actors::commit_feed> fed() {
    std::promise<void> done;
    caf::anon_send(writer, actors::after_writes{[&] { done.set_value(); }});
    done.get_future().wait();
    return feeds->take();
  }

  ~writer_fixture() {
    if (writer) {
      auto [to, from] = actors::make_reply<status>();
      caf::anon_send(writer, actors::close_call{{}, std::move(to)});
      from.wait();
    }
  }

  using submit_reply = result<std::vector<job_id>>;

  actors::reply_from<submit_reply> send_submit(std::vector<job> jobs) {
    auto [to, from] = actors::make_reply<submit_reply>();
    caf::anon_send(writer, actors::submit_call{{std::move(jobs)}, std::move(to)});
    return std::move(from);
  }

  actors::reply_from<status> send_cancel(const job_id& id) {
    auto [to, from] = actors::make_reply<status>();
    caf::anon_send(writer, actors::cancel_call{{id}, std::move(to)});
    return std::move(from);
  }
};

// Holds the database's write lock (on PostgreSQL, the jobs table's) from
// another connection until released, so requests queue up in the writer's
// mailbox and land in one batch.
struct write_lock {
  explicit write_lock(const std::string& location) {
    if (storage::names_postgres(location)) {
      pg.emplace(location);
      pg->exec("", "BEGIN; LOCK TABLE jobs IN EXCLUSIVE MODE");
    } else {
      file.emplace(location, sqlite_probe::writable);
      file->exec("BEGIN IMMEDIATE");
    }
  }
  void release() {
    if (pg)
      pg->exec("", "ROLLBACK");
    else
      file->exec("ROLLBACK");
  }
  std::optional<sqlite_probe> file;
  std::optional<engine_probe> pg;
};

// Makes every insert of a row of type "poison" into `table` fail with
// `message`, after whatever the same statement or request wrote before it.
void poison(const std::string& location, const std::string& table, const std::string& message) {
  engine_probe{location}.exec(
    "CREATE TRIGGER reject_poison BEFORE INSERT ON " + table
      + " WHEN NEW.type = 'poison' BEGIN SELECT RAISE(ABORT, '" + message + "'); END;",
    "CREATE FUNCTION reject_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.type = 'poison' THEN RAISE EXCEPTION '" + message + "'; END IF; RETURN NEW; END $$;"
    "CREATE TRIGGER reject_poison BEFORE INSERT ON " + table
      + " FOR EACH ROW EXECUTE FUNCTION reject_poison()");
}

// The types of the jobs, in row order.
std::string types_of_jobs(const engine_probe& probe) {
  return probe.text("SELECT group_concat(type, ',') FROM (SELECT type FROM jobs ORDER BY id)",
                    "SELECT string_agg(type, ',' ORDER BY id) FROM jobs");
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(batching, writer_fixture)

BOOST_AUTO_TEST_CASE(a_failing_request_does_not_fail_the_others_in_its_batch) {
  start();
  // A trigger rejects type "poison" after earlier rows of the same request
  // were written: only a savepoint per request keeps the other requests.
  poison(location, "jobs", "poisoned");
  write_lock lock{location};
  auto first = send_submit({make("a")});
  auto poisoned = send_submit({make("b"), make("poison")});
  auto third = send_submit({make("c")});
  lock.release();
  auto r1 = first.wait();
  auto r2 = poisoned.wait();
  auto r3 = third.wait();
  BOOST_TEST(r1.has_value());
  BOOST_REQUIRE(!r2.has_value());
  BOOST_TEST(r2.error().message().find("poisoned") != std::string::npos);
  BOOST_TEST(r3.has_value());
  BOOST_TEST(types_of_jobs(engine_probe{location}) == "a,c");
  BOOST_TEST(counters->totals()[job_status::pending] == 2);
}

BOOST_AUTO_TEST_CASE(when_sqlite_aborts_the_transaction_no_earlier_request_is_acknowledged,
                     *test::sqlite_only("a size limit is SQLite's; test-storage-postgres fails "
                                        "a whole PostgreSQL transaction")) {
  // A full disk makes SQLite roll back the whole transaction, taking the
  // earlier requests of the batch with it: they must fail, not report success.
  storage::sqlite_options opts;
  opts.max_bytes = 256 * 1024;
  start(opts);
  write_lock lock{dir.file("q.db")};
  auto first = send_submit({make("a")});
  auto huge = send_submit({make("b", std::string(400 * 1024, 'x'))});
  auto third = send_submit({make("c")});
  lock.release();
  auto r1 = first.wait();
  auto r2 = huge.wait();
  auto r3 = third.wait();
  BOOST_REQUIRE(!r2.has_value());
  BOOST_TEST(r2.error().code() == error::storage_full);
  BOOST_REQUIRE(!r1.has_value());
  BOOST_TEST(r1.error().code() == error::storage_full);
  BOOST_TEST(r3.has_value());
  sqlite_probe probe{dir.file("q.db")};
  BOOST_TEST(probe.text("SELECT group_concat(type, ',') FROM jobs") == "c");
  BOOST_TEST(counters->totals()[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(a_batch_whose_counts_cannot_be_written_fails_every_request_in_it) {
  start();
  auto ids = send_submit({make("a"), make("poison"), make("c")}).wait();
  BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
  // The finished_counts rows are written last, just before COMMIT: their
  // failure must fail the whole batch as a failed COMMIT does, not only the
  // cancel that finished the poisoned job.
  poison(location, "finished_counts", "poisoned count");
  write_lock lock{location};
  std::vector<actors::reply_from<status>> cancels;
  for (auto& id : *ids)
    cancels.push_back(send_cancel(id));
  auto submitted = send_submit({make("d")});
  lock.release();
  for (auto& reply : cancels) {
    auto st = reply.wait();
    BOOST_TEST(st.message().find("poisoned count") != std::string::npos, st.message());
  }
  auto lost = submitted.wait();
  BOOST_REQUIRE(!lost.has_value());
  BOOST_TEST(lost.error().message().find("poisoned count") != std::string::npos);
  engine_probe probe{location};
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE status = 0") == 3);
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs") == 3);
  BOOST_TEST(probe.number("SELECT count(*) FROM finished_counts") == 0);
  BOOST_TEST(counters->totals()[job_status::pending] == 3);
  BOOST_TEST(counters->totals()[job_status::cancelled] == 0);
  // The writer goes on: the next batch commits with its counts.
  BOOST_REQUIRE(send_cancel((*ids)[0]).wait().ok());
  BOOST_TEST(probe.text("SELECT type || status || '=' || count FROM finished_counts") == "a4=1");
  BOOST_TEST(counters->totals()[job_status::pending] == 2);
  BOOST_TEST(counters->totals()[job_status::cancelled] == 1);
}

BOOST_AUTO_TEST_CASE(submits_and_claims_write_no_counts) {
  start();
  auto ids = send_submit({make("a"), make("b")}).wait();
  BOOST_REQUIRE(ids.has_value());
  // Pending jobs are counted from the jobs at open, so a submit pays nothing.
  BOOST_TEST(engine_probe{location}.number("SELECT count(*) FROM finished_counts") == 0);
  BOOST_TEST(counters->totals()[job_status::pending] == 2);
}

BOOST_AUTO_TEST_CASE(a_request_that_arrives_after_close_gets_closed) {
  start();
  auto [to, from] = actors::make_reply<status>();
  caf::anon_send(writer, actors::close_call{{}, std::move(to)});
  BOOST_TEST(from.wait().ok());
  auto late = send_submit({make()});
  BOOST_TEST(late.wait().error().code() == error::closed);
  writer = actors::db_writer_actor{};
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(storage_failures,
                      *test::sqlite_only("a file's failures; PostgreSQL's are in "
                                         "test-pg-faults"))

BOOST_AUTO_TEST_CASE(a_read_only_file_fails_open_with_read_only) {
  temp_dir dir;
  {
    auto q = queue::open(dir.file("q.db"));
    BOOST_REQUIRE(q.has_value());
    BOOST_REQUIRE(q->submit(make()).has_value());
  }
  auto before = sqlite_probe{dir.file("q.db")}.dump();
  BOOST_REQUIRE_MESSAGE(test::make_unwritable(dir.file("q.db")),
                        "cannot make the file unwritable here");
  auto q = queue::open(dir.file("q.db"));
  test::make_writable(dir.file("q.db"));
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::read_only);
  BOOST_TEST(q.error().message().find("q.db") != std::string::npos);
  BOOST_TEST(sqlite_probe{dir.file("q.db")}.dump() == before);
}

BOOST_AUTO_TEST_CASE(an_unwritable_log_reaches_the_submitter_and_loses_nothing) {
  temp_dir dir;
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(q.has_value());
  auto kept = q->submit(make("kept"));
  BOOST_REQUIRE(kept.has_value());
  // The write-ahead log is where commits land; make it unwritable under the
  // open connection (chattr +i: root ignores file modes).
  if (!test::set_immutable(dir.file("q.db-wal"), true)) {
    BOOST_TEST_MESSAGE("immutable files unsupported here; covered by the full-disk test");
    return;
  }
  auto failed = q->submit(make("lost"));
  test::set_immutable(dir.file("q.db-wal"), false);
  BOOST_REQUIRE(!failed.has_value());
  BOOST_TEST((failed.error().code() == error::io_error
              || failed.error().code() == error::read_only));
  // The queue keeps working, and the acknowledged job is still there.
  auto after = q->submit(make("after"));
  BOOST_REQUIRE_MESSAGE(after.has_value(), after.error().to_string());
  BOOST_TEST(q->job_info(*kept)->type == "kept");
  BOOST_REQUIRE(q->close().ok());
  sqlite_probe probe{dir.file("q.db")};
  BOOST_TEST(probe.text("SELECT group_concat(type, ',') FROM (SELECT type FROM jobs ORDER BY id)")
             == "kept,after");
}

BOOST_AUTO_TEST_CASE(a_full_database_fails_the_submit_and_keeps_earlier_jobs) {
  temp_dir dir;
  options opts;
  opts.max_database_bytes = 256 * 1024;
  opts.max_payload_bytes = 1 << 20;
  auto q = queue::open(dir.file("q.db"), opts);
  BOOST_REQUIRE(q.has_value());
  auto kept = q->submit(make("kept"));
  BOOST_REQUIRE(kept.has_value());
  auto before = sqlite_probe{dir.file("q.db")}.dump();
  auto full = q->submit(make("huge", std::string(512 * 1024, 'x')));
  BOOST_REQUIRE(!full.has_value());
  BOOST_TEST(full.error().code() == error::storage_full);
  BOOST_TEST(sqlite_probe{dir.file("q.db")}.dump() == before);
  BOOST_TEST(q->counts().total() == 1);
  BOOST_TEST(q->submit(make("small")).has_value());
}

// One 12 MiB transaction grows the WAL past the 4 MiB it is cut back to; a
// checkpoint follows the commit, and the next write after it starts the WAL
// over. Returns the writes that took.
int small_writes_until_the_wal_is_cut_back(bool checkpoint_in_commits) {
  temp_dir dir;
  options opts;
  opts.max_database_bytes = 256 << 20;
  opts.checkpoint_in_commits = checkpoint_in_commits;
  auto q = queue::open(dir.file("q.db"), opts);
  BOOST_REQUIRE(q.has_value());
  std::vector<job> big;
  for (int i = 0; i < 12; ++i)
    big.push_back(make("big", std::string(1 << 20, 'x')));
  BOOST_REQUIRE(q->submit_batch(big).has_value());
  auto wal = dir.file("q.db-wal");
  BOOST_TEST(std::filesystem::file_size(wal) > (12u << 20));
  // On the checkpointer's thread the pass ends a little after the commit:
  // each write is a step, and the bound only stops a WAL that never shrinks.
  int writes = 0;
  for (; writes < 20'000 && std::filesystem::file_size(wal) > (4u << 20); ++writes)
    BOOST_REQUIRE(q->submit(make("small")).has_value());
  BOOST_TEST(std::filesystem::file_size(wal) <= (4u << 20));
  return writes;
}

BOOST_AUTO_TEST_CASE(with_a_size_limit_checkpoints_cut_the_wal_back) {
  BOOST_TEST(small_writes_until_the_wal_is_cut_back(false) >= 1);
}

BOOST_AUTO_TEST_CASE(with_a_size_limit_checkpoints_within_commits_cut_it_back_at_once) {
  BOOST_TEST(small_writes_until_the_wal_is_cut_back(true) == 1);
}

BOOST_AUTO_TEST_CASE(a_lock_held_by_another_process_gives_busy_not_a_hang) {
  temp_dir dir;
  options opts;
  opts.busy_timeout = 100ms;
  auto q = queue::open(dir.file("q.db"), opts);
  BOOST_REQUIRE(q.has_value());
  auto before = sqlite_probe{dir.file("q.db")}.dump();
  {
    test::child_process holder{{ERGON_TEST_LOCK_HOLDER, dir.file("q.db")}};
    BOOST_REQUIRE(holder.wait_for_line("locked"));
    auto r = q->submit(make());
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code() == error::busy);
    holder.close_stdin();
    BOOST_TEST(holder.wait() == 0);
  }
  BOOST_TEST(sqlite_probe{dir.file("q.db")}.dump() == before);
  BOOST_TEST(q->submit(make()).has_value());
}

BOOST_AUTO_TEST_CASE(a_corrupt_file_is_refused_at_open) {
  temp_dir dir;
  {
    std::ofstream junk{dir.file("q.db")};
    junk << std::string(4096, 'z');
  }
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::corrupt);
}

BOOST_AUTO_TEST_SUITE_END()

// -- standing offers ---------------------------------------------------------------------

namespace {

// A started writer with a listener, and a worker to hand jobs to.
struct offer_fixture : writer_fixture {
  std::unique_ptr<caf::scoped_actor> listener;
  std::unique_ptr<caf::scoped_actor> worker;

  explicit offer_fixture(storage::sqlite_options db_opts = {}) {
    start(db_opts);
    listener = std::make_unique<caf::scoped_actor>(*sys);
    worker = std::make_unique<caf::scoped_actor>(*sys);
    caf::anon_send(writer, actors::listen_to{*listener});
  }

  // Offer `serial` of worker 7's room for type "t".
  void offer(uint64_t serial, int32_t room, uint64_t fed_through) {
    caf::anon_send(writer, actors::offer_batch{*worker, {serial, 7, {"t"}, room,
                                                         storage::never_ms, fed_through}});
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(standing_offers, offer_fixture)

// The one new job that fits is claimed in its insert's transaction, handed
// to the worker after that commit, and fed as a claim naming the offer.
BOOST_AUTO_TEST_CASE(an_offer_claims_the_new_job_in_its_insert_transaction) {
  offer(1, 1, 0);
  auto ids = send_submit({make()}).wait();
  BOOST_REQUIRE(ids.has_value());
  bool assigned = false;
  (*worker)->receive(
    [&](actors::assign_jobs& a) {
      BOOST_REQUIRE_EQUAL(a.jobs.size(), 1u);
      BOOST_TEST(a.jobs[0].id == actors::to_wire(ids->at(0)));
      assigned = true;
    },
    caf::after(std::chrono::seconds(30)) >> [] {});
  BOOST_TEST(assigned);
  auto f = fed();
  BOOST_REQUIRE_EQUAL(f.size(), 1u);
  BOOST_REQUIRE_EQUAL(f[0].claims.size(), 1u);
  BOOST_TEST(f[0].claims[0].offer == 1u);
  BOOST_TEST(f[0].claims[0].worker_id == 7u);
  BOOST_TEST(f[0].added.size() == 1u);
  BOOST_TEST(f[0].seq == 1u);
  BOOST_TEST(engine_probe{location}.text("SELECT status FROM jobs") == "1");  // running
}

// A feed the dispatcher had not applied made a job ready: it decided
// without that job, so the offer goes back and claims nothing.
BOOST_AUTO_TEST_CASE(an_offer_made_before_a_ready_feed_was_applied_goes_back) {
  BOOST_REQUIRE(send_submit({make()}).wait().has_value());
  auto f = fed();
  BOOST_REQUIRE_EQUAL(f.size(), 1u);
  BOOST_TEST(f[0].seq == 1u);
  offer(2, 1, 0);
  BOOST_REQUIRE(send_submit({make()}).wait().has_value());
  f = fed();
  bool given_back = false;
  for (auto& feed : f) {
    BOOST_TEST(feed.claims.empty());
    given_back = given_back || feed.offers_ended == std::vector<uint64_t>{2};
  }
  BOOST_TEST(given_back);
  // Made knowing that feed, an offer is used.
  offer(3, 1, f.back().seq);
  BOOST_REQUIRE(send_submit({make()}).wait().has_value());
  f = fed();
  BOOST_REQUIRE_EQUAL(f.size(), 1u);
  BOOST_REQUIRE_EQUAL(f[0].claims.size(), 1u);
  BOOST_TEST(f[0].claims[0].offer == 3u);
}

// Two new jobs that fit, or one the same transaction updated: the
// dispatcher must choose, so the offer goes back.
BOOST_AUTO_TEST_CASE(an_offer_goes_back_when_its_transaction_makes_two_fitting_jobs_ready) {
  offer(1, 2, 0);
  BOOST_REQUIRE(send_submit({make(), make()}).wait().has_value());
  auto f = fed();
  BOOST_REQUIRE_EQUAL(f.size(), 1u);
  BOOST_TEST(f[0].claims.empty());
  BOOST_TEST(f[0].offers_ended == std::vector<uint64_t>{1});
  BOOST_TEST(f[0].added.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- a worker's batch ------------------------------------------------------------------

namespace {

// Makes claiming a job of type "poison" fail, after the claim's other rows.
void poison_claims(const std::string& location) {
  engine_probe{location}.exec(
    "CREATE TRIGGER reject_claim BEFORE UPDATE ON jobs WHEN NEW.type = 'poison' "
    "AND NEW.status = 1 BEGIN SELECT RAISE(ABORT, 'claim poisoned'); END;",
    "CREATE FUNCTION reject_claim() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.type = 'poison' AND NEW.status = 1 THEN RAISE EXCEPTION 'claim poisoned'; "
    "END IF; RETURN NEW; END $$;"
    "CREATE TRIGGER reject_claim BEFORE UPDATE ON jobs FOR EACH ROW "
    "EXECUTE FUNCTION reject_claim()");
}

struct worker_batch_fixture : offer_fixture {
  explicit worker_batch_fixture(storage::sqlite_options db_opts = {}) : offer_fixture(db_opts) {}

  // Sends worker 7's batch and returns the writer's answer.
  actors::assign_jobs run(actors::worker_writes w) {
    w.worker_id = 7;
    caf::anon_send(writer, actors::worker_batch{*worker, std::move(w)});
    actors::assign_jobs answer;
    bool answered = false;
    (*worker)->receive(
      [&](actors::assign_jobs& a) {
        answer = std::move(a);
        answered = true;
      },
      caf::after(std::chrono::seconds(30)) >> [] {});
    BOOST_REQUIRE(answered);
    return answer;
  }

  // The rows of new jobs, in the order submitted.
  std::vector<int64_t> submit_rows(std::vector<job> jobs) {
    BOOST_REQUIRE(send_submit(std::move(jobs)).wait().has_value());
    std::vector<int64_t> rows;
    for (auto& f : fed())
      for (auto& k : f.added)
        rows.push_back(k.row);
    return rows;
  }

  // How many times the dispatcher heard that worker 7's claim of `row`
  // failed with `why`; none of the feeds may carry the claim as made.
  int heard_failed_claims(int64_t row, const std::string& why) {
    int heard = 0;
    for (auto& f : fed()) {
      for (auto& failed : f.failed)
        if (failed.worker_id == 7 && failed.claim_rows == std::vector<int64_t>{row}) {
          ++heard;
          BOOST_TEST(failed.why.message().find(why) != std::string::npos, failed.why.message());
        }
      for (auto& claim : f.claims)
        for (auto& j : claim.claimed)
          BOOST_TEST(j.key.row != row, "a feed carries the failed claim of row " << row);
    }
    return heard;
  }

  std::string statuses() {
    return engine_probe{location}.text(
      "SELECT group_concat(status, ',') FROM (SELECT status FROM jobs ORDER BY id)",
      "SELECT string_agg(status::text, ',' ORDER BY id) FROM jobs");
  }
};

// A SQLite file of at most 256 KiB (PostgreSQL has no such limit).
struct small_file_fixture : worker_batch_fixture {
  small_file_fixture() : worker_batch_fixture(small_file()) {}
  static storage::sqlite_options small_file() {
    storage::sqlite_options o;
    o.max_bytes = 256 * 1024;
    return o;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(worker_batches, worker_batch_fixture)

// A worker's outcomes and its next claims commit together, and the answer
// carries both: the acks and the jobs.
BOOST_AUTO_TEST_CASE(a_worker_batch_records_outcomes_and_claims_in_one_commit) {
  auto rows = submit_rows({make(), make()});
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  auto first = run({0, {}, {}, {{rows[0], 11}}, false});
  BOOST_REQUIRE_EQUAL(first.jobs.size(), 1u);
  BOOST_TEST(first.jobs[0].token == 11);
  fed();
  auto second = run({0, {{rows[0], 11, storage::report_kind::succeeded, ""}}, {}, {{rows[1], 12}},
                     true});
  BOOST_REQUIRE_EQUAL(second.acks.size(), 1u);
  BOOST_TEST(second.acks[0].code == 0, second.acks[0].message);
  BOOST_REQUIRE_EQUAL(second.jobs.size(), 1u);
  BOOST_TEST(second.jobs[0].row == rows[1]);
  BOOST_TEST(statuses() == "2,1");
  auto f = fed();
  BOOST_REQUIRE_EQUAL(f.size(), 1u);
  BOOST_TEST(f[0].ended.size() == 1u);
  BOOST_REQUIRE_EQUAL(f[0].claims.size(), 1u);
  BOOST_TEST(f[0].claims[0].worker_id == 7u);
}

// On PostgreSQL the claims come back with the outcomes' statement, so a
// claim that fails ends the whole transaction: the outcomes are not
// acknowledged and nothing is written (the worker reports them again).
// SQLite claims in a savepoint of its own: the outcomes stand. Either way
// the dispatcher hears that the claim failed, and the job stays pending.
BOOST_AUTO_TEST_CASE(a_claim_that_fails_beside_outcomes_reaches_the_dispatcher) {
  auto rows = submit_rows({make(), make("poison")});
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_REQUIRE_EQUAL(run({0, {}, {}, {{rows[0], 11}}, false}).jobs.size(), 1u);
  fed();
  poison_claims(location);
  actors::worker_writes w{0, {{rows[0], 11, storage::report_kind::succeeded, ""}}, {},
                          {{rows[1], 12}}, true};
  auto answer = run(w);
  BOOST_TEST(answer.jobs.empty());
  BOOST_REQUIRE_EQUAL(answer.acks.size(), 1u);
  bool whole = storage::names_postgres(location);
  if (whole)
    BOOST_TEST(answer.acks[0].message.find("claim poisoned") != std::string::npos,
               answer.acks[0].message);
  else
    BOOST_TEST(answer.acks[0].code == 0, answer.acks[0].message);
  BOOST_TEST(statuses() == (whole ? "1,0" : "2,0"));
  BOOST_TEST(heard_failed_claims(rows[1], "claim poisoned") == 1);
  // The writer goes on: the outcome, reported again, commits (PostgreSQL)
  // or is acknowledged again as committed already (SQLite).
  auto again = run({0, {{rows[0], 11, storage::report_kind::succeeded, ""}}, {}, {}, true});
  BOOST_REQUIRE_EQUAL(again.acks.size(), 1u);
  BOOST_TEST(again.acks[0].code == 0, again.acks[0].message);
  BOOST_TEST(statuses() == "2,0");
}

// A worker's claims alone: on PostgreSQL their rows are read at the end of
// the batch's requests, and a failure there ends the transaction with the
// requests before them. SQLite's claim fails alone, in its savepoint.
BOOST_AUTO_TEST_CASE(a_claim_that_fails_when_read_fails_its_whole_batch_on_postgres) {
  auto rows = submit_rows({make("poison")});
  BOOST_REQUIRE_EQUAL(rows.size(), 1u);
  poison_claims(location);
  write_lock lock{location};
  auto submitted = send_submit({make("b")});
  caf::anon_send(writer, actors::worker_batch{*worker, {7, {}, {}, {{rows[0], 12}}, false}});
  lock.release();
  auto ids = submitted.wait();
  bool whole = storage::names_postgres(location);
  BOOST_TEST(ids.has_value() == !whole);
  if (!ids)
    BOOST_TEST(ids.error().message().find("claim poisoned") != std::string::npos,
               ids.error().message());
  BOOST_TEST(heard_failed_claims(rows[0], "claim poisoned") == 1);
  BOOST_TEST(statuses() == (whole ? "0" : "0,0"));
}

// Claims made before a later request of the same batch lost the whole
// transaction (SQLite's disk full; PostgreSQL's session ended) are not
// handed out, and no ack of the batch says ok: nothing of it was written.
BOOST_FIXTURE_TEST_CASE(claims_a_later_request_rolled_back_are_not_handed_out,
                        small_file_fixture) {
  bool whole_in_release = storage::names_postgres(location);
  auto rows = submit_rows({make(), make(), make("doomed")});
  BOOST_REQUIRE_EQUAL(rows.size(), 3u);
  BOOST_REQUIRE_EQUAL(run({0, {}, {}, {{rows[1], 11}, {rows[2], 11}}, false}).jobs.size(), 2u);
  fed();
  std::string result;
  if (whole_in_release) {
    // Releasing the doomed job ends the writer's own session.
    engine_probe{location}.exec(
      "", "CREATE FUNCTION end_session() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
          "IF NEW.type = 'doomed' AND OLD.status = 1 AND NEW.status = 0 THEN "
          "PERFORM pg_terminate_backend(pg_backend_pid()); END IF; RETURN NEW; END $$;"
          "CREATE TRIGGER end_session BEFORE UPDATE ON jobs FOR EACH ROW "
          "EXECUTE FUNCTION end_session()");
  } else {
    // The outcome's result does not fit: SQLite rolls the whole transaction back.
    result.assign(400 * 1024, 'x');
  }
  auto answer = run({0, {{rows[1], 11, storage::report_kind::succeeded, result}},
                     {{rows[2], 11}}, {{rows[0], 12}}, true});
  BOOST_TEST(answer.jobs.empty());
  BOOST_REQUIRE_EQUAL(answer.acks.size(), 1u);
  BOOST_TEST(answer.acks[0].code != 0, answer.acks[0].message);
  BOOST_TEST(heard_failed_claims(rows[0], "") == 1);
  // Rows 0 and 1 as they were; SQLite released row 2 in a transaction of its own.
  BOOST_TEST(statuses() == (whole_in_release ? "0,1,1" : "0,1,0"));
}

BOOST_AUTO_TEST_SUITE_END()
