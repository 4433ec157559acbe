// ergonctl as an operator runs it: a real binary on real files, beside a
// file nobody owns, an owner in this process that takes no connections, and
// ergon-server owners (with and without a secret), with remote worker
// processes failing jobs. --json output is parsed and checked.
#define BOOST_TEST_MODULE ergonctl
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <set>
#include <sstream>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "support/server_process.hpp"
#include "support/test_engine.hpp"

extern char** environ;

using namespace ergon;
using ergon::test::child_process;
using ergon::test::server_process;
using ergon::test::temp_dir;
using json = nlohmann::json;

namespace {

struct run_result {
  int code = -1;
  std::string out;
  std::string err;

  json doc() const {
    auto d = json::parse(out, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!d.is_discarded(), "not JSON: " << out << " / stderr: " << err);
    return d;
  }
};

// Everything stored at `location`: the SQLite file's bytes, or a dump of
// the PostgreSQL schema's rows.
std::string stored(const std::string& location) {
  if (test::on_postgres())
    return test::engine_probe{location}.dump();
  std::ifstream in{location, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs ergonctl with `args` and waits for it; stdout and stderr via files.
run_result ergonctl(const temp_dir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), ERGON_CTL);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  auto out = dir.file("ctl.out");
  auto err = dir.file("ctl.err");
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  BOOST_REQUIRE_MESSAGE(rc == 0, "posix_spawn failed: " << rc);
  int st = 0;
  ::waitpid(pid, &st, 0);
  run_result r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A queue (a file, or a PostgreSQL schema) with three jobs of type "job",
// failed for good (by a worker in this process), one pending "other" job in
// group "g", and a recurring job.
struct filled_file {
  temp_dir dir;
  std::string db = test::test_location(dir);
  std::vector<job_id> failed;
  job_id pending;

  filled_file() {
    auto q = queue::open(db);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    for (int i = 0; i < 3; ++i)
      failed.push_back(*q->submit(*job_builder("job").payload("f" + std::to_string(i)).build()));
    pending = *q->submit(*job_builder("other").group("g").run_at(4'000'000'000'000).build());
    recurring_job r;
    r.id = "nightly";
    r.schedule = "every 1h";
    r.job = *job_builder("report").build();
    BOOST_REQUIRE(q->add_recurring(r).has_value());
    worker_options w;
    w.runners["job"] = [](job_context& ctx) {
      ctx.log(log_level::warn, "about to fail " + ctx.payload());
      ctx.fail_permanently("boom:" + ctx.payload());
    };
    auto wk = q->start_worker(std::move(w));
    BOOST_REQUIRE(wk.has_value());
    for (auto& id : failed)
      BOOST_REQUIRE(q->wait(id, std::chrono::minutes(1))->status == job_status::failed);
    BOOST_REQUIRE(wk->stop().ok());
    BOOST_REQUIRE(q->close().ok());
  }

  run_result ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", db});
    return ergonctl(dir, std::move(args));
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(reads_of_a_file_nobody_owns) {
  filled_file f;
  auto all = f.ctl({"list", "--json"});
  BOOST_REQUIRE_MESSAGE(all.code == 0, all.err);
  auto jobs = all.doc()["jobs"];
  BOOST_TEST(jobs.size() == 5u);  // three failed, the pending one, the recurring instance
  BOOST_TEST(all.doc()["next"].is_null());
  auto failed = f.ctl({"list", "--failed", "--json", "--limit", "2"});
  BOOST_REQUIRE_MESSAGE(failed.code == 0, failed.err);
  BOOST_TEST(failed.doc()["jobs"].size() == 2u);
  BOOST_TEST(failed.doc()["next"] == failed.doc()["jobs"][1]["id"]);
  auto rest = f.ctl({"list", "--failed", "--json", "--after",
                     failed.doc()["next"].get<std::string>()});
  BOOST_TEST(rest.doc()["jobs"].size() == 1u);
  // Times as ISO 8601 or ms: every job was submitted after 2001 and before 2200.
  auto in_range = f.ctl({"list", "--submitted-from", "2001-09-09T01:46:40.5Z",
                         "--submitted-before", "7258118400000", "--json"});
  BOOST_REQUIRE_MESSAGE(in_range.code == 0, in_range.err);
  BOOST_TEST(in_range.doc()["jobs"].size() == 5u);
  auto by_group = f.ctl({"list", "--group", "g", "--json"});
  BOOST_TEST(by_group.doc()["jobs"].size() == 1u);
  BOOST_TEST(by_group.doc()["jobs"][0]["id"] == f.pending.to_string());
  auto text = f.ctl({"list", "--status", "failed"});
  BOOST_TEST(text.code == 0);
  BOOST_TEST(text.out.find("boom:f0") != std::string::npos);
  BOOST_TEST(text.out.find("LAST ERROR") != std::string::npos);

  auto shown = f.ctl({"show", f.failed[1].to_string(), "--json"});
  BOOST_REQUIRE_MESSAGE(shown.code == 0, shown.err);
  auto j = shown.doc();
  BOOST_TEST(j["status"] == "failed");
  BOOST_TEST(j["payload"]["size"] == 2);
  BOOST_REQUIRE(j["attempts"].size() == 1u);
  BOOST_TEST(j["attempts"][0]["outcome"] == "failed_permanently");
  BOOST_TEST(j["attempts"][0]["message"] == "boom:f1");
  // The worker that ran it: this test's process.
  auto ran_on = j["attempts"][0]["worker"];
  BOOST_TEST(ran_on["name"] == "worker");
  BOOST_TEST(ran_on["pid"] == ::getpid());
  BOOST_TEST(ran_on["node"] == "");
  auto host = ran_on["host"].get<std::string>();
  BOOST_TEST(!host.empty());
  auto shown_text = f.ctl({"show", f.failed[1].to_string()});
  BOOST_TEST(shown_text.out.find("WORKER") != std::string::npos, shown_text.out);
  BOOST_TEST(shown_text.out.find("worker on " + host + " pid " + std::to_string(::getpid()))
               != std::string::npos,
             shown_text.out);
  BOOST_TEST(j["attempts"][0]["logs"][0]["text"] == "about to fail f1");
  BOOST_TEST(j["attempts"][0]["logs"][0]["level"] == "warn");
  BOOST_TEST(j["attempts"][0]["logs_dropped"] == 0);
  BOOST_TEST(shown_text.out.find("try 1 log:") != std::string::npos, shown_text.out);
  BOOST_TEST(shown_text.out.find(" warn about to fail f1") != std::string::npos, shown_text.out);
  // Who is registered lives in the owner's memory.
  auto nobody = f.ctl({"workers"});
  BOOST_TEST(nobody.code == 1);
  BOOST_TEST(nobody.err.find("listing workers needs a running owner") != std::string::npos,
             nobody.err);

  auto stats = f.ctl({"stats", "--json"});
  BOOST_REQUIRE_MESSAGE(stats.code == 0, stats.err);
  auto s = stats.doc();
  BOOST_TEST(s["by_status"]["failed"] == 3);
  BOOST_TEST(s["by_status"]["pending"] == 2);
  BOOST_TEST(s["by_type"]["job"]["failed"] == 3);
  BOOST_TEST(s["by_group"]["g"]["pending"] == 1);
  BOOST_TEST(s["owner"].is_null());
  BOOST_TEST(s["scheduling"].is_null());
  BOOST_TEST(!s["oldest_pending"].is_null());
  auto stats_text = f.ctl({"stats"});
  BOOST_TEST(stats_text.out.find("no process owns the file") != std::string::npos);

  auto recurring = f.ctl({"recurring", "list", "--json"});
  BOOST_REQUIRE_MESSAGE(recurring.code == 0, recurring.err);
  BOOST_TEST(recurring.doc().size() == 1u);
  BOOST_TEST(recurring.doc()[0]["schedule"] == "every 1h");
  auto one = f.ctl({"recurring", "show", "nightly", "--json"});
  BOOST_TEST(one.doc()["type"] == "report");
  BOOST_TEST(!one.doc()["next_job"].is_null());
}

BOOST_AUTO_TEST_CASE(writes_open_a_file_nobody_owns_and_release_it) {
  filled_file f;
  auto retried = f.ctl({"retry", f.failed[0].to_string(), "--json"});
  BOOST_REQUIRE_MESSAGE(retried.code == 0, retried.err);
  BOOST_TEST(retried.doc()["route"] == "opened here");
  auto bulk = f.ctl({"retry", "--all", "--type", "job", "--json"});
  BOOST_REQUIRE_MESSAGE(bulk.code == 0, bulk.err);
  BOOST_TEST(bulk.doc()["retried"] == 2);
  auto cancelled = f.ctl({"cancel", f.pending.to_string()});
  BOOST_REQUIRE_MESSAGE(cancelled.code == 0, cancelled.err);
  auto paused = f.ctl({"recurring", "pause", "nightly", "--for", "2h", "--json"});
  BOOST_REQUIRE_MESSAGE(paused.code == 0, paused.err);
  BOOST_TEST(paused.doc()["for_ms"] == 7'200'000);
  auto shown = f.ctl({"recurring", "show", "nightly"});
  BOOST_TEST(shown.out.find("paused         until ") != std::string::npos, shown.out);
  BOOST_TEST(f.ctl({"recurring", "list", "--json"}).doc()[0]["paused"] == true);
  BOOST_TEST(f.ctl({"recurring", "resume", "nightly"}).code == 0);
  BOOST_TEST(f.ctl({"recurring", "show", "nightly", "--json"}).doc()["paused"] == false);
  auto missing = f.ctl({"recurring", "pause", "none"});
  BOOST_TEST(missing.code != 0);
  BOOST_TEST(missing.err.find("no recurring job with id 'none'") != std::string::npos, missing.err);
  BOOST_TEST(f.ctl({"recurring", "pause", "nightly", "--for", "soon"}).code != 0);
  BOOST_TEST(f.ctl({"recurring", "delete", "nightly"}).code == 0);
  // Each run released the file: it opens here, with every change in it.
  {
    auto q = queue::open(f.db);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    for (auto& id : f.failed)
      BOOST_TEST(q->job_info(id)->status == job_status::pending);
    BOOST_TEST(q->job_info(f.pending)->status == job_status::cancelled);
    BOOST_TEST(q->recurring_info("nightly").error().code() == error::not_found);
    // Fail them again, to purge.
    worker_options w;
    w.runners["job"] = [](job_context& ctx) { ctx.fail_permanently("again"); };
    auto wk = q->start_worker(std::move(w));
    for (auto& id : f.failed)
      BOOST_REQUIRE(q->wait(id, std::chrono::minutes(1))->status == job_status::failed);
    BOOST_REQUIRE(wk->stop().ok());
  }
  auto purged = f.ctl({"purge", "--all", "--json"});
  BOOST_REQUIRE_MESSAGE(purged.code == 0, purged.err);
  BOOST_TEST(purged.doc()["purged"] == 3);
  BOOST_TEST(f.ctl({"show", f.failed[0].to_string()}).code == 1);
  // Pauses live in an owner's memory: with none, it says so and does nothing.
  auto pause = f.ctl({"pause", "group", "g"});
  BOOST_TEST(pause.code == 1);
  BOOST_TEST(pause.err.find("no program owns") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_input_is_named_with_exit_status_2_and_changes_nothing) {
  filled_file f;
  struct bad_case {
    std::vector<std::string> args;
    std::string names;
  };
  std::vector<bad_case> cases{
    {{"show", "not-an-id"}, "not a job id"},
    {{"list", "--status", "done"}, "--status: 'done' is not a status"},
    {{"list", "--submitted-from", "yesterday"}, "--submitted-from: 'yesterday' is not a time"},
    {{"list", "--after", "x"}, "--after"},
    {{"list", "--finished-before", "2026-02-30"}, "not a date and time of the calendar"},
    {{"list", "--finished-before", "2026-11-25T24:00:00Z"}, "calendar"},
    {{"list", "--finished-before", "2026-11-25T10:00"}, "not a time"},
    {{"list", "--finished-before", "99999999999999999999"}, "past the range"},
    {{"retry"}, "either a job ID or --all"},
    {{"retry", f.failed[0].to_string(), "--all"}, "either a job ID or --all"},
    {{"purge"}, "either --older-than or --all"},
    {{"purge", "--older-than", "-5s"}, "negative"},
    {{"purge", "--older-than", "5 weeks"}, "unknown unit"},
    {{"purge", "--older-than", "99999999999999999999d"}, "too long"},
    {{"purge", "--older-than", "1d", "--type", "job"}, "give it alone"},
    // A bare number was once ms: "7" meant to be days deleted everything.
    {{"purge", "--older-than", "7"}, "--older-than: '7' has no unit"},
    {{"purge", "--older-than", "7", "--dry-run"}, "has no unit"},
    {{"pause", "group", "g", "--for", "10"}, "--for: '10' has no unit"},
    {{"list", "--limit", "0"}, "--limit: must be 1 to 1000"},
    {{"list", "--limit", "1001"}, "--limit"},
    {{"list", "--type", std::string(300, 't')}, "--type: "},
    {{"retry", "--all", "--group", std::string("a\x01b")}, "--group: "},
    {{"retry", f.failed[0].to_string(), "--dry-run"}, "--dry-run: give it with --all"},
    {{"resume", "group"}, "WHAT"},
    {{"resume", "group", "g", "--all"}, "--all: give it without"},
    {{"pause", "queue", "x"}, "NAME: the queue has none"},
    {{"pause", "group"}, "NAME: give the group's name"},
    {{"set", "group", "g", "--burst", "2"}, "--burst: give it with --rate"},
    {{"set", "queue", "g", "--weight", "2"}, "WHAT"},
    {{"set", "group", "g", "--weight", "x"}, "--weight"},
    {{"frobnicate"}, "frobnicate"},
  };
  auto empty_secret = f.dir.file("empty-secret");
  test::write_private_file(empty_secret, "\nsecret on line two");
  cases.push_back({{"--secret-file", empty_secret, "list"}, "--secret-file: "});
  for (auto& c : cases) {
    auto r = f.ctl(c.args);
    BOOST_TEST_CONTEXT(c.args[0] << " " << (c.args.size() > 1 ? c.args[1] : "")) {
      BOOST_TEST(r.code == 2);
      BOOST_TEST(r.err.find(c.names) != std::string::npos, r.err);
      BOOST_TEST(r.out.empty());
    }
  }
  // The queue's own refusals: exit 1, as JSON on stderr with --json.
  auto missing = f.ctl({"show", job_id{}.to_string(), "--json"});
  BOOST_TEST(missing.code == 1);
  auto e = json::parse(missing.err, nullptr, false);
  BOOST_REQUIRE(!e.is_discarded());
  BOOST_TEST(e["error"] == "not_found");
  auto pending = f.ctl({"retry", f.pending.to_string()});
  BOOST_TEST(pending.code == 1);
  BOOST_TEST(pending.err.find("id") != std::string::npos);
  auto nowhere = ergonctl(f.dir, {"--db", f.dir.file("absent.db"), "list"});
  BOOST_TEST(nowhere.code == 1);
  BOOST_TEST(nowhere.err.find("absent.db") != std::string::npos, nowhere.err);
  auto create = ergonctl(f.dir, {"--db", f.dir.file("absent.db"), "retry", "--all"});
  BOOST_TEST(create.code == 1);
  BOOST_TEST(create.err.find("creates no database") != std::string::npos, create.err);
  BOOST_TEST(!std::filesystem::exists(f.dir.file("absent.db")));
  // Nothing above changed the file.
  auto q = queue::inspect(f.db);
  BOOST_REQUIRE(q.has_value());
  BOOST_TEST((*q->counts())[job_status::failed] == 3);
  auto help = f.ctl({"--help"});
  BOOST_TEST(help.code == 0);
  BOOST_TEST(help.out.find("EXIT STATUS") != std::string::npos);
  // Every command's help lists its flags, the formats and --json.
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"list"}, {"show"}, {"stats"}, {"backup"}, {"retry"}, {"cancel"},
        {"purge"}, {"pause"}, {"resume"}, {"recurring", "list"}, {"recurring", "show"},
        {"recurring", "delete"}, {"recurring", "pause"}, {"recurring", "resume"}}) {
    auto args = cmd;
    args.push_back("--help");
    auto h = f.ctl(args);
    BOOST_TEST_CONTEXT(cmd.back()) {
      BOOST_TEST(h.code == 0);
      BOOST_TEST(h.out.find("--json") != std::string::npos);
      BOOST_TEST(h.out.find("DURATION  a number with its unit") != std::string::npos);
      BOOST_TEST(h.out.find("EXIT STATUS") != std::string::npos);
    }
  }
  BOOST_TEST(f.ctl({"purge", "--help"}).out.find("--dry-run") != std::string::npos);
  BOOST_TEST(f.ctl({"retry", "--help"}).out.find("--dry-run") != std::string::npos);
  BOOST_TEST(f.ctl({"cancel", "--help"}).out.find("--dry-run") != std::string::npos);
}

// --dry-run prints what purge, retry --all and cancel would change, and
// changes nothing.
BOOST_AUTO_TEST_CASE(dry_runs_say_what_would_change_and_change_nothing) {
  filled_file f;
  auto before = stored(f.db);
  auto purge = f.ctl({"purge", "--all", "--type", "job", "--dry-run", "--json"});
  BOOST_REQUIRE_MESSAGE(purge.code == 0, purge.err);
  BOOST_TEST(purge.doc()["dry_run"] == true);
  BOOST_TEST(purge.doc()["would_purge"] == 3);
  std::set<std::string> listed;
  auto doc = purge.doc();
  for (auto& id : doc["jobs"])
    listed.insert(id.get<std::string>());
  for (auto& id : f.failed)
    BOOST_TEST(listed.count(id.to_string()) == 1u);
  auto none = f.ctl({"purge", "--older-than", "3650d", "--dry-run"});
  BOOST_TEST(none.code == 0);
  BOOST_TEST(none.out.find("would purge 0 failed jobs") != std::string::npos, none.out);
  auto recent = f.ctl({"purge", "--older-than", "0ms", "--dry-run"});
  BOOST_TEST(recent.out.find("would purge 3 failed jobs") != std::string::npos, recent.out);
  BOOST_TEST(recent.out.find(f.failed[0].to_string()) != std::string::npos);
  auto retry = f.ctl({"retry", "--all", "--dry-run"});
  BOOST_TEST(retry.code == 0);
  BOOST_TEST(retry.out.find("would retry 3 failed jobs") != std::string::npos, retry.out);
  auto cancel = f.ctl({"cancel", f.pending.to_string(), "--dry-run", "--json"});
  BOOST_REQUIRE_MESSAGE(cancel.code == 0, cancel.err);
  BOOST_TEST(cancel.doc()["status"] == "pending");
  auto finished = f.ctl({"cancel", f.failed[0].to_string(), "--dry-run"});
  BOOST_TEST(finished.code == 1);
  BOOST_TEST(finished.err.find("cancel would refuse it") != std::string::npos, finished.err);
  // Not a byte changed, and every job is where it was.
  BOOST_TEST(stored(f.db) == before);
  auto q = queue::inspect(f.db);
  BOOST_TEST((*q->counts())[job_status::failed] == 3);
  BOOST_TEST((*q->counts())[job_status::pending] == 2);
}

// Job fields are printed as text for people: control characters in them
// can't clear the screen or fake a line of output.
BOOST_AUTO_TEST_CASE(text_output_escapes_control_characters_from_job_fields) {
  filled_file f;
  const std::string hostile = "line one\n\x1b[2Jfake: all good\r\xc2\x9b";
  job_id id;
  {
    auto q = queue::open(f.db);
    BOOST_REQUIRE(q.has_value());
    id = *q->submit(*job_builder("evil").build());
    worker_options w;
    w.runners["evil"] = [&](job_context& ctx) { ctx.fail_permanently(hostile); };
    auto wk = q->start_worker(std::move(w));
    BOOST_REQUIRE(q->wait(id, std::chrono::minutes(1))->status == job_status::failed);
    BOOST_REQUIRE(wk->stop().ok());
    BOOST_REQUIRE(q->close().ok());
  }
  for (auto args : {std::vector<std::string>{"show", id.to_string()},
                    std::vector<std::string>{"list", "--type", "evil"}}) {
    auto r = f.ctl(args);
    BOOST_TEST_CONTEXT(args[0]) {
      BOOST_TEST(r.code == 0);
      BOOST_TEST(r.out.find('\x1b') == std::string::npos);
      BOOST_TEST(r.out.find('\r') == std::string::npos);
      BOOST_TEST(r.out.find("\\x1b[2J") != std::string::npos, r.out);
    }
  }
  auto shown = f.ctl({"show", id.to_string()});
  BOOST_TEST(shown.out.find("line one\\x0a\\x1b[2Jfake: all good\\x0d\\xc2\\x9b")
               != std::string::npos,
             shown.out);
  // --json keeps the bytes, escaped by JSON itself.
  auto as_json = f.ctl({"show", id.to_string(), "--json"});
  BOOST_TEST(as_json.doc()["attempts"][0]["message"] == hostile);
}

// A backup taken while an owner in this process writes: it opens, passes
// integrity_check, and holds every job committed before it began.
BOOST_AUTO_TEST_CASE(a_backup_under_write_load_opens_and_is_whole,
                     *test::sqlite_only("PostgreSQL is backed up with its own tools")) {
  filled_file f;
  auto q = queue::open(f.db);
  BOOST_REQUIRE(q.has_value());
  std::vector<job_id> before;
  for (int i = 0; i < 2'000; ++i)
    before.push_back(*q->submit(*job_builder("load").payload(std::string(500, 'p')).build()));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> written{0};
  std::thread writer{[&] {
    while (!stop.load()) {
      std::vector<job> batch(50, *job_builder("load").payload(std::string(500, 'q')).build());
      if (q->submit_batch(batch))
        written += 50;
    }
  }};
  auto first = f.ctl({"backup", f.dir.file("b1.db"), "--json"});
  auto second = f.ctl({"backup", f.dir.file("b2.db")});
  stop = true;
  writer.join();
  BOOST_REQUIRE_MESSAGE(first.code == 0, first.err);
  BOOST_REQUIRE_MESSAGE(second.code == 0, second.err);
  BOOST_TEST(first.doc()["quick_check"] == "ok");
  BOOST_TEST(second.out.find("quick_check ok") != std::string::npos);
  BOOST_TEST(written.load() > 0);
  BOOST_TEST(q->close().ok());
  for (auto name : {"b1.db", "b2.db"}) {
    auto path = f.dir.file(name);
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(!std::filesystem::exists(path + "-wal"));
      struct stat st {};
      BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
      BOOST_TEST((st.st_mode & 0777) == 0600u);
      sqlite3* db = nullptr;
      BOOST_REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
      sqlite3_stmt* check = nullptr;
      BOOST_REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &check, nullptr) == SQLITE_OK);
      BOOST_REQUIRE(sqlite3_step(check) == SQLITE_ROW);
      BOOST_TEST(std::string{reinterpret_cast<const char*>(sqlite3_column_text(check, 0))} == "ok");
      sqlite3_finalize(check);
      sqlite3_close(db);
      // The copy opens as a queue, with every job committed before it.
      auto copy = queue::open(path);
      BOOST_REQUIRE_MESSAGE(copy.has_value(), copy.error().to_string());
      for (auto& id : {before.front(), before.back(), f.failed[0]})
        BOOST_TEST(copy->job_info(id).has_value());
      BOOST_TEST(copy->counts()[job_status::pending] >= 2'000);
    }
  }
  // Never over an existing file: it stays as it was.
  auto again = f.ctl({"backup", f.dir.file("b1.db")});
  BOOST_TEST(again.code == 1);
  BOOST_TEST(again.err.find("exists") != std::string::npos, again.err);
  auto nowhere = f.ctl({"backup", f.dir.file("no/such/dir/b.db")});
  BOOST_TEST(nowhere.code == 1);
}

