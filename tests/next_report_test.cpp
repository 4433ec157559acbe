// next_report: a worker's next report from its outbox, with no actors. The
// room asked for, what is not sent twice, and which reports the writer
// answers.
#define BOOST_TEST_MODULE next_report
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <limits>

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

// Successes of rows first, first + 1, ...
std::vector<storage::attempt_report> successes(int64_t first, size_t n) {
  std::vector<storage::attempt_report> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back({first + static_cast<int64_t>(i), 100 + first + static_cast<int64_t>(i),
                   storage::report_kind::succeeded, "r"});
  return out;
}

// A report of one success of `row`, whose caller is `to`.
void sent_one(reports_in_flight& reports, int64_t row, reply_to<status> to) {
  reports_in_flight::replies callers;
  callers.emplace_back(std::move(to));
  reports.sent(successes(row, 1), std::move(callers));
}

// Sends the outcomes that wait again, as the worker's next report does.
void resend(reports_in_flight& reports) {
  auto box = holding(0);
  reports.resend_into(box);
  reports.sent(box.outcomes, std::move(box.replies));
}

}  // namespace

// queue::set_worker lowered the max below what runs: no room, but the
// dispatcher must hear of the new max, once.
BOOST_AUTO_TEST_CASE(a_new_max_is_reported_once_even_without_room) {
  last_room last;
  std::vector<storage::attempt_ref> none;
  auto box = holding(6);  // full
  auto plan = next_report(7, box, none, false, 4, room, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->report.capacity == 0);
  BOOST_TEST(plan->report.max_capacity == 4);
  box = holding(6);
  BOOST_TEST(!next_report(7, box, none, false, 4, room, last));
  report_room lowered{1, 1, 2};
  box = holding(6);
  plan = next_report(7, box, none, false, 4, lowered, last);
  BOOST_REQUIRE(plan);
  BOOST_TEST(plan->report.capacity == 0);
  BOOST_TEST(plan->report.max_capacity == 1);
  BOOST_TEST(!plan->carries_writes);
  box = holding(6);
  BOOST_TEST(!next_report(7, box, none, false, 4, lowered, last));
}

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

