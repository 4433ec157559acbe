// update_pending and cancel_pending through the public API, with every error.
#define BOOST_TEST_MODULE queue_update
#include <boost/test/unit_test.hpp>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/storage/op/claim_jobs.hpp"
#include "ergon/storage/job_ids.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::engine_probe;
using ergon::test::temp_dir;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

struct fixture {
  temp_dir dir;
  std::string location = ergon::test::test_location(dir);
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(t0);
  queue q = [this] {
    options opts;
    opts.clock = clock;
    auto r = queue::open(location, opts);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    return std::move(*r);
  }();

  job_id submit(const std::string& type = "t") {
    auto id = q.submit(*job_builder(type).payload("orig").build());
    BOOST_REQUIRE(id.has_value());
    return *id;
  }

  // Claims a job through a second connection, as a worker's claim would.
  void make_running(const job_id& id) {
    auto d = ergon::test::open_db(location);
    auto row = storage::row_of(id);
    BOOST_REQUIRE(row.has_value());
    auto r = storage::claim_jobs(*d, storage::claim_jobs_args{{{*row, 42}}}, t0);
    BOOST_REQUIRE(r.has_value());
    BOOST_REQUIRE(r->claimed.size() == 1u);
  }

  std::string dump() { return engine_probe{location}.dump(); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(update_pending, fixture)

BOOST_AUTO_TEST_CASE(changes_exactly_the_fields_given) {
  auto id = submit();
  auto other = submit();
  job_update u;
  u.priority = 7;
  u.run_at_ms = t0 + 60'000;
  u.payload = "changed";
  BOOST_REQUIRE(q.update_pending(id, u).ok());
  auto info = q.job_info(id);
  BOOST_TEST(info->priority == 7);
  BOOST_TEST(info->run_at_ms == t0 + 60'000);
  BOOST_TEST(info->payload == "changed");
  BOOST_TEST(info->weight == 1);
  BOOST_TEST(info->max_retries == 3);
  BOOST_TEST(info->status == job_status::pending);
  auto untouched = q.job_info(other);
  BOOST_TEST(untouched->priority == 0);
  BOOST_TEST(untouched->payload == "orig");
}

BOOST_AUTO_TEST_CASE(each_error_is_distinct_and_changes_nothing) {
  auto running = submit();
  auto cancelled = submit();
  auto pending = submit();
  make_running(running);
  BOOST_REQUIRE(q.cancel_pending(cancelled).ok());
  job_update u;
  u.priority = 1;
  auto before = dump();
  auto unknown = storage::make_job_id(t0, 3, 9'999);
  BOOST_TEST(q.update_pending(unknown, u).code() == error::not_found);
  BOOST_TEST(q.update_pending(running, u).code() == error::job_running);
  BOOST_TEST(q.update_pending(cancelled, u).code() == error::job_finished);
  job_update nothing;
  auto empty = q.update_pending(pending, nothing);
  BOOST_TEST(empty.code() == error::invalid_argument);
  BOOST_TEST(empty.field() == "update");
  job_update bad_weight;
  bad_weight.weight = 0;
  BOOST_TEST(q.update_pending(pending, bad_weight).field() == "weight");
  job_update bad_timeout;
  bad_timeout.timeout_ms = -1;
  BOOST_TEST(q.update_pending(pending, bad_timeout).field() == "timeout");
  job_update bad_retries;
  bad_retries.max_retries = -1;
  BOOST_TEST(q.update_pending(pending, bad_retries).field() == "max_retries");
  BOOST_TEST(dump() == before);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(cancel_pending, fixture)

BOOST_AUTO_TEST_CASE(cancels_only_that_job) {
  auto id = submit();
  auto other = submit();
  BOOST_REQUIRE(q.cancel_pending(id).ok());
  BOOST_TEST(q.job_info(id)->status == job_status::cancelled);
  BOOST_TEST(q.job_info(id)->finished_at_ms.value_or(0) == t0);
  BOOST_TEST(q.job_info(other)->status == job_status::pending);
  BOOST_TEST(q.counts()[job_status::cancelled] == 1);
  BOOST_TEST(q.counts()[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(each_error_is_distinct_and_changes_nothing) {
  auto running = submit();
  auto cancelled = submit();
  make_running(running);
  BOOST_REQUIRE(q.cancel_pending(cancelled).ok());
  auto before = dump();
  BOOST_TEST(q.cancel_pending(storage::make_job_id(t0, 3, 9'999)).code() == error::not_found);
  BOOST_TEST(q.cancel_pending(running).code() == error::job_running);
  BOOST_TEST(q.cancel_pending(cancelled).code() == error::job_finished);
  BOOST_TEST(dump() == before);
}

BOOST_AUTO_TEST_SUITE_END()
