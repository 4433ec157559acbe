// Unit tests of the dispatcher's parts, without actors: the attempt table,
// the worker registry, the checks of worker protocol messages and the events
// built from a commit feed. They cover
// the orderings the actor sees: returns before claims, retries parked behind
// running code, stale expiries and releases, workers leaving mid-claim.
#define BOOST_TEST_MODULE dispatcher_parts
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <limits>
#include <utility>
#include <vector>

#include "dispatch/attempt_table.hpp"
#include "dispatch/dispatcher_events.hpp"
#include "dispatch/orphans.hpp"
#include "dispatch/preemptions.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/job.hpp"
#include "ergon/storage/job_ids.hpp"
#include "dispatch/worker_registry.hpp"

using namespace ergon;
using namespace ergon::actors;

namespace {

job_id id_of(int64_t row) {
  return storage::make_job_id(1'000, 7, row);
}

attempt_table::attempt attempt_of(uint64_t worker, int64_t token, int64_t expires_at,
                                  int32_t weight = 1) {
  attempt_table::attempt a;
  a.worker = worker;
  a.token = token;
  a.expires_at = expires_at;
  a.weight = weight;
  return a;
}

storage::job_key key_of(int64_t row, int64_t run_at = 0) {
  storage::job_key k;
  k.row = row;
  k.id = id_of(row);
  k.type = "t";
  k.run_at = run_at;
  return k;
}

// The end of row's attempt; a retried job (pending) runs again at 500.
storage::attempt_end end_of(int64_t row, attempt_outcome outcome, job_status status) {
  storage::attempt_end e;
  e.row = row;
  e.id = id_of(row);
  e.type = "t";
  e.try_number = 1;
  e.outcome = outcome;
  e.message = outcome == attempt_outcome::expired ? "expired" : "";
  e.status = status;
  e.key = key_of(row, 500);
  return e;
}

// Row, token, row, token...
std::vector<int64_t> refs(const std::vector<storage::attempt_ref>& v) {
  std::vector<int64_t> out;
  for (auto& a : v) {
    out.push_back(a.row);
    out.push_back(a.token);
  }
  return out;
}

using ref_list = std::vector<int64_t>;

}  // namespace

BOOST_AUTO_TEST_SUITE(attempts)

BOOST_AUTO_TEST_CASE(a_returned_attempt_frees_its_slot_once) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100, 3));
  BOOST_TEST(!t.code_returned(1, 8));  // another attempt's token
  auto freed = t.code_returned(1, 7);
  BOOST_REQUIRE(freed);
  BOOST_TEST(freed->weight == 3);
  BOOST_TEST(!t.code_returned(1, 7));
  // Its end frees nothing more.
  auto effect = t.ended(end_of(1, attempt_outcome::succeeded, job_status::succeeded), true);
  BOOST_TEST(!effect.freed);
  BOOST_TEST(!effect.ready);
  BOOST_TEST(!t.find(1));
}

BOOST_AUTO_TEST_CASE(an_end_before_the_return_frees_the_slot_at_the_end) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  auto effect = t.ended(end_of(1, attempt_outcome::succeeded, job_status::succeeded), true);
  BOOST_TEST(effect.freed.has_value());
  // The late return is no attempt's any more.
  BOOST_TEST(!t.code_returned(1, 7));
  BOOST_TEST(!t.unpark(1, 7));
}

BOOST_AUTO_TEST_CASE(a_failed_attempts_retry_waits_for_its_code_to_return) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  auto effect = t.ended(end_of(1, attempt_outcome::failed, job_status::pending), true);
  BOOST_TEST(effect.freed.has_value());
  BOOST_TEST(!effect.ready);  // parked
  BOOST_TEST(!t.unpark(1, 8));
  BOOST_TEST(t.worker_gone(2).empty());
  auto key = t.unpark(1, 7);
  BOOST_REQUIRE(key);
  BOOST_TEST(key->run_at == 500);
  BOOST_TEST(!t.unpark(1, 7));
}

BOOST_AUTO_TEST_CASE(a_parked_retry_goes_with_its_worker) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  t.claimed(2, attempt_of(2, 8, 100));
  t.ended(end_of(1, attempt_outcome::failed, job_status::pending), true);
  t.ended(end_of(2, attempt_outcome::failed, job_status::pending), true);
  auto gone = t.worker_gone(2);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST(gone[0].row == 2);
  BOOST_TEST(!t.unpark(2, 8));
  BOOST_TEST(t.unpark(1, 7).has_value());
}

BOOST_AUTO_TEST_CASE(a_retry_is_ready_at_once_when_no_code_can_still_run) {
  attempt_table t;
  // Expired: its code may never return, and its result is fenced.
  t.claimed(1, attempt_of(1, 7, 100));
  BOOST_TEST(t.ended(end_of(1, attempt_outcome::expired, job_status::pending), true).ready);
  // Its code returned before the failure committed.
  t.claimed(2, attempt_of(1, 8, 100));
  t.code_returned(2, 8);
  auto effect = t.ended(end_of(2, attempt_outcome::failed, job_status::pending), true);
  BOOST_TEST(effect.ready);
  BOOST_TEST(!effect.freed);
  // Its worker is not registered.
  t.claimed(3, attempt_of(1, 9, 100));
  BOOST_TEST(t.ended(end_of(3, attempt_outcome::failed, job_status::pending), false).ready);
  // A job without retries left is parked nowhere.
  t.claimed(4, attempt_of(1, 10, 100));
  BOOST_TEST(!t.ended(end_of(4, attempt_outcome::failed, job_status::failed), true).ready);
  BOOST_TEST(t.worker_gone(1).empty());
}