// Finished jobs wait for the others the worker holds, for an eighth of the
// last answer's time at most, so that one report carries the burst.
BOOST_AUTO_TEST_CASE(a_report_waits_for_the_rest_of_its_burst_an_eighth_of_an_answer) {
  BOOST_TEST(report_hold_us(800, true) == 100);
  BOOST_TEST(report_hold_us(800, false) == 0);  // nothing else runs or waits
  BOOST_TEST(report_hold_us(0, true) == 0);     // no answer yet
  BOOST_TEST(report_hold_us(7, true) == 0);     // a fast store: no wait
  BOOST_TEST(report_hold_us(-5, true) == 0);
  BOOST_TEST(report_hold_us(100'000, true) == longest_hold_us);
  BOOST_TEST(report_hold_us(std::numeric_limits<int64_t>::max(), true) == longest_hold_us);
}

BOOST_AUTO_TEST_CASE(the_answer_time_is_that_of_the_last_report_answered) {
  reports_in_flight reports;
  BOOST_TEST(reports.last_answer_us() == 0);
  reports.sent(successes(1, 1), reports_in_flight::replies(1));
  // Real time passes between the two (a spin, no sleep).
  auto sent = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - sent < std::chrono::microseconds{50}) {
  }
  reports.answered({wire_status{}}, true);
  BOOST_TEST(reports.last_answer_us() >= 50);
  BOOST_TEST(reports.last_answer_us() < 60'000'000);
  BOOST_TEST(reports.empty());
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
  reports.sent(successes(1, 2), std::move(one));
  BOOST_TEST(!reports.full());
  reports_in_flight::replies two;
  two.emplace_back(std::move(second_to));
  two.emplace_back(std::move(third_to));
  reports.sent(successes(3, 2), std::move(two));
  BOOST_TEST(reports.full());

  wire_status stale = to_wire(status{error::stale_attempt, "gone"});
  BOOST_TEST(reports.answered({wire_status{}, stale}, true) == 2u);
  BOOST_TEST(first.wait().ok());
  BOOST_TEST(!reports.full());
  BOOST_TEST(reports.answered({stale}, true) == 2u);  // a missing ack is ok
  BOOST_TEST(second.wait().code() == error::stale_attempt);
  BOOST_TEST(third.wait().ok());
  BOOST_TEST(reports.empty());
  BOOST_TEST(reports.answered({}, true) == 0u);  // nothing at the writer
  BOOST_TEST(reports.resends_waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(a_dropped_connection_answers_every_report_at_the_writer) {
  reports_in_flight reports;
  auto [a_to, a] = make_reply<status>();
  auto [b_to, b] = make_reply<status>();
  sent_one(reports, 1, std::move(a_to));
  sent_one(reports, 2, std::move(b_to));
  reports.drop(status{error::unreachable, "dropped"});
  BOOST_TEST(a.wait().code() == error::unreachable);
  BOOST_TEST(b.wait().code() == error::unreachable);
  BOOST_TEST(reports.empty());
}

// A write that failed for a passing cause (PostgreSQL restarting) is sent
// again, ahead of what finished since; other failures reach their callers.
BOOST_AUTO_TEST_CASE(outcomes_whose_write_failed_for_a_passing_cause_wait_to_be_sent_again) {
  reports_in_flight reports;
  auto [lost_to, lost] = make_reply<status>();
  auto [stale_to, stale] = make_reply<status>();
  reports_in_flight::replies callers;
  callers.emplace_back(std::move(lost_to));
  callers.emplace_back(std::move(stale_to));
  callers.emplace_back();  // nobody waits for the third
  reports.sent(successes(1, 3), std::move(callers));
  auto down = to_wire(status{error::unreachable, "PostgreSQL restarts"});
  auto slow = to_wire(status{error::timeout, "statement_timeout"});
  auto gone = to_wire(status{error::stale_attempt, "expired"});
  BOOST_TEST(reports.answered({down, gone, slow}, true) == 3u);
  BOOST_TEST(stale.wait().code() == error::stale_attempt);
  BOOST_TEST(reports.resends_waiting() == 2u);
  BOOST_TEST(!reports.empty());  // a stopping worker waits for them
  BOOST_TEST(reports.resend_wait_ms() == reports_in_flight::first_wait_ms);

  auto box = holding(0);
  box.outcomes = successes(9, 1);
  box.replies.emplace_back();
  BOOST_TEST(reports.resend_into(box) == 2u);
  BOOST_TEST(reports.resends_waiting() == 0u);
  BOOST_REQUIRE_EQUAL(box.outcomes.size(), 3u);
  BOOST_TEST(box.outcomes[0].row == 1);  // the resent first, in their order
  BOOST_TEST(box.outcomes[0].token == 101);
  BOOST_TEST(box.outcomes[1].row == 3);
  BOOST_TEST(box.outcomes[2].row == 9);
  BOOST_REQUIRE_EQUAL(box.replies.size(), 3u);

  // Failing again, the wait doubles, up to its longest; an answer without
  // passing failures starts it over. The caller hears only the last answer.
  reports.sent(box.outcomes, std::move(box.replies));
  BOOST_TEST(reports.answered({down, wire_status{}, wire_status{}}, true) == 3u);
  BOOST_TEST(reports.resend_wait_ms() == 2 * reports_in_flight::first_wait_ms);
  for (int i = 0; i < 10; ++i) {
    resend(reports);
    reports.answered({down}, true);
  }
  BOOST_TEST(reports.resend_wait_ms() == reports_in_flight::longest_wait_ms);
  resend(reports);
  reports.answered({wire_status{}}, true);
  BOOST_TEST(lost.wait().ok());
  BOOST_TEST(reports.resend_wait_ms() == reports_in_flight::first_wait_ms);
  BOOST_TEST(reports.empty());
}

// A stopping worker does not wait out a restart: its callers hear the
// failure. A dropped connection answers the outcomes that wait, too.
BOOST_AUTO_TEST_CASE(without_resends_or_connection_the_callers_hear_the_failure) {
  reports_in_flight reports;
  auto [a_to, a] = make_reply<status>();
  auto [b_to, b] = make_reply<status>();
  sent_one(reports, 1, std::move(a_to));
  auto down = to_wire(status{error::unreachable, "PostgreSQL restarts"});
  reports.answered({down}, false);
  BOOST_TEST(a.wait().code() == error::unreachable);
  BOOST_TEST(reports.empty());

  sent_one(reports, 2, std::move(b_to));
  reports.answered({down}, true);
  BOOST_TEST(reports.resends_waiting() == 1u);
  reports.drop(status{error::unreachable, "dropped"});
  BOOST_TEST(b.wait().message() == "dropped");
  BOOST_TEST(reports.empty());
}

// A dropped connection whose attempts the queue keeps: the outcomes at the
// writer wait to be sent again, with their callers, and are listed (with
// those that waited already) for the next registration.
BOOST_AUTO_TEST_CASE(a_held_connection_keeps_unacknowledged_outcomes_for_resending) {
  reports_in_flight reports;
  auto [a_to, a] = make_reply<status>();
  auto [b_to, b] = make_reply<status>();
  sent_one(reports, 1, std::move(a_to));
  BOOST_TEST(reports.answered({to_wire(status{error::unreachable, "down"})}, true) == 1u);
  sent_one(reports, 2, std::move(b_to));
  sent_one(reports, 3, reply_to<status>{});
  auto listed = reports.unacknowledged();
  BOOST_REQUIRE_EQUAL(listed.size(), 3u);
  BOOST_TEST(listed[0].row == 2);  // at the writer first, then those waiting
  BOOST_TEST(listed[2].row == 1);
  BOOST_TEST(listed[2].token == 101);
  reports.keep_for_resend();
  BOOST_TEST(!reports.full());
  BOOST_TEST(reports.resends_waiting() == 3u);
  BOOST_TEST(reports.resend_wait_ms() == reports_in_flight::first_wait_ms);
  auto box = holding(0);
  BOOST_TEST(reports.resend_into(box) == 3u);
  BOOST_REQUIRE_EQUAL(box.replies.size(), 3u);
  reports.sent(box.outcomes, std::move(box.replies));
  // In the order kept: those at the writer, then those that waited.
  BOOST_TEST(reports.answered({wire_status{}, wire_status{},
                               to_wire(status{error::stale_attempt, "committed before"})},
                              true) == 3u);
  BOOST_TEST(b.wait().ok());
  BOOST_TEST(a.wait().code() == error::stale_attempt);
  BOOST_TEST(reports.empty());
}
