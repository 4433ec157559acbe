// The circuit breaker per job type (issue 31, item 4) as a plain class:
// opening on the N-th failure within the window, the cool-down, the one
// trial of half-open, and what decides it, with exact times.
#define BOOST_TEST_MODULE type_breakers
#include <boost/test/unit_test.hpp>

#include "dispatch/type_breakers.hpp"

using namespace ergon;
using namespace ergon::actors;
using namespace std::chrono_literals;

namespace {

type_breakers three_in_a_minute() {
  return type_breakers{{{"flaky", breaker_options{3, 60s, 30s}}}};
}

constexpr auto failed = attempt_outcome::failed;

}  // namespace

BOOST_AUTO_TEST_CASE(a_type_without_a_breaker_always_starts) {
  type_breakers b;
  BOOST_TEST(!b.any());
  BOOST_TEST(b.may_start("x"));
  BOOST_TEST(!b.ended("x", 1, failed, 0).has_value());
  BOOST_TEST(b.reset("x").error().code() == error::not_found);
}

BOOST_AUTO_TEST_CASE(the_nth_failure_within_the_window_opens_it_for_the_cool_down) {
  auto b = three_in_a_minute();
  BOOST_TEST(!b.ended("flaky", 1, failed, 0));
  // One that slid out of the window does not count.
  BOOST_TEST(!b.ended("flaky", 2, failed, 60'000));
  BOOST_TEST(!b.ended("flaky", 3, attempt_outcome::succeeded, 60'001));
  BOOST_TEST(!b.ended("flaky", 4, attempt_outcome::cancelled, 60'002));
  BOOST_TEST(!b.ended("flaky", 5, attempt_outcome::expired, 60'003));
  BOOST_TEST(b.may_start("flaky"));
  auto opened = b.ended("flaky", 6, attempt_outcome::failed_permanently, 60'004);
  BOOST_REQUIRE(opened);
  BOOST_TEST(opened->to == breaker_state::open);
  BOOST_TEST(opened->why == "3 failures within 60000 ms");
  BOOST_TEST(opened->until.value_or(0) == 90'004);
  BOOST_TEST(!b.may_start("flaky"));
  BOOST_TEST(b.may_start("other"));
  // Attempts that ran before it opened end without changing it.
  BOOST_TEST(!b.ended("flaky", 7, failed, 60'005));
  BOOST_TEST(b.next_wake().value_or(0) == 90'004);
  BOOST_TEST(b.tick(90'003).empty());
  auto half = b.tick(90'004);
  BOOST_REQUIRE(half.size() == 1u);
  BOOST_TEST(half[0].to == breaker_state::half_open);
  BOOST_TEST(!b.next_wake());
  auto snap = b.snapshot();
  BOOST_REQUIRE(snap.size() == 1u);
  BOOST_TEST(snap[0].state == breaker_state::half_open);
  BOOST_TEST(snap[0].trips == 1);
  BOOST_TEST(snap[0].recent_failures == 3);
}

BOOST_AUTO_TEST_CASE(one_trial_decides_and_a_failed_trial_opens_it_again) {
  auto b = three_in_a_minute();
  for (int64_t row = 1; row <= 3; ++row)
    b.ended("flaky", row, failed, 0);
  b.tick(30'000);
  BOOST_TEST(b.may_start("flaky"));
  b.picked("flaky", 10);
  BOOST_TEST(!b.may_start("flaky"));  // one trial at a time
  // A claim that missed gives the trial back.
  b.trial_lost("flaky", 10);
  BOOST_TEST(b.may_start("flaky"));
  b.picked("flaky", 11);
  // Another job's end is no verdict; the trial's failure is.
  BOOST_TEST(!b.ended("flaky", 12, attempt_outcome::succeeded, 31'000));
  auto again = b.ended("flaky", 11, failed, 31'000);
  BOOST_REQUIRE(again);
  BOOST_TEST(again->from == breaker_state::half_open);
  BOOST_TEST(again->to == breaker_state::open);
  BOOST_TEST(again->until.value_or(0) == 61'000);
  BOOST_TEST(b.snapshot()[0].trips == 2);
  b.tick(61'000);
  b.picked("flaky", 13);
  // A trial that ends with no verdict (cancelled) lets another try.
  BOOST_TEST(!b.ended("flaky", 13, attempt_outcome::cancelled, 62'000));
  BOOST_TEST(b.may_start("flaky"));
  b.picked("flaky", 14);
  auto closed = b.ended("flaky", 14, attempt_outcome::succeeded, 63'000);
  BOOST_REQUIRE(closed);
  BOOST_TEST(closed->to == breaker_state::closed);
  BOOST_TEST(b.may_start("flaky"));
  BOOST_TEST(b.snapshot()[0].recent_failures == 0);
}

BOOST_AUTO_TEST_CASE(failures_reported_but_not_committed_hold_the_type_back) {
  auto b = three_in_a_minute();
  b.ended("flaky", 1, failed, 0);
  b.ended("flaky", 2, failed, 0);
  // The third is reported: no job of the type may be claimed beside its
  // commit, which will open the breaker.
  b.reported_failure("flaky", 3, 0);
  BOOST_TEST(!b.may_start("flaky"));
  // It ended otherwise (a cancel won): the type runs again.
  BOOST_TEST(!b.ended("flaky", 3, attempt_outcome::cancelled, 1));
  BOOST_TEST(b.may_start("flaky"));
  b.reported_failure("flaky", 4, 1);
  BOOST_REQUIRE(b.ended("flaky", 4, failed, 2));
  BOOST_TEST(!b.may_start("flaky"));
}

// Two failures a minute old have left the window: a third reported one
// holds nothing back.
BOOST_AUTO_TEST_CASE(failures_out_of_the_window_do_not_hold_a_reported_one_back) {
  auto b = three_in_a_minute();
  b.ended("flaky", 1, failed, 0);
  b.ended("flaky", 2, failed, 0);
  b.reported_failure("flaky", 3, 60'000);
  BOOST_TEST(b.may_start("flaky"));
  BOOST_TEST(b.snapshot()[0].recent_failures == 0);
  BOOST_TEST(!b.ended("flaky", 3, failed, 60'001));
  BOOST_TEST(b.snapshot()[0].recent_failures == 1);
}

BOOST_AUTO_TEST_CASE(a_reset_closes_it_and_forgets_its_failures) {
  auto b = three_in_a_minute();
  b.ended("flaky", 1, failed, 0);
  b.ended("flaky", 2, failed, 0);
  auto quiet = b.reset("flaky");
  BOOST_REQUIRE(quiet.has_value());
  BOOST_TEST(!quiet->has_value());  // it was closed
  // Its two failures are forgotten: two more don't open it.
  b.ended("flaky", 3, failed, 1);
  BOOST_TEST(!b.ended("flaky", 4, failed, 2));
  BOOST_REQUIRE(b.ended("flaky", 5, failed, 3));
  auto closed = b.reset("flaky");
  BOOST_REQUIRE(closed.has_value() && closed->has_value());
  BOOST_TEST((*closed)->from == breaker_state::open);
  BOOST_TEST((*closed)->why == "reset");
  BOOST_TEST(b.may_start("flaky"));
  BOOST_TEST(!b.next_wake());
}
