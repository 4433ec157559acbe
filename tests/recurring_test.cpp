// Recurring jobs through the queue, on the manual clock: schedules run on
// time, late runs don't drift, downtime gives at most one catch-up, updates
// keep or move the pending instance, deletes leave no orphan, and a process
// killed at any point neither loses an instance nor runs one twice.
#define BOOST_TEST_MODULE recurring
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <set>

#include "support/child_process.hpp"
#include "support/queue_fixture.hpp"

using ergon::test::engine_probe;
using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

constexpr int64_t minute = 60'000;

recurring_job every_minute(const std::string& id, const std::string& payload = "p") {
  recurring_job r;
  r.id = id;
  r.schedule = "every 1m";
  r.job = *job_of("tick").payload(payload).max_retries(0).build();
  return r;
}

// The payloads of the jobs a worker ran, in order.
struct ran_log {
  std::mutex mtx;
  std::vector<std::string> payloads;
  void add(const std::string& p) {
    std::lock_guard<std::mutex> guard{mtx};
    payloads.push_back(p);
  }
  std::vector<std::string> all() {
    std::lock_guard<std::mutex> guard{mtx};
    return payloads;
  }
};

worker_options ticking(ran_log& ran) {
  worker_options w;
  w.runners["tick"] = [&ran](job_context& ctx) { ran.add(ctx.payload()); };
  return w;
}

struct recurring_fixture : queue_fixture {
  recurring_info recurring(const std::string& id) {
    auto r = q->recurring_info(id);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    return *r;
  }

  job_id add(const recurring_job& r) {
    auto id = q->add_recurring(r);
    BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
    return *id;
  }

  // Instances of `id` by status, counted in the file.
  int64_t instances(const std::string& id, const std::string& where = "TRUE") {
    engine_probe p{location};
    return p.number("SELECT count(*) FROM jobs WHERE recurring_id = '" + id + "' AND " + where);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(schedules, recurring_fixture)

BOOST_AUTO_TEST_CASE(an_added_job_runs_on_schedule_with_one_instance_at_a_time) {
  auto first = add(every_minute("tick-1"));
  auto r = recurring("tick-1");
  BOOST_TEST((r.next_job == first));
  BOOST_TEST((r.next_status == job_status::pending));
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + minute);
  BOOST_TEST(!r.last_job.has_value());
  auto inst = info(first);
  BOOST_TEST(inst.recurring_id.value_or("") == "tick-1");
  BOOST_TEST(inst.scheduled_at_ms.value_or(0) == t0 + minute);
  BOOST_TEST(inst.run_at_ms == t0 + minute);

  ran_log ran;
  auto w = start(ticking(ran));
  for (int n = 1; n <= 3; ++n) {
    advance(1min);
    BOOST_REQUIRE(log->wait_for(event_kind::succeeded, static_cast<size_t>(n)));
    BOOST_REQUIRE(log->wait_for(event_kind::submitted, static_cast<size_t>(n + 1)));
    r = recurring("tick-1");
    BOOST_TEST((r.last_status == job_status::succeeded));
    BOOST_TEST(r.last_scheduled_at_ms.value_or(0) == t0 + n * minute);
    BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + (n + 1) * minute);
    BOOST_TEST(instances("tick-1", "status < 2") == 1);
  }
  BOOST_TEST(ran.all().size() == 3u);
  // Every event of an instance names its recurring job.
  for (auto& e : log->snapshot())
    if (e.kind == event_kind::submitted || e.kind == event_kind::started
        || e.kind == event_kind::succeeded)
      BOOST_TEST(e.recurring_id == "tick-1");
  BOOST_TEST(instances("tick-1") == 4);
}

