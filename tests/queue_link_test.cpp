// queue_link: a worker's standing with its queue through registration,
// stop, leave and a dropped connection, with no actors. Each turn's steps
// are what the worker actor does next.
#define BOOST_TEST_MODULE queue_link
#include <boost/test/unit_test.hpp>

#include "run/queue_link.hpp"

using namespace ergon::actors;

namespace {

bool nothing(const link_steps& s) {
  return !s.give_back_waiting && !s.forget_connection && !s.hold_connection && !s.watch_queue
         && !s.report
         && !s.unregister && !s.rejoin && !s.give_up && !s.stop_if_idle;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_local_worker_registers_reports_and_leaves_when_asked) {
  queue_link link{false};
  BOOST_TEST(!link.registered());
  auto s = link.joined(7);
  BOOST_TEST(link.worker_id() == 7u);
  BOOST_TEST((link.phase() == worker_phase::running));
  BOOST_TEST(s.report);
  BOOST_TEST(!s.watch_queue);  // a local queue is not a connection
  BOOST_TEST(!s.unregister);

  s = link.stop();
  BOOST_TEST((link.phase() == worker_phase::leaving));
  BOOST_TEST(s.give_back_waiting);
  BOOST_TEST(s.report);
  BOOST_TEST(s.unregister);
  BOOST_TEST(s.stop_if_idle);
  BOOST_TEST(link.registered());  // outcomes still go
  BOOST_TEST(!link.unregistered());

  s = link.left();
  BOOST_TEST((link.phase() == worker_phase::left));
  BOOST_TEST(link.unregistered());
  BOOST_TEST(s.stop_if_idle);
}

BOOST_AUTO_TEST_CASE(a_second_stop_only_checks_whether_the_worker_is_done) {
  queue_link link{false};
  link.joined(1);
  link.stop();
  auto s = link.stop();
  BOOST_TEST(s.stop_if_idle);
  BOOST_TEST(!s.give_back_waiting);
  BOOST_TEST(!s.unregister);
  BOOST_TEST((link.phase() == worker_phase::leaving));
}

BOOST_AUTO_TEST_CASE(a_stop_before_the_registration_answer_leaves_right_after_it) {
  queue_link link{true};
  auto s = link.stop();
  BOOST_TEST((link.phase() == worker_phase::stop_joining));
  BOOST_TEST(s.give_back_waiting);
  BOOST_TEST(!s.unregister);  // nothing to leave yet
  BOOST_TEST(!s.report);
  s = link.joined(3);
  BOOST_TEST((link.phase() == worker_phase::leaving));
  BOOST_TEST(s.unregister);
  BOOST_TEST(s.report);
  BOOST_TEST(s.watch_queue);
}

BOOST_AUTO_TEST_CASE(a_local_worker_whose_queue_refuses_it_gives_up) {
  queue_link link{false};
  auto s = link.join_failed();
  BOOST_TEST(s.give_up);
  BOOST_TEST(!s.rejoin);
}

BOOST_AUTO_TEST_CASE(a_remote_worker_that_loses_its_queue_forgets_the_connection_and_rejoins) {
  queue_link link{true};
  auto s = link.joined(4);
  BOOST_TEST(s.watch_queue);
  s = link.queue_down();
  BOOST_TEST((link.phase() == worker_phase::lost));
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(s.rejoin);
  BOOST_TEST(!s.report);
  BOOST_TEST(!link.registered());
  // Once per drop: the same loss seen again does nothing.
  BOOST_TEST(nothing(link.queue_down()));
  s = link.joined(9);
  BOOST_TEST((link.phase() == worker_phase::running));
  BOOST_TEST(link.worker_id() == 9u);
  BOOST_TEST(s.report);
}

BOOST_AUTO_TEST_CASE(a_failed_registration_of_a_remote_worker_rejoins) {
  queue_link link{true};
  auto s = link.join_failed();
  BOOST_TEST((link.phase() == worker_phase::lost));
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(s.rejoin);
  BOOST_TEST(!s.give_up);
}

BOOST_AUTO_TEST_CASE(a_local_worker_ignores_the_queue_going_down) {
  queue_link link{false};
  link.joined(2);
  BOOST_TEST(nothing(link.queue_down()));
  BOOST_TEST((link.phase() == worker_phase::running));
}

BOOST_AUTO_TEST_CASE(stopping_while_lost_stops_offline_and_answers_outcomes_at_once) {
  queue_link link{true};
  link.joined(5);
  link.queue_down();
  auto s = link.stop();
  BOOST_TEST((link.phase() == worker_phase::left_offline));
  BOOST_TEST(s.report);  // offline: answers the outcomes' callers
  BOOST_TEST(!s.unregister);  // the queue lost it already
  BOOST_TEST(link.unregistered());
  BOOST_TEST(link.stopping());
}

BOOST_AUTO_TEST_CASE(a_drop_while_leaving_stops_offline_instead_of_rejoining) {
  queue_link link{true};
  link.joined(6);
  link.stop();
  auto s = link.queue_down();
  BOOST_TEST((link.phase() == worker_phase::left_offline));
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(!s.rejoin);
  BOOST_TEST(s.report);
  BOOST_TEST(s.stop_if_idle);
}

BOOST_AUTO_TEST_CASE(a_registration_that_lands_after_an_offline_stop_leaves_again) {
  queue_link link{true};
  link.join_failed();  // lost, rejoining
  link.stop();         // left_offline
  auto s = link.joined(8);
  BOOST_TEST((link.phase() == worker_phase::left));
  BOOST_TEST(s.unregister);
  BOOST_TEST(s.report);
}

BOOST_AUTO_TEST_CASE(left_is_harmless_in_any_other_phase) {
  queue_link link{true};
  auto s = link.left();
  BOOST_TEST((link.phase() == worker_phase::joining));
  BOOST_TEST(s.stop_if_idle);
  link.joined(1);
  link.left();
  BOOST_TEST((link.phase() == worker_phase::running));
}

// A queue that keeps a remote worker's attempts (hold_ms) is not forgotten
// when the connection drops: the worker holds them, rejoins, and lists them.
// Failed rejoins hold on; the next registration ends the hold.
BOOST_AUTO_TEST_CASE(a_remote_worker_holds_its_attempts_while_it_rejoins) {
  queue_link link{true};
  link.joined(4, 5'000);
  BOOST_TEST(link.hold_ms() == 5'000);
  auto s = link.queue_down();
  BOOST_TEST((link.phase() == worker_phase::lost));
  BOOST_TEST(s.hold_connection);
  BOOST_TEST(!s.forget_connection);
  BOOST_TEST(s.rejoin);
  BOOST_TEST(link.holding());
  s = link.join_failed();
  BOOST_TEST(!s.hold_connection);  // once per drop
  BOOST_TEST(!s.forget_connection);
  BOOST_TEST(s.rejoin);
  BOOST_TEST(link.holding());
  s = link.joined(9, 5'000);
  BOOST_TEST(!link.holding());
  BOOST_TEST(s.report);
  BOOST_TEST(nothing(link.hold_expired()));  // it came in time
}

// A hold that ends before the registration forgets what was kept, once;
// stopping while holding forgets it too, and answers offline.
BOOST_AUTO_TEST_CASE(a_hold_that_ends_or_a_stop_forgets_what_was_kept) {
  queue_link link{true};
  link.joined(4, 5'000);
  link.queue_down();
  auto s = link.hold_expired();
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(!link.holding());
  BOOST_TEST((link.phase() == worker_phase::lost));
  BOOST_TEST(nothing(link.hold_expired()));
  s = link.join_failed();  // not holding now: as without a hold
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(!s.hold_connection);

  queue_link other{true};
  other.joined(5, 5'000);
  other.queue_down();
  s = other.stop();
  BOOST_TEST((other.phase() == worker_phase::left_offline));
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(s.report);
  BOOST_TEST(!other.holding());
}

// Without a hold, or on a local worker, a drop forgets as before.
BOOST_AUTO_TEST_CASE(no_hold_without_the_queue_keeping_attempts_or_on_a_local_worker) {
  queue_link remote{true};
  remote.joined(4, 0);
  auto s = remote.queue_down();
  BOOST_TEST(s.forget_connection);
  BOOST_TEST(!s.hold_connection);
  queue_link local{false};
  local.joined(2, 5'000);
  BOOST_TEST(local.hold_ms() == 0);
}
