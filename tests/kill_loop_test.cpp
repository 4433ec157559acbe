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

}  // namespace

BOOST_AUTO_TEST_CASE(every_acknowledged_job_succeeds_exactly_once_across_sigkills) {
  const int kills = env_or("ERGON_KILLS", 50);
  const unsigned seed = static_cast<unsigned>(env_or("ERGON_KILL_SEED", std::random_device{}()));
  BOOST_TEST_MESSAGE("kills: " << kills << ", seed: " << seed);
  std::mt19937 rng{seed};
  temp_dir dir;
  auto db = test_location(dir);
  auto log = dir.file("starts.log");
  std::set<std::string> acked;
  int killed_mid_run = 0;
  std::vector<int> open_ms;
  for (int k = 0; k < kills; ++k) {
    child_process child{{ERGON_TEST_KILL_LOOP_CHILD, db, log, "run", "12"}};
    auto opened = child.read_line();
    BOOST_REQUIRE_MESSAGE(opened.rfind("opened ", 0) == 0,
                          "kill " << k << ": the child did not open: " << opened);
    open_ms.push_back(std::stoi(opened.substr(7)));
    // A random moment: after 0 to 13 lines of progress (12 acks, then
    // "submitted"); the jobs run meanwhile, so kills land in submits,
    // claims, job code, checkpoints and outcome commits.
    int lines = std::uniform_int_distribution<int>{0, 13}(rng);
    bool alive = true;
    for (int i = 0; i < lines && alive; ++i) {
      auto line = child.read_line();
      if (line.rfind("acked ", 0) == 0)
        acked.insert(line.substr(6));
      alive = !line.empty();
    }
    BOOST_REQUIRE_MESSAGE(alive, "the child died before it was killed (kill " << k << ")");
    child.signal(SIGKILL);
    int st = child.wait();
    BOOST_REQUIRE(WIFSIGNALED(st));
    // Acks already written before the kill were acknowledged too.
    for (auto line = child.read_line(); !line.empty(); line = child.read_line())
      if (line.rfind("acked ", 0) == 0)
        acked.insert(line.substr(6));
    ++killed_mid_run;
  }
  {
    child_process drain{{ERGON_TEST_KILL_LOOP_CHILD, db, log, "drain"}};
    BOOST_REQUIRE(drain.wait_for_line("drained"));
    BOOST_REQUIRE(WIFEXITED(drain.wait()));
  }
  BOOST_TEST_MESSAGE(killed_mid_run << " kills, " << acked.size() << " acknowledged jobs");
  BOOST_REQUIRE(!acked.empty());
  std::sort(open_ms.begin(), open_ms.end());
  BOOST_TEST_MESSAGE("opening after a kill: median " << open_ms[open_ms.size() / 2]
                                                     << " ms, max " << open_ms.back() << " ms");

  engine_probe probe{db};
  if (!on_postgres())
    BOOST_TEST(probe.text("PRAGMA integrity_check") == "ok");
  // status 2 = succeeded (the frozen job_status values).
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE status <> 2") == 0);
  auto in = queue::inspect(db);
  BOOST_REQUIRE_MESSAGE(in.has_value(), in.error().to_string());
  auto counts = in->counts();
  BOOST_REQUIRE(counts.has_value());
  BOOST_TEST((*counts)[job_status::pending] == 0);
  BOOST_TEST((*counts)[job_status::running] == 0);
  BOOST_TEST((*counts)[job_status::succeeded] >= static_cast<int64_t>(acked.size()));

  auto starts = logged_starts(log);
  int restarts = 0;
  for (auto& text : acked) {
    BOOST_TEST_CONTEXT(text) {
      auto id = job_id::parse(text);
      BOOST_REQUIRE(id.has_value());
      auto info = in->job_info(*id);
      BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
      BOOST_TEST(info->status == job_status::succeeded);
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
