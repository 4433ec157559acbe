// The SIGKILL loop: a child process submits and runs jobs and is killed at
// random moments, again and again; then everything is run to the end and
// exact invariants are checked. ERGON_KILLS sets the number of kills (50 by
// default; tools/kill-loop runs 1,000) and ERGON_KILL_SEED the random seed.
// On PostgreSQL (ERGON_TEST_ENGINE) each new child opens as soon as the
// killed one's lease lets it; the test reports how long that took.
#define BOOST_TEST_MODULE kill_loop
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "support/child_process.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"
#include "ergon/queue.hpp"

using namespace ergon;
using namespace ergon::test;

namespace {

int env_or(const char* name, int fallback) {
  auto v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

// "start <id> <try>" lines the job code wrote, counted per job.
std::map<std::string, int> logged_starts(const std::string& path) {
  std::map<std::string, int> starts;
  std::ifstream in{path};
  std::string word;
  std::string id;
  int try_number = 0;
  while (in >> word >> id >> try_number)
    ++starts[id];
  return starts;
}

// What a run of kills left: the jobs acknowledged, and how long each open
// after a kill took.
struct kill_run {
  std::set<std::string> acked;
  int kills = 0;
  std::vector<int> open_ms;
};

// Starts the child in `mode` (run or graph, `per_child` of them) and
// SIGKILLs it at a random moment, ERGON_KILLS times; then drains the queue.
kill_run kill_again_and_again(const std::string& db, const std::string& log,
                              const std::string& mode, int per_child) {
  const int kills = env_or("ERGON_KILLS", 50);
  const unsigned seed = static_cast<unsigned>(env_or("ERGON_KILL_SEED", std::random_device{}()));
  BOOST_TEST_MESSAGE(mode << ": kills: " << kills << ", seed: " << seed);
  std::mt19937 rng{seed};
  kill_run out;
  for (int k = 0; k < kills; ++k) {
    child_process child{{ERGON_TEST_KILL_LOOP_CHILD, db, log, mode, std::to_string(per_child)}};
    auto opened = child.read_line();
    BOOST_REQUIRE_MESSAGE(opened.rfind("opened ", 0) == 0,
                          "kill " << k << ": the child did not open: " << opened);
    out.open_ms.push_back(std::stoi(opened.substr(7)));
    // A random moment: after 0 to per_child + 1 lines of progress (acks,
    // then "submitted"); the jobs run meanwhile, so kills land in submits,
    // claims, job code, checkpoints, spawns and outcome commits.
    int lines = std::uniform_int_distribution<int>{0, per_child + 1}(rng);
    bool alive = true;
    for (int i = 0; i < lines && alive; ++i) {
      auto line = child.read_line();
      if (line.rfind("acked ", 0) == 0)
        out.acked.insert(line.substr(6));
      alive = !line.empty();
    }
    BOOST_REQUIRE_MESSAGE(alive, "the child died before it was killed (kill " << k << ")");
    child.signal(SIGKILL);
    int st = child.wait();
    BOOST_REQUIRE(WIFSIGNALED(st));
    // Acks already written before the kill were acknowledged too.
    for (auto line = child.read_line(); !line.empty(); line = child.read_line())
      if (line.rfind("acked ", 0) == 0)
        out.acked.insert(line.substr(6));
    ++out.kills;
  }
  {
    child_process drain{{ERGON_TEST_KILL_LOOP_CHILD, db, log, "drain"}};
    BOOST_REQUIRE(drain.wait_for_line("drained"));
    BOOST_REQUIRE(WIFEXITED(drain.wait()));
  }
  std::sort(out.open_ms.begin(), out.open_ms.end());
  return out;
}

// The queue after a run, read as a tool would: a sound file, and every job
// succeeded (none left waiting, pending or running), at least `acked`.
std::unique_ptr<inspector> all_succeeded(const std::string& db, size_t acked) {
  engine_probe probe{db};
  if (!on_postgres())
    BOOST_TEST(probe.text("PRAGMA integrity_check") == "ok");
  // status 2 = succeeded (the frozen job_status values).
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE status <> 2") == 0);
  auto in = queue::inspect(db);
  BOOST_REQUIRE_MESSAGE(in.has_value(), in.error().to_string());
  auto counts = in->counts();
  BOOST_REQUIRE(counts.has_value());
  for (auto s : {job_status::waiting, job_status::pending, job_status::running})
    BOOST_TEST((*counts)[s] == 0);
  BOOST_TEST((*counts)[job_status::succeeded] >= static_cast<int64_t>(acked));
  return std::make_unique<inspector>(std::move(*in));
}

// An acknowledged job (its id as the child printed it), which succeeded.
std::pair<job_id, std::optional<job_info>> acked_job(inspector& in, const std::string& text) {
  auto id = job_id::parse(text);
  BOOST_REQUIRE(id.has_value());
  auto info = in.job_info(*id);
  BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
  BOOST_TEST(info->status == job_status::succeeded);
  return {*id, std::move(*info)};
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_acknowledged_job_succeeds_exactly_once_across_sigkills) {
  temp_dir dir;
  auto db = test_location(dir);
  auto log = dir.file("starts.log");
  auto run = kill_again_and_again(db, log, "run", 12);
  auto& acked = run.acked;
  auto killed_mid_run = run.kills;
  auto& open_ms = run.open_ms;
  BOOST_TEST_MESSAGE(killed_mid_run << " kills, " << acked.size() << " acknowledged jobs");
  BOOST_REQUIRE(!acked.empty());
  BOOST_TEST_MESSAGE("opening after a kill: median " << open_ms[open_ms.size() / 2]
                                                     << " ms, max " << open_ms.back() << " ms");

  auto in = all_succeeded(db, acked.size());

  auto starts = logged_starts(log);
  int restarts = 0;
  for (auto& text : acked) {
    BOOST_TEST_CONTEXT(text) {
      auto [id, info] = acked_job(*in, text);
      BOOST_REQUIRE(info->attempts.size() == static_cast<size_t>(info->tries));
      // Claims are durable before code runs: a start the code logged has
      // an attempt, and an attempt may have been killed before its code ran.
      BOOST_TEST(info->tries >= starts[text]);
      BOOST_TEST(starts[text] >= 1);
      int succeeded = 0;
      for (size_t a = 0; a < info->attempts.size(); ++a) {
        auto& at = info->attempts[a];
        BOOST_TEST(at.try_number == static_cast<int32_t>(a + 1));
        BOOST_TEST(at.finished_at_ms.has_value());
        if (at.outcome == attempt_outcome::succeeded) {
          ++succeeded;
          BOOST_TEST(a + 1 == info->attempts.size());
        } else {
          // Every interrupted attempt is a process restart.
          BOOST_TEST(at.message == "process restart");
          ++restarts;
        }
      }
      BOOST_TEST(succeeded == 1);
      // Each run checkpoints "+" onto the payload it got.
      BOOST_TEST(info->checkpoint.has_value());
    }
  }
  BOOST_TEST_MESSAGE(restarts << " interrupted attempts recovered");
}

// The same over workflows (issue 31): diamonds submitted in one batch and
// parents that spawn children, killed at random moments. Afterwards every
// job succeeded once; each dependent first started only after all its
// dependencies had succeeded (no release early, none lost: nothing is left
// waiting); and each parent spawned its two children once and joined them
// after they ended.
BOOST_AUTO_TEST_CASE(every_workflow_runs_in_order_and_once_across_sigkills) {
  temp_dir dir;
  auto db = test_location(dir);
  auto log = dir.file("starts.log");
  auto run = kill_again_and_again(db, log, "graph", 3);
  BOOST_TEST_MESSAGE(run.kills << " kills, " << run.acked.size() << " acknowledged jobs");
  BOOST_REQUIRE(!run.acked.empty());
  auto in = all_succeeded(db, run.acked.size());
  auto starts = logged_starts(log);
  int parents = 0;
  int waits_checked = 0;
  for (auto& text : run.acked) {
    BOOST_TEST_CONTEXT(text) {
      auto [id, info] = acked_job(*in, text);
      BOOST_TEST(std::count_if(info->attempts.begin(), info->attempts.end(), [](auto& a) {
                   return a.outcome == attempt_outcome::succeeded;
                 }) == 1);
      BOOST_TEST(starts[text] >= 1);
      if (info->type == "parent") {
        ++parents;
        BOOST_TEST(std::count_if(info->attempts.begin(), info->attempts.end(), [](auto& a) {
                     return a.outcome == attempt_outcome::spawned;
                   }) == 1);
        BOOST_REQUIRE(info->depends_on.size() == 2u);
      }
      if (info->depends_on.empty())
        continue;
      // Its first attempt (the parent's first after the spawn) began after
      // every dependency's success.
      auto first = info->attempts.begin();
      if (info->type == "parent")
        first = std::find_if(first, info->attempts.end(),
                             [](auto& a) { return a.outcome == attempt_outcome::spawned; }) + 1;
      BOOST_REQUIRE(first < info->attempts.end());
      for (auto& dep : info->depends_on) {
        auto d = in->job_info(dep);
        BOOST_REQUIRE(d.has_value());
        BOOST_TEST(d->status == job_status::succeeded);
        BOOST_TEST(first->started_at_ms >= d->finished_at_ms.value_or(INT64_MAX));
        if (info->type == "parent")
          BOOST_TEST(d->parent.value_or(job_id{}) == id);
        ++waits_checked;
      }
    }
  }
  BOOST_TEST_MESSAGE(parents << " parents, " << waits_checked << " waits checked");
}
