// next_report: a worker's next report from its outbox, with no actors. The
// room asked for, what is not sent twice, and which reports the writer
// answers.
#define BOOST_TEST_MODULE next_report
#include <boost/test/unit_test.hpp>

#include "run/next_report.hpp"

using namespace ergon;
using namespace ergon::actors;

namespace {

constexpr report_room room{2, 4, 2};  // min 2, max 4, prefetch 2

job_runner::outbox holding(int32_t weight) {
  job_runner::outbox box;
  box.held_weight = weight;
  return box;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_room_asked_for_is_sent_once_until_it_or_the_credit_changes) {
  last_room last;
  std::vector<storage::attempt_ref> none;
  auto box = holding(0);
  auto plan = next_report(7, box, none, false, 0, room, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->report.worker_id == 7u);
  BOOST_TEST(plan->report.capacity == 6);  // max 4 + prefetch 2
  BOOST_TEST(!plan->carries_writes);
  BOOST_TEST(last.capacity == 6);
  box = holding(0);
  BOOST_TEST(!next_report(7, box, none, false, 0, room, last));  // nothing new
  box = holding(0);
  plan = next_report(7, box, none, false, 3, room, last);  // 3 units arrived
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->report.received_weight == 3);
  // At min_capacity + prefetch held it asks for nothing, and says nothing.
  box = holding(4);
  BOOST_TEST(!next_report(7, box, none, false, 9, room, last));
  box = holding(3);
  plan = next_report(7, box, none, false, 9, room, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->report.capacity == 3);
}

BOOST_AUTO_TEST_CASE(outcomes_and_claims_given_back_are_writes_the_writer_answers) {
  last_room last{6, 0};
  std::vector<storage::attempt_ref> give_back{{5, 50}};
  auto box = holding(4);
  box.outcomes.push_back({1, 10, storage::report_kind::succeeded, "ok"});
  box.replies.emplace_back(std::nullopt);
  box.returned.push_back({1, 10});
  auto plan = next_report(7, box, give_back, false, 6, room, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->carries_writes);
  BOOST_TEST(plan->report.outcomes.size() == 1u);
  BOOST_TEST(plan->report.returned.size() == 1u);
  BOOST_TEST(plan->report.released.size() == 1u);
  BOOST_TEST(plan->report.capacity == 0);  // holds min + prefetch
  BOOST_TEST(give_back.empty());
  BOOST_TEST(box.outcomes.empty());
  BOOST_TEST(box.replies.size() == 1u);  // the caller answers them
}

BOOST_AUTO_TEST_CASE(a_return_alone_is_reported_so_its_slot_frees) {
  last_room last{0, 6};
  std::vector<storage::attempt_ref> none;
  auto box = holding(4);
  box.returned.push_back({1, 10});
  auto plan = next_report(7, box, none, false, 6, room, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(!plan->carries_writes);
  BOOST_TEST(plan->report.capacity == 0);
}

BOOST_AUTO_TEST_CASE(a_stopping_worker_asks_for_nothing_but_still_reports) {
  last_room last;
  std::vector<storage::attempt_ref> give_back{{5, 50}};
  auto box = holding(0);
  auto plan = next_report(7, box, give_back, true, 0, room, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->report.capacity == 0);
  BOOST_TEST(plan->carries_writes);
  box = holding(0);
  BOOST_TEST(!next_report(7, box, give_back, true, 0, room, last));
}

// Two reports at the writer: each answer goes to the callers of the oldest.
BOOST_AUTO_TEST_CASE(answers_reach_the_callers_of_the_reports_in_the_order_sent) {
  reports_in_flight reports;
  BOOST_TEST(reports.empty());
  auto [first_to, first] = make_reply<status>();
  auto [second_to, second] = make_reply<status>();
  auto [third_to, third] = make_reply<status>();
  reports_in_flight::replies one;
  one.emplace_back(std::move(first_to));
  one.emplace_back();  // an outcome nobody waits for
  reports.sent(std::move(one));
  BOOST_TEST(!reports.full());
  reports_in_flight::replies two;
  two.emplace_back(std::move(second_to));
  two.emplace_back(std::move(third_to));
  reports.sent(std::move(two));
  BOOST_TEST(reports.full());

  wire_status stale = to_wire(status{error::stale_attempt, "gone"});
  BOOST_TEST(reports.answered({wire_status{}, stale}) == 2u);
  BOOST_TEST(first.wait().ok());
  BOOST_TEST(!reports.full());
  BOOST_TEST(reports.answered({stale}) == 2u);  // a missing ack is ok
  BOOST_TEST(second.wait().code() == error::stale_attempt);
  BOOST_TEST(third.wait().ok());
  BOOST_TEST(reports.empty());
  BOOST_TEST(reports.answered({}) == 0u);  // nothing at the writer
}

BOOST_AUTO_TEST_CASE(a_dropped_connection_answers_every_report_at_the_writer) {
  reports_in_flight reports;
  auto [a_to, a] = make_reply<status>();
  auto [b_to, b] = make_reply<status>();
  reports_in_flight::replies one;
  one.emplace_back(std::move(a_to));
  reports.sent(std::move(one));
  reports_in_flight::replies two;
  two.emplace_back(std::move(b_to));
  reports.sent(std::move(two));
  reports.drop(status{error::unreachable, "dropped"});
  BOOST_TEST(a.wait().code() == error::unreachable);
  BOOST_TEST(b.wait().code() == error::unreachable);
  BOOST_TEST(reports.empty());
}
