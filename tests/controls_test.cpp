// Run-time controls (issue 32, item 2) through a real queue: every control
// survives a SIGKILL of the ergon-server that owns the queue and is found
// the same at reopen (recurring jobs' own pauses too); a timed pause keeps
// its end across a reopen and ends to the millisecond; bad input is refused
// by field and writes nothing.
// On both engines.
#define BOOST_TEST_MODULE controls
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "ergon/queue_actor.hpp"
#include "support/queue_fixture.hpp"
#include "support/server_process.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

void same_controls(const std::vector<control_info>& a, const std::vector<control_info>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST_CONTEXT("control " << i << ": " << a[i].name) {
      BOOST_TEST((a[i].scope == b[i].scope));
      BOOST_TEST(a[i].name == b[i].name);
      BOOST_TEST(a[i].paused == b[i].paused);
      BOOST_TEST(a[i].paused_since_ms == b[i].paused_since_ms);
      BOOST_TEST((a[i].paused_until_ms == b[i].paused_until_ms));
      BOOST_TEST((a[i].settings.weight == b[i].settings.weight));
      BOOST_TEST((a[i].settings.min_slots == b[i].settings.min_slots));
      BOOST_TEST((a[i].settings.max_running == b[i].settings.max_running));
      BOOST_TEST(a[i].settings.rate.has_value() == b[i].settings.rate.has_value());
      if (a[i].settings.rate && b[i].settings.rate) {
        BOOST_TEST(a[i].settings.rate->per_second == b[i].settings.rate->per_second);
        BOOST_TEST(a[i].settings.rate->burst == b[i].settings.rate->burst);
      }
      BOOST_TEST(a[i].changed_at_ms == b[i].changed_at_ms);
    }
  }
}

worker_options runs_t(int32_t slots) {
  worker_options w;
  w.runners["t"] = [](job_context&) {};
  w.max_concurrency = slots;
  return w;
}

