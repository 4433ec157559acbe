// Opening a database file: one owner at a time (in this process and across
// real processes), a killed owner never blocks the next open, inspection
// beside a live owner, other programs' files left byte for byte unchanged,
// and paths that name no file. On both engines (ERGON_TEST_ENGINE); what is
// about files, SQLite alone.
#define BOOST_TEST_MODULE open
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "support/child_process.hpp"
#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::set<std::string> entries(const temp_dir& dir) {
  std::set<std::string> out;
  for (auto& e : std::filesystem::directory_iterator{dir.path()})
    out.insert(e.path().filename().string());
  return out;
}

std::string our_pid() {
  return "pid " + std::to_string(::getpid()) + " ";
}

// Submits `n` "work" jobs and closes, so a child process can own the file.
std::vector<job_id> seed(const std::string& path, int n) {
  auto q = queue::open(path);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  std::vector<job_id> ids;
  for (int i = 0; i < n; ++i) {
    auto id = q->submit(*job_builder("work").build());
    BOOST_REQUIRE(id.has_value());
    ids.push_back(*id);
  }
  BOOST_REQUIRE(q->close().ok());
  return ids;
}

// Skip messages of the cases about files.
constexpr const char* files_only = "about SQLite's files; a PostgreSQL schema's owner is in "
                                   "test-pg-owner, foreign tables in test-storage-postgres";

// A child process that owns a file with `n` seeded jobs and runs the first.
struct live_owner {
  explicit live_owner(int n)
      : ids(seed(path, n)), owner({ERGON_TEST_CRASH_WORKER, path, "hang"}) {
    BOOST_REQUIRE_EQUAL(owner.read_line(), "started " + ids[0].to_string() + " 1");
  }
  temp_dir dir;
  std::string path = location_of(dir);
  std::vector<job_id> ids;
  child_process owner;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(ownership)

BOOST_AUTO_TEST_CASE(a_second_open_in_the_same_process_is_busy_and_names_the_owner) {
  temp_dir dir;
  auto path = location_of(dir);
  auto first = queue::open(path);
  BOOST_REQUIRE(first.has_value());
  auto id = first->submit(*job_builder("work").build());
  BOOST_REQUIRE(id.has_value());
  std::vector<std::string> others{path};
  if (!on_postgres()) {  // other names of the same file
    std::filesystem::create_directory(dir.file("sub"));
    std::filesystem::create_symlink(path, dir.file("link.db"));
    others.push_back(dir.file("sub/../q.db"));
    others.push_back(dir.file("link.db"));
  }
  for (auto& other : others) {
    auto second = queue::open(other);
    BOOST_REQUIRE(!second.has_value());
    BOOST_TEST(second.error().code() == error::busy);
    BOOST_TEST(second.error().message().find(our_pid()) != std::string::npos,
               second.error().message());
  }
  // The refused opens changed nothing: the job is still there, pending.
  auto info = first->job_info(*id);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::pending);
  BOOST_REQUIRE(first->close().ok());
  BOOST_TEST(entries(dir).count("q.db-owner") == 0u);  // SQLite's lock file
  auto again = queue::open(path);
  BOOST_TEST(again.has_value());
}

BOOST_AUTO_TEST_CASE(a_second_process_is_refused_while_the_first_runs_jobs) {
  live_owner live{1};
  auto& [dir, path, ids, owner] = live;
  auto owner_pid = "pid " + std::to_string(owner.pid()) + " ";

  // From this process...
  auto here = queue::open(path);
  BOOST_REQUIRE(!here.has_value());
  BOOST_TEST(here.error().code() == error::busy);
  BOOST_TEST(here.error().message().find(owner_pid) != std::string::npos,
             here.error().message());
  // ...and from a third one.
  child_process third{{ERGON_TEST_CRASH_WORKER, path, "try-open"}};
  auto line = third.read_line();
  BOOST_TEST(line.rfind("refused busy: ", 0) == 0u, line);
  BOOST_TEST(line.find(owner_pid) != std::string::npos, line);
  third.wait();

  // No recovery ran: the owner's job is still running its first attempt.
  auto in = queue::inspect(path);
  BOOST_REQUIRE_MESSAGE(in.has_value(), in.error().to_string());
  auto info = in->job_info(ids[0]);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::running);
  BOOST_TEST(info->tries == 1);
  BOOST_TEST(info->attempts.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_process_is_refused_while_this_one_runs_jobs) {
  temp_dir dir;
  auto path = location_of(dir);
  auto q = queue::open(path);
  BOOST_REQUIRE(q.has_value());
  gate g;
  std::atomic<int> starts{0};
  worker_options w;
  w.runners["work"] = [&](job_context&) {
    ++starts;
    g.pass();
  };
  auto wk = q->start_worker(std::move(w));
  BOOST_REQUIRE(wk.has_value());
  auto id = q->submit(*job_builder("work").build());
  BOOST_REQUIRE(id.has_value());
  BOOST_REQUIRE(g.wait_for_waiting(1));
  child_process other{{ERGON_TEST_CRASH_WORKER, path, "try-open"}};
  auto line = other.read_line();
  BOOST_TEST(line.rfind("refused busy: ", 0) == 0u, line);
  BOOST_TEST(line.find(our_pid()) != std::string::npos, line);
  BOOST_TEST(WIFEXITED(other.wait()));
  g.open();
  BOOST_REQUIRE(wk->stop().ok());
  auto info = q->job_info(*id);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::succeeded);
  BOOST_TEST(info->tries == 1);
  BOOST_TEST(starts.load() == 1);
}