BOOST_AUTO_TEST_CASE(a_job_with_max_executions_stops_by_itself_and_an_update_resumes_it) {
  auto r = every_minute("thrice");
  r.max_executions = 3;
  add(r);
  BOOST_TEST(recurring("thrice").max_executions.value_or(0) == 3);
  // A cancelled instance never ran: it does not count.
  auto first = *recurring("thrice").next_job;
  BOOST_TEST(q->cancel(first).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  BOOST_TEST(recurring("thrice").executions == 0);
  // Its slot was t0 + 1m: the next is the slot after.
  BOOST_TEST(recurring("thrice").next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);
  advance(1min);
  ran_log ran;
  {
    auto w = start(ticking(ran));
    for (int n = 1; n <= 3; ++n) {
      advance(1min);
      BOOST_REQUIRE(log->wait_for(event_kind::succeeded, static_cast<size_t>(n)));
    }
    BOOST_TEST(w.stop(hang_guard).ok());
  }
  auto done = recurring("thrice");
  BOOST_TEST(done.executions == 3);
  BOOST_TEST(!done.next_job.has_value());
  BOOST_TEST((done.last_status == job_status::succeeded));
  BOOST_TEST(instances("thrice", "status < 2") == 0);
  // Time passes and a reopen reconciles: still no instance.
  advance(10min);
  reopen();
  BOOST_TEST(!recurring("thrice").next_job.has_value());
  BOOST_TEST(ran.all().size() == 3u);
  // An upsert that keeps the limit (as at every start of a program) is
  // kept and makes no instance; a higher limit starts it again.
  auto same = r;
  same.job.payload = "new";
  auto kept = q->upsert_recurring(same);
  BOOST_REQUIRE_MESSAGE(kept.has_value(), kept.error().to_string());
  BOOST_TEST((*kept == job_id{}));
  BOOST_TEST(recurring("thrice").job.payload == "new");
  BOOST_TEST(!recurring("thrice").next_job.has_value());
  auto more = r;
  more.max_executions = 4;
  auto next = q->update_recurring(more);
  BOOST_REQUIRE_MESSAGE(next.has_value(), next.error().to_string());
  auto again = recurring("thrice");
  BOOST_TEST((again.next_job == *next));
  BOOST_TEST(again.max_executions.value_or(0) == 4);
  // Lowering the limit to the count cancels the pending instance.
  auto lower = r;
  auto none = q->update_recurring(lower);
  BOOST_REQUIRE_MESSAGE(none.has_value(), none.error().to_string());
  BOOST_TEST((*none == job_id{}));
  BOOST_TEST((info(*next).status == job_status::cancelled));
  BOOST_TEST(!recurring("thrice").next_job.has_value());
  // Bad limits are named.
  auto zero = every_minute("zero");
  zero.max_executions = 0;
  BOOST_TEST(q->add_recurring(zero).error().field() == "max_executions");
}

BOOST_AUTO_TEST_CASE(a_late_run_keeps_the_schedule) {
  add(every_minute("late"));
  advance(90s);  // no worker yet: the instance of t0+1m runs 30 s late
  ran_log ran;
  auto w = start(ticking(ran));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  auto r = recurring("late");
  BOOST_TEST(r.last_scheduled_at_ms.value_or(0) == t0 + minute);
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);  // not t0 + 2.5m
  BOOST_TEST(r.next_run_at_ms.value_or(0) == t0 + 2 * minute);
}

BOOST_AUTO_TEST_CASE(an_instance_that_overruns_slots_gets_one_catch_up) {
  gate g;
  std::atomic<int> runs{0};
  worker_options w;
  w.runners["tick"] = [&](job_context&) {
    if (runs++ == 0)
      g.pass();
  };
  add(every_minute("slow"));
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  advance(150s);  // slots t0+2m and t0+3m fall due while it runs
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 2));  // one catch-up, at once
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 3));
  auto r = recurring("slow");
  BOOST_TEST(r.last_scheduled_at_ms.value_or(0) == t0 + 3 * minute);  // the latest missed
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 4 * minute);
  BOOST_TEST(runs.load() == 2);
}

BOOST_AUTO_TEST_CASE(downtime_gives_at_most_one_catch_up_run) {
  add(every_minute("once"));
  q->close();
  advance(10min);
  reopen();
  ran_log ran;
  auto w = start(ticking(ran));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 1));
  auto r = recurring("once");
  BOOST_TEST(r.last_scheduled_at_ms.value_or(0) == t0 + minute);  // the stale one ran, once
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 11 * minute);
  BOOST_TEST(ran.all().size() == 1u);
  BOOST_TEST(instances("once") == 2);
}

BOOST_AUTO_TEST_CASE(skip_mode_runs_nothing_for_the_slots_missed_while_down) {
  auto r = every_minute("skip");
  r.catch_up = catch_up::skip;
  auto first = add(r);
  q->close();
  advance(10min);
  reopen();
  auto moved = recurring("skip");
  BOOST_TEST((moved.next_job == first));  // the same instance, moved
  BOOST_TEST(moved.next_scheduled_at_ms.value_or(0) == t0 + 11 * minute);
  BOOST_TEST(info(first).run_at_ms == t0 + 11 * minute);
  ran_log ran;
  auto w = start(ticking(ran));
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  BOOST_TEST(recurring("skip").last_scheduled_at_ms.value_or(0) == t0 + 11 * minute);
}

