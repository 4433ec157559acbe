// When an owner takes its PostgreSQL lease as lapsed, and when it renews
// (runtime/src/lease_clock.hpp): counted from the send of the last renewal
// that succeeded, so the owner stops before any successor can start.
#define BOOST_TEST_MODULE lease_clock
#include <boost/test/unit_test.hpp>

#include "lease_clock.hpp"

using ergon::runtime::lease_clock;
using namespace std::chrono_literals;

namespace {
const lease_clock::time_point t0{std::chrono::seconds(1000)};
}

BOOST_AUTO_TEST_CASE(a_lease_lapses_a_margin_before_it_ends_counted_from_the_send) {
  lease_clock c{10s, t0};
  BOOST_TEST(c.margin().count() == 1000);
  BOOST_TEST((c.lapses_at() == t0 + 9s));
  BOOST_TEST(!c.lapsed(t0 + 9s - 1ms));
  BOOST_TEST(c.lapsed(t0 + 9s));
  // A short lease keeps a tenth of itself; a long one at most 1 s.
  BOOST_TEST(lease_clock(1s, t0).margin().count() == 100);
  BOOST_TEST(lease_clock(1h, t0).margin().count() == 1000);
}

BOOST_AUTO_TEST_CASE(a_renewal_moves_the_lapse_by_its_send_never_back) {
  lease_clock c{10s, t0};
  c.renewed(t0 + 3s);
  BOOST_TEST((c.lapses_at() == t0 + 12s));
  // An answer to an older send (or a clock that did not move) changes nothing.
  c.renewed(t0 + 1s);
  BOOST_TEST((c.lapses_at() == t0 + 12s));
}

BOOST_AUTO_TEST_CASE(renewals_come_every_third_and_sooner_after_a_failure) {
  lease_clock c{9s, t0};
  BOOST_TEST((c.next_renewal(t0 + 10ms) == t0 + 3s));
  c.renewed(t0 + 3s);
  BOOST_TEST((c.next_renewal(t0 + 3s + 5ms) == t0 + 6s));
  // The renewal at 6 s failed (nothing confirmed it): retry at a tenth of
  // the lease, so several more tries fit before the lapse at 11.1 s.
  BOOST_TEST((c.next_renewal(t0 + 6s + 200ms) == t0 + 6s + 200ms + 900ms));
  BOOST_TEST((c.lapses_at() == t0 + 3s + 9s - 900ms));
}
