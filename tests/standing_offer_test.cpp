// Standing offers through a real queue: a job submitted to an idle worker
// is claimed in the transaction that inserts it (one commit, not two), and
// an offer never decides what the dispatcher would decide otherwise: among
// several new jobs, or against a pause.
#define BOOST_TEST_MODULE standing_offers
#include <boost/test/unit_test.hpp>

#include <mutex>
#include <vector>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

int64_t commits(queue& q) {
  auto m = q.metrics();
  BOOST_REQUIRE(m.has_value());
  return m->commit_us.total;
}

// Runs one job to the end: when its wait returns, the worker's report with
// its room was handled, so the offer for that room is at the writer.
void run_one(queue_fixture& f, const std::string& type = "t") {
  auto id = f.submit(*job_of(type).build());
  auto done = f.q->wait(id, 1min);
  BOOST_REQUIRE(done.has_value());
  BOOST_REQUIRE(done->status == job_status::succeeded);
}

// A worker of room 1 for `t` (and `p`, running `p_code`), idle after one
// job, with its offer at the writer.
worker idle_worker(queue_fixture& f, job_handler p_code = [](job_context&) {}) {
  worker_options w;
  w.max_concurrency = 1;
  w.runners["t"] = [](job_context&) {};
  w.runners["p"] = std::move(p_code);
  auto wk = f.start(std::move(w));
  run_one(f);
  return wk;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(standing_offers, queue_fixture)

// Without offers each job takes three commits (insert, claim, outcome);
// with them two. The bound leaves room for a job that missed its offer.
BOOST_AUTO_TEST_CASE(a_job_for_an_idle_worker_is_claimed_in_the_commit_that_inserts_it) {
  auto wk = idle_worker(*this);
  constexpr int64_t jobs = 20;
  auto before = commits(*q);
  for (int64_t i = 0; i < jobs; ++i)
    run_one(*this);
  auto used = commits(*q) - before;
  BOOST_TEST(used <= 2 * jobs + 5, used << " commits for " << jobs << " jobs");
  auto m = q->metrics();
  BOOST_TEST(m->by_type["t"][job_status::succeeded] == jobs + 1);
  BOOST_TEST(m->by_type["t"][job_status::running] == 0);
  BOOST_TEST(m->by_type["t"][job_status::pending] == 0);
}

// New jobs in one transaction: the dispatcher chooses, by priority.
BOOST_AUTO_TEST_CASE(jobs_submitted_together_are_chosen_by_the_dispatcher_not_the_offer) {
  std::mutex mtx;
  std::vector<int32_t> order;
  auto wk = idle_worker(*this, [&](job_context& ctx) {
    std::lock_guard<std::mutex> guard{mtx};
    order.push_back(std::stoi(ctx.payload()));
  });
  // The highest neither first nor last: no one-job rule would find it.
  std::vector<job> batch{*job_of("p").payload("0").priority(0).build(),
                         *job_of("p").payload("9").priority(9).build(),
                         *job_of("p").payload("5").priority(5).build()};
  auto ids = q->submit_batch(std::move(batch));
  BOOST_REQUIRE(ids.has_value());
  for (auto& id : *ids)
    BOOST_REQUIRE(q->wait(id, 1min)->status == job_status::succeeded);
  BOOST_TEST(order == (std::vector<int32_t>{9, 5, 0}));
}

// A pause answered before the submit holds the job: the offer went back
// with the pause, ahead of the submit.
BOOST_AUTO_TEST_CASE(a_job_of_a_paused_type_waits_for_the_resume) {
  auto wk = idle_worker(*this);
  BOOST_REQUIRE(q->pause_type("t").ok());
  auto id = submit(*job_of("t").build());
  BOOST_REQUIRE(q->metrics().has_value());  // every commit so far is fed
  BOOST_TEST(info(id).status == job_status::pending);
  BOOST_REQUIRE(q->resume_type("t").ok());
  BOOST_TEST(q->wait(id, 1min)->status == job_status::succeeded);
}

// A ready job that no worker takes makes the dispatcher decide again (the
// offer goes back while anything is ready): jobs for the idle worker still
// run, and the other job runs once its worker comes.
BOOST_AUTO_TEST_CASE(a_job_no_worker_takes_holds_back_no_other) {
  auto wk = idle_worker(*this);
  auto other = submit(*job_of("u").build());
  BOOST_REQUIRE(q->metrics().has_value());
  BOOST_TEST(info(other).status == job_status::pending);
  run_one(*this);
  run_one(*this);
  worker_options u;
  u.runners["u"] = [](job_context&) {};
  auto wu = start(std::move(u));
  BOOST_TEST(q->wait(other, 1min)->status == job_status::succeeded);
  run_one(*this);
}

BOOST_AUTO_TEST_SUITE_END()