BOOST_AUTO_TEST_CASE(skip_mode_moves_an_instance_that_recovery_put_back_to_pending) {
  auto r = every_minute("recovered");
  r.catch_up = catch_up::skip;
  r.job.max_retries = 3;
  auto first = add(r);
  {
    gate g;
    worker_options w;
    w.runners["tick"] = [&](job_context&) { g.pass(); };
    auto wk = start(std::move(w));
    advance(1min);
    BOOST_REQUIRE(g.wait_for_waiting(1));
    // Closing without waiting leaves the attempt running, as a crash does.
    BOOST_TEST(q->close(std::chrono::milliseconds(1)).code() == error::timeout);
  }
  advance(4min);  // t0+5m: the slots of t0+2m to t0+5m were missed
  options opts;
  opts.recovery = recovery_mode::retry_immediately;  // the retry is due now...
  reopen(opts);
  BOOST_TEST(info(first).run_at_ms == t0 + 6 * minute);  // ...but skip mode moved it
  // A plain job due now is claimed together with anything the dispatcher
  // wrongly thinks is due; once it ran, that claim has committed.
  auto plain = submit(*job_of("tick").payload("plain").build());
  ran_log ran;
  worker_options w = ticking(ran);
  w.max_concurrency = 4;
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, plain));
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  BOOST_TEST(recurring("recovered").last_scheduled_at_ms.value_or(0) == t0 + 6 * minute);
}

BOOST_AUTO_TEST_CASE(a_restart_runs_nothing_twice) {
  ran_log ran;
  {
    auto w = start(ticking(ran));
    add(every_minute("restart"));
    advance(1min);
    BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  }
  q->close();
  reopen();
  auto w = start(ticking(ran));
  BOOST_TEST(recurring("restart").next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);
  BOOST_TEST(instances("restart") == 2);
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  BOOST_TEST(ran.all().size() == 2u);
  BOOST_TEST(instances("restart") == 3);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(changes, recurring_fixture)

BOOST_AUTO_TEST_CASE(an_update_that_keeps_the_schedule_keeps_the_time) {
  auto first = add(every_minute("keep", "old"));
  advance(20s);
  auto next = q->update_recurring(every_minute("keep", "new"));
  BOOST_REQUIRE_MESSAGE(next.has_value(), next.error().to_string());
  BOOST_TEST(*next == first);
  auto inst = info(first);
  BOOST_TEST(inst.run_at_ms == t0 + minute);
  BOOST_TEST(inst.payload == "new");  // the template applies to the pending instance
  BOOST_TEST(recurring("keep").job.payload == "new");
}

BOOST_AUTO_TEST_CASE(an_update_that_changes_the_schedule_moves_the_pending_instance) {
  auto first = add(every_minute("move"));
  advance(20s);
  auto r = every_minute("move");
  r.schedule = "every 5m";
  BOOST_REQUIRE(q->update_recurring(r).has_value());
  auto inst = info(first);
  BOOST_TEST(inst.run_at_ms == t0 + 20'000 + 5 * minute);  // counted from the change
  BOOST_TEST(inst.scheduled_at_ms.value_or(0) == t0 + 20'000 + 5 * minute);
  r.schedule = "*/10 * * * *";  // cron: t0 is 22:13:20 UTC
  BOOST_REQUIRE(q->update_recurring(r).has_value());
  BOOST_TEST(info(first).run_at_ms == t0 + (20 - 13) * minute - 20'000);
}

BOOST_AUTO_TEST_CASE(a_ttl_added_by_an_update_expires_the_pending_instance) {
  auto first = add(every_minute("ttl"));
  auto r = every_minute("ttl");
  r.job.ttl_ms = 1'000;
  BOOST_TEST(q->update_recurring(r).value() == first);  // the same row, a new deadline
  BOOST_TEST(info(first).deadline_ms.value_or(0) == t0 + minute + 1'000);
  advance(1min + 2s);  // no worker: the deadline passes
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, first));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  BOOST_TEST(recurring("ttl").next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);
}

BOOST_AUTO_TEST_CASE(a_new_type_gives_the_pending_instance_a_new_row_at_the_same_time) {
  auto first = add(every_minute("retype"));
  auto r = every_minute("retype");
  r.job.type = "tock";
  r.job.ttl_ms = 1'000;
  auto next = q->update_recurring(r);
  BOOST_REQUIRE_MESSAGE(next.has_value(), next.error().to_string());
  BOOST_TEST(*next != first);  // a claim made for the old type misses the old row
  BOOST_TEST(info(first).status == job_status::cancelled);
  auto now = info(*next);
  BOOST_TEST(now.type == "tock");
  BOOST_TEST(now.run_at_ms == t0 + minute);
  BOOST_TEST(now.deadline_ms.value_or(0) == t0 + minute + 1'000);
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->by_type["tick"][job_status::pending] == 0);
  BOOST_TEST(m->by_type["tick"][job_status::cancelled] == 1);
  BOOST_TEST(m->by_type["tock"][job_status::pending] == 1);
  BOOST_TEST(instances("retype", "status < 2") == 1);
  // The new deadline is watched: with no worker the instance expires, and
  // the chain goes on.
  advance(1min + 2s);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, *next));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 3));  // add, update, after the expiry
  BOOST_TEST(recurring("retype").next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);
}

