// What a standby server does next from what it read of the queue's lease
// (runtime/src/standby_policy.hpp).
#define BOOST_TEST_MODULE standby_policy
#include <boost/test/unit_test.hpp>

#include "standby_policy.hpp"

using ergon::error;
using ergon::status;
using ergon::runtime::standby_policy;
using view = ergon::storage::pg_lease::view;
using read_result = ergon::result<std::optional<view>>;
using namespace std::chrono_literals;

namespace {

view live(int64_t ms_left) {
  view v;
  v.epoch = 3;
  v.host = "a";
  v.pid = 42;
  v.ms_left = ms_left;
  v.session_alive = true;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_lease_that_could_be_taken_is_taken_at_once) {
  standby_policy p{200ms};
  BOOST_TEST(p.read(read_result{std::optional<view>{}}).take_over);  // never owned
  auto dead = live(9'000);
  dead.session_alive = false;  // a SIGKILLed owner
  BOOST_TEST(p.read(read_result{dead}).take_over);
  BOOST_TEST(p.read(read_result{live(-1)}).take_over);  // passed: stopped or cut off
}

BOOST_AUTO_TEST_CASE(a_live_lease_is_read_again_after_a_poll_or_just_after_it_passes) {
  standby_policy p{200ms};
  auto later = p.read(read_result{live(9'000)});
  BOOST_TEST(!later.take_over);
  BOOST_TEST(later.wait.count() == 200);
  auto soon = p.read(read_result{live(50)});
  BOOST_TEST(!soon.take_over);
  BOOST_TEST(soon.wait.count() == 60);
  BOOST_TEST(p.read(read_result{live(0)}).wait.count() == 10);
}

BOOST_AUTO_TEST_CASE(failed_reads_back_off_to_5_s_and_a_good_read_resets_it) {
  standby_policy p{200ms};
  read_result down = status{error::unreachable, "no server"};
  std::vector<int64_t> waits;
  for (int i = 0; i < 8; ++i) {
    auto s = p.read(down);
    BOOST_TEST(!s.take_over);
    waits.push_back(s.wait.count());
  }
  BOOST_TEST(waits == (std::vector<int64_t>{200, 400, 800, 1600, 3200, 5000, 5000, 5000}),
             boost::test_tools::per_element());
  BOOST_TEST(p.read(read_result{live(9'000)}).wait.count() == 200);
  BOOST_TEST(p.read(down).wait.count() == 200);
}

BOOST_AUTO_TEST_CASE(a_lost_race_polls_and_a_failed_open_backs_off) {
  standby_policy p{100ms};
  // Another standby won, or the owner renewed in time.
  auto lost = p.takeover_failed({error::busy, "owned by pid 7 on b"});
  BOOST_TEST(!lost.take_over);
  BOOST_TEST(lost.wait.count() == 100);
  // The open failed otherwise (a port in use, the server gone): back off.
  BOOST_TEST(p.takeover_failed({error::io_error, "cannot listen"}).wait.count() == 100);
  BOOST_TEST(p.takeover_failed({error::io_error, "cannot listen"}).wait.count() == 200);
  BOOST_TEST(p.takeover_failed({error::unreachable, "gone"}).wait.count() == 400);
}

BOOST_AUTO_TEST_CASE(a_server_that_stepped_down_waits_a_poll_before_it_reads) {
  standby_policy p{300ms};
  auto s = p.stepped_down();
  BOOST_TEST(!s.take_over);
  BOOST_TEST(s.wait.count() == 300);
}