BOOST_AUTO_TEST_CASE(an_owner_that_takes_no_connections_is_named_and_reads_still_work) {
  filled_file f;
  auto q = queue::open(f.db);
  BOOST_REQUIRE(q.has_value());
  auto retry = f.ctl({"retry", f.failed[0].to_string()});
  BOOST_TEST(retry.code == 1);
  BOOST_TEST(retry.err.find("pid " + std::to_string(::getpid())) != std::string::npos, retry.err);
  BOOST_TEST(retry.err.find("takes no connections") != std::string::npos);
  auto list = f.ctl({"list", "--json"});
  BOOST_TEST(list.code == 0);
  BOOST_TEST(list.doc()["jobs"].size() == 5u);
  auto workers = f.ctl({"workers"});
  BOOST_TEST(workers.code == 1);
  BOOST_TEST(workers.err.find("listing workers needs the owner to listen") != std::string::npos,
             workers.err);
  auto stats = f.ctl({"stats", "--json"});
  BOOST_TEST(stats.doc()["owner"]["pid"] == ::getpid());
  BOOST_TEST(stats.doc()["owner"]["listeners"].empty());
  BOOST_TEST(q->job_info(f.failed[0])->status == job_status::failed);
}

BOOST_AUTO_TEST_CASE(writes_go_through_a_listening_owner) {
  filled_file f;
  server_process server{f.db};
  auto stats = f.ctl({"stats", "--json"});
  BOOST_REQUIRE_MESSAGE(stats.code == 0, stats.err);
  auto s = stats.doc();
  BOOST_TEST(s["owner"]["pid"] == server.proc.pid());
  BOOST_REQUIRE(s["owner"]["listeners"].size() == 1u);
  BOOST_TEST(s["owner"]["listeners"][0]["port"] == server.port);
  BOOST_TEST(!s["scheduling"].is_null());
  auto retried = f.ctl({"retry", "--all", "--json"});
  BOOST_REQUIRE_MESSAGE(retried.code == 0, retried.err);
  BOOST_TEST(retried.doc()["retried"] == 3);
  BOOST_TEST(retried.doc()["route"] == "through the owner at 127.0.0.1:" + std::to_string(server.port));
  auto paused = f.ctl({"pause", "type", "job", "--for", "1h", "--json"});
  BOOST_REQUIRE_MESSAGE(paused.code == 0, paused.err);
  BOOST_TEST(paused.doc()["for_ms"] == 3'600'000);
  BOOST_TEST(f.ctl({"resume", "type", "job"}).code == 0);
  // Run-time controls go to the owner, which saves them; `controls` reads
  // them from the file.
  auto set = f.ctl({"set", "group", "g", "--weight", "3", "--max-running", "0", "--rate", "2.5",
                    "--burst", "4", "--json"});
  BOOST_REQUIRE_MESSAGE(set.code == 0, set.err);
  BOOST_TEST(set.doc()["weight"] == 3);
  BOOST_TEST(set.doc()["group"] == "g");
  BOOST_TEST(f.ctl({"pause", "queue", "--for", "1h"}).code == 0);
  auto controls = f.ctl({"controls", "--json"});
  BOOST_REQUIRE_MESSAGE(controls.code == 0, controls.err);
  BOOST_REQUIRE(controls.doc().size() == 2u);
  BOOST_TEST(controls.doc()[0]["scope"] == "queue");
  BOOST_TEST(controls.doc()[1]["settings"]["rate"]["burst"] == 4);
  auto table = f.ctl({"controls"});
  BOOST_TEST(table.out.find("weight 3, max_running none, rate 2.5/s burst 4") != std::string::npos,
             table.out);
  auto refused = f.ctl({"set", "type", "job", "--weight", "2"});
  BOOST_TEST(refused.code == 2);
  BOOST_TEST(refused.err.find("--weight") != std::string::npos, refused.err);
  // A worker name's concurrency.
  auto sized = f.ctl({"set", "worker", "mailer", "--max-running", "6", "--json"});
  BOOST_REQUIRE_MESSAGE(sized.code == 0, sized.err);
  BOOST_TEST(sized.doc()["worker"] == "mailer");
  BOOST_TEST(sized.doc()["max_running"] == 6);
  auto listed = f.ctl({"controls"});
  BOOST_TEST(listed.out.find("worker") != std::string::npos, listed.out);
  auto zero = f.ctl({"set", "worker", "mailer", "--max-running", "0"});
  BOOST_TEST(zero.code == 2);
  BOOST_TEST(zero.err.find("--max-running") != std::string::npos, zero.err);
  auto unnamed = f.ctl({"set", "worker", "", "--max-running", "2"});
  BOOST_TEST(unnamed.code == 2);
  BOOST_TEST(unnamed.err.find("NAME") != std::string::npos, unnamed.err);
  BOOST_TEST(f.ctl({"reset", "worker", "mailer"}).code == 0);
  BOOST_TEST(f.ctl({"reset", "group", "g"}).code == 0);
  BOOST_TEST(f.ctl({"resume", "queue"}).code == 0);
  BOOST_TEST(f.ctl({"controls", "--json"}).doc().empty());
  auto cancelled = f.ctl({"cancel", f.pending.to_string(), "--json"});
  BOOST_REQUIRE_MESSAGE(cancelled.code == 0, cancelled.err);
  auto again = f.ctl({"cancel", f.pending.to_string()});
  BOOST_TEST(again.code == 1);
  BOOST_TEST(again.err.find("job_finished") != std::string::npos, again.err);
  // The owner made the changes: they are in its answers.
  auto list = f.ctl({"list", "--status", "pending", "--type", "job", "--json"});
  BOOST_TEST(list.doc()["jobs"].size() == 3u);
  BOOST_TEST(server.stop(SIGTERM));
  // SIGTERM closes the queue cleanly: the file alone holds it, no WAL.
  if (!test::on_postgres()) {
    BOOST_TEST(!std::filesystem::exists(f.db + "-wal"));
    BOOST_TEST(!std::filesystem::exists(f.db + "-shm"));
  }
  // Once the owner is gone its lock names nobody, and writes open the file.
  BOOST_TEST(f.ctl({"retry", "--all"}).code == 0);
}