BOOST_AUTO_TEST_CASE(a_template_update_while_an_instance_runs_applies_to_the_next) {
  gate g;
  std::vector<std::string> payloads;
  std::mutex mtx;
  worker_options w;
  w.runners["tick"] = [&](job_context& ctx) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      payloads.push_back(ctx.payload());
    }
    g.pass();
  };
  auto first = add(every_minute("tmpl", "v1"));
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto next = q->update_recurring(every_minute("tmpl", "v2"));
  BOOST_REQUIRE(next.has_value());
  BOOST_TEST(*next == first);  // the running one is the unfinished instance
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 2));
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_TEST(payloads == (std::vector<std::string>{"v1", "v2"}));
}

BOOST_AUTO_TEST_CASE(deleting_while_an_instance_runs_leaves_no_orphan) {
  gate g;
  worker_options w;
  w.runners["tick"] = [&](job_context&) { g.pass(); };
  auto first = add(every_minute("gone"));
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_REQUIRE(q->delete_recurring("gone").ok());
  BOOST_TEST(q->recurring_info("gone").error().code() == error::not_found);
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  q->close();  // every write committed
  BOOST_TEST(instances("gone") == 1);
  BOOST_TEST(instances("gone", "status = 2") == 1);
  reopen();  // open's reconcile makes nothing for it either
  BOOST_TEST(instances("gone") == 1);
  BOOST_TEST(info(first).status == job_status::succeeded);
}

BOOST_AUTO_TEST_CASE(re_adding_a_deleted_id_adopts_its_running_instance) {
  gate g;
  worker_options w;
  w.runners["tick"] = [&](job_context&) { g.pass(); };
  auto first = add(every_minute("again"));
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_REQUIRE(q->delete_recurring("again").ok());
  auto readded = every_minute("again");
  readded.schedule = "every 5m";
  BOOST_TEST(add(readded) == first);  // still one unfinished instance: the running one
  g.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  auto r = recurring("again");
  BOOST_TEST((r.last_job == first));
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + minute + 5 * minute);  // the new schedule
  BOOST_TEST(instances("again", "status < 2") == 1);
}

BOOST_AUTO_TEST_CASE(deleting_cancels_the_pending_instance) {
  auto first = add(every_minute("drop"));
  BOOST_REQUIRE(q->delete_recurring("drop").ok());
  BOOST_TEST(info(first).status == job_status::cancelled);
  BOOST_TEST(q->counts()[job_status::pending] == 0);
  BOOST_TEST(q->delete_recurring("drop").code() == error::not_found);
  BOOST_TEST(instances("drop", "status < 2") == 0);
}

BOOST_AUTO_TEST_CASE(cancelling_one_instance_keeps_the_chain) {
  auto first = add(every_minute("cancel"));
  BOOST_REQUIRE(q->cancel_pending(first).ok());
  auto r = recurring("cancel");
  BOOST_TEST((r.last_job == first));
  BOOST_TEST((r.last_status == job_status::cancelled));
  BOOST_REQUIRE(r.next_job.has_value());
  BOOST_TEST(*r.next_job != first);
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);
  BOOST_TEST(log->wait_for(event_kind::cancelled, 1, first));
}

