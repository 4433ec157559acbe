// commit_release: the order in which a writer's commit lets go of what it
// held (counts, workers' answers, the feed, callers' replies, failures, the
// ring), and what a lost commit or a rolled-back transaction releases.
#define BOOST_TEST_MODULE commit_release
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "write/commit_release.hpp"

using namespace ergon;
using namespace ergon::actors;

namespace {

// Records each step as a line; workers are numbers.
struct recording_sink final : commit_release<int>::sink {
  std::vector<std::string> steps;
  std::vector<std::pair<int, assign_jobs>> assigned;
  std::vector<commit_feed> pushed;
  bool ring_on_push = true;

  void apply_counts(const storage::count_delta&) override { steps.push_back("counts"); }
  void assign(const int& worker, assign_jobs out) override {
    steps.push_back("assign " + std::to_string(worker));
    assigned.emplace_back(worker, std::move(out));
  }
  bool push(commit_feed feed) override {
    steps.push_back(feed.failed.empty() ? "feed" : "failures");
    pushed.push_back(std::move(feed));
    return ring_on_push;
  }
  void ring() override { steps.push_back("ring"); }
};

assign_jobs answer(int jobs, int acks, bool answers_report) {
  assign_jobs out;
  out.jobs.resize(static_cast<size_t>(jobs));
  out.acks.resize(static_cast<size_t>(acks));
  out.answers_report = answers_report;
  return out;
}

// A transaction that claimed a job for worker 7, recorded an outcome for
// worker 8's report, added a job, moved a count and has one caller waiting,
// whose reply check finds a failed dispatcher request.
void fill_busy(commit_release<int>& r, std::vector<std::string>& steps, status& seen) {
  r.assign(7, answer(1, 0, false));
  r.assign(8, answer(0, 1, true));
  r.feed().added.emplace_back();
  r.counts().move("t", "", job_status::running, job_status::succeeded);
  r.after_commit([&steps, &seen, &r](const status& commit) {
    steps.push_back("reply");
    seen = commit;
    r.fail(write_failed{7, {1}, {}, {}, status{error::storage_full, "disk full"}});
  });
}

// A sink, and a busy transaction releasing into it.
struct busy {
  recording_sink to;
  status seen{error::internal, "not called"};
  commit_release<int> r;
  busy() { fill_busy(r, to.steps, seen); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_commit_releases_counts_answers_feed_replies_failures_then_rings, busy) {
  r.after_release([&] { to.steps.push_back("after writes"); });
  r.release(status{}, to);
  BOOST_TEST(to.steps == (std::vector<std::string>{"counts", "assign 7", "assign 8", "feed",
                                                   "reply", "failures", "ring", "after writes"}));
  BOOST_TEST(seen.ok());
  BOOST_REQUIRE_EQUAL(to.assigned.size(), 2u);
  BOOST_TEST(to.assigned[0].second.jobs.size() == 1u);
  BOOST_REQUIRE_EQUAL(to.pushed.size(), 2u);
  BOOST_TEST(to.pushed[0].added.size() == 1u);
  BOOST_TEST(to.pushed[1].failed.size() == 1u);
  // Everything went: a second release sends nothing.
  to.steps.clear();
  r.release(status{}, to);
  BOOST_TEST(to.steps.empty());
}

BOOST_FIXTURE_TEST_CASE(a_lost_commit_sends_no_jobs_no_counts_and_no_feed, busy) {
  status lost{error::io_error, "COMMIT failed"};
  r.release(lost, to);
  // Worker 7 had only jobs: nothing for it. Worker 8's report is answered
  // with the error as its ack.
  BOOST_TEST(to.steps
             == (std::vector<std::string>{"assign 8", "reply", "failures", "ring"}));
  BOOST_TEST(seen.code() == error::io_error);
  BOOST_REQUIRE_EQUAL(to.assigned.size(), 1u);
  auto& acks = to.assigned[0].second.acks;
  BOOST_REQUIRE_EQUAL(acks.size(), 1u);
  BOOST_TEST(from_wire(acks[0]).code() == error::io_error);
  BOOST_TEST(to.assigned[0].second.jobs.empty());
}

BOOST_FIXTURE_TEST_CASE(the_dispatcher_is_rung_once_and_only_when_a_push_asks, busy) {
  to.ring_on_push = false;  // rung already, not yet drained
  r.release(status{}, to);
  BOOST_TEST(std::count(to.steps.begin(), to.steps.end(), "ring") == 0);
  // A transaction with nothing to feed pushes nothing and rings nothing.
  to.steps.clear();
  to.ring_on_push = true;
  commit_release<int> quiet;
  quiet.after_commit([&](const status&) { to.steps.push_back("reply"); });
  quiet.release(status{}, to);
  BOOST_TEST(to.steps == std::vector<std::string>{"reply"});
}

BOOST_FIXTURE_TEST_CASE(a_rolled_back_transaction_fails_what_it_did_and_feeds_nothing, busy) {
  status why{error::storage_full, "database or disk is full"};
  r.abort(why, to);
  BOOST_TEST(to.steps == (std::vector<std::string>{"reply", "assign 8"}));
  BOOST_TEST(seen.code() == error::storage_full);
  BOOST_TEST(to.pushed.empty());
  // The failure its reply check found goes with the batch's next release;
  // the rolled-back feed and counts do not. A hook that waits for the
  // batch's writes runs after that failure is fed, not at the abort.
  r.after_release([&] { to.steps.push_back("after writes"); });
  to.steps.clear();
  r.release(status{}, to);
  BOOST_TEST(to.steps == (std::vector<std::string>{"failures", "ring", "after writes"}));
  BOOST_REQUIRE_EQUAL(to.pushed.size(), 1u);
  BOOST_TEST(to.pushed[0].added.empty());
}