settings_change capped_and_limited() {
  settings_change s;
  s.weight = 3;
  s.min_slots = 1;
  s.max_running = 2;
  s.rate = rate_limit{5.5, 10};
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_control_survives_a_sigkill_of_its_owner) {
  temp_dir dir;
  auto location = test_location(dir);
  server_process server{location};
  std::vector<control_info> before;
  std::vector<recurring_info> recurring_before;
  {
    client c;
    auto q = connect(c.sys, "127.0.0.1", server.port);
    BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
    auto ok = [&](result<ok_atom> r) { BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string()); };
    ok(c.ask<ok_atom>(*q, pause_group_atom::value, std::string{"tenant-a"}));
    ok(c.ask<ok_atom>(*q, pause_type_atom::value, std::string{"report"},
                      std::chrono::milliseconds{3'600'000}));
    ok(c.ask<ok_atom>(*q, pause_queue_atom::value, std::chrono::milliseconds{1'800'000}));
    ok(c.ask<ok_atom>(*q, set_group_atom::value, std::string{"tenant-b"}, capped_and_limited()));
    settings_change email;
    email.max_running = 4;
    email.rate = rate_limit{2, 1};
    ok(c.ask<ok_atom>(*q, set_type_atom::value, std::string{"email"}, email));
    ok(c.ask<ok_atom>(*q, group_weight_atom::value, std::string{"tenant-c"}, int32_t{7}));
    settings_change uncapped;
    uncapped.max_running = 0;  // "no cap" is a setting of its own
    ok(c.ask<ok_atom>(*q, set_type_atom::value, std::string{"thumb"}, uncapped));
    settings_change mailers;
    mailers.max_running = 6;
    ok(c.ask<ok_atom>(*q, set_worker_atom::value, std::string{"mailer"}, mailers));
    settings_change gone;
    gone.weight = 9;
    ok(c.ask<ok_atom>(*q, set_group_atom::value, std::string{"tenant-d"}, gone));
    ok(c.ask<ok_atom>(*q, reset_group_atom::value, std::string{"tenant-d"}));
    // Two recurring jobs, one paused until resumed, one for two hours.
    for (auto id : {"nightly", "hourly"}) {
      recurring_job r;
      r.id = id;
      r.schedule = "every 1h";
      r.job = *job_of("t").build();
      auto added = c.ask<job_id>(*q, add_recurring_atom::value, r);
      BOOST_REQUIRE_MESSAGE(added.has_value(), added.error().to_string());
    }
    ok(c.ask<ok_atom>(*q, pause_recurring_atom::value, std::string{"nightly"}));
    ok(c.ask<ok_atom>(*q, pause_recurring_atom::value, std::string{"hourly"},
                      std::chrono::milliseconds{7'200'000}));
    auto missing = c.ask<ok_atom>(*q, resume_recurring_atom::value, std::string{"none"});
    BOOST_REQUIRE(!missing.has_value());
    BOOST_TEST(missing.error().code() == error::not_found);
    auto recurring = c.ask<std::vector<recurring_info>>(*q, list_recurring_atom::value,
                                                        std::string{});
    BOOST_REQUIRE_MESSAGE(recurring.has_value(), recurring.error().to_string());
    recurring_before = *recurring;
    // Refused over the wire with its field, as in process.
    settings_change bad;
    bad.weight = 2;
    auto refused = c.ask<ok_atom>(*q, set_type_atom::value, std::string{"email"}, bad);
    BOOST_REQUIRE(!refused.has_value());
    BOOST_TEST(refused.error().field() == "weight");
    auto listed = c.ask<std::vector<control_info>>(*q, controls_atom::value);
    BOOST_REQUIRE_MESSAGE(listed.has_value(), listed.error().to_string());
    before = *listed;
    auto m = c.ask<metrics_snapshot>(*q, metrics_atom::value);
    BOOST_REQUIRE(m.has_value());
    BOOST_TEST(m->control_changes == 12);
  }
  BOOST_REQUIRE_EQUAL(before.size(), 8u);  // the queue, 3 groups, 3 types, a worker
  BOOST_TEST((before[0].scope == control_scope::queue));
  BOOST_TEST(before[0].paused_until_ms.has_value());
  BOOST_TEST(before[1].name == "tenant-a");
  BOOST_TEST(!before[1].paused_until_ms.has_value());
  BOOST_TEST(before[2].settings.rate->per_second == 5.5);
  BOOST_TEST(before[6].settings.max_running.value_or(-1) == 0);
  BOOST_TEST((before[7].scope == control_scope::worker));
  BOOST_TEST(before[7].settings.max_running.value_or(-1) == 6);
  server.stop(SIGKILL);
  // Reopened as the next owner (a restart, or a standby's takeover) opens it.
  auto q = queue::open(location);
  BOOST_REQUIRE_MESSAGE(q.has_value(), q.error().to_string());
  auto after = q->controls();
  BOOST_REQUIRE_MESSAGE(after.has_value(), after.error().to_string());
  same_controls(before, *after);
  // The dispatcher runs by them, not only lists them.
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_REQUIRE_EQUAL(m->pauses.size(), 2u);
  BOOST_TEST(m->pauses[0].name == "tenant-a");
  BOOST_TEST(m->pauses[1].name == "report");
  BOOST_TEST(m->control_changes == 0);  // since this open
  // The recurring jobs' pauses too: one has no instance, the other's waits
  // for the pause's end.
  auto recurring = q->list_recurring();
  BOOST_REQUIRE(recurring.has_value());
  BOOST_REQUIRE_EQUAL(recurring->size(), 2u);
  BOOST_REQUIRE_EQUAL(recurring_before.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    auto& was = recurring_before[i];
    auto& is = (*recurring)[i];
    BOOST_TEST_CONTEXT(was.id) {
      BOOST_TEST(is.id == was.id);
      BOOST_TEST(is.paused_since_ms.has_value());
      BOOST_TEST((is.paused_since_ms == was.paused_since_ms));
      BOOST_TEST((is.paused_until_ms == was.paused_until_ms));
      BOOST_TEST((is.next_job == was.next_job));
      BOOST_TEST((is.next_run_at_ms == was.next_run_at_ms));
    }
  }
  BOOST_TEST((*recurring)[0].id == "hourly");
  BOOST_TEST((*recurring)[0].next_run_at_ms.value_or(0) >= *(*recurring)[0].paused_until_ms);
  BOOST_TEST(!(*recurring)[1].next_job.has_value());
  BOOST_REQUIRE(q->close().ok());
  // A read-only view of the file finds the same, with no owner at all.
  auto view = queue::inspect(location);
  BOOST_REQUIRE_MESSAGE(view.has_value(), view.error().to_string());
  auto read = view->controls();
  BOOST_REQUIRE(read.has_value());
  same_controls(before, *read);
}