BOOST_AUTO_TEST_CASE(a_final_failure_and_an_expiry_keep_the_chain) {
  worker_options w;
  w.runners["tick"] = [](job_context&) { throw std::runtime_error("boom"); };
  auto r = every_minute("fails");
  r.job.ttl_ms = 1'000;
  add(r);
  advance(1min);  // no worker: the instance's deadline passes
  advance(2s);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 1));
  auto info1 = recurring("fails");
  BOOST_TEST((info1.last_status == job_status::expired));
  BOOST_TEST(info1.next_scheduled_at_ms.value_or(0) == t0 + 2 * minute);
  auto wk = start(std::move(w));
  advance(58s);
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  BOOST_TEST((recurring("fails").last_status == job_status::failed));
  BOOST_TEST(recurring("fails").next_scheduled_at_ms.value_or(0) == t0 + 3 * minute);
}

BOOST_AUTO_TEST_CASE(upsert_adds_then_updates) {
  auto first = q->upsert_recurring(every_minute("up", "a"));
  BOOST_REQUIRE(first.has_value());
  auto again = q->upsert_recurring(every_minute("up", "b"));
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(*again == *first);
  BOOST_TEST(info(*first).payload == "b");
  BOOST_TEST(instances("up") == 1);
}

BOOST_AUTO_TEST_SUITE_END()

// A recurring job's own pause (issue 32, item 2).
BOOST_FIXTURE_TEST_SUITE(pauses, recurring_fixture)

BOOST_AUTO_TEST_CASE(a_pause_until_resumed_holds_the_chain_across_a_reopen_and_a_resume_skips_what_it_covered) {
  auto first = add(every_minute("held"));
  BOOST_REQUIRE(q->pause_recurring("held").ok());
  auto paused = recurring("held");
  BOOST_TEST(paused.paused_since_ms.value_or(-1) == t0);
  BOOST_TEST(!paused.paused_until_ms.has_value());
  BOOST_TEST(!paused.next_job.has_value());
  auto gone = info(first);
  BOOST_TEST((gone.status == job_status::cancelled));
  BOOST_TEST(gone.attempts.empty());
  BOOST_TEST(instances("held", "status < 2") == 0);
  // One control_changed event names it, and metrics count it.
  BOOST_REQUIRE(log->wait_for(event_kind::control_changed, 1));
  auto e = log->of(event_kind::control_changed).at(0);
  BOOST_TEST(e.recurring_id == "held");
  BOOST_TEST(e.message == "paused recurring job \"held\"");
  BOOST_TEST(q->metrics()->control_changes == 1);
  // Pausing again keeps its start.
  advance(1min);
  BOOST_REQUIRE(q->pause_recurring("held").ok());
  BOOST_TEST(recurring("held").paused_since_ms.value_or(-1) == t0);
  ran_log ran;
  {
    auto w = start(ticking(ran));
    advance(4min);
    BOOST_TEST(w.stop(hang_guard).ok());
  }
  reopen();  // the pause is stored; open's reconcile makes no instance
  BOOST_TEST(recurring("held").paused_since_ms.value_or(-1) == t0);
  BOOST_TEST(instances("held", "status < 2") == 0);
  // An update keeps the pause, and makes no instance.
  auto changed = q->update_recurring(every_minute("held", "new"));
  BOOST_REQUIRE_MESSAGE(changed.has_value(), changed.error().to_string());
  BOOST_TEST((*changed == job_id{}));
  BOOST_TEST(recurring("held").paused_since_ms.has_value());
  // The resume makes the first slot after now: the five missed slots are
  // skipped, catch_up::once notwithstanding.
  BOOST_REQUIRE(q->resume_recurring("held").ok());
  auto resumed = recurring("held");
  BOOST_TEST(!resumed.paused_since_ms.has_value());
  BOOST_REQUIRE(resumed.next_job.has_value());
  BOOST_TEST(resumed.next_scheduled_at_ms.value_or(0) == t0 + 6 * minute);
  BOOST_TEST(info(*resumed.next_job).payload == "new");
  BOOST_REQUIRE(log->wait_for(event_kind::control_changed, 1));
  BOOST_TEST(log->of(event_kind::control_changed).back().message
             == "resumed recurring job \"held\"");
  BOOST_TEST(q->metrics()->control_changes == 1);  // since the reopen
  // Resuming what is not paused changes nothing, and is no error.
  BOOST_REQUIRE(q->resume_recurring("held").ok());
  BOOST_TEST(q->metrics()->control_changes == 1);
  BOOST_TEST((recurring("held").next_job == resumed.next_job));
  auto w = start(ticking(ran));
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1));
  BOOST_TEST(ran.all() == (std::vector<std::string>{"new"}));
}

