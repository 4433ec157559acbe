// Preemption through real workers on the manual clock: a HIGH job at full
// capacity makes exactly one LOW job yield; the yielded job resumes with its
// checkpoint and the same try, once its preemptor ended and ahead of other
// jobs of its priority; a job that ignores the request keeps its slot;
// min_slots hold; yield() without a request is refused.
#define BOOST_TEST_MODULE preemption
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

options preempting(int32_t threshold = 10) {
  options o;
  o.scheduling.preemption = preemption_options{threshold};
  return o;
}

// Counts job code entering, for the test to wait on: a claim alone is only
// `started`, and a request reaching it before its code runs gives it back
// unstarted.
struct latch {
  std::mutex mtx;
  std::condition_variable cv;
  int hits = 0;
  void hit() {
    std::lock_guard<std::mutex> guard{mtx};
    ++hits;
    cv.notify_all();
  }
  bool wait(int n) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, hang_guard, [&] { return hits >= n; });
  }
};

// LOW jobs: what they saw (the payload and try of each start, the most
// running at once), and when they may finish.
struct low_jobs {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::pair<std::string, int32_t>> starts;  // payload, try
  int running = 0;
  int most_running = 0;
  std::atomic<bool> release{false};
  std::vector<std::string> problems;

  void started(job_context& ctx) {
    std::lock_guard<std::mutex> guard{mtx};
    starts.emplace_back(ctx.payload(), ctx.try_number());
    most_running = std::max(most_running, ++running);
    cv.notify_all();
  }

  // Waits until `n` LOW jobs run code (a claim alone is only `started`: a
  // request reaching it before its code runs gives it back unstarted).
  bool wait_running(int n) {
    std::unique_lock<std::mutex> guard{mtx};
    return cv.wait_for(guard, hang_guard, [&] { return running >= n; });
  }
  void returned() {
    std::lock_guard<std::mutex> guard{mtx};
    --running;
  }

  // Checkpoints and yields when asked, unless it resumed from that
  // checkpoint already; else runs until released. The short waits are the
  // job's own loop (it waits for two things), not the test's
  // synchronisation, which is on events.
  job_handler handler() {
    return [this](job_context& ctx) {
      started(ctx);
      bool resumed = ctx.payload() == "resumed";
      // A stopping worker cancels: a failed test leaves no thread behind.
      while (!release.load() && !ctx.cancelled()) {
        if (ctx.wait_preempted(5ms) && !resumed) {
          auto saved = ctx.checkpoint("resumed");
          auto yielded = ctx.yield();
          std::lock_guard<std::mutex> guard{mtx};
          // Checked by the test thread: Boost.Test's checks are not for job threads.
          for (auto* st : {&saved, &yielded})
            if (!st->ok())
              problems.push_back(st->to_string());
          break;
        }
      }
      returned();
    };
  }
};

// A worker with two slots: `lows` runs the LOW jobs, HIGH jobs return at once.
worker_options two_slots(low_jobs& lows) {
  worker_options w;
  w.max_concurrency = 2;
  w.runners["low"] = lows.handler();
  w.runners["high"] = [](job_context&) {};
  return w;
}

