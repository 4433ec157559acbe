// Unit tests of the fair-scheduling arithmetic and the dispatch policy,
// without actors: allocation, effective priority, max_wait, and pick().
#define BOOST_TEST_MODULE fair_share
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "ergon/actors/fair_share.hpp"
#include "ergon/actors/scheduling_policy.hpp"

using namespace ergon;
using namespace ergon::actors;
using namespace std::chrono_literals;

namespace {

int32_t sum(const std::vector<int32_t>& v) {
  return std::accumulate(v.begin(), v.end(), 0);
}

aging_options aging(int64_t grace_ms, int64_t interval_ms, int32_t ceiling,
                    std::optional<int32_t> urgent = std::nullopt) {
  aging_options a;
  a.grace_period = std::chrono::milliseconds(grace_ms);
  a.interval = std::chrono::milliseconds(interval_ms);
  a.max_effective_priority = ceiling;
  a.urgent_threshold = urgent;
  return a;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(allocation)

BOOST_AUTO_TEST_CASE(weights_3_to_1_of_16_give_12_and_4) {
  auto a = allocate_slots({{"a", 3, 0, {}}, {"b", 1, 0, {}}}, 16);
  BOOST_TEST(a == (std::vector<int32_t>{12, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_proposals_worked_example) {
  // 16 slots; A weight 3 cap 12; B weight 1 cap 6 min 2. B gets 2, the other
  // 14 split 10.5 / 3.5: the tie in remainders goes to B (fewer slots).
  auto a = allocate_slots({{"s3://prod", 3, 0, 12}, {"s3://b2-backup", 1, 2, 6}}, 16);
  BOOST_TEST(a == (std::vector<int32_t>{10, 6}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(minimums_come_first) {
  auto a = allocate_slots({{"big", 100, 0, {}}, {"small", 1, 3, {}}}, 8);
  BOOST_TEST(a[1] >= 3);
  BOOST_TEST(sum(a) == 8);
}

BOOST_AUTO_TEST_CASE(minimums_larger_than_capacity_are_scaled_down) {
  auto a = allocate_slots({{"a", 1, 6, {}}, {"b", 1, 6, {}}, {"c", 1, 0, {}}}, 8);
  BOOST_TEST(a == (std::vector<int32_t>{4, 4, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(caps_apply_and_the_excess_goes_to_groups_that_can_take_it) {
  auto a = allocate_slots({{"a", 3, 0, 5}, {"b", 1, 0, {}}}, 16);
  BOOST_TEST(a == (std::vector<int32_t>{5, 11}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(when_every_group_is_capped_the_rest_stays_idle) {
  auto a = allocate_slots({{"a", 3, 0, 12}, {"b", 1, 0, 3}}, 16);
  BOOST_TEST(a == (std::vector<int32_t>{12, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(rounding_is_deterministic_and_exact) {
  // Three equal groups, 16 slots: 5.33 each; the one extra slot goes by name.
  auto a = allocate_slots({{"c", 1, 0, {}}, {"a", 1, 0, {}}, {"b", 1, 0, {}}}, 16);
  BOOST_TEST(a == (std::vector<int32_t>{5, 6, 5}), boost::test_tools::per_element());
  BOOST_TEST(allocate_slots({{"c", 1, 0, {}}, {"a", 1, 0, {}}, {"b", 1, 0, {}}}, 16) == a);
}

BOOST_AUTO_TEST_CASE(no_groups_or_no_capacity) {
  BOOST_TEST(allocate_slots({}, 16).empty());
  BOOST_TEST(allocate_slots({{"a", 1, 0, {}}}, 0) == (std::vector<int32_t>{0}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_thousand_groups_allocate_correctly) {
  std::vector<group_share> groups;
  int64_t weights = 0;
  for (int i = 0; i < 1'000; ++i) {
    int32_t w = 1 + i % 7;
    weights += w;
    groups.push_back({"g" + std::to_string(i), w, i % 50 == 0 ? 2 : 0,
                      i % 10 == 0 ? std::optional<int32_t>{3} : std::nullopt});
  }
  const int32_t capacity = 4'000;
  auto a = allocate_slots(groups, capacity);
  BOOST_REQUIRE(a.size() == groups.size());
  BOOST_TEST(sum(a) == capacity);
  for (size_t i = 0; i < groups.size(); ++i) {
    BOOST_TEST_CONTEXT("group " << i) {
      if (groups[i].max_slots)
        BOOST_TEST(a[i] <= *groups[i].max_slots);
      BOOST_TEST(a[i] >= std::min(groups[i].min_slots, groups[i].max_slots.value_or(1 << 30)));
    }
  }
  // Uncapped groups are proportional: equal weights differ by at most one slot.
  for (size_t i = 1; i < 20; ++i)
    if (!groups[i].max_slots && !groups[i + 7].max_slots && groups[i].min_slots == 0
        && groups[i + 7].min_slots == 0)
      BOOST_TEST(std::abs(a[i] - a[i + 7]) <= 1);
  BOOST_TEST(allocate_slots(groups, capacity) == a);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(aging_arithmetic)

BOOST_AUTO_TEST_CASE(effective_priority_steps_after_the_grace_period) {
  std::optional<aging_options> a = aging(10'000, 1'000, 8);
  BOOST_TEST(effective_priority(a, 0, 0) == 0);
  BOOST_TEST(effective_priority(a, 0, 10'999) == 0);
  BOOST_TEST(effective_priority(a, 0, 11'000) == 1);
  BOOST_TEST(effective_priority(a, 0, 15'500) == 5);
  BOOST_TEST(effective_priority(a, 0, 1'000'000) == 8);  // the ceiling
  BOOST_TEST(effective_priority(a, 9, 1'000'000) == 9);  // never below its base
  BOOST_TEST(effective_priority(std::nullopt, 3, 1'000'000) == 3);
}

BOOST_AUTO_TEST_CASE(max_wait_follows_from_the_config) {
  std::optional<aging_options> a = aging(10'000, 1'000, 10, 8);
  BOOST_TEST(max_wait_ms(a, 0).value() == 10'000 + 8 * 1'000);
  BOOST_TEST(max_wait_ms(a, 5).value() == 10'000 + 3 * 1'000);
  BOOST_TEST(max_wait_ms(a, 8).value() == 0);
  BOOST_TEST(!max_wait_ms(std::nullopt, 0).has_value());
  std::optional<aging_options> no_urgent = aging(5'000, 2'000, 4);
  BOOST_TEST(max_wait_ms(no_urgent, 1).value() == 5'000 + 3 * 2'000);
  // Aging stops at the ceiling (6), below the threshold: the bound is the
  // time to reach the ceiling.
  std::optional<aging_options> high_threshold = aging(10'000, 1'000, 6, 8);
  BOOST_TEST(max_wait_ms(high_threshold, 0).value() == 10'000 + 6 * 1'000);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A policy with `n` ready jobs per group, each of weight 1.
struct policy_fixture {
  int64_t now = 1'000'000;
  int64_t next_row = 1;

  pending_job job(scheduling_policy& p, const std::string& group, int32_t priority = 0,
                  int64_t ready_since = 0) {
    pending_job e;
    e.row = next_row++;
    e.run_at = ready_since ? ready_since : now;
    e.ready_since = ready_since ? ready_since : now;
    e.priority = priority;
    e.type = p.type_id("t");
    e.group = p.group_id(group);
    return e;
  }

  std::map<std::string, int> fill(scheduling_policy& p, int slots) {
    std::map<std::string, int> running;
    for (int i = 0; i < slots; ++i) {
      auto picked = p.pick({p.type_id("t")}, 1, now);
      BOOST_REQUIRE(picked.has_value());
      ++running[p.group_name(picked->job.group)];
    }
    return running;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(policy, policy_fixture)

BOOST_AUTO_TEST_CASE(picks_follow_the_allocation_under_saturation) {
  scheduling_options o;
  o.groups["a"].weight = 3;
  o.groups["b"].weight = 1;
  scheduling_policy p{o};
  for (int i = 0; i < 100; ++i) {
    p.add(job(p, "a"), now);
    p.add(job(p, "b"), now);
  }
  p.set_capacity(16);
  p.rebalance();
  auto running = fill(p, 16);
  BOOST_TEST(running["a"] == 12);
  BOOST_TEST(running["b"] == 4);
}

BOOST_AUTO_TEST_CASE(within_a_group_the_highest_priority_runs_first) {
  scheduling_policy p{scheduling_options{}};
  p.add(job(p, "g", 1), now);
  p.add(job(p, "g", 5), now);
  p.add(job(p, "g", 3), now);
  p.set_capacity(4);
  p.rebalance();
  std::vector<int32_t> order;
  for (int i = 0; i < 3; ++i)
    order.push_back(p.pick({p.type_id("t")}, 1, now)->job.priority);
  BOOST_TEST(order == (std::vector<int32_t>{5, 3, 1}), boost::test_tools::per_element());
}

// The dispatch order that runs: higher priority first, then earlier run_at,
// then lower row id (submission order).
BOOST_AUTO_TEST_CASE(ties_break_by_priority_desc_then_run_at_then_row) {
  scheduling_policy p{scheduling_options{}};
  auto add = [&](int64_t row, int32_t prio, int64_t run_at) {
    auto e = job(p, "g", prio);
    e.row = row;
    e.run_at = e.ready_since = now - 1'000 + run_at;
    p.add(e, now);
  };
  add(5, 0, 100);
  add(4, 0, 100);
  add(3, 1, 500);
  add(2, 0, 50);
  add(1, -1, 0);
  add(6, 1, 500);
  p.set_capacity(8);
  p.rebalance();
  std::vector<int64_t> order;
  for (int i = 0; i < 6; ++i)
    order.push_back(p.pick({p.type_id("t")}, 1, now)->job.row);
  BOOST_TEST(order == (std::vector<int64_t>{3, 6, 2, 4, 5, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_idle_groups_share_is_lent_and_taken_back) {
  scheduling_options o;
  scheduling_policy p{o};
  for (int i = 0; i < 10; ++i)
    p.add(job(p, "a"), now);
  p.set_capacity(4);
  p.rebalance();
  // b has no work, so a alone is a member and is allocated all 4.
  auto running = fill(p, 4);
  BOOST_TEST(running["a"] == 4);
  for (int i = 0; i < 10; ++i)
    p.add(job(p, "b"), now);
  p.rebalance();  // b has work again: 2 and 2
  // As a's jobs finish, freed slots go to b until it has its share.
  auto a = p.type_id("t");
  p.finished(0, p.group_id("a"), a, 1);
  p.finished(0, p.group_id("a"), a, 1);
  auto next = fill(p, 2);
  BOOST_TEST(next["b"] == 2);
  p.finished(0, p.group_id("a"), a, 1);
  BOOST_TEST(p.group_name(p.pick({a}, 1, now)->job.group) == "a");  // b has its 2
}

BOOST_AUTO_TEST_CASE(an_aged_job_overtakes_fresher_higher_priority_ones) {
  scheduling_options o;
  o.aging = aging(10'000, 1'000, 8);
  scheduling_policy p{o};
  p.add(job(p, "g", 0, now - 16'000), now);  // waited 16 s: effective 6
  p.add(job(p, "g", 5), now);
  p.set_capacity(1);
  p.rebalance();
  auto first = p.pick({p.type_id("t")}, 1, now);
  BOOST_TEST(first->job.priority == 0);
  BOOST_TEST(first->effective_priority == 6);
}

BOOST_AUTO_TEST_CASE(an_urgent_job_borrows_a_slot_beyond_its_groups_share) {
  scheduling_options o;
  o.aging = aging(10'000, 1'000, 10, 8);
  o.groups["big"].weight = 1'000;
  scheduling_policy p{o};
  for (int i = 0; i < 10; ++i)
    p.add(job(p, "big", 5), now);
  p.add(job(p, "small", 0, now - 18'000), now);  // effective 8: urgent
  p.set_capacity(4);
  p.rebalance();
  auto first = p.pick({p.type_id("t")}, 1, now);
  BOOST_TEST(p.group_name(first->job.group) == "small");
  BOOST_TEST(first->effective_priority == 8);
}

BOOST_AUTO_TEST_CASE(groups_whose_share_is_under_one_slot_take_turns) {
  // 100 groups on 16 slots: 0.16 slots each. Rounding alone would give 16
  // groups one slot and the rest none for as long as those 16 had work.
  scheduling_policy p{scheduling_options{}};
  for (int g = 0; g < 100; ++g)
    for (int i = 0; i < 20; ++i)
      p.add(job(p, "g" + std::to_string(g)), now);
  p.set_capacity(16);
  p.rebalance();
  std::vector<pending_job> running;
  std::map<std::string, int> starts;
  for (int i = 0; i < 16; ++i) {
    running.push_back(p.pick({p.type_id("t")}, 1, now)->job);
    ++starts[p.group_name(running.back().group)];
  }
  for (int i = 0; i < 484; ++i) {  // 500 starts in all: 5 per group
    auto k = static_cast<size_t>(i) % running.size();
    p.finished(running[k].row, running[k].group, running[k].type, running[k].weight);
    running[k] = p.pick({p.type_id("t")}, 1, now)->job;
    ++starts[p.group_name(running[k].group)];
  }
  BOOST_TEST(starts.size() == 100u);
  for (auto& [group, n] : starts)
    BOOST_TEST_CONTEXT(group) { BOOST_TEST((n >= 4 && n <= 6)); }
}

BOOST_AUTO_TEST_CASE(a_fraction_of_a_slot_is_served_in_proportion_over_time) {
  // 2 slots, weights 3:1: shares 1.5 and 0.5. Whole slots would be 1 and 1.
  scheduling_options o;
  o.groups["a"].weight = 3;
  scheduling_policy p{o};
  for (int i = 0; i < 500; ++i) {
    p.add(job(p, "a"), now);
    p.add(job(p, "b"), now);
  }
  p.set_capacity(2);
  p.rebalance();
  std::deque<pending_job> running;
  for (int i = 0; i < 2; ++i)
    running.push_back(p.pick({p.type_id("t")}, 1, now)->job);
  int a_slots = 0;
  const int rounds = 400;
  for (int i = 0; i < rounds; ++i) {  // the oldest job ends, one starts
    auto done = running.front();
    running.pop_front();
    p.finished(done.row, done.group, done.type, done.weight);
    running.push_back(p.pick({p.type_id("t")}, 1, now)->job);
    for (auto& j : running)
      a_slots += p.group_name(j.group) == "a";
  }
  double a_average = static_cast<double>(a_slots) / rounds;
  BOOST_TEST(a_average >= 1.4);
  BOOST_TEST(a_average <= 1.6);
}

BOOST_AUTO_TEST_CASE(when_every_backlog_is_urgent_a_group_borrows_at_most_one_slot) {
  scheduling_options o;
  o.aging = aging(0, 1, 10, 5);
  scheduling_policy p{o};
  for (int i = 0; i < 200; ++i) {
    p.add(job(p, "a", 0, now - 100'000), now);  // all of them urgent
    p.add(job(p, "b", 0, now - 100'000), now);
  }
  p.set_capacity(4);
  p.rebalance();
  std::vector<pending_job> running;
  for (int i = 0; i < 4; ++i)
    running.push_back(p.pick({p.type_id("t")}, 1, now)->job);
  // Jobs of both groups finish in turn; a's older rows win every tie.
  for (int round = 0; round < 100; ++round) {
    auto k = static_cast<size_t>(round) % running.size();
    p.finished(running[k].row, running[k].group, running[k].type, running[k].weight);
    running[k] = p.pick({p.type_id("t")}, 1, now)->job;
    std::map<std::string, int> per_group;
    for (auto& j : running)
      ++per_group[p.group_name(j.group)];
    BOOST_TEST(per_group["a"] <= 3);  // its share of 2, plus one borrowed
    BOOST_TEST(per_group["b"] >= 1);
  }
}

BOOST_AUTO_TEST_CASE(a_time_when_group_and_type_are_both_paused_counts_once) {
  scheduling_options o;
  o.aging = aging(0, 1'000, 100);
  scheduling_policy p{o};
  p.add(job(p, "a", 0, now), now);
  p.set_capacity(1);
  p.rebalance();
  p.pause_group("a", std::nullopt, now);
  p.pause_type("t", std::nullopt, now + 1'000);
  p.resume_group("a", now + 4'000);
  p.resume_type("t", now + 5'000);  // paused from +0 to +5 s, by one or both
  now += 8'000;
  auto first = p.pick({p.type_id("t")}, 1, now);
  BOOST_REQUIRE(first.has_value());
  BOOST_TEST(first->waited_ms == 3'000);
  BOOST_TEST(first->effective_priority == 3);
}

BOOST_AUTO_TEST_CASE(a_rate_limited_groups_share_is_lent) {
  scheduling_options o;
  o.group_rate_limits["a"] = rate_limit{1.0, 1};
  scheduling_policy p{o};
  for (int i = 0; i < 10; ++i) {
    p.add(job(p, "a"), now);
    p.add(job(p, "b"), now);
  }
  p.set_capacity(4);
  p.rebalance();
  auto running = fill(p, 4);
  BOOST_TEST(running["a"] == 1);  // one token
  BOOST_TEST(running["b"] == 3);  // a's other slot is lent
  BOOST_TEST(p.next_wake(now).value() == now + 1'000);  // the next token
}

BOOST_AUTO_TEST_CASE(a_paused_group_releases_its_share_and_its_aging_stands_still) {
  scheduling_options o;
  o.aging = aging(0, 1'000, 100);
  scheduling_policy p{o};
  p.add(job(p, "a", 0, now), now);
  auto b = job(p, "b");
  p.add(b, now);
  p.set_capacity(2);
  p.pause_group("a", std::nullopt, now);
  auto changes = p.rebalance();
  BOOST_REQUIRE(changes.size() == 1u);
  BOOST_TEST(changes[0].group == "b");  // all of it: 0 -> 2
  BOOST_TEST(changes[0].after == 2);
  now += 5'000;  // a paused for 5 s
  p.resume_group("a", now);
  auto back = p.rebalance();
  BOOST_TEST(back.size() == 2u);  // a gets its share back: 1 and 1
  BOOST_TEST(p.remove(b));
  now += 3'000;  // then waiting for 3 s more
  auto first = p.pick({p.type_id("t")}, 1, now);
  BOOST_TEST(p.group_name(first->job.group) == "a");
  BOOST_TEST(first->waited_ms == 3'000);  // the paused 5 s don't count
  BOOST_TEST(first->effective_priority == 3);
}

BOOST_AUTO_TEST_CASE(a_timed_pause_ends_by_itself) {
  scheduling_policy p{scheduling_options{}};
  p.add(job(p, "a"), now);
  p.set_capacity(1);
  p.pause_group("a", now + 500, now);
  p.rebalance();
  BOOST_TEST(!p.pick({p.type_id("t")}, 1, now).has_value());
  BOOST_TEST(p.next_wake(now).value() == now + 500);
  p.expire_pauses(now + 500);
  p.rebalance();
  BOOST_TEST(p.pick({p.type_id("t")}, 1, now + 500).has_value());
}

BOOST_AUTO_TEST_CASE(a_name_paused_ahead_is_taken_by_its_first_job) {
  scheduling_policy p{scheduling_options{}};
  BOOST_TEST(p.pause_group("later", std::nullopt, now).ok());
  BOOST_TEST(p.pause_type("t", now + 1'000, now).ok());
  metrics_snapshot m;
  p.fill_metrics(m, now);
  BOOST_REQUIRE(m.pauses.size() == 2u);
  BOOST_TEST(m.pauses[0].group);
  BOOST_TEST(m.pauses[0].name == "later");
  BOOST_TEST(!m.pauses[0].until_ms.has_value());
  BOOST_TEST(!m.pauses[1].group);
  BOOST_TEST((m.pauses[1].until_ms == std::optional<int64_t>{now + 1'000}));
  BOOST_TEST(p.next_wake(now).value() == now + 1'000);
  // The first job of the group finds it paused.
  p.resume_type("t", now);
  p.add(job(p, "later"), now);
  p.set_capacity(1);
  p.rebalance();
  BOOST_TEST(!p.pick({p.type_id("t")}, 1, now).has_value());
  p.resume_group("later", now);
  p.rebalance();
  BOOST_TEST(p.pick({p.type_id("t")}, 1, now).has_value());
}

BOOST_AUTO_TEST_CASE(pauses_ahead_are_bounded_forgotten_on_resume_and_all_can_be_ended) {
  scheduling_policy p{scheduling_options{}};
  for (size_t i = 0; i < max_paused_ahead; ++i)
    BOOST_REQUIRE(p.pause_group("g" + std::to_string(i), std::nullopt, now).ok());
  auto over = p.pause_group("one-more", std::nullopt, now);
  BOOST_TEST(over.code() == error::invalid_argument);
  BOOST_TEST(over.field() == "group");
  BOOST_TEST(over.message().find("1000 groups") != std::string::npos, over.message());
  BOOST_TEST(p.pause_group("g7", now + 10, now).ok());  // pausing again is no new name
  BOOST_TEST(p.pause_type("a-type", std::nullopt, now).ok());  // types count apart
  // A name with jobs is never refused.
  p.add(job(p, "busy"), now);
  BOOST_TEST(p.pause_group("busy", std::nullopt, now).ok());
  // Resuming forgets a name paused ahead, which makes room.
  p.resume_group("g0", now);
  BOOST_TEST(p.pause_group("one-more", std::nullopt, now).ok());
  // A timed pause ahead ends by itself and frees its place too.
  p.expire_pauses(now + 10);
  metrics_snapshot m;
  p.fill_metrics(m, now + 10);
  BOOST_TEST(m.pauses.size() == max_paused_ahead + 1);  // g1..g999 but g7, one-more, busy, a-type
  BOOST_TEST(p.resume_all(now + 10) == static_cast<int64_t>(max_paused_ahead + 1));
  metrics_snapshot after;
  p.fill_metrics(after, now + 10);
  BOOST_TEST(after.pauses.empty());
  BOOST_TEST(p.resume_all(now + 10) == 0);
}

BOOST_AUTO_TEST_CASE(type_caps_hold) {
  scheduling_options o;
  o.type_max_running["t"] = 2;
  scheduling_policy p{o};
  for (int i = 0; i < 5; ++i)
    p.add(job(p, "g"), now);
  p.set_capacity(8);
  p.rebalance();
  BOOST_TEST(p.pick({p.type_id("t")}, 1, now).has_value());
  BOOST_TEST(p.pick({p.type_id("t")}, 1, now).has_value());
  BOOST_TEST(!p.pick({p.type_id("t")}, 1, now).has_value());
}

BOOST_AUTO_TEST_CASE(allocation_changes_name_their_reason) {
  scheduling_options o;
  scheduling_policy p{o};
  auto a = job(p, "a");
  p.add(a, now);
  p.add(job(p, "b"), now);
  p.set_capacity(4);
  auto first = p.rebalance();
  BOOST_TEST(first.size() == 2u);
  p.set_group_weight("a", 3);
  auto weights = p.rebalance();
  BOOST_REQUIRE(weights.size() == 2u);
  BOOST_TEST((weights[0].reason == allocation_reason::weight_change));
  BOOST_TEST(p.remove(a));
  auto drained = p.rebalance();
  bool saw_drained = false;
  for (auto& c : drained)
    if (c.group == "a")
      saw_drained = c.reason == allocation_reason::group_drained && c.after == 0;
  BOOST_TEST(saw_drained);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(weight_limits, policy_fixture)

std::vector<int64_t> rows_of(const std::vector<pending_job>& jobs) {
  std::vector<int64_t> rows;
  for (auto& j : jobs)
    rows.push_back(j.row);
  std::sort(rows.begin(), rows.end());
  return rows;
}

BOOST_AUTO_TEST_CASE(a_job_heavier_than_every_worker_of_its_type_is_named_once) {
  scheduling_policy p{scheduling_options{}};
  auto t = p.type_id("t");
  auto heavy = job(p, "g");
  heavy.weight = 8;
  auto light = job(p, "g");
  light.weight = 4;
  auto later = job(p, "g");
  later.weight = 6;
  later.run_at = now + 1'000;
  // No worker yet: nothing is too heavy.
  p.add(heavy, now);
  p.add(light, now);
  p.add(later, now);
  BOOST_TEST(p.take_too_heavy().empty());
  BOOST_TEST(!p.too_heavy(t, 8));
  // The largest worker takes 4: both heavier jobs, ready or waiting.
  p.set_type_limits({{t, 4}});
  BOOST_TEST(rows_of(p.take_too_heavy()) == (std::vector<int64_t>{heavy.row, later.row}));
  BOOST_TEST(p.too_heavy(t, 5));
  BOOST_TEST(!p.too_heavy(t, 4));
  BOOST_TEST(p.too_heavy("t", 8));
  BOOST_TEST(!p.too_heavy("unknown", 8));
  metrics_snapshot m;
  p.fill_metrics(m, now);
  BOOST_TEST(m.too_heavy_jobs == 2);
  // Again the same limit, or a larger one: nothing new.
  p.set_type_limits({{t, 4}});
  BOOST_TEST(p.take_too_heavy().empty());
  p.set_type_limits({{t, 7}});
  BOOST_TEST(p.take_too_heavy().empty());
  // Down to 5 from 7: the 6 stops fitting; the 8 was named already.
  p.set_type_limits({{t, 5}});
  BOOST_TEST(rows_of(p.take_too_heavy()) == (std::vector<int64_t>{later.row}));
  // A new job that doesn't fit is named when added.
  auto more = job(p, "g");
  more.weight = 9;
  p.add(more, now);
  BOOST_TEST(rows_of(p.take_too_heavy()) == (std::vector<int64_t>{more.row}));
  // The last worker leaves: no limit, nothing too heavy.
  p.set_type_limits({});
  BOOST_TEST(!p.too_heavy(t, 9));
  BOOST_TEST(p.take_too_heavy().empty());
}

BOOST_AUTO_TEST_SUITE_END()