BOOST_AUTO_TEST_CASE(a_timed_pause_moves_the_instance_past_its_end_and_keeps_it_across_a_reopen) {
  auto first = add(every_minute("nap"));
  BOOST_REQUIRE(q->pause_recurring("nap", 150s).ok());  // until t0 + 2.5m
  auto r = recurring("nap");
  BOOST_TEST(r.paused_until_ms.value_or(0) == t0 + 150'000);
  BOOST_TEST((r.next_job == first));  // the same instance, moved
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 3 * minute);
  BOOST_TEST(info(first).run_at_ms == t0 + 3 * minute);
  BOOST_REQUIRE(log->wait_for(event_kind::control_changed, 1));
  BOOST_TEST(log->of(event_kind::control_changed).at(0).run_at_ms == t0 + 150'000);
  reopen();
  BOOST_TEST(recurring("nap").paused_until_ms.value_or(0) == t0 + 150'000);
  BOOST_TEST(info(first).run_at_ms == t0 + 3 * minute);
  ran_log ran;
  auto w = start(ticking(ran));
  advance(3min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 1));
  auto after = recurring("nap");
  BOOST_TEST(!after.paused_since_ms.has_value());  // its end passed
  BOOST_TEST(after.next_scheduled_at_ms.value_or(0) == t0 + 4 * minute);
  BOOST_TEST(ran.all().size() == 1u);
  // A resume before a timed pause ends brings the next slot back.
  BOOST_REQUIRE(q->pause_recurring("nap", 1h).ok());
  auto next = *recurring("nap").next_job;
  BOOST_TEST(info(next).run_at_ms == t0 + 63 * minute);
  BOOST_REQUIRE(q->resume_recurring("nap").ok());
  BOOST_TEST(info(next).run_at_ms == t0 + 4 * minute);
  // milliseconds::max() lasts until resumed.
  BOOST_REQUIRE(q->pause_recurring("nap", std::chrono::milliseconds::max()).ok());
  BOOST_TEST(!recurring("nap").paused_until_ms.has_value());
  BOOST_TEST((info(next).status == job_status::cancelled));
}

BOOST_AUTO_TEST_CASE(a_running_instance_finishes_and_the_next_one_follows_the_pause) {
  gate g;
  worker_options w;
  w.runners["tick"] = [&](job_context&) { g.pass(); };
  auto first = add(every_minute("busy"));
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_REQUIRE(q->pause_recurring("busy", 10min).ok());  // until t0 + 11m
  BOOST_TEST((info(first).status == job_status::running));
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  BOOST_TEST(recurring("busy").next_scheduled_at_ms.value_or(0) == t0 + 11 * minute);
  // Until resumed: the running one ends and none follows.
  advance(10min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto second = *recurring("busy").next_job;
  BOOST_REQUIRE(q->pause_recurring("busy").ok());
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, second));
  q->close();  // every write committed
  BOOST_TEST(instances("busy", "status < 2") == 0);
  reopen();
  BOOST_TEST(instances("busy", "status < 2") == 0);
  BOOST_TEST((recurring("busy").last_job == second));
}

BOOST_AUTO_TEST_CASE(an_instance_that_runs_through_a_pause_makes_no_catch_up_for_what_it_covered) {
  gate g;
  worker_options w;
  w.runners["tick"] = [&](job_context&) { g.pass(); };
  auto first = add(every_minute("long"));  // catch_up::once
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_REQUIRE(q->pause_recurring("long", 150s).ok());  // t0+1m to t0+3.5m
  advance(3min);  // t0+4m: the pause ended; slots 2m, 3m (covered) and 4m passed
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 2));
  // The latest missed slot, t0+4m, lies after the pause: its catch-up runs.
  auto r = recurring("long");
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 4 * minute);
  BOOST_TEST(r.next_run_at_ms.value_or(0) == t0 + 4 * minute);
  // Paused until resumed while the next runs; resumed at t0+6.5m, before it
  // ends at t0+6.75m. Slots 5m and 6m were covered: no catch-up for them
  // (without the rule, 6m would run at once).
  BOOST_REQUIRE(g.wait_for_waiting(1));
  BOOST_REQUIRE(q->pause_recurring("long").ok());
  advance(150s);
  BOOST_REQUIRE(q->resume_recurring("long").ok());
  BOOST_TEST(instances("long", "status < 2") == 1);  // the running one alone
  advance(15s);
  auto second = *r.next_job;
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, second));
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 3));
  r = recurring("long");
  BOOST_TEST(r.next_scheduled_at_ms.value_or(0) == t0 + 7 * minute);
  BOOST_TEST(r.next_run_at_ms.value_or(0) == t0 + 7 * minute);
  g.open();
}