BOOST_AUTO_TEST_CASE(a_timed_pause_keeps_its_end_across_a_reopen_and_ends_to_the_millisecond) {
  queue_fixture f;
  BOOST_REQUIRE(f.q->pause_group("a", 10s).ok());
  BOOST_REQUIRE(f.q->pause_queue(20s).ok());
  BOOST_REQUIRE(f.log->wait_for(event_kind::control_changed, 2));
  auto first = f.log->of(event_kind::control_changed).at(0);
  BOOST_TEST(first.group == "a");
  BOOST_TEST(first.run_at_ms == t0 + 10'000);
  BOOST_TEST(first.message == "paused group \"a\" until " + std::to_string(t0 + 10'000));
  f.advance(5s);
  f.reopen();
  auto listed = f.q->controls();
  BOOST_REQUIRE(listed.has_value());
  BOOST_REQUIRE_EQUAL(listed->size(), 2u);
  BOOST_TEST((*listed)[1].paused_since_ms == t0);
  BOOST_TEST((*listed)[1].paused_until_ms.value_or(0) == t0 + 10'000);
  BOOST_REQUIRE(f.q->resume_queue().ok());
  auto id = f.submit(*job_of("t").group("a").build());
  auto other = f.submit(*job_of("t").group("b").build());
  auto w = f.start(runs_t(2));
  BOOST_REQUIRE(f.log->wait_for(event_kind::succeeded, 1, other));
  f.advance(4'999ms);  // t0 + 9,999
  BOOST_REQUIRE(f.q->metrics().has_value());  // the tick is applied
  BOOST_TEST((f.info(id).status == job_status::pending));
  f.advance(1ms);
  BOOST_REQUIRE(f.log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(f.info(id).attempts.at(0).started_at_ms == t0 + 10'000);
  auto ended = f.log->of(event_kind::control_changed);
  BOOST_TEST(ended.back().message == "resumed group \"a\" (its pause ended)");
  BOOST_TEST(f.q->controls()->empty());
  BOOST_TEST(f.q->metrics()->control_changes == 2);  // the resume and the end
  f.reopen();
  BOOST_TEST(f.q->controls()->empty());  // its end was saved
}

BOOST_AUTO_TEST_CASE(a_paused_queue_starts_nothing_and_resume_all_ends_its_pause) {
  queue_fixture f;
  BOOST_REQUIRE(f.q->pause_queue().ok());
  auto id = f.submit(*job_of("t").build());
  auto w = f.start(runs_t(1));
  BOOST_REQUIRE(f.q->metrics().has_value());
  f.advance(1h);
  BOOST_REQUIRE(f.q->metrics().has_value());
  BOOST_TEST((f.info(id).status == job_status::pending));
  auto n = f.q->resume_all();
  BOOST_REQUIRE(n.has_value());
  BOOST_TEST(*n == 1);
  BOOST_REQUIRE(f.log->wait_for(event_kind::succeeded, 1, id));
}

BOOST_AUTO_TEST_CASE(settings_are_checked_by_field_and_a_refusal_writes_nothing) {
  queue_fixture f;
  auto refused = [&](status st, const std::string& field) {
    BOOST_TEST(st.code() == error::invalid_argument, st.to_string());
    BOOST_TEST(st.field() == field, st.to_string());
  };
  settings_change none;
  refused(f.q->set_group("g", none), "settings");
  settings_change s;
  s.weight = 0;
  refused(f.q->set_group("g", s), "weight");
  s = {};
  s.min_slots = 1;
  refused(f.q->set_type("t", s), "min_slots");
  s = {};
  s.min_slots = -1;
  refused(f.q->set_group("g", s), "min_slots");
  s = {};
  s.max_running = -1;
  refused(f.q->set_type("t", s), "max_running");
  s.max_running = 1'000'001;
  refused(f.q->set_type("t", s), "max_running");
  s = {};
  s.rate = rate_limit{-1, 1};
  refused(f.q->set_group("g", s), "rate.per_second");
  s.rate = rate_limit{std::numeric_limits<double>::quiet_NaN(), 1};
  refused(f.q->set_group("g", s), "rate.per_second");
  s.rate = rate_limit{std::numeric_limits<double>::infinity(), 1};
  refused(f.q->set_group("g", s), "rate.per_second");
  s.rate = rate_limit{1, 0};
  refused(f.q->set_group("g", s), "rate.burst");
  s = {};
  s.weight = 2;
  refused(f.q->set_group(std::string(257, 'g'), s), "group");
  refused(f.q->set_type("", s), "type");
  refused(f.q->pause_queue(0ms), "duration");
  refused(f.q->pause_queue(-5ms), "duration");
  BOOST_TEST(f.q->controls()->empty());
  BOOST_TEST(f.log->of(event_kind::control_changed).empty());
  BOOST_TEST(f.q->metrics()->control_changes == 0);
  // Resuming or resetting what is not set is no error, and writes nothing.
  BOOST_TEST(f.q->resume_queue().ok());
  BOOST_TEST(f.q->reset_type("t").ok());
  BOOST_TEST(f.q->controls()->empty());
  // A moved-from handle.
  queue moved = std::move(*f.q);
  BOOST_TEST(f.q->set_group("g", s).code() == error::closed);
  BOOST_TEST(f.q->controls().error().code() == error::closed);
  BOOST_TEST(moved.set_group("g", s).ok());
  BOOST_TEST(moved.controls()->size() == 1u);
}

// A row no run-time control could have written (edited by hand, or a bad
// restore) is refused at open by name, rather than reaching the dispatcher.
BOOST_AUTO_TEST_CASE(a_controls_row_out_of_range_is_refused_at_open_by_name) {
  queue_fixture f;
  settings_change s;
  s.weight = 2;
  BOOST_REQUIRE(f.q->set_group("tenant", s).ok());
  f.q.reset();
  f.log.reset();
  for (auto [sql, says] :
       {std::pair{"UPDATE controls SET weight = 0", "weight 0"},
        std::pair{"UPDATE controls SET weight = NULL, rate_per_second = 5, rate_burst = NULL",
                  "a rate without a burst"},
        std::pair{"UPDATE controls SET rate_burst = 0", "burst 0"}}) {
    {
      auto d = open_db(f.location);
      BOOST_REQUIRE(d->exec(sql).ok());
    }
    auto q = queue::open(f.location);
    BOOST_REQUIRE(!q.has_value());
    BOOST_TEST(q.error().code() == error::corrupt);
    BOOST_TEST(q.error().message().find("group 'tenant'") != std::string::npos,
               q.error().message());
    BOOST_TEST(q.error().message().find(says) != std::string::npos, q.error().message());
  }
  // A worker's row: only a max_running of 1 or more.
  {
    auto d = open_db(f.location);
    BOOST_REQUIRE(d->exec("DELETE FROM controls").ok());
    BOOST_REQUIRE(d->exec("INSERT INTO controls (scope, name, max_running, changed_at)"
                          " VALUES (3, 'mailer', 0, 1)")
                    .ok());
  }
  auto q = queue::open(f.location);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().code() == error::corrupt);
  BOOST_TEST(q.error().message().find("worker 'mailer'") != std::string::npos, q.error().message());
  {
    auto d = open_db(f.location);
    BOOST_REQUIRE(d->exec("UPDATE controls SET scope = 4").ok());
  }
  q = queue::open(f.location);
  BOOST_REQUIRE(!q.has_value());
  BOOST_TEST(q.error().message().find("unknown scope 4") != std::string::npos, q.error().message());
}