BOOST_AUTO_TEST_CASE(a_killed_owner_never_blocks_the_next_open) {
  live_owner live{1};
  auto& [dir, path, ids, owner] = live;
  owner.signal(SIGKILL);
  owner.wait();
  // SQLite's lock file is still there, but its lock died with the process;
  // PostgreSQL ended the owner's session, and with it its lease.
  BOOST_TEST(entries(dir).count("q.db-owner") == (on_postgres() ? 0u : 1u));
  options opts;
  opts.recovery = recovery_mode::retry_immediately;
  auto q = queue::open(path, opts);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto info = q->job_info(ids[0]);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::pending);
  BOOST_REQUIRE(info->attempts.size() == 1u);
  BOOST_TEST(info->attempts[0].message == "process restart");
}

// What a dead owner's remote workers were running (held_by) waits for them
// with remote_grace set: still running, its expiry held to the grace's end
// at least, and lost ("worker lost") when the grace ends on the queue's
// clock, to run again. Without it, it is recovered as the owner's own are.
BOOST_AUTO_TEST_CASE(a_remote_workers_attempt_waits_its_grace_after_the_owner_died) {
  for (bool grace : {false, true}) {
    live_owner live{2};
    auto& [dir, path, ids, owner] = live;
    owner.signal(SIGKILL);
    owner.wait();
    engine_probe{path}.exec("UPDATE jobs SET held_by = 'node/7' WHERE status = 1");
    auto clock = std::make_shared<manual_clock>(t0);
    options opts;
    opts.clock = clock;
    opts.remote_grace = grace ? 20s : 0s;
    auto q = queue::open(path, opts);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    event_log log{*q};
    auto info = q->job_info(ids[0]);
    BOOST_REQUIRE(info.has_value());
    if (!grace) {
      BOOST_TEST(info->status == job_status::pending);
      BOOST_REQUIRE_EQUAL(info->attempts.size(), 1u);
      BOOST_TEST(info->attempts[0].message == "process restart");
      continue;
    }
    BOOST_TEST(info->status == job_status::running);
    BOOST_TEST(q->metrics()->orphaned_attempts == 1);
    auto expires = engine_probe{path}.number("SELECT expires_at FROM jobs WHERE status = 1");
    BOOST_TEST(expires >= t0 + 20'000);
    clock->advance(19'999ms);
    BOOST_TEST(q->job_info(ids[0])->status == job_status::running);
    clock->advance(1ms);
    BOOST_REQUIRE(log.wait_for(event_kind::retried, 1, ids[0]));
    info = q->job_info(ids[0]);
    BOOST_REQUIRE(info.has_value());
    BOOST_TEST(info->status == job_status::pending);
    BOOST_REQUIRE_EQUAL(info->attempts.size(), 1u);
    BOOST_TEST(info->attempts[0].message == "worker lost");
    BOOST_TEST(q->metrics()->orphaned_attempts == 0);
  }
}

BOOST_AUTO_TEST_CASE(a_closed_queue_leaves_no_lock_file_and_can_be_reopened_at_once) {
  temp_dir dir;
  auto path = location_of(dir);
  for (int i = 0; i < 3; ++i) {
    auto q = queue::open(path);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    BOOST_TEST(entries(dir).count("q.db-owner") == (on_postgres() ? 0u : 1u));
  }
  BOOST_TEST(entries(dir).count("q.db-owner") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(inspection)

BOOST_AUTO_TEST_CASE(inspection_reads_beside_a_live_owner) {
  live_owner live{3};
  auto& [dir, path, ids, owner] = live;
  auto in = queue::inspect(path);
  BOOST_REQUIRE_MESSAGE(in.has_value(), in.error().to_string());
  auto counts = in->counts();
  BOOST_REQUIRE(counts.has_value());
  BOOST_TEST((*counts)[job_status::running] == 1);
  BOOST_TEST((*counts)[job_status::pending] == 2);
  auto m = in->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->by_type["work"][job_status::pending] == 2);
  BOOST_TEST(m->groups.empty());
  auto second = in->job_info(ids[1]);
  BOOST_REQUIRE(second.has_value());
  BOOST_TEST(second->status == job_status::pending);
  BOOST_TEST(in->jobs_by_name("none")->empty());
  BOOST_TEST(in->job_info(job_id{}).error().code() == error::not_found);
  // The owner goes on: ending its job lets it take the next one.
  owner.close_stdin();
  owner.wait();
}

BOOST_AUTO_TEST_CASE(inspection_of_an_unowned_file_writes_nothing) {
  temp_dir dir;
  auto path = location_of(dir);
  seed(path, 2);
  // The file byte for byte; on PostgreSQL, the rows and the lease.
  auto state = [&] {
    return on_postgres()
             ? engine_probe{path}.dump() + engine_probe{path}.text("SELECT epoch FROM lease")
             : read_bytes(path);
  };
  auto before = state();
  {
    auto in = queue::inspect(path);
    BOOST_REQUIRE_MESSAGE(in.has_value(), in.error().to_string());
    BOOST_TEST((*in->counts())[job_status::pending] == 2);
  }
  BOOST_TEST((state() == before));
  BOOST_TEST(entries(dir).count("q.db-owner") == 0u);
  // And it takes no ownership: a queue opens while an inspector is open.
  auto in = queue::inspect(path);
  BOOST_REQUIRE(in.has_value());
  auto q = queue::open(path);
  BOOST_TEST(q.has_value());
}

BOOST_AUTO_TEST_CASE(inspection_refuses_what_it_cannot_read, *sqlite_only(files_only)) {
  temp_dir dir;
  BOOST_TEST(queue::inspect(dir.file("missing.db")).error().code() == error::io_error);
  BOOST_TEST(queue::inspect(":memory:").error().field() == "path");
  BOOST_TEST(queue::inspect("").error().field() == "path");
  {
    sqlite_probe other{dir.file("other.db"), sqlite_probe::create};
    other.exec("CREATE TABLE notes (body TEXT)");
  }
  BOOST_TEST(queue::inspect(dir.file("other.db")).error().code() == error::corrupt);
  {
    sqlite_probe empty{dir.file("empty.db"), sqlite_probe::create};
    empty.exec("PRAGMA user_version = 0");
  }
  BOOST_TEST(queue::inspect(dir.file("empty.db")).error().code() == error::corrupt);
  seed(dir.file("q.db"), 1);
  auto in = queue::inspect(dir.file("q.db"));
  BOOST_REQUIRE(in.has_value());
  auto moved = std::move(*in);
  BOOST_TEST(in->counts().error().code() == error::closed);
  BOOST_TEST(in->job_info(job_id{}).error().code() == error::closed);
  BOOST_TEST(moved.counts().has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(finished_counts)

namespace {

// finished_counts (without its zero rows) as "type:status=count" pairs,
// beside the same pairs from a fresh GROUP BY over every finished job.
struct count_listing {
  std::string table;
  std::string jobs;
};

count_listing list_counts(const std::string& path) {
  engine_probe probe{path};
  auto listed = [&](const std::string& rows) {
    return probe.text("SELECT coalesce(group_concat(type || ':' || status || '=' || n, ' '), '') "
                      "FROM (" + rows + ")",
                      "SELECT coalesce(string_agg(type || ':' || status || '=' || n, ' ' "
                      "ORDER BY type, status), '') FROM (" + rows + ") r");
  };
  BOOST_TEST(probe.number("SELECT count(*) FROM finished_counts WHERE count < 0") == 0);
  return {listed("SELECT type, status, count AS n FROM finished_counts WHERE count <> 0 "
                 "ORDER BY type, status"),
          listed("SELECT type, status, count(*) AS n FROM jobs WHERE status >= 2 "
                 "GROUP BY type, status ORDER BY type, status")};
}

void require_counts_match_jobs(const std::string& path) {
  auto c = list_counts(path);
  BOOST_REQUIRE_EQUAL(c.table, c.jobs);
}

// The queue's in-memory counts of unfinished jobs per group, beside a GROUP BY
// over the jobs, as "group:status=count" pairs. A group with no unfinished
// jobs must not be listed.
void require_group_counts_match_jobs(queue& q, const std::string& path) {
  auto m = q.metrics();
  BOOST_REQUIRE(m.has_value());
  std::string counted;
  for (auto& [group, counts] : m->by_group)
    for (auto s : {job_status::pending, job_status::running})
      if (counts[s] != 0)
        counted += (counted.empty() ? "" : " ") + group + ":" +
                   std::to_string(static_cast<int>(s)) + "=" + std::to_string(counts[s]);
  for (auto& [group, counts] : m->by_group)
    BOOST_TEST(counts[job_status::pending] + counts[job_status::running] > 0, group);
  std::string rows = "SELECT coalesce(group_key, '') AS g, status, count(*) AS n FROM jobs "
                     "WHERE status IN (0, 1) GROUP BY 1, 2 ORDER BY 1, 2";
  BOOST_REQUIRE_EQUAL(counted, engine_probe{path}.text(
                                 "SELECT coalesce(group_concat(g || ':' || status || '=' || n, "
                                 "' '), '') FROM (" + rows + ")",
                                 "SELECT coalesce(string_agg(g || ':' || status || '=' || n, ' ' "
                                 "ORDER BY g, status), '') FROM (" + rows + ") r"));
}

// A file with `n` seeded jobs, then changed by `sql` behind ergon's back.
std::string seeded_then(const temp_dir& dir, int n, const std::string& sql) {
  auto path = location_of(dir);
  seed(path, n);
  engine_probe{path}.exec(sql);
  return path;
}

void run_until_cancelled(job_context& ctx) {
  ctx.wait_cancelled(std::chrono::milliseconds::max());
}

}  // namespace

// Every write that finishes a job keeps finished_counts equal to the jobs:
// submit, update, cancel, claim, success, failure with and without a retry,
// attempt expiry, deadline expiry, and recovery after two real crashes (one
// in the crashed file's next owner, one in this process).
BOOST_FIXTURE_TEST_CASE(finished_counts_equal_the_jobs_after_every_kind_of_write_and_crashes,
                        queue_fixture) {
  auto path = location;
  // Groups, to check the per-group counts too; each ends up with none left
  // unfinished but "crash".
  std::vector<job_id> ok{submit(*job_of("ok").group("a").build()), submit(*job_of("ok").build())};
  auto flaky = submit(*job_of("flaky").group("b").max_retries(1).build());
  auto doomed = submit(*job_of("doomed").group("a").max_retries(0).build());
  auto slow = submit(*job_of("slow").group("b").timeout(1'000ms).max_retries(0).build());
  auto cancelled = submit(*job_of("cancel").group("c").build());
  auto late = submit(*job_of("late").group("c").ttl(500ms).build());
  // For the crashes: the child runs the highest priority first.
  auto dies_for_good = submit(*job_of("work").group("crash").priority(2).max_retries(0).build());
  auto retried = submit(*job_of("work").group("crash").priority(1).max_retries(1).build());
  submit(*job_of("work").group("crash").build());
  require_group_counts_match_jobs(*q, path);
  job_update u;
  u.payload = "changed";
  BOOST_REQUIRE(q->update_pending(retried, u).ok());
  BOOST_REQUIRE(q->cancel_pending(cancelled).ok());

  worker_options w;
  w.runners["ok"] = [](job_context&) {};
  w.runners["flaky"] = [](job_context& ctx) {
    if (ctx.try_number() == 1)
      ctx.fail("boom");
  };
  w.runners["doomed"] = [](job_context& ctx) { ctx.fail("boom"); };
  w.runners["slow"] = run_until_cancelled;
  auto wk = start(std::move(w));
  for (auto& id : ok)
    BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, flaky));
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, doomed));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, slow));
  require_counts_match_jobs(path);
  require_group_counts_match_jobs(*q, path);
  advance(501ms);  // past the deadline of "late"
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, late));
  advance(500ms);  // past the timeout of "slow" and the backoff of "flaky"
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, slow));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, flaky));
  BOOST_REQUIRE(wk.stop().ok());
  require_counts_match_jobs(path);
  require_group_counts_match_jobs(*q, path);
  BOOST_TEST(q->metrics()->by_group.count("a") == 0u);
  log.reset();
  q.reset();

  // Two owners killed mid-job: the second one's open recovers the first
  // one's job (no retries left: failed).
  for (auto& victim : {dies_for_good, retried}) {
    child_process owner{{ERGON_TEST_CRASH_WORKER, path, "hang"}};
    BOOST_REQUIRE_EQUAL(owner.read_line(), "started " + victim.to_string() + " 1");
    owner.signal(SIGKILL);
    owner.wait();
    require_counts_match_jobs(path);
  }
  reopen();  // recovers `retried`: back to pending
  auto c = list_counts(path);
  BOOST_TEST(c.jobs == c.table);
  BOOST_TEST(c.table == "cancel:4=1 doomed:3=1 flaky:2=1 late:5=1 ok:2=2 slow:3=1 work:3=1");
  auto counts = q->counts();
  BOOST_TEST(counts[job_status::pending] == 2);
  BOOST_TEST(counts[job_status::running] == 0);
  BOOST_TEST(counts[job_status::succeeded] == 3);
  BOOST_TEST(counts[job_status::failed] == 3);
  BOOST_TEST(counts[job_status::cancelled] == 1);
  BOOST_TEST(counts[job_status::expired] == 1);
  auto in = queue::inspect(path);
  BOOST_REQUIRE(in.has_value());
  auto m = in->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->by_status.by_status == counts.by_status, boost::test_tools::per_element());
  BOOST_TEST(m->by_type["work"][job_status::failed] == 1);
  require_group_counts_match_jobs(*q, path);
  BOOST_TEST(q->metrics()->by_group["crash"][job_status::pending] == 2);
  // Both run now (past any backoff): the group's counts follow claims and ends,
  // and the emptied group is dropped.
  advance(60'000ms);
  worker_options again;
  again.runners["work"] = [](job_context&) {};
  auto rerun = start(std::move(again));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 2));
  BOOST_REQUIRE(rerun.stop().ok());
  require_group_counts_match_jobs(*q, path);
  BOOST_TEST(q->metrics()->by_group.empty());
}