BOOST_AUTO_TEST_CASE(a_parked_retry_follows_updates_and_cancels) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  t.ended(end_of(1, attempt_outcome::failed, job_status::pending), true);
  BOOST_TEST(t.update_parked(key_of(1, 900)));
  BOOST_TEST(!t.update_parked(key_of(2, 900)));  // not parked: the index moves it
  auto key = t.unpark(1, 7);
  BOOST_REQUIRE(key);
  BOOST_TEST(key->run_at == 900);

  t.claimed(3, attempt_of(1, 8, 100));
  t.ended(end_of(3, attempt_outcome::failed, job_status::pending), true);
  t.drop_parked(3);
  BOOST_TEST(!t.unpark(3, 8));
}

BOOST_AUTO_TEST_CASE(an_expiry_moved_by_a_heartbeat_is_skipped) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  BOOST_TEST(t.next_expiry().value_or(0) == 100);
  BOOST_TEST(t.extended(1, 7, 300) != nullptr);
  BOOST_TEST(refs(t.due(100)).empty());
  BOOST_TEST(t.next_expiry().value_or(0) == 300);
  BOOST_TEST(refs(t.due(299)).empty());
  BOOST_TEST(refs(t.due(300)) == (ref_list{1, 7}), boost::test_tools::per_element());
  BOOST_TEST(!t.next_expiry());
}