BOOST_AUTO_TEST_CASE(a_pause_leaves_a_pending_retry_of_an_instance_that_ran) {
  std::atomic<int> runs{0};
  worker_options w;
  w.runners["tick"] = [&](job_context&) {
    if (runs++ == 0)
      throw std::runtime_error("once");
  };
  auto r = every_minute("retry");
  r.job.max_retries = 2;
  auto first = add(r);
  auto wk = start(std::move(w));
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, first));
  BOOST_REQUIRE(q->pause_recurring("retry").ok());
  auto retry = info(first);
  BOOST_TEST((retry.status == job_status::pending));  // its backoff kept
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  q->close();  // every write committed
  BOOST_TEST(instances("retry", "status < 2") == 0);  // and none follows it
}

BOOST_AUTO_TEST_CASE(pauses_refuse_bad_input_by_field_and_write_nothing) {
  add(every_minute("ok"));
  BOOST_TEST(q->pause_recurring("missing").code() == error::not_found);
  BOOST_TEST(q->resume_recurring("missing").code() == error::not_found);
  BOOST_TEST(q->pause_recurring("").field() == "id");
  BOOST_TEST(q->pause_recurring(std::string(257, 'x')).field() == "id");
  BOOST_TEST(q->pause_recurring("ok", 0ms).field() == "duration");
  BOOST_TEST(q->pause_recurring("ok", -5ms).field() == "duration");
  BOOST_TEST(!recurring("ok").paused_since_ms.has_value());
  BOOST_TEST(recurring("ok").next_job.has_value());
  BOOST_TEST(q->metrics()->control_changes == 0);
  queue moved = std::move(*q);
  BOOST_TEST(q->pause_recurring("ok").code() == error::closed);
  BOOST_TEST(q->resume_recurring("ok").code() == error::closed);
  BOOST_REQUIRE(moved.close().ok());
  BOOST_TEST(moved.pause_recurring("ok").code() == error::closed);
  *q = std::move(moved);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bad_input, recurring_fixture)

BOOST_AUTO_TEST_CASE(bad_specs_and_ids_get_errors_that_name_them_and_write_nothing) {
  struct bad {
    std::string spec, zone, field, says;
  };
  for (auto& b : std::vector<bad>{
         {"61 * * * *", "", "schedule", "minute: 61 is out of range 0-59"},
         {"* * * *", "", "schedule", ""},
         {"0 9 * * *", "Mars/Olympus", "time_zone", "unknown time zone"},
         {"every 0s", "", "schedule", ""},
         {"every 5m", "UTC", "time_zone", ""},
         {"", "", "schedule", ""}}) {
    auto r = every_minute("bad");
    r.schedule = b.spec;
    r.time_zone = b.zone;
    auto id = q->add_recurring(r);
    BOOST_REQUIRE(!id.has_value());
    BOOST_TEST(id.error().code() == error::invalid_argument);
    BOOST_TEST(id.error().field() == b.field, b.spec << ": " << id.error().to_string());
    BOOST_TEST(id.error().message().find(b.says) != std::string::npos, id.error().to_string());
  }
  auto r = every_minute("");
  BOOST_TEST(q->add_recurring(r).error().field() == "id");
  r = every_minute("x");
  r.job.weight = 0;
  BOOST_TEST(q->add_recurring(r).error().field() == "job.weight");
  r = every_minute("x");
  r.job.run_at_ms = t0;
  BOOST_TEST(q->add_recurring(r).error().field() == "job.run_at");
  r = every_minute("x");
  r.job.unique_key = "k";
  BOOST_TEST(q->add_recurring(r).error().field() == "job.unique_key");
  r = every_minute("x");
  r.catch_up = static_cast<catch_up>(7);
  BOOST_TEST(q->add_recurring(r).error().field() == "catch_up");
  BOOST_TEST(q->list_recurring()->empty());
  BOOST_TEST(q->counts().total() == 0);
}