// Tags filter listings and bulk writes, on the file and through an owner.
BOOST_AUTO_TEST_CASE(tags_filter_listings_and_bulk_writes) {
  filled_file f;
  job_id a1, a2, b1;
  {
    auto q = queue::open(f.db);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    auto later = [&](const std::string& tenant, const std::string& batch) {
      return *q->submit(*job_builder("t").tag("tenant", tenant).tag("batch", batch)
                           .run_at(4'000'000'000'000).build());
    };
    a1 = later("acme", "1");
    a2 = later("acme", "2");
    b1 = later("globex", "1");
    BOOST_REQUIRE(q->close().ok());
  }
  auto list = f.ctl({"list", "--tag", "tenant=acme", "--json"});
  BOOST_REQUIRE_MESSAGE(list.code == 0, list.err);
  BOOST_REQUIRE(list.doc()["jobs"].size() == 2u);
  BOOST_TEST(list.doc()["jobs"][0]["tags"] == json::parse(R"({"batch": "1", "tenant": "acme"})"));
  BOOST_TEST(f.ctl({"list", "--tag-prefix", "bat", "--json"}).doc()["jobs"].size() == 3u);
  BOOST_TEST(f.ctl({"list", "--tag", "tenant=acme", "--tag", "batch=2", "--json"})
               .doc()["jobs"].size() == 1u);
  auto show = f.ctl({"show", a1.to_string()});
  BOOST_TEST(show.out.find("batch=1, tenant=acme") != std::string::npos, show.out);
  // Bad tags and a cancel without a filter are usage errors.
  auto no_value = f.ctl({"list", "--tag", "tenant"});
  BOOST_TEST(no_value.code == 2);
  BOOST_TEST(no_value.err.find("--tag: 'tenant' is not KEY=VALUE") != std::string::npos, no_value.err);
  auto long_key = f.ctl({"list", "--tag", std::string(65, 'k') + "=v"});
  BOOST_TEST(long_key.code == 2);
  BOOST_TEST(long_key.err.find("--tag") != std::string::npos, long_key.err);
  BOOST_TEST(f.ctl({"cancel", "--all"}).code == 2);
  BOOST_TEST(f.ctl({"cancel", a1.to_string(), "--tag", "batch=1"}).code == 2);
  BOOST_TEST(f.ctl({"delete"}).code == 2);
  auto finished_status = f.ctl({"cancel", "--all", "--status", "failed"});
  BOOST_TEST(finished_status.code == 2);
  BOOST_TEST(finished_status.err.find("--status") != std::string::npos, finished_status.err);
  auto dry = f.ctl({"cancel", "--all", "--tag", "batch=1", "--dry-run", "--json"});
  BOOST_REQUIRE_MESSAGE(dry.code == 0, dry.err);
  BOOST_TEST(dry.doc()["would_cancel"] == 2);
  BOOST_TEST(f.ctl({"list", "--status", "pending", "--tag-prefix", "bat", "--json"})
               .doc()["jobs"].size() == 3u);
  {
    server_process server{f.db};
    auto cancelled = f.ctl({"cancel", "--all", "--tag", "batch=1", "--json"});
    BOOST_REQUIRE_MESSAGE(cancelled.code == 0, cancelled.err);
    BOOST_TEST(cancelled.doc()["cancelled"] == 2);
    BOOST_TEST(cancelled.doc()["stop_requested"] == 0);
    BOOST_TEST(cancelled.doc()["route"] == "through the owner at 127.0.0.1:" + std::to_string(server.port));
    auto dry_delete = f.ctl({"delete", "--all", "--tag-prefix", "ten", "--dry-run", "--json"});
    BOOST_TEST(dry_delete.doc()["would_delete"] == 2);
    auto deleted = f.ctl({"delete", "--all", "--tag-prefix", "ten", "--json"});
    BOOST_REQUIRE_MESSAGE(deleted.code == 0, deleted.err);
    BOOST_TEST(deleted.doc()["deleted"] == 2);
    BOOST_TEST(server.stop(SIGTERM));
  }
  // The file alone, opened here.
  auto pending_dry = f.ctl({"delete", "--all", "--status", "pending", "--dry-run"});
  BOOST_TEST(pending_dry.code == 2);
  BOOST_TEST(pending_dry.err.find("--status") != std::string::npos, pending_dry.err);
  auto pending = f.ctl({"delete", "--all", "--status", "pending"});
  BOOST_TEST(pending.code == 2);
  BOOST_TEST(pending.err.find("--status") != std::string::npos, pending.err);
  auto rest = f.ctl({"cancel", "--all", "--tag", "tenant=acme"});
  BOOST_REQUIRE_MESSAGE(rest.code == 0, rest.err);
  BOOST_TEST(rest.out.find("cancelled 1 job;") != std::string::npos, rest.out);
  auto q = queue::open(f.db);
  BOOST_REQUIRE(q.has_value());
  BOOST_TEST(q->job_info(a1).error().code() == error::not_found);
  BOOST_TEST(q->job_info(b1).error().code() == error::not_found);
  BOOST_TEST(q->job_info(a2)->status == job_status::cancelled);
}