BOOST_AUTO_TEST_CASE(an_expiry_of_an_ended_or_replaced_attempt_is_skipped) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  t.ended(end_of(1, attempt_outcome::succeeded, job_status::succeeded), true);
  t.claimed(2, attempt_of(1, 8, 100));
  t.claimed(2, attempt_of(1, 9, 200));  // claimed again after its end
  BOOST_TEST(refs(t.due(150)).empty());
  BOOST_TEST(refs(t.due(200)) == (ref_list{2, 9}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_stale_extension_changes_nothing) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  BOOST_TEST(t.extended(1, 8, 300) == nullptr);
  BOOST_TEST(t.extended(2, 7, 300) == nullptr);
  BOOST_TEST(refs(t.due(100)) == (ref_list{1, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_expiry_that_did_not_commit_is_checked_again) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  BOOST_TEST(refs(t.due(100)) == (ref_list{1, 7}), boost::test_tools::per_element());
  t.recheck_at(1'100, 1, 7);
  BOOST_TEST(refs(t.due(1'099)).empty());
  BOOST_TEST(refs(t.due(1'100)) == (ref_list{1, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_release_with_a_stale_token_is_ignored) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100, 2));
  BOOST_TEST(!t.released(1, 8));
  BOOST_TEST(t.find(1) != nullptr);
  auto freed = t.released(1, 7);
  BOOST_REQUIRE(freed);
  BOOST_TEST(freed->weight == 2);
  BOOST_TEST(t.find(1) == nullptr);
  BOOST_TEST(refs(t.due(100)).empty());
}

BOOST_AUTO_TEST_CASE(a_release_after_the_return_frees_nothing_more) {
  attempt_table t;
  t.claimed(1, attempt_of(1, 7, 100));
  t.code_returned(1, 7);
  BOOST_TEST(!t.released(1, 7));
  BOOST_TEST(t.find(1) == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(workers)

// Hands out jobs of `weight` with rows from 100 while `left` lasts, and
// records the room each call had.
struct job_source {
  int32_t weight = 1;
  int left = 100;
  int64_t next_row = 100;
  std::vector<int32_t> rooms;

  worker_registry::picker picker() {
    return [this](const std::vector<uint32_t>&, int32_t room) -> std::optional<picked_job> {
      rooms.push_back(room);
      if (left == 0 || weight > room)
        return std::nullopt;
      --left;
      picked_job p;
      p.job.row = next_row++;
      p.job.weight = weight;
      return p;
    };
  }
};

// A registered worker with max_capacity 4 that reported 4 units free.
struct one_worker {
  worker_registry r;
  uint64_t id = r.add({0}, 4, 0);
  int64_t next_row = 100;

  one_worker() { r.credit(id, 4, 0); }

  // Claims up to `n` jobs of weight 1, rows from 100 on.
  std::vector<int64_t> claim(int n) {
    job_source jobs;
    jobs.left = n;
    jobs.next_row = next_row;
    auto rows = r.claim(id, jobs.picker());
    next_row = jobs.next_row;
    return rows;
  }
};

BOOST_FIXTURE_TEST_CASE(credit_is_free_capacity_minus_what_is_on_its_way, one_worker) {
  auto fresh = r.add({0}, 4, 0);
  BOOST_TEST(r.find(fresh)->wanted() == 0);
  BOOST_TEST(r.claim(fresh, job_source{}.picker()).empty());
  BOOST_TEST(claim(3).size() == 3u);
  BOOST_TEST(r.find(id)->sent == 3);
  BOOST_TEST(r.find(id)->wanted() == 1);
  r.claim_committed(id, 100, {});
  // A report sent before the jobs arrived still counts them as on their way.
  r.credit(id, 4, 0);
  BOOST_TEST(r.find(id)->wanted() == 1);
  r.credit(id, 1, 3);
  BOOST_TEST(r.find(id)->wanted() == 1);
  BOOST_TEST(!r.credit(fresh + 1, 4, 0));
}

BOOST_AUTO_TEST_CASE(a_report_may_claim_only_room_the_worker_can_have) {
  worker_registry r;
  auto id = r.add({0}, 2, 3);
  BOOST_TEST(r.check_credit(id, 0, 0).ok());
  BOOST_TEST(r.check_credit(id, 5, 0).ok());  // max_capacity + prefetch
  auto over = r.check_credit(id, 6, 0);
  BOOST_TEST(over.code() == error::invalid_argument);
  BOOST_TEST(over.field() == "capacity");
  BOOST_TEST(r.check_credit(id, -1, 0).field() == "capacity");
  BOOST_TEST(r.check_credit(id, std::numeric_limits<int32_t>::max(), 0).field() == "capacity");
  // Received: 0 up to what was sent.
  BOOST_TEST(r.check_credit(id, 5, 1).field() == "received_weight");
  BOOST_TEST(r.check_credit(id, 5, -1).field() == "received_weight");
  r.credit(id, 5, 0);
  job_source jobs;
  jobs.left = 2;
  BOOST_TEST(r.claim(id, jobs.picker()).size() == 2u);
  BOOST_TEST(r.check_credit(id, 3, 2).ok());
  BOOST_TEST(r.check_credit(id, 3, 3).field() == "received_weight");
  BOOST_TEST(r.check_credit(id, 3, std::numeric_limits<int64_t>::max()).field()
             == "received_weight");
  // An unknown worker's report credits nothing, so anything goes.
  BOOST_TEST(r.check_credit(id + 1, -5, -5).ok());
}

BOOST_AUTO_TEST_CASE(a_registration_keeps_worker_options_rules) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto me = sys.spawn([](caf::event_based_actor*, int) -> caf::behavior {
    return {[](int) {}};
  }, 0);
  register_worker good;
  good.types = {"job"};
  good.max_capacity = 1;
  good.worker = me;
  BOOST_TEST(validate(good).ok());
  auto field_of = [&](auto change) {
    auto r = good;
    change(r);
    auto st = validate(r);
    BOOST_TEST(st.code() == error::invalid_argument);
    return st.field();
  };
  BOOST_TEST(field_of([](register_worker& r) { r.types.clear(); }) == "types");
  BOOST_TEST(field_of([](register_worker& r) { r.types.push_back(""); }) == "types");
  BOOST_TEST(field_of([](register_worker& r) { r.types = {std::string(max_type_bytes + 1, 't')}; })
             == "types");
  BOOST_TEST(field_of([](register_worker& r) { r.max_capacity = 0; }) == "max_capacity");
  BOOST_TEST(field_of([](register_worker& r) { r.max_capacity = max_weight + 1; })
             == "max_capacity");
  BOOST_TEST(field_of([](register_worker& r) { r.prefetch = -1; }) == "prefetch");
  BOOST_TEST(field_of([](register_worker& r) { r.prefetch = max_weight + 1; }) == "prefetch");
  BOOST_TEST(field_of([](register_worker& r) { r.worker = caf::actor{}; }) == "worker");
  // The attempts a worker kept: 4 per unit of capacity and prefetch (here
  // 1), rows from 1, tokens from 0, each row once across both lists.
  auto kept = good;
  kept.held = {{1, 0}, {2, 7}};
  kept.returned = {{3, 8}, {4, 9}};
  BOOST_TEST(validate(kept).ok());
  BOOST_TEST(field_of([](register_worker& r) { r.held = {{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}; })
             == "held");
  BOOST_TEST(field_of([](register_worker& r) {
               r.held = {{1, 1}, {2, 2}};
               r.returned = {{3, 3}, {4, 4}, {5, 5}};
             }) == "returned");
  BOOST_TEST(field_of([](register_worker& r) { r.held = {{0, 1}}; }) == "held");
  BOOST_TEST(field_of([](register_worker& r) { r.returned = {{1, -1}}; }) == "returned");
  BOOST_TEST(field_of([](register_worker& r) {
               r.held = {{1, 1}};
               r.returned = {{1, 2}};
             }) == "returned");
  caf::anon_send_exit(me, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_claim_fills_the_prefetch_window_with_jobs_that_fit_the_worker) {
  worker_registry r;
  auto id = r.add({0}, 2, 3);
  r.credit(id, 5, 0);
  job_source jobs;
  jobs.weight = 2;
  auto rows = r.claim(id, jobs.picker());
  BOOST_TEST(rows == (std::vector<int64_t>{100, 101}), boost::test_tools::per_element());
  // Never more room than max_capacity per job, and none beyond the credit.
  BOOST_TEST(jobs.rooms == (std::vector<int32_t>{2, 2, 1}), boost::test_tools::per_element());
  BOOST_TEST(r.find(id)->sent == 4);
}

// The next claim is picked while the last commits, up to
// max_claims_at_writer; the credit still bounds what is on its way.
BOOST_FIXTURE_TEST_CASE(two_claims_at_a_time, one_worker) {
  static_assert(worker_registry::max_claims_at_writer == 2);
  BOOST_TEST(claim(1).size() == 1u);
  BOOST_TEST(r.find(id)->claiming());
  BOOST_TEST(r.find(id)->may_claim());
  BOOST_TEST(claim(1).size() == 1u);  // row 101
  BOOST_TEST(r.find(id)->claims.size() == 2u);
  BOOST_TEST(!r.find(id)->may_claim());
  job_source more;
  more.next_row = 200;
  BOOST_TEST(r.claim(id, more.picker()).empty());
  BOOST_TEST(more.rooms.empty());
  r.wait_for_jobs(id);
  BOOST_TEST(!r.anyone_waiting());  // can't claim: not in line
  // The second claim's feed may come first (the first failed in the same
  // transaction, and failures are told after the commit).
  auto c = r.claim_committed(id, 101, {});
  BOOST_TEST(c.picked.count(101) == 1u);
  BOOST_TEST(c.picked.count(100) == 0u);
  BOOST_TEST(r.find(id)->claims.size() == 1u);
  BOOST_TEST(r.claim(id, more.picker()).size() == 2u);  // 4 free, 2 on their way
  BOOST_TEST(r.find(id)->sent == 4);
  auto f = r.claim_failed(id, 100);
  BOOST_REQUIRE(f.picks.size() == 1u);
  BOOST_TEST(f.picks[0].job.row == 100);
  BOOST_TEST(r.find(id)->sent == 3);
  // A feed for no claim of its own changes nothing.
  BOOST_TEST(r.claim_committed(id, 999, {}).picked.empty());
  BOOST_TEST(r.find(id)->claims.size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(missed_jobs_give_their_weight_back, one_worker) {
  claim(4);
  BOOST_TEST(r.find(id)->wanted() == 0);
  auto c = r.claim_committed(id, 100, {101, 102, 999});  // 999 was never picked
  BOOST_TEST(c.picked.size() == 4u);
  BOOST_REQUIRE(c.missed.size() == 2u);
  BOOST_TEST(c.missed[0].row == 101);
  BOOST_TEST(c.missed[1].row == 102);
  BOOST_TEST(!c.left);
  BOOST_TEST(r.find(id)->wanted() == 2);
  BOOST_TEST(!r.find(id)->claiming());
  // It wants the two units again, so it waits for jobs.
  BOOST_TEST(r.pop_waiting().value_or(0) == id);
}

BOOST_FIXTURE_TEST_CASE(a_failed_claim_gives_its_picks_back, one_worker) {
  claim(2);
  auto f = r.claim_failed(id, 101);
  BOOST_REQUIRE(f.picks.size() == 2u);
  BOOST_TEST(f.picks[0].job.row == 100);
  BOOST_TEST(f.picks[1].job.row == 101);
  BOOST_TEST(!f.left);
  BOOST_TEST(r.find(id)->sent == 0);
  BOOST_TEST(r.find(id)->claims.empty());
  BOOST_TEST(r.pop_waiting().value_or(0) == id);
  BOOST_TEST(claim(4).size() == 4u);
}

BOOST_FIXTURE_TEST_CASE(a_worker_leaving_mid_claim_goes_after_the_claim, one_worker) {
  claim(1);
  BOOST_TEST((r.leave(id) == worker_registry::leave_result::after_claim));
  BOOST_TEST(r.find(id) != nullptr);
  BOOST_TEST(r.capacity().weight == 0);
  r.credit(id, 4, 1);  // a report while leaving
  r.wait_for_jobs(id);
  BOOST_TEST(!r.anyone_waiting());
  auto c = r.claim_committed(id, 100, {});
  BOOST_TEST(c.left);
  BOOST_TEST(c.picked.count(100) == 1u);  // its job still started
  BOOST_TEST(r.find(id) == nullptr);
  BOOST_TEST(!r.anyone_waiting());
}

BOOST_FIXTURE_TEST_CASE(a_worker_leaving_mid_claim_goes_when_the_claim_fails, one_worker) {
  claim(4);
  r.leave(id);
  auto f = r.claim_failed(id, 100);
  BOOST_TEST(f.left);
  BOOST_TEST(f.picks.size() == 4u);
  BOOST_TEST(r.find(id) == nullptr);
  BOOST_TEST(!r.anyone_waiting());
}

BOOST_FIXTURE_TEST_CASE(a_worker_without_a_claim_leaves_at_once, one_worker) {
  BOOST_TEST((r.leave(id) == worker_registry::leave_result::left));
  BOOST_TEST(r.find(id) == nullptr);
  BOOST_TEST((r.leave(id) == worker_registry::leave_result::unknown));
}

BOOST_FIXTURE_TEST_CASE(a_worker_leaving_with_two_claims_goes_after_both, one_worker) {
  claim(1);
  claim(1);
  BOOST_TEST((r.leave(id) == worker_registry::leave_result::after_claim));
  BOOST_TEST(!r.claim_committed(id, 100, {}).left);
  BOOST_TEST(r.find(id) != nullptr);
  BOOST_TEST(r.claim_failed(id, 101).left);
  BOOST_TEST(r.find(id) == nullptr);
}

BOOST_FIXTURE_TEST_CASE(a_gone_worker_hands_back_its_claims_picks, one_worker) {
  claim(2);
  claim(2);
  auto gone = r.remove(id);
  BOOST_REQUIRE(gone);
  BOOST_TEST(gone->picks.size() == 4u);
  BOOST_TEST(gone->claims == 2u);
  BOOST_TEST(!r.remove(id));
  // Its claim's feed then finds nobody.
  auto c = r.claim_committed(id, 100, {});
  BOOST_TEST(c.picked.empty());
  BOOST_TEST(!c.left);
}

BOOST_FIXTURE_TEST_CASE(the_waiting_line_passes_over_workers_that_cannot_claim, one_worker) {
  auto busy = r.add({0}, 4, 0);
  r.wait_for_jobs(busy);  // no credit: not put in line
  BOOST_TEST(!r.anyone_waiting());
  r.credit(busy, 4, 0);
  r.wait_for_jobs(busy);
  r.wait_for_jobs(id);
  BOOST_TEST(r.waiting_count() == 2u);
  job_source one;
  one.left = 1;
  r.claim(busy, one.picker());  // room left, and one claim more allowed
  job_source two;
  two.left = 1;
  two.next_row = 200;
  r.claim(busy, two.picker());  // room left, but two claims at the writer
  BOOST_TEST(!r.pop_waiting());
  BOOST_TEST(r.pop_waiting().value_or(0) == id);
  BOOST_TEST(!r.anyone_waiting());
  BOOST_TEST(!r.pop_waiting());
}

BOOST_AUTO_TEST_CASE(capacity_counts_prefetch_and_the_largest_worker_per_type) {
  worker_registry r;
  auto small = r.add({0, 1}, 2, 1);
  auto large = r.add({0}, 5, 0);
  auto c = r.capacity();
  BOOST_TEST(c.weight == 8);
  BOOST_TEST(c.largest_by_type.at(0) == 5);
  BOOST_TEST(c.largest_by_type.at(1) == 2);
  r.leave(large);
  c = r.capacity();
  BOOST_TEST(c.weight == 3);
  BOOST_TEST(c.largest_by_type.at(0) == 2);
  r.leave(small);
  BOOST_TEST(r.capacity().largest_by_type.empty());
}

BOOST_FIXTURE_TEST_CASE(a_return_before_the_claims_feed_frees_the_slot_at_the_claim,
                        one_worker) {
  // The writer hands claimed jobs to the worker before the dispatcher reads
  // the claim's feed, so the worker may report the code returned first.
  attempt_table t;
  claim(2);
  BOOST_TEST(!t.find(100));  // not running yet: remember the return
  claim(1);  // row 102, a second claim
  r.returned_before_claim(id, 100, 55);
  r.returned_before_claim(id, 102, 57);
  r.returned_before_claim(id, 999, 56);  // not in its claims
  auto c = r.claim_committed(id, 101, {});
  BOOST_TEST(c.returned_early.size() == 1u);
  BOOST_TEST(c.returned_early.count({100, 55}) == 1u);
  // The second claim's return waits for its own feed.
  BOOST_TEST(r.find(id)->returned_early.size() == 1u);
  BOOST_TEST(r.claim_committed(id, 102, {}).returned_early.count({102, 57}) == 1u);
  BOOST_TEST(r.find(id)->returned_early.empty());
  auto a = attempt_of(id, 55, 100);
  a.code_returned = c.returned_early.count({100, 55}) == 1;
  t.claimed(100, a);
  // Its slot was freed at the claim; neither a repeat nor the end frees it again.
  BOOST_TEST(!t.code_returned(100, 55));
  BOOST_TEST(!t.ended(end_of(100, attempt_outcome::succeeded, job_status::succeeded), true)
                  .freed);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(events)

std::vector<event_kind> kinds(const std::vector<event>& evs) {
  std::vector<event_kind> out;
  for (auto& e : evs)
    out.push_back(e.kind);
  return out;
}

storage::claimed_job claimed_of(int64_t row, int32_t priority, int64_t run_at,
                                int64_t started_at) {
  storage::claimed_job j;
  j.key = key_of(row, run_at);
  j.key.priority = priority;
  j.key.group = "g";
  j.key.id = id_of(row);
  j.token = row * 10;
  j.try_number = 2;
  j.started_at = started_at;
  return j;
}

BOOST_AUTO_TEST_CASE(a_feed_gives_its_events_in_order) {
  scheduling_policy names{scheduling_options{}};
  attempt_table t;
  auto a = attempt_of(1, 77, 100);
  a.id = id_of(9);
  a.type = names.type_id("hb-type");
  a.group = names.group_id("hb-group");
  t.claimed(9, a);

  commit_feed f;
  f.added.push_back(key_of(1, 40));
  f.cancelled.push_back(key_of(2));
  f.expired.push_back(key_of(3));
  claim_result c;
  c.claimed = {claimed_of(4, 1, 10, 30), claimed_of(5, 1, 10, 5)};
  f.claims.push_back(c);
  f.ended.push_back(end_of(6, attempt_outcome::expired, job_status::pending));
  f.ended.push_back(end_of(7, attempt_outcome::failed, job_status::failed));
  f.released.push_back({70, key_of(8)});
  f.extended.push_back({9, 77, 400, true});
  f.extended.push_back({9, 77, 450, false});  // an expiry check: no event
  f.extended.push_back({9, 78, 500, true});   // another attempt's token

  std::unordered_map<int64_t, picked_job> picks;
  picked_job aged;
  aged.job.row = 4;
  aged.effective_priority = 3;
  aged.waited_ms = 25;
  picks.emplace(4, aged);

  auto evs = feed_events(f, 50, picks, t, names);
  BOOST_TEST(kinds(evs)
                 == (std::vector<event_kind>{event_kind::submitted, event_kind::cancelled,
                                             event_kind::expired, event_kind::job_aged,
                                             event_kind::started, event_kind::started,
                                             event_kind::expired, event_kind::retried,
                                             event_kind::failed, event_kind::released,
                                             event_kind::heartbeat}),
             boost::test_tools::per_element());
  BOOST_REQUIRE(evs.size() == 11u);
  BOOST_TEST(evs[0].run_at_ms == 40);
  BOOST_TEST(evs[0].at_ms == 50);
  BOOST_TEST(evs[2].message == "deadline passed before the job started");
  // Aging raised row 4: the claim's time, and the pick's wait and priority.
  BOOST_TEST(evs[3].at_ms == 30);
  BOOST_TEST(evs[3].id == id_of(4));
  BOOST_TEST(evs[3].base_priority == 1);
  BOOST_TEST(evs[3].effective_priority == 3);
  BOOST_TEST(evs[3].wait_ms == 25);
  BOOST_TEST(evs[4].effective_priority == 3);
  BOOST_TEST(evs[4].wait_ms == 20);  // started_at - run_at
  BOOST_TEST(evs[4].try_number == 2);
  BOOST_TEST(evs[4].group == "g");
  // Row 5 was not picked for this claim: its stored priority.
  BOOST_TEST(evs[5].effective_priority == 1);
  BOOST_TEST(evs[5].wait_ms == 0);  // started before run_at: no wait
  BOOST_TEST(evs[6].message == "expired");
  BOOST_TEST(evs[7].run_at_ms == 500);
  BOOST_TEST(evs[7].id == id_of(6));
  BOOST_TEST(evs[8].id == id_of(7));
  BOOST_TEST(evs[9].id == id_of(8));
  BOOST_TEST(evs[10].id == id_of(9));
  BOOST_TEST(evs[10].type == "hb-type");
  BOOST_TEST(evs[10].group == "hb-group");
  BOOST_TEST(evs[10].expires_at_ms == 400);
}

BOOST_AUTO_TEST_CASE(too_heavy_and_allocation_events_name_their_numbers) {
  scheduling_policy policy{scheduling_options{}};
  pending_job j;
  j.row = 3;
  j.added_at = 1'000;
  j.weight = 6;
  j.priority = 2;
  j.type = policy.type_id("big");
  j.group = policy.group_id("g");
  policy.set_type_limits({{j.type, 4}});
  auto heavy = too_heavy_events({j}, policy, 7, 50);
  BOOST_REQUIRE(heavy.size() == 1u);
  BOOST_TEST(heavy[0].kind == event_kind::job_too_heavy);
  BOOST_TEST(heavy[0].id == id_of(3));
  BOOST_TEST(heavy[0].base_priority == 2);
  BOOST_TEST(heavy[0].message
             == "weight 6 is more than any registered worker of type 'big' takes (max 4)");

  auto alloc = allocation_events({{"g", 1, 3, allocation_reason::weight_change}}, 60);
  BOOST_REQUIRE(alloc.size() == 1u);
  BOOST_TEST(alloc[0].kind == event_kind::group_allocation_changed);
  BOOST_TEST(alloc[0].group == "g");
  BOOST_TEST(alloc[0].previous_slots == 1);
  BOOST_TEST(alloc[0].new_slots == 3);
  BOOST_TEST((alloc[0].reason == allocation_reason::weight_change));
  BOOST_TEST(alloc[0].at_ms == 60);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(preemption)

namespace {

preemptions::candidate running(int64_t row, uint64_t worker, int32_t priority,
                               int64_t started_at, uint32_t group = 0, int32_t weight = 1) {
  return {row, row * 10, worker, group, weight, priority, started_at};
}

std::vector<int64_t> rows_of(const std::vector<preemptions::candidate>& cs) {
  std::vector<int64_t> out;
  for (auto& c : cs)
    out.push_back(c.row);
  return out;
}

storage::job_key key_of(int64_t row) {
  storage::job_key k;
  k.row = row;
  k.id = id_of(row);
  return k;
}

// Rows 1 and 2 ended: 1 yielded and is held, 2 did not yield.
void only_row_1_is_held(preemptions& p) {
  bool resumed = false;
  BOOST_TEST(p.hold(key_of(1), resumed));
  BOOST_TEST(resumed);
  BOOST_TEST(!p.hold(key_of(2), resumed));
  BOOST_TEST(!resumed);
  BOOST_TEST(p.held() == 1u);
}

}  // namespace

BOOST_AUTO_TEST_CASE(victims_are_the_lowest_priority_then_the_latest_started_and_no_more) {
  auto no_room = [](uint64_t) { return 0; };
  auto any = [](uint32_t, int32_t) { return true; };
  std::vector<preemptions::candidate> cs{running(1, 1, 5, 100), running(2, 1, 0, 100),
                                         running(3, 1, 0, 200), running(4, 1, 3, 50)};
  BOOST_TEST(rows_of(preemptions::choose(cs, 1, no_room, any)) == std::vector<int64_t>{3});
  BOOST_TEST(rows_of(preemptions::choose(cs, 2, no_room, any)) == (std::vector<int64_t>{3, 2}));
  // Room the worker has counts: one unit free, one more needed.
  BOOST_TEST(rows_of(preemptions::choose(cs, 2, [](uint64_t) { return 1; }, any))
             == std::vector<int64_t>{3});
  // Nothing can make room for more than the worker holds.
  BOOST_TEST(preemptions::choose(cs, 5, no_room, any).empty());
  BOOST_TEST(preemptions::choose({}, 1, no_room, any).empty());
}

BOOST_AUTO_TEST_CASE(victims_come_from_one_worker_and_never_below_a_groups_minimum) {
  auto no_room = [](uint64_t) { return 0; };
  // Worker 1 has the lowest job, but room for 2 units is found on worker 2 first.
  std::vector<preemptions::candidate> cs{running(1, 1, 0, 0), running(2, 2, 1, 0),
                                         running(3, 2, 2, 0)};
  BOOST_TEST(rows_of(preemptions::choose(cs, 2, no_room, [](uint32_t, int32_t) { return true; }))
             == (std::vector<int64_t>{2, 3}));
  // Group 7 may lose one unit, not two; group 8 none.
  std::vector<preemptions::candidate> grouped{running(1, 1, 0, 0, 7), running(2, 1, 0, 0, 7),
                                              running(3, 1, 0, 0, 8), running(4, 1, 1, 0, 9)};
  auto lose = [](uint32_t g, int32_t w) { return (g == 7 && w <= 1) || g == 9; };
  BOOST_TEST(rows_of(preemptions::choose(grouped, 1, no_room, lose)) == std::vector<int64_t>{1});
  BOOST_TEST(rows_of(preemptions::choose(grouped, 2, no_room, lose))
             == (std::vector<int64_t>{1, 4}));
  BOOST_TEST(preemptions::choose(grouped, 3, no_room, lose).empty());
}

BOOST_AUTO_TEST_CASE(a_yielded_job_is_held_until_its_preemptor_ends) {
  preemptions p;
  p.asked(running(1, 1, 0, 0, 7), 100);  // token 10
  p.asked(running(2, 1, 0, 0, 7), 100);  // token 20
  BOOST_TEST(p.asking_for(100));
  BOOST_TEST(p.asked(1));
  BOOST_TEST(p.losing(7) == 2);
  p.attempt_ended(1, 11, true, true);  // another attempt's token: nothing
  BOOST_TEST(p.asked(1));
  p.attempt_ended(1, 10, true, false);  // yielded; its code has not returned yet
  BOOST_TEST(p.asking_for(100));       // no room before it does
  p.slot_freed(1, 99);                 // a stale return: nothing
  BOOST_TEST(p.losing(7) == 2);
  p.slot_freed(1, 10);
  p.attempt_ended(2, 20, false, true);  // ignored the request and finished
  BOOST_TEST(!p.asking_for(100));
  BOOST_TEST(p.losing(7) == 0);
  only_row_1_is_held(p);
  p.started(100, true);
  BOOST_TEST(p.release_stale({}).empty());  // it runs: keep holding
  auto updated = key_of(1);
  updated.priority = 9;
  BOOST_TEST(p.update_held(updated));
  BOOST_TEST(!p.update_held(key_of(3)));
  auto released = p.ended(100);
  BOOST_REQUIRE_EQUAL(released.size(), 1u);
  BOOST_TEST(released[0].row == 1);
  BOOST_TEST(released[0].priority == 9);
  BOOST_TEST(p.held() == 0u);
  BOOST_TEST(p.ended(100).empty());
}

// The worker's return and the writer's feed race: a victim's code may
// return (freeing its slot for the preemptor) before its yield commits.
BOOST_AUTO_TEST_CASE(a_yield_that_commits_after_its_slot_was_freed_is_still_held) {
  preemptions p;
  p.asked(running(1, 1, 0, 0, 7), 100);  // token 10
  p.asked(running(2, 1, 0, 0, 7), 100);  // token 20
  p.slot_freed(1, 10);
  p.slot_freed(2, 20);
  BOOST_TEST(!p.asking_for(100));
  BOOST_TEST(!p.asked(1));
  BOOST_TEST(p.losing(7) == 0);
  p.started(100, true);
  p.attempt_ended(1, 11, true, true);  // another attempt's token: nothing
  p.attempt_ended(1, 10, true, true);
  p.attempt_ended(2, 20, false, true);  // finished instead
  only_row_1_is_held(p);
  // Each answer is used once: a later attempt of the same row is not a yield.
  p.attempt_ended(2, 20, true, true);
  bool resumed = false;
  BOOST_TEST(!p.hold(key_of(2), resumed));
  BOOST_TEST(!resumed);
  auto released = p.ended(100);
  BOOST_REQUIRE_EQUAL(released.size(), 1u);
  BOOST_TEST(released[0].row == 1);
  // A job that leaves the queue between its return and its end is forgotten.
  p.asked(running(3, 1, 0, 0), 200);
  p.slot_freed(3, 30);
  p.forget(3);
  p.attempt_ended(3, 30, true, true);
  BOOST_TEST(!p.hold(key_of(3), resumed));
  BOOST_TEST(!resumed);
}

BOOST_AUTO_TEST_CASE(held_jobs_are_let_go_when_their_preemptor_stops_waiting) {
  preemptions p;
  p.asked(running(1, 1, 0, 0), 100);
  p.attempt_ended(1, 10, true, true);
  bool resumed = false;
  BOOST_TEST(p.hold(key_of(1), resumed));
  BOOST_TEST(p.release_stale({100}).empty());  // still waiting for a slot
  auto released = p.release_stale({});         // paused, say
  BOOST_REQUIRE_EQUAL(released.size(), 1u);
  BOOST_TEST(p.held() == 0u);
  // A preemptor that ended before the yield committed holds nothing.
  p.asked(running(2, 1, 0, 0), 200);
  p.attempt_ended(2, 20, true, true);
  BOOST_TEST(p.ended(200).empty());
  BOOST_TEST(!p.hold(key_of(2), resumed));
  BOOST_TEST(resumed);
}

BOOST_AUTO_TEST_CASE(a_job_that_leaves_the_queue_is_forgotten_not_resumed) {
  preemptions p;
  p.asked(running(1, 1, 0, 0, 3), 100);
  p.asked(running(2, 2, 0, 0, 3), 100);
  p.attempt_ended(1, 10, true, true);
  bool resumed = false;
  BOOST_TEST(p.hold(key_of(1), resumed));
  p.forget(1);  // the held job was cancelled
  p.forget(2);  // the asked one's worker died and its job expired, say
  BOOST_TEST(p.held() == 0u);
  BOOST_TEST(!p.asking_for(100));
  BOOST_TEST(p.losing(3) == 0);
  BOOST_TEST(p.ended(100).empty());
  // A gone worker answers the request whatever the attempt's token.
  p.asked(running(4, 1, 0, 0), 300);
  p.slot_freed(4, std::nullopt);
  BOOST_TEST(!p.asking_for(300));
}

BOOST_AUTO_TEST_SUITE_END()

// -- attempts whose remote worker is away (issue 30) ---------------------------------------

BOOST_AUTO_TEST_SUITE(orphaned_attempts)

namespace {

using refs = std::vector<storage::attempt_ref>;

std::vector<int64_t> rows_of(const refs& r) {
  std::vector<int64_t> out;
  for (auto& a : r)
    out.push_back(a.row);
  return out;
}

}  // namespace

// Each waits until its grace ends, earliest first; next_due says when.
BOOST_AUTO_TEST_CASE(attempts_wait_until_their_grace_ends) {
  orphans o;
  BOOST_TEST(!o.next_due().has_value());
  o.hold("a", {1, 11}, 300);
  o.hold("b", {2, 12}, 200);
  o.hold("a", {3, 13}, 300);
  BOOST_TEST(o.size() == 3u);
  BOOST_TEST(o.next_due().value_or(0) == 200);
  BOOST_TEST(o.due(199).empty());
  auto gone = o.due(200);
  BOOST_TEST(rows_of(gone) == (std::vector<int64_t>{2}), "due");
  BOOST_TEST(gone[0].token == 12);
  BOOST_TEST(!o.holds(2));
  BOOST_TEST(o.next_due().value_or(0) == 300);
  BOOST_TEST(rows_of(o.due(1'000)) == (std::vector<int64_t>{1, 3}), "due");
  BOOST_TEST(o.size() == 0u);
  BOOST_TEST(!o.next_due().has_value());
}

// A returning holder adopts what it lists under its tokens; a pair it lists
// that is not its attempt here is stale; its attempts it does not list are
// lost. Another holder's attempts still wait.
BOOST_AUTO_TEST_CASE(a_returning_holder_adopts_only_its_own_attempts_under_their_tokens) {
  orphans o;
  o.hold("a", {1, 11}, 300);
  o.hold("a", {2, 12}, 300);
  o.hold("a", {3, 13}, 300);
  o.hold("b", {4, 14}, 300);
  BOOST_TEST(o.request_cancel(2));
  BOOST_TEST(!o.request_cancel(9));
  auto r = o.adopt("a", {{1, 11}, {2, 12}, {3, 99}, {4, 14}, {5, 15}});
  BOOST_REQUIRE_EQUAL(r.adopted.size(), 2u);
  BOOST_TEST(r.adopted[0].first.row == 1);
  BOOST_TEST(!r.adopted[0].second);
  BOOST_TEST(r.adopted[1].first.row == 2);
  BOOST_TEST(r.adopted[1].second);  // its cancel request goes with it
  BOOST_TEST(rows_of(r.stale) == (std::vector<int64_t>{3, 4, 5}), "stale");
  BOOST_TEST(rows_of(r.lost) == (std::vector<int64_t>{3}), "lost");
  BOOST_TEST(r.lost[0].token == 13);
  BOOST_TEST(o.size() == 1u);
  BOOST_TEST(o.holds(4));
  // Nothing of "a" is left to adopt or lose.
  auto again = o.adopt("a", {{1, 11}});
  BOOST_TEST(again.adopted.empty());
  BOOST_TEST(again.lost.empty());
  BOOST_TEST(rows_of(again.stale) == (std::vector<int64_t>{1}), "stale");
}

// An attempt that ended otherwise waits no more; holding a row again
// replaces its record, grace and holder included.
BOOST_AUTO_TEST_CASE(an_ended_attempt_waits_no_more_and_a_new_hold_replaces_the_old) {
  orphans o;
  o.hold("a", {1, 11}, 300);
  o.ended(1);
  o.ended(7);  // not held: nothing
  BOOST_TEST(!o.holds(1));
  BOOST_TEST(!o.next_due().has_value());
  o.hold("a", {2, 12}, 300);
  o.hold("b", {2, 22}, 500);
  BOOST_TEST(o.size() == 1u);
  BOOST_TEST(o.next_due().value_or(0) == 500);
  BOOST_TEST(o.adopt("a", {}).lost.empty());
  auto r = o.adopt("b", {{2, 22}});
  BOOST_REQUIRE_EQUAL(r.adopted.size(), 1u);
  BOOST_TEST(r.adopted[0].first.token == 22);
}

BOOST_AUTO_TEST_SUITE_END()