// Open scans from the low mark; the writer moves it past finished jobs as
// they finish, so the next open does not read the jobs finished since this one.
BOOST_FIXTURE_TEST_CASE(the_low_mark_moves_past_finished_jobs_while_the_queue_runs,
                        queue_fixture) {
  auto path = location;
  std::vector<job> jobs(1'500, *job_of("ok").build());
  auto ids = q->submit_batch(jobs);
  BOOST_REQUIRE(ids.has_value());
  auto low_mark = [&] {
    return engine_probe{path}.number("SELECT value FROM meta WHERE key = 'unfinished_low_mark'");
  };
  BOOST_TEST(low_mark() <= 1);
  worker_options w;
  w.runners["ok"] = [](job_context&) {};
  w.min_concurrency = w.max_concurrency = 1;
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, ids->back()));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, jobs.size()));
  BOOST_REQUIRE(wk.stop().ok());
  // One worker slot runs them in order: at the first advance, after 1,024
  // finished jobs, every row below 1,025 was finished.
  BOOST_TEST(low_mark() >= 1'025);
  BOOST_TEST(low_mark() <= 1'501);
  reopen();
  BOOST_TEST(low_mark() == 1'501);  // open finishes the scan: nothing is unfinished
  BOOST_TEST(q->counts()[job_status::succeeded] == 1'500);
  BOOST_TEST(q->counts()[job_status::pending] == 0);
}

BOOST_AUTO_TEST_CASE(open_and_inspection_read_the_counts_table_not_the_jobs) {
  temp_dir dir;
  // A count no GROUP BY over the one (pending) job could give.
  auto path = seeded_then(dir, 1, "INSERT INTO finished_counts VALUES ('work', 2, 42)");
  {
    auto in = queue::inspect(path);
    BOOST_REQUIRE(in.has_value());
    BOOST_TEST((*in->counts())[job_status::succeeded] == 42);
    BOOST_TEST((*in->counts())[job_status::pending] == 1);
  }
  auto q = queue::open(path);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(q->counts()[job_status::succeeded] == 42);
  BOOST_TEST(q->counts()[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(inspecting_a_version_1_file_counts_its_jobs,
                     *sqlite_only("SQLite's schema history; PostgreSQL's starts at 1")) {
  // A file no queue of this version has opened yet: the inspector must not
  // migrate it, so it counts the jobs instead of reading finished_counts.
  temp_dir dir;
  auto path = seeded_then(dir, 2, downgrade_sql(1));
  auto in = queue::inspect(path);
  BOOST_REQUIRE_MESSAGE(in.has_value(), in.error().to_string());
  BOOST_TEST((*in->counts())[job_status::pending] == 2);
  // Job rows predate version 3's columns: reads say so instead of failing
  // inside SQLite.
  auto jobs = in->jobs_by_name("x");
  BOOST_REQUIRE(!jobs.has_value());
  BOOST_TEST(jobs.error().code() == error::corrupt);
  BOOST_TEST(jobs.error().message().find("queue::open") != std::string::npos,
             jobs.error().to_string());
  BOOST_TEST(in->list_recurring().error().code() == error::corrupt);
  BOOST_TEST(sqlite_probe{path}.number("PRAGMA user_version") == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(foreign_files, *sqlite_only(files_only))

// Opening `path` fails with corrupt, and neither the file nor its directory
// changed (no -wal, -shm or lock file left behind).
void check_left_alone(const temp_dir& dir, const std::string& path, const std::string& what) {
  auto bytes = read_bytes(path);
  auto before = entries(dir);
  auto q = queue::open(path);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::corrupt, q.error().to_string());
  BOOST_TEST(q.error().message().find(what) != std::string::npos, q.error().message());
  BOOST_TEST((read_bytes(path) == bytes));
  BOOST_TEST((entries(dir) == before));
}

BOOST_AUTO_TEST_CASE(other_programs_databases_are_refused_and_left_unchanged) {
  struct foreign {
    const char* setup;
    const char* refusal;  // part of the error message
    const char* journal;  // the journal mode it must keep
  };
  const foreign cases[] = {
    {"CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')",
     "other tables (notes)", "delete"},
    // Such a file used to pass the version check and then fail with
    // "internal: no such table".
    {"CREATE TABLE jobs (x); PRAGMA user_version = 1", "other tables (jobs)", "delete"},
    {"PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1)",
     "other tables (t)", "wal"},
    // Marked by another program, even with nothing in it yet.
    {"PRAGMA application_id = 42", "application_id is 42", "delete"},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.setup) {
      temp_dir dir;
      auto path = dir.file("app.db");
      sqlite_probe{path, sqlite_probe::create}.exec(c.setup);
      check_left_alone(dir, path, c.refusal);
      BOOST_TEST(sqlite_probe{path}.text("PRAGMA journal_mode") == c.journal);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_sqlite_is_refused_and_left_unchanged) {
  temp_dir dir;
  auto path = dir.file("notes.txt");
  {
    std::ofstream out{path};
    out << "these are not the pages you are looking for\n";
  }
  check_left_alone(dir, path, "not a SQLite file");
}

BOOST_AUTO_TEST_CASE(an_empty_file_or_empty_database_becomes_a_marked_queue) {
  temp_dir dir;
  { std::ofstream touch{dir.file("empty.bin")}; }
  {
    sqlite_probe blank{dir.file("blank.db"), sqlite_probe::create};
    blank.exec("PRAGMA user_version = 0");
  }
  for (auto name : {"empty.bin", "blank.db", "new.db"}) {
    {
      auto q = queue::open(dir.file(name));
      BOOST_REQUIRE_MESSAGE(q.has_value(), name << ": " << q.error().to_string());
      BOOST_TEST(q->submit(*job_builder("work").build()).has_value());
    }
    sqlite_probe p{dir.file(name)};
    BOOST_TEST(p.number("PRAGMA application_id") == 0x4552474E);
  }
}

BOOST_AUTO_TEST_CASE(an_ergon_file_made_before_the_mark_still_opens_and_gets_marked) {
  temp_dir dir;
  auto path = dir.file("q.db");
  auto ids = seed(path, 1);
  {
    // Such files are at schema version 1: finished_counts came later.
    sqlite_probe p{path, sqlite_probe::writable};
    p.exec(downgrade_sql(1) + "; PRAGMA application_id = 0");
  }
  auto q = queue::open(path);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(q->job_info(ids[0]).has_value());
  BOOST_TEST(q->counts()[job_status::pending] == 1);  // migrated with its counts
  BOOST_REQUIRE(q->close().ok());
  sqlite_probe p{path};
  BOOST_TEST(p.number("PRAGMA application_id") == 0x4552474E);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(paths)

BOOST_AUTO_TEST_CASE(paths_that_name_no_file_are_refused, *sqlite_only(files_only)) {
  for (auto path : {":memory:", ""}) {
    auto q = queue::open(path);
    BOOST_REQUIRE(!q.has_value());
    BOOST_TEST(q.error().code() == error::invalid_argument);
    BOOST_TEST(q.error().field() == "path");
  }
}

BOOST_AUTO_TEST_CASE(bad_options_are_named_and_create_nothing) {
  struct bad {
    const char* field;
    std::function<void(options&)> set;
  };
  const bad cases[] = {
    {"max_database_bytes", [](options& o) { o.max_database_bytes = -1; }},
    {"writer_batch_limit", [](options& o) { o.writer_batch_limit = 0; }},
    {"cache_kib", [](options& o) { o.cache_kib = -1; }},
    {"scheduler.threads", [](options& o) { o.scheduler.threads = 0; }},
    {"clock", [](options& o) { o.clock = std::make_shared<manual_clock>(-1); }},
    {"file_mode", [](options& o) { o.file_mode = 0400; }},
    {"file_mode", [](options& o) { o.file_mode = 0700; }},
    {"file_mode", [](options& o) { o.file_mode = 01600; }},
    {"lease_time", [](options& o) { o.lease_time = 999ms; }},
    {"commit_outcome_wait", [](options& o) { o.commit_outcome_wait = 0ms; }},
    {"commit_outcome_wait", [](options& o) { o.commit_outcome_wait = 3601s; }},
    {"remote_grace", [](options& o) { o.remote_grace = -1ms; }},
    {"remote_grace", [](options& o) { o.remote_grace = 3601s; }},
    {"idempotency_window", [](options& o) { o.idempotency_window = 999ms; }},
    {"idempotency_window", [](options& o) { o.idempotency_window = 2'592'000'001ms; }},
    {"inbox_sweep", [](options& o) { o.inbox_sweep = 9ms; }},
    {"inbox_sweep", [](options& o) { o.inbox_sweep = 3'600'001ms; }},
    {"max_snoozes", [](options& o) { o.max_snoozes = -1; }},
    {"max_snoozes", [](options& o) { o.max_snoozes = 1'000'001; }},
  };
  temp_dir dir;
  auto path = location_of(dir);
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.field) {
      options o;
      c.set(o);
      auto q = queue::open(path, o);
      BOOST_REQUIRE(!q.has_value());
      BOOST_TEST(q.error().code() == error::invalid_argument);
      BOOST_TEST(q.error().field() == c.field);
    }
  }
  BOOST_TEST(entries(dir).empty());
  if (on_postgres())
    BOOST_TEST(engine_probe{path}.number(
                 "SELECT count(*) FROM pg_namespace WHERE nspname = 'ergon'") == 0);
}

BOOST_AUTO_TEST_CASE(a_missing_directory_is_an_io_error_and_creates_nothing,
                     *sqlite_only(files_only)) {
  temp_dir dir;
  auto q = queue::open(dir.file("nowhere/q.db"));
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::io_error, q.error().to_string());
  BOOST_TEST(entries(dir).empty());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

unsigned mode_of(const std::string& path) {
  struct stat st {};
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777u;
}

}  // namespace

// Payloads, results and checkpoints are this user's alone by default: the
// database and its -wal and -shm files are made 0600, whatever the umask.
BOOST_AUTO_TEST_CASE(new_database_files_are_private_unless_widened, *sqlite_only(files_only)) {
  temp_dir dir;
  auto old_mask = ::umask(0);
  {
    auto q = queue::open(dir.file("q.db"));
    BOOST_REQUIRE(q.has_value());
    BOOST_REQUIRE(q->submit(*job_builder("t").build()).has_value());
    for (auto f : {"q.db", "q.db-wal", "q.db-shm"})
      BOOST_TEST(mode_of(dir.file(f)) == 0600u, f);
    BOOST_TEST(q->close().ok());
  }
  options group_reads;
  group_reads.file_mode = 0640;
  {
    auto q = queue::open(dir.file("shared.db"), group_reads);
    BOOST_REQUIRE(q.has_value());
    BOOST_REQUIRE(q->submit(*job_builder("t").build()).has_value());
    for (auto f : {"shared.db", "shared.db-wal", "shared.db-shm"})
      BOOST_TEST(mode_of(dir.file(f)) == 0640u, f);
  }
  // An existing file keeps the mode its owner gave it.
  {
    std::ofstream{dir.file("made.db")};
    ::chmod(dir.file("made.db").c_str(), 0644);
    auto q = queue::open(dir.file("made.db"));
    BOOST_REQUIRE(q.has_value());
    BOOST_TEST(mode_of(dir.file("made.db")) == 0644u);
  }
  ::umask(old_mask);
}

BOOST_AUTO_TEST_SUITE(lock_file, *sqlite_only(files_only))

// A symlink planted at the lock file's name is replaced, not followed: its
// target keeps its bytes. A FIFO there is replaced too, without blocking.
BOOST_AUTO_TEST_CASE(what_sits_at_the_lock_files_name_is_replaced_never_followed) {
  temp_dir dir;
  auto victim = dir.file("victim");
  std::ofstream{victim} << "precious";
  std::filesystem::create_symlink(victim, dir.file("q.db-owner"));
  {
    auto q = queue::open(dir.file("q.db"));
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    BOOST_TEST(read_bytes(victim) == "precious");
    BOOST_TEST(!std::filesystem::is_symlink(dir.file("q.db-owner")));
    BOOST_TEST(read_bytes(dir.file("q.db-owner")).find(our_pid()) == 0u);
    BOOST_TEST(mode_of(dir.file("q.db-owner")) == 0644u);
  }
  BOOST_REQUIRE(::mkfifo(dir.file("q.db-owner").c_str(), 0600) == 0);
  {
    auto q = queue::open(dir.file("q.db"));
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    BOOST_TEST(std::filesystem::is_regular_file(dir.file("q.db-owner")));
  }
  // One this user left writable by others is made 0644 again.
  std::ofstream{dir.file("q.db-owner")} << "pid 1 on host nowhere\n";
  ::chmod(dir.file("q.db-owner").c_str(), 0666);
  {
    auto q = queue::open(dir.file("q.db"));
    BOOST_REQUIRE(q.has_value());
    BOOST_TEST(mode_of(dir.file("q.db-owner")) == 0644u);
  }
  BOOST_TEST(read_bytes(victim) == "precious");
}

// Another user's lock file that no live process holds is replaced; one
// that its owner holds still means busy. Needs root to make it.
BOOST_AUTO_TEST_CASE(another_users_lock_file_is_replaced_unless_held) {
  if (::geteuid() != 0)
    return;  // chown needs root; the checks below hold for any user
  temp_dir dir;
  auto lock = dir.file("q.db-owner");
  std::ofstream{lock} << "pid 1 on host elsewhere\nlistening on 127.0.0.1 port 1\n";
  BOOST_REQUIRE(::chown(lock.c_str(), 65534, 65534) == 0);
  // Tools ignore it: it can't have been written by this user or the
  // database's owner.
  auto found = find_owner(dir.file("q.db"));
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(!found->has_value());
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  struct stat st {};
  BOOST_REQUIRE(::stat(lock.c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == ::geteuid());
}

// ergonctl sends the operator's writes where the lock file says: a file
// that others could have written is no owner's, and what it says is never
// printed raw.
BOOST_AUTO_TEST_CASE(find_owner_trusts_only_a_lock_file_its_owner_could_have_written) {
  temp_dir dir;
  auto db = dir.file("q.db");
  seed(db, 1);
  auto lock = dir.file("q.db-owner");
  auto text = "pid " + std::to_string(::getpid()) + " on host ev\x1b[2Jil\nlistening on 127.0.0.1 port 9\n";
  std::ofstream{lock} << text;
  ::chmod(lock.c_str(), 0644);
  auto found = find_owner(db);
  BOOST_REQUIRE(found.has_value());
  BOOST_REQUIRE(found->has_value());
  BOOST_TEST((*found)->host == "ev?[2Jil");  // control bytes never reach a terminal
  BOOST_TEST((*found)->listeners.size() == 1u);
  for (auto mode : {0664, 0646}) {
    ::chmod(lock.c_str(), static_cast<mode_t>(mode));
    auto loose = find_owner(db);
    BOOST_REQUIRE(loose.has_value());
    BOOST_TEST(!loose->has_value(), "mode " << std::oct << mode);
  }
  std::filesystem::remove(lock);
  std::ofstream{dir.file("elsewhere")} << text;
  std::filesystem::create_symlink(dir.file("elsewhere"), lock);
  auto linked = find_owner(db);
  BOOST_REQUIRE(linked.has_value());
  BOOST_TEST(!linked->has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(clean_close, *sqlite_only(files_only))

// After close the database file alone holds every commit: no -wal or -shm
// is left, and a copy of the file by itself opens with every job.
BOOST_AUTO_TEST_CASE(a_closed_queue_is_one_file) {
  temp_dir dir;
  options opts;
  opts.http = http_options{};  // its reads use connections of their own
  std::vector<job_id> ids;
  {
    auto q = queue::open(dir.file("q.db"), opts);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    for (int i = 0; i < 500; ++i)
      ids.push_back(*q->submit(*job_builder("t").payload(std::string(1000, 'x')).build()));
    BOOST_REQUIRE(q->job_info(ids.front()).has_value());  // a read connection
    BOOST_REQUIRE(q->list_jobs({}).has_value());
    BOOST_TEST(q->close().ok());
  }
  BOOST_TEST((entries(dir) == std::set<std::string>{"q.db"}));
  std::filesystem::create_directory(dir.file("copy"));
  std::filesystem::copy_file(dir.file("q.db"), dir.file("copy/q.db"));
  auto copy = queue::inspect(dir.file("copy/q.db"));
  BOOST_REQUIRE_MESSAGE(copy.has_value(), copy.error().to_string());
  BOOST_TEST(copy->counts()->by_status[0] == 500);
  BOOST_TEST(copy->job_info(ids.back()).has_value());
}

// A reader still open keeps the WAL file in place, but the close has
// folded every commit into the database file: a copy of it is whole.
BOOST_AUTO_TEST_CASE(a_reader_open_across_the_close_still_leaves_a_whole_database_file) {
  temp_dir dir;
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(q.has_value());
  auto reader = queue::inspect(dir.file("q.db"));
  BOOST_REQUIRE(reader.has_value());
  BOOST_REQUIRE(reader->counts().has_value());
  for (int i = 0; i < 200; ++i)
    BOOST_REQUIRE(q->submit(*job_builder("t").build()).has_value());
  BOOST_TEST(q->close().ok());
  BOOST_TEST(std::filesystem::file_size(dir.file("q.db-wal")) == 0u);
  std::filesystem::create_directory(dir.file("copy"));
  std::filesystem::copy_file(dir.file("q.db"), dir.file("copy/q.db"));
  auto copy = queue::inspect(dir.file("copy/q.db"));
  BOOST_REQUIRE_MESSAGE(copy.has_value(), copy.error().to_string());
  BOOST_TEST(copy->counts()->by_status[0] == 200);
}

BOOST_AUTO_TEST_SUITE_END()