BOOST_AUTO_TEST_CASE(an_existing_id_and_a_missing_one_get_distinct_errors) {
  add(every_minute("dup"));
  auto again = q->add_recurring(every_minute("dup"));
  BOOST_TEST(again.error().code() == error::already_exists);
  BOOST_TEST(again.error().field() == "id");
  BOOST_TEST(q->update_recurring(every_minute("nope")).error().code() == error::not_found);
  BOOST_TEST(q->delete_recurring("nope").code() == error::not_found);
  BOOST_TEST(q->recurring_info("nope").error().code() == error::not_found);
  BOOST_TEST(instances("dup") == 1);
}

BOOST_AUTO_TEST_CASE(a_moved_from_queue_answers_closed) {
  auto moved = std::move(*q);
  BOOST_TEST(q->add_recurring(every_minute("m")).error().code() == error::closed);
  BOOST_TEST(q->delete_recurring("m").code() == error::closed);
  BOOST_TEST(q->list_recurring().error().code() == error::closed);
  *q = std::move(moved);
}

BOOST_AUTO_TEST_CASE(list_by_prefix_treats_percent_and_underscore_as_characters) {
  for (auto id : {"a%b", "a%c", "a_b", "axb", "A%b", "b"})
    add(every_minute(id));
  auto ids = [&](const std::string& prefix) {
    std::vector<std::string> out;
    auto l = q->list_recurring(prefix);
    BOOST_REQUIRE_MESSAGE(l.has_value(), l.error().to_string());
    for (auto& r : *l)
      out.push_back(r.id);
    return out;
  };
  BOOST_TEST(ids("a%") == (std::vector<std::string>{"a%b", "a%c"}));
  BOOST_TEST(ids("a_") == (std::vector<std::string>{"a_b"}));
  BOOST_TEST(ids("a") == (std::vector<std::string>{"a%b", "a%c", "a_b", "axb"}));
  BOOST_TEST(ids("").size() == 6u);
  BOOST_TEST(ids("zz").empty());
  add(every_minute(std::string{"caf\xC3\xA9"}));  // a prefix ending inside a character
  BOOST_TEST(ids("caf\xC3") == (std::vector<std::string>{"caf\xC3\xA9"}));
  auto in = queue::inspect(location);
  BOOST_REQUIRE(in.has_value());
  BOOST_TEST(in->list_recurring("a%")->size() == 2u);
  BOOST_TEST(in->recurring_info("b")->schedule == "every 1m");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(crashes)

// The child runs instance after instance, moving its clock 1 s each time; it
// is killed at random points, also between an instance's end and the next
// one's creation (one transaction: either both or neither are on disk).
// After each kill, the file holds one unfinished instance, and the
// instances' times are consecutive slots with none twice.
BOOST_AUTO_TEST_CASE(kills_at_any_point_lose_no_instance_and_run_none_twice) {
  temp_dir dir;
  auto location = ergon::test::test_location(dir);
  auto path = location;
  std::mt19937 rng{42};
  int64_t clock_ms = t0;
  for (int kill = 0; kill < 40; ++kill) {
    child_process child{{ERGON_TEST_RECURRING_CHILD, path, std::to_string(clock_ms)}};
    int wait_runs = std::uniform_int_distribution<int>{1, 10}(rng);
    for (int i = 0; i < wait_runs; ++i)
      BOOST_REQUIRE_MESSAGE(child.read_line() == "ran", "the child stopped (kill " << kill << ")");
    child.signal(SIGKILL);
    child.wait();
    engine_probe p{path};
    BOOST_TEST(p.number("SELECT count(*) FROM jobs WHERE recurring_id = 'tick' AND status < 2")
               == 1);
    BOOST_TEST(p.number("SELECT count(*) FROM (SELECT scheduled_at FROM jobs GROUP BY "
                        "scheduled_at HAVING count(*) > 1) AS twice")
               == 0);
    auto first = p.number("SELECT min(scheduled_at) FROM jobs");
    auto last = p.number("SELECT max(scheduled_at) FROM jobs");
    auto count = p.number("SELECT count(*) FROM jobs");
    BOOST_TEST(last - first == (count - 1) * 1'000);  // consecutive slots: none lost
    BOOST_TEST(p.number("SELECT count(*) FROM jobs WHERE status = 2") == count - 1);
    // The next run starts where the unfinished instance is due.
    clock_ms = last;
  }
}

BOOST_AUTO_TEST_SUITE_END()