// `workers` asks the listening owner who is registered now.
BOOST_AUTO_TEST_CASE(workers_lists_the_owner_s_registered_workers) {
  filled_file f;
  options o;
  o.listen = listen_options{};
  auto q = queue::open(f.db, o);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  BOOST_TEST(f.ctl({"workers", "--json"}).doc().empty());
  BOOST_TEST(f.ctl({"workers"}).out.find("no workers registered") != std::string::npos);
  worker_options w;
  w.name = "billing";
  w.max_concurrency = 3;
  w.runners["invoice"] = [](job_context& ctx) { ctx.complete("sent"); };
  auto wk = q->start_worker(std::move(w));
  BOOST_REQUIRE(wk.has_value());
  auto ran = q->submit(*job_builder("invoice").build());
  BOOST_REQUIRE(q->wait(*ran, std::chrono::minutes(1))->status == job_status::succeeded);
  auto listed = f.ctl({"workers", "--json"});
  BOOST_REQUIRE_MESSAGE(listed.code == 0, listed.err);
  auto doc = listed.doc();
  BOOST_REQUIRE(doc.size() == 1u);
  BOOST_TEST(doc[0]["worker"]["name"] == "billing");
  BOOST_TEST(doc[0]["worker"]["pid"] == ::getpid());
  BOOST_TEST(doc[0]["types"] == json::array({"invoice"}));
  BOOST_TEST(doc[0]["max_concurrency"] == 3);
  BOOST_TEST(doc[0]["leaving"] == false);
  auto text = f.ctl({"workers"});
  BOOST_TEST(text.out.find("billing") != std::string::npos, text.out);
  BOOST_TEST(text.out.find("REPORTED") != std::string::npos, text.out);
  BOOST_TEST(text.out.find("/3") != std::string::npos, text.out);
  BOOST_TEST(wk->stop().ok());
  BOOST_TEST(f.ctl({"workers", "--json"}).doc().empty());
}