std::vector<job_id> started_order(event_log& log) {
  std::vector<job_id> out;
  for (auto& e : log.of(event_kind::started))
    out.push_back(e.id);
  return out;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_high_job_at_full_capacity_makes_exactly_one_low_job_yield,
                        queue_fixture) {
  reopen(preempting());
  low_jobs lows;
  gate high_hold;
  worker_options w;
  w.max_concurrency = 2;
  w.runners["low"] = lows.handler();
  w.runners["high"] = [&](job_context&) { high_hold.pass(); };
  auto a = submit(*job_of("low").payload("start").build());
  auto b = submit(*job_of("low").payload("start").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(lows.wait_running(2));
  // A third LOW job waits behind both: the resumed one must go before it.
  auto c = submit(*job_of("low").payload("start").build());
  auto high = submit(*job_of("high").priority(10).build());
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, high));
  BOOST_REQUIRE(log->wait_for(event_kind::yielded, 1));
  auto preempted = log->of(event_kind::preempted);
  BOOST_REQUIRE_EQUAL(preempted.size(), 1u);
  auto victim = preempted[0].id;
  BOOST_TEST((victim == a || victim == b));
  BOOST_TEST(preempted[0].message.find(high.to_string()) != std::string::npos);
  BOOST_TEST(log->of(event_kind::yielded).size() == 1u);
  BOOST_TEST(log->of(event_kind::yielded)[0].id == victim);
  // Held until its preemptor ends: pending, its try unspent, not resumed.
  auto held = info(victim);
  BOOST_TEST(held.status == job_status::pending);
  BOOST_TEST(held.tries == 0);
  BOOST_TEST(held.yields == 1);
  BOOST_TEST(held.checkpoint.value_or("") == "resumed");
  BOOST_TEST(log->of(event_kind::resumed).empty());
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->preemptions == 1);
  BOOST_TEST(m->yields == 1);
  BOOST_TEST(m->preempted_waiting == 1);
  BOOST_TEST(m->attempts_by_outcome[static_cast<size_t>(attempt_outcome::yielded)] == 1);

  high_hold.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  BOOST_REQUIRE(log->wait_for(event_kind::resumed, 1, victim));
  BOOST_REQUIRE(log->wait_for(event_kind::started, 2, victim));
  // The resumed job took the slot before `c`, which waited longer.
  auto order = started_order(*log);
  auto first = std::find(order.begin(), order.end(), victim);
  auto again = std::find(first + 1, order.end(), victim);
  auto c_at = std::find(order.begin(), order.end(), c);
  BOOST_TEST((again < c_at));
  lows.release = true;
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, victim));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, c));
  auto done = info(victim);
  BOOST_TEST(done.tries == 1);
  BOOST_TEST(done.yields == 1);
  BOOST_TEST(done.attempts.size() == 1u);  // a yield is no attempt of its own
  std::lock_guard<std::mutex> guard{lows.mtx};
  // Four LOW starts (a, b, the victim again, c); the victim's second one from
  // its checkpoint, on the same try.
  BOOST_REQUIRE_EQUAL(lows.starts.size(), 4u);
  auto again_start = std::find_if(lows.starts.begin(), lows.starts.end(),
                                  [](auto& s) { return s.first == "resumed"; });
  BOOST_REQUIRE((again_start != lows.starts.end()));
  BOOST_TEST(again_start->second == 1);
  BOOST_TEST(std::count_if(lows.starts.begin(), lows.starts.end(),
                           [](auto& s) { return s.second != 1; }) == 0);
  BOOST_TEST(lows.most_running <= 2);
  BOOST_TEST(lows.problems.empty());
  m = q->metrics();
  BOOST_TEST(m->resumptions == 1);
  BOOST_TEST(m->preempted_waiting == 0);
}

BOOST_FIXTURE_TEST_CASE(a_job_that_ignores_the_request_keeps_its_slot, queue_fixture) {
  reopen(preempting());
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  gate low_hold;
  std::atomic<bool> saw_request{false};
  worker_options w;
  w.max_concurrency = 1;
  auto count = [&] {
    auto now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
  };
  latch entered;
  w.runners["low"] = [&](job_context& ctx) {
    count();
    entered.hit();
    saw_request = ctx.wait_preempted(std::chrono::milliseconds(hang_guard));
    low_hold.pass();  // ignores it
    --running;
  };
  w.runners["high"] = [&](job_context&) {
    count();
    --running;
  };
  auto low = submit(*job_of("low").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(entered.wait(1));
  auto high = submit(*job_of("high").priority(20).build());
  BOOST_REQUIRE(log->wait_for(event_kind::preempted, 1, low));
  BOOST_REQUIRE(low_hold.wait_for_waiting(1));
  BOOST_TEST(saw_request.load());
  // More dispatch passes: the clock moves and another job arrives. The
  // request is not repeated, and the HIGH job gets no slot beyond the max.
  advance(1'000ms);
  submit(*job_of("high").build());  // priority 0: no preemptor
  advance(1'000ms);
  BOOST_TEST(info(high).status == job_status::pending);
  auto m = q->metrics();
  BOOST_TEST(m->preemptions == 1);
  low_hold.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, low));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  BOOST_TEST(most.load() == 1);
  BOOST_TEST(log->of(event_kind::yielded).empty());
  BOOST_TEST(info(low).yields == 0);
}

// Group "kept" has min_slots 1 and runs the lowest-priority job; the ask goes
// to the other group's job, and with both groups at their minimum to none.
BOOST_FIXTURE_TEST_CASE(preemption_never_takes_a_slot_a_group_needs_for_its_minimum,
                        queue_fixture) {
  auto opts = preempting();
  opts.scheduling.groups["kept"].min_slots = 1;
  reopen(opts);
  low_jobs lows;
  auto w = two_slots(lows);
  auto kept = submit(*job_of("low").group("kept").priority(0).build());
  auto other = submit(*job_of("low").group("other").priority(5).build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(lows.wait_running(2));
  auto high = submit(*job_of("high").group("other").priority(10).build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  auto preempted = log->of(event_kind::preempted);
  BOOST_REQUIRE_EQUAL(preempted.size(), 1u);
  BOOST_TEST(preempted[0].id == other);
  BOOST_TEST(info(kept).yields == 0);
  lows.release = true;
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, kept));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, other));
}

