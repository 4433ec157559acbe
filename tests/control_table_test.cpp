// Run-time controls (issue 32, item 2) as a plain class over the scheduling
// policy: what each call does to scheduling, which rows it saves, its
// events, a timed pause's end to the millisecond, the bound, and the
// restore at open.
#define BOOST_TEST_MODULE control_table
#include <boost/test/unit_test.hpp>

#include "dispatch/control_table.hpp"

using namespace ergon;
using namespace ergon::actors;

namespace {

// A policy with 4 slots and jobs of type "t" in groups "a" and "b".
struct fixture {
  scheduling_policy policy{scheduling_options{}};
  int64_t next_row = 1;

  fixture() { policy.set_capacity(4); }

  void add(const std::string& group, int n, int64_t now, const std::string& type = "t") {
    for (int i = 0; i < n; ++i) {
      pending_job e;
      e.row = next_row++;
      e.run_at = e.ready_since = now;
      e.type = policy.type_id(type);
      e.group = policy.group_id(group);
      policy.add(e, now);
    }
  }

  // The group of the job a worker of `type` would get now, or "" for none.
  std::string next(int64_t now, const std::string& type = "t") {
    policy.rebalance();
    auto picked = policy.pick({policy.type_id(type)}, 1, now);
    return picked ? policy.group_name(picked->job.group) : std::string{};
  }
};

scheduling_control call(scheduling_control::op_type op, std::string name = {},
                        std::optional<int64_t> until = {}) {
  scheduling_control c;
  c.op = op;
  c.name = std::move(name);
  c.until = until;
  return c;
}

scheduling_control change(scheduling_control::op_type op, std::string name, settings_change s) {
  auto c = call(op, std::move(name));
  c.settings = s;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_queue_pause_stops_every_start_and_ends_at_its_deadline_exactly) {
  fixture f;
  control_table t{f.policy, {}};
  f.add("a", 2, 0);
  auto done = t.apply(call(scheduling_control::pause_queue, {}, 10'000), 100);
  BOOST_REQUIRE(done.has_value());
  BOOST_REQUIRE(done->changed.size() == 1u);
  auto& row = done->changed[0];
  BOOST_TEST((row.scope == control_scope::queue));
  BOOST_TEST(row.paused);
  BOOST_TEST(row.paused_since_ms == 100);
  BOOST_TEST(row.paused_until_ms.value_or(0) == 10'000);
  BOOST_REQUIRE(done->events.size() == 1u);
  BOOST_TEST((done->events[0].kind == event_kind::control_changed));
  BOOST_TEST(done->events[0].message == "paused the queue until 10000");
  BOOST_TEST(done->events[0].run_at_ms == 10'000);
  BOOST_TEST(f.next(200) == "");
  BOOST_TEST(!f.policy.ungated());
  BOOST_TEST(f.policy.next_wake(200).value_or(0) == 10'000);
  // Not a millisecond early.
  BOOST_TEST(t.expire(9'999).changed.empty());
  f.policy.expire_pauses(9'999);
  BOOST_TEST(f.next(9'999) == "");
  auto ended = t.expire(10'000);
  f.policy.expire_pauses(10'000);
  BOOST_REQUIRE(ended.changed.size() == 1u);
  BOOST_TEST(!ended.changed[0].in_force());  // the row goes
  BOOST_TEST(ended.events.at(0).message == "resumed the queue (its pause ended)");
  BOOST_TEST(f.next(10'000) == "a");
  BOOST_TEST(t.list(10'000).empty());
  BOOST_TEST(t.changes() == 2);
}

BOOST_AUTO_TEST_CASE(a_queue_pause_stops_aging_like_a_group_pause) {
  scheduling_options o;
  o.aging = aging_options{std::chrono::milliseconds{0}, std::chrono::milliseconds{1'000}, 10, {}};
  scheduling_policy p{o};
  control_table t{p, {}};
  for (auto g : {"a", "b"})
    p.group_id(g);
  p.type_id("t");
  BOOST_REQUIRE(t.apply(call(scheduling_control::pause_queue), 1'000).has_value());
  BOOST_REQUIRE(t.apply(call(scheduling_control::pause_group, "a"), 2'000).has_value());
  BOOST_REQUIRE(t.apply(call(scheduling_control::resume_queue), 3'000).has_value());
  // Ready since 0, at 5000: paused 1000..3000 (queue) and 2000..5000
  // (group), 4000 ms in all, counted once.
  BOOST_TEST(p.effective_now("t", "a", 0, 0, 5'000) == 1);
  BOOST_TEST(p.effective_now("t", "b", 0, 0, 5'000) == 3);
}

BOOST_AUTO_TEST_CASE(settings_change_scheduling_and_reset_goes_back_to_the_configured_ones) {
  scheduling_options o;
  o.groups["a"].weight = 2;
  scheduling_policy p{o};
  control_table t{p, {}};
  p.set_capacity(4);
  settings_change s;
  s.max_running = 1;
  auto done = t.apply(change(scheduling_control::change_group, "a", s), 5);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->events.at(0).message == "set group \"a\": max_running 1");
  BOOST_TEST(done->events.at(0).group == "a");
  pending_job e;
  e.type = p.type_id("t");
  e.group = p.group_id("a");
  for (int i = 1; i <= 3; ++i) {
    e.row = i;
    p.add(e, 0);
  }
  p.rebalance();
  BOOST_TEST(p.pick({e.type}, 4, 10).has_value());
  BOOST_TEST(!p.pick({e.type}, 4, 10).has_value());  // capped at 1
  // A second change merges into the row; the cap stays.
  settings_change w;
  w.weight = 5;
  w.rate = rate_limit{0.5, 2};
  done = t.apply(change(scheduling_control::change_group, "a", w), 6);
  BOOST_REQUIRE(done.has_value());
  auto& row = done->changed.at(0);
  BOOST_TEST(row.settings.weight.value_or(0) == 5);
  BOOST_TEST(row.settings.max_running.value_or(0) == 1);
  BOOST_TEST(row.settings.rate->burst == 2);
  BOOST_TEST(row.changed_at_ms == 6);
  // Removing the cap is a change too (0), and lets the others start.
  settings_change uncapped;
  uncapped.max_running = 0;
  BOOST_REQUIRE(t.apply(change(scheduling_control::change_group, "a", uncapped), 7));
  BOOST_TEST(t.list(7).at(0).settings.max_running.value_or(-1) == 0);
  p.rebalance();
  BOOST_TEST(p.pick({e.type}, 4, 10).has_value());
  // Reset: the row goes, and the configured weight (2) is back.
  done = t.apply(call(scheduling_control::reset_group, "a"), 8);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(!done->changed.at(0).in_force());
  BOOST_TEST(done->events.at(0).message == "reset group \"a\" to its configured settings");
  BOOST_TEST(t.list(8).empty());
  metrics_snapshot m;
  p.fill_metrics(m, 8);
  BOOST_REQUIRE(!m.groups.empty());
  BOOST_TEST(m.groups.at(0).weight == 2);
  // Resetting or resuming what has nothing set changes nothing and sends no
  // event, but saves the row as it stands (none: a delete), so that
  // repeating a call whose write failed fixes the database.
  for (auto c : {call(scheduling_control::reset_group, "a"),
                 call(scheduling_control::resume_type, "x")}) {
    auto again = t.apply(c, 9);
    BOOST_REQUIRE(again.has_value());
    BOOST_REQUIRE(again->changed.size() == 1u);
    BOOST_TEST(!again->changed[0].in_force());
    BOOST_TEST(again->events.empty());
  }
  BOOST_TEST(t.changes() == 4);
  // resume_all ends every stored pause, known here or not.
  auto all = t.apply(call(scheduling_control::resume_all), 10);
  BOOST_TEST(all->end_all_pauses);
}

BOOST_AUTO_TEST_CASE(settings_of_names_without_jobs_wait_for_their_first_job) {
  fixture f;
  control_table t{f.policy, {}};
  metrics_snapshot before;
  f.policy.fill_metrics(before, 0);
  settings_change capped;
  capped.max_running = 1;
  for (int i = 0; i < 100; ++i) {
    auto name = "g" + std::to_string(i);
    BOOST_REQUIRE(t.apply(change(scheduling_control::change_group, name, capped), 1));
    BOOST_REQUIRE(t.apply(call(scheduling_control::reset_group, name), 1));
  }
  BOOST_REQUIRE(t.apply(change(scheduling_control::change_group, "later", capped), 2));
  BOOST_TEST(!f.policy.ungated());  // a cap waits for its group
  BOOST_TEST(f.policy.group_id("later") == 1u);  // nothing else was interned
  f.add("later", 3, 3);
  BOOST_TEST(f.next(3) == "later");
  BOOST_TEST(f.next(3) == "");  // the cap came with its first job
}

BOOST_AUTO_TEST_CASE(a_type_rate_limit_set_at_run_time_spaces_its_starts) {
  fixture f;
  control_table t{f.policy, {}};
  f.add("a", 3, 0);
  settings_change s;
  s.rate = rate_limit{1.0, 1};  // one start a second
  BOOST_REQUIRE(t.apply(change(scheduling_control::change_type, "t", s), 0));
  BOOST_TEST(f.next(0) == "a");
  BOOST_TEST(f.next(999) == "");
  BOOST_TEST(f.next(1'000) == "a");
  settings_change off;
  off.rate = rate_limit{0, 1};
  BOOST_REQUIRE(t.apply(change(scheduling_control::change_type, "t", off), 1'001));
  BOOST_TEST(f.next(1'001) == "a");
}

BOOST_AUTO_TEST_CASE(resume_all_ends_every_pause_the_queue_among_them) {
  fixture f;
  control_table t{f.policy, {}};
  BOOST_REQUIRE(t.apply(call(scheduling_control::pause_queue), 1));
  BOOST_REQUIRE(t.apply(call(scheduling_control::pause_group, "a", 50), 1));
  BOOST_REQUIRE(t.apply(call(scheduling_control::pause_type, "ahead"), 1));
  settings_change s;
  s.weight = 3;
  BOOST_REQUIRE(t.apply(change(scheduling_control::change_group, "b", s), 1));
  auto done = t.apply(call(scheduling_control::resume_all), 2);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->answer == 3);
  BOOST_TEST(done->changed.size() == 3u);
  BOOST_TEST(done->events.size() == 3u);
  auto left = t.list(2);
  BOOST_REQUIRE(left.size() == 1u);  // b's weight is no pause
  BOOST_TEST(left[0].name == "b");
}

BOOST_AUTO_TEST_CASE(past_the_bound_a_new_control_is_refused_and_changes_nothing) {
  fixture f;
  control_table t{f.policy, {}};
  settings_change s;
  s.weight = 2;
  for (size_t i = 0; i < max_controls; ++i)
    BOOST_REQUIRE(t.apply(change(scheduling_control::change_group, "g" + std::to_string(i), s), 1));
  auto refused = t.apply(call(scheduling_control::pause_type, "one-more"), 2);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().code() == error::invalid_argument);
  BOOST_TEST(refused.error().field() == "name");
  BOOST_TEST(t.list(2).size() == max_controls);
  f.add("x", 1, 0, "one-more");
  BOOST_TEST(f.next(3, "one-more") == "x");  // not paused
  // A row that exists may still change.
  BOOST_TEST(t.apply(call(scheduling_control::pause_group, "g0"), 3).has_value());
}

BOOST_AUTO_TEST_CASE(a_refused_pause_ahead_leaves_no_row) {
  fixture f;
  control_table t{f.policy, {}};
  for (size_t i = 0; i < max_paused_ahead; ++i)
    BOOST_REQUIRE(t.apply(call(scheduling_control::pause_group, "p" + std::to_string(i)), 1));
  auto refused = t.apply(call(scheduling_control::pause_group, "more"), 1);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().field() == "group");
  BOOST_TEST(t.list(1).size() == max_paused_ahead);
}

BOOST_AUTO_TEST_CASE(stored_controls_are_restored_with_their_start_and_end) {
  control_info queue_pause;
  queue_pause.scope = control_scope::queue;
  queue_pause.paused = true;
  queue_pause.paused_since_ms = 100;
  queue_pause.paused_until_ms = 5'000;
  control_info capped;
  capped.scope = control_scope::group;
  capped.name = "a";
  capped.settings.max_running = 1;
  control_info over;  // its end passed while the queue was closed
  over.scope = control_scope::type;
  over.name = "t2";
  over.paused = true;
  over.paused_since_ms = 10;
  over.paused_until_ms = 50;
  fixture f;
  control_table t{f.policy, {queue_pause, capped, over}};
  f.add("a", 2, 0);
  BOOST_TEST(f.next(1'000) == "");  // the queue is paused
  BOOST_TEST(t.list(1'000).size() == 2u);  // t2's pause is over
  auto ended = t.expire(5'000);
  f.policy.expire_pauses(5'000);
  BOOST_TEST(ended.changed.size() == 2u);  // t2's and the queue's: both saved as ended
  BOOST_TEST(f.next(5'000) == "a");
  BOOST_TEST(f.next(5'000) == "");  // a's cap of 1 came back too
}