BOOST_AUTO_TEST_CASE(an_owner_with_a_secret_needs_it) {
  filled_file f;
  auto secret_file = f.dir.file("secret");
  test::write_private_file(secret_file, test::test_secret);
  server_process server{f.db, 0, {"--secret-file", secret_file}};
  // stats prints the file's counts without the secret, and says what
  // needs it.
  auto stats = f.ctl({"stats"});
  BOOST_TEST(stats.code == 0, stats.err);
  BOOST_TEST(stats.out.find("failed: 3") != std::string::npos, stats.out);
  BOOST_TEST(stats.out.find("--secret-file") != std::string::npos, stats.out);
  auto stats_json = f.ctl({"stats", "--json"});
  BOOST_TEST(stats_json.doc()["by_status"]["failed"] == 3);
  BOOST_TEST(stats_json.doc()["scheduling"].is_null());
  BOOST_TEST(stats_json.doc()["scheduling_note"].get<std::string>().find("secret")
             != std::string::npos);
  // Pauses ahead are listed by stats, and resume --all ends them.
  auto paused = f.ctl({"--secret-file", secret_file, "pause", "group", "not-yet"});
  BOOST_REQUIRE_MESSAGE(paused.code == 0, paused.err);
  BOOST_TEST(f.ctl({"--secret-file", secret_file, "pause", "type", "later", "--for", "1h"}).code
             == 0);
  auto listed = f.ctl({"--secret-file", secret_file, "stats"});
  BOOST_TEST(listed.out.find("PAUSED") != std::string::npos, listed.out);
  BOOST_TEST(listed.out.find("not-yet") != std::string::npos, listed.out);
  auto pauses = f.ctl({"--secret-file", secret_file, "stats", "--json"}).doc()["scheduling"]["pauses"];
  BOOST_TEST(pauses.size() == 2u);
  auto bad_name = f.ctl({"--secret-file", secret_file, "pause", "group", "a\x01b"});
  BOOST_TEST(bad_name.code == 2);
  BOOST_TEST(bad_name.err.find("NAME: ") != std::string::npos, bad_name.err);
  auto resumed = f.ctl({"--secret-file", secret_file, "resume", "--all", "--json"});
  BOOST_REQUIRE_MESSAGE(resumed.code == 0, resumed.err);
  BOOST_TEST(resumed.doc()["resumed"] == 2);
  BOOST_TEST(f.ctl({"--secret-file", secret_file, "stats", "--json"})
               .doc()["scheduling"]["pauses"]
               .empty());
  auto without = f.ctl({"retry", "--all"});
  BOOST_TEST(without.code == 1);
  BOOST_TEST(without.err.find("--secret-file") != std::string::npos, without.err);
  auto wrong_file = f.dir.file("wrong");
  test::write_private_file(wrong_file, std::string(64, 'a'));
  auto wrong = f.ctl({"--secret-file", wrong_file, "retry", "--all"});
  BOOST_TEST(wrong.code == 1);
  BOOST_TEST(wrong.err.find("unauthenticated") != std::string::npos, wrong.err);
  auto with = f.ctl({"--secret-file", secret_file, "retry", "--all", "--json"});
  BOOST_REQUIRE_MESSAGE(with.code == 0, with.err);
  BOOST_TEST(with.doc()["retried"] == 3);
  BOOST_TEST(server.stop(SIGTERM));
}