BOOST_FIXTURE_TEST_CASE(groups_at_their_minimum_are_never_asked, queue_fixture) {
  auto opts = preempting();
  opts.scheduling.groups["a"].min_slots = 1;
  opts.scheduling.groups["b"].min_slots = 1;
  reopen(opts);
  low_jobs lows;
  auto w = two_slots(lows);
  auto a = submit(*job_of("low").group("a").build());
  auto b = submit(*job_of("low").group("b").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(lows.wait_running(2));
  auto high = submit(*job_of("high").group("c").priority(10).build());
  advance(1'000ms);  // another dispatch pass
  BOOST_TEST(q->metrics()->preemptions == 0);
  BOOST_TEST(info(high).status == job_status::pending);
  lows.release = true;
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, a));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, b));
  BOOST_TEST(log->of(event_kind::preempted).empty());
}

BOOST_FIXTURE_TEST_CASE(preemption_is_off_by_default_and_yield_needs_a_request,
                        queue_fixture) {
  gate hold;
  status yielded;
  worker_options w;
  w.max_concurrency = 1;
  bool flagged = true;  // read after hold.pass(), whose mutex orders it
  w.runners["low"] = [&](job_context& ctx) {
    yielded = ctx.yield();
    flagged = ctx.preempted() || ctx.wait_preempted(0ms) || ctx.wait_preempted(-5ms);
    hold.pass();
  };
  w.runners["high"] = [&](job_context&) {};
  auto low = submit(*job_of("low").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(hold.wait_for_waiting(1));
  auto high = submit(*job_of("high").priority(100).build());
  advance(1'000ms);
  BOOST_TEST(yielded.code() == error::invalid_argument);
  BOOST_TEST(yielded.field() == "yield");
  BOOST_TEST(!flagged);
  BOOST_TEST(q->metrics()->preemptions == 0);
  BOOST_TEST(info(high).status == job_status::pending);
  hold.open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, low));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  BOOST_TEST(info(low).yields == 0);
}

// A cancel request wins over a yield: the job ends cancelled.
BOOST_FIXTURE_TEST_CASE(a_job_cancelled_while_asked_to_yield_ends_cancelled, queue_fixture) {
  reopen(preempting());
  gate hold;
  status yielded;
  worker_options w;
  w.max_concurrency = 1;
  latch entered;
  w.runners["low"] = [&](job_context& ctx) {
    entered.hit();
    ctx.wait_preempted(std::chrono::milliseconds(hang_guard));
    hold.pass();
    yielded = ctx.yield();
  };
  w.runners["high"] = [&](job_context&) {};
  auto low = submit(*job_of("low").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(entered.wait(1));
  auto high = submit(*job_of("high").priority(10).build());
  BOOST_REQUIRE(log->wait_for(event_kind::preempted, 1, low));
  BOOST_REQUIRE(hold.wait_for_waiting(1));
  BOOST_REQUIRE(q->cancel(low).ok());
  BOOST_REQUIRE(log->wait_for(event_kind::cancel_requested, 1, low));
  hold.open();
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, low));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  BOOST_REQUIRE(wk.stop().ok());  // the job code has returned: `yielded` is set
  BOOST_TEST(yielded.ok());
  BOOST_TEST(info(low).status == job_status::cancelled);
  BOOST_TEST(log->of(event_kind::resumed).empty());
}