// find_owner reads the lock without taking it: a live owner with its
// port, nobody after a close, and nobody after a crash (a dead pid).
BOOST_AUTO_TEST_CASE(find_owner_tells_live_owners_from_gone_ones,
                     *test::sqlite_only("it writes lock files; see the PostgreSQL case below")) {
  temp_dir dir;
  auto db = dir.file("q.db");
  BOOST_TEST(!find_owner(db)->has_value());
  BOOST_TEST(find_owner("").error().field() == "path");
  {
    options o;
    o.listen = listen_options{};
    auto q = queue::open(db, o);
    BOOST_REQUIRE(q.has_value());
    auto owner = find_owner(db);
    BOOST_REQUIRE(owner.has_value() && owner->has_value());
    BOOST_TEST((*owner)->pid == ::getpid());
    BOOST_REQUIRE((*owner)->listeners.size() == 1u);
    BOOST_TEST((*owner)->listeners[0].port == *q->listening_port());
    BOOST_TEST((*owner)->listeners[0].address == "127.0.0.1");
    BOOST_TEST(!(*owner)->listeners[0].needs_secret);
  }
  BOOST_TEST(!find_owner(db)->has_value());
  // A crashed owner's lock file: its pid is dead.
  pid_t dead = ::fork();
  if (dead == 0)
    ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::ofstream{db + "-owner"} << "pid " << dead << " on host " << host << "\n"
                               << "listening on 127.0.0.1 port 1\n";
  BOOST_TEST(!find_owner(db)->has_value());
  std::ofstream{db + "-owner"} << "not a lock file\n";
  BOOST_TEST(!find_owner(db)->has_value());
  // ergonctl then opens the file itself.
  BOOST_TEST(ergonctl(dir, {"--db", db, "retry", "--all"}).code == 0);
}

// On PostgreSQL the owner is the lease's holder: a live one with its port,
// nobody after a close, and nobody once a killed owner's session is gone.
BOOST_AUTO_TEST_CASE(find_owner_reads_a_postgresql_lease,
                     *test::postgres_only("it reads the lease table")) {
  temp_dir dir;
  auto db = test::test_location(dir);
  BOOST_TEST(!find_owner(db)->has_value());
  {
    options o;
    o.listen = listen_options{};
    auto q = queue::open(db, o);
    BOOST_REQUIRE(q.has_value());
    auto owner = find_owner(db);
    BOOST_REQUIRE_MESSAGE(owner.has_value(), owner.error().to_string());
    BOOST_REQUIRE(owner->has_value());
    BOOST_TEST((*owner)->pid == ::getpid());
    BOOST_REQUIRE((*owner)->listeners.size() == 1u);
    BOOST_TEST((*owner)->listeners[0].port == *q->listening_port());
    BOOST_TEST((*owner)->listeners[0].address == "127.0.0.1");
  }
  BOOST_TEST(!find_owner(db)->has_value());
  {
    server_process server{db};
    auto owner = find_owner(db);
    BOOST_REQUIRE(owner.has_value() && owner->has_value());
    BOOST_TEST((*owner)->pid == server.proc.pid());
    server.proc.signal(SIGKILL);
    server.proc.wait();
  }
  // PostgreSQL ends a killed owner's sessions once it notices the
  // connections closed; until then the lease still names it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto gone = find_owner(db);
  while (gone && gone->has_value() && std::chrono::steady_clock::now() < deadline)
    gone = find_owner(db);
  BOOST_REQUIRE(gone.has_value());
  BOOST_TEST(!gone->has_value());
  BOOST_TEST(find_owner("postgresql://nobody@127.0.0.1:1/none").error().code()
             == error::unreachable);
}
