// Unique jobs: a key held by an unfinished job (or a finished one within
// its hold) meets each policy, in one process, within a batch, from 8
// threads at once, and from processes that share one ergon-server.
#define BOOST_TEST_MODULE unique_jobs
#include <boost/test/unit_test.hpp>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "support/queue_fixture.hpp"
#include "support/server_process.hpp"

using ergon::test::engine_probe;
using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

job keyed(const std::string& key, unique_policy p, const std::string& payload = "p",
          std::chrono::milliseconds hold = 0ms) {
  return *job_of("u").payload(payload).unique_key(key, p, hold).max_retries(0).build();
}

struct unique_fixture : queue_fixture {
  int64_t rows(const std::string& where) {
    engine_probe p{location};
    return p.number("SELECT count(*) FROM jobs WHERE " + where);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(policies, unique_fixture)

BOOST_AUTO_TEST_CASE(skip_returns_the_holder_and_submits_nothing) {
  auto first = submit(keyed("k", unique_policy::skip, "a"));
  auto again = submit(keyed("k", unique_policy::skip, "b"));
  BOOST_TEST(again == first);
  BOOST_TEST(info(first).payload == "a");
  BOOST_TEST(info(first).unique_key.value_or("") == "k");
  BOOST_TEST(q->counts().total() == 1);
  BOOST_TEST(log->wait_for(event_kind::submitted, 1));
}

BOOST_AUTO_TEST_CASE(replace_cancels_the_pending_holder_and_starts_a_fresh_clock) {
  auto first = submit(keyed("k", unique_policy::replace, "a"));
  advance(5s);
  auto second = submit(keyed("k", unique_policy::replace, "b"));
  BOOST_TEST(second != first);
  BOOST_TEST(info(first).status == job_status::cancelled);
  auto now = info(second);
  BOOST_TEST(now.status == job_status::pending);
  BOOST_TEST(now.payload == "b");
  BOOST_TEST(now.ready_since_ms == t0 + 5'000);  // its own aging clock
  BOOST_TEST(log->wait_for(event_kind::cancelled, 1, first));
  BOOST_TEST(q->counts()[job_status::pending] == 1);
  BOOST_TEST(q->counts()[job_status::cancelled] == 1);
}

BOOST_AUTO_TEST_CASE(replace_refuses_a_running_holder_and_writes_nothing) {
  gate g;
  worker_options w;
  w.runners["u"] = [&](job_context&) { g.pass(); };
  auto first = submit(keyed("k", unique_policy::replace));
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto second = q->submit(keyed("k", unique_policy::replace));
  BOOST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().code() == error::job_running);
  BOOST_TEST(second.error().message().find(first.to_string()) != std::string::npos);
  BOOST_TEST(q->counts().total() == 1);
  g.open();
}

BOOST_AUTO_TEST_CASE(reject_fails_with_already_exists_naming_the_holder) {
  auto first = submit(keyed("k", unique_policy::reject));
  auto second = q->submit(keyed("k", unique_policy::reject));
  BOOST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().code() == error::already_exists);
  BOOST_TEST(second.error().field() == "unique_key");
  BOOST_TEST(second.error().message().find(first.to_string()) != std::string::npos,
             second.error().to_string());
  BOOST_TEST(q->counts().total() == 1);
}

BOOST_AUTO_TEST_CASE(every_final_status_frees_the_key) {
  worker_options w;
  w.runners["u"] = [](job_context& ctx) {
    if (ctx.payload() == "fail")
      throw std::runtime_error("no");
  };
  auto wk = start(std::move(w));
  std::vector<job_id> holders;
  for (auto payload : {"ok", "fail"}) {
    auto id = submit(keyed("k", unique_policy::reject, payload));
    BOOST_REQUIRE(log->wait_for(std::string{payload} == "ok" ? event_kind::succeeded
                                                              : event_kind::failed,
                                1, id));
    holders.push_back(id);
  }
  auto cancelled = submit(*job_of("u").payload("c").delay(1h).unique_key("k", unique_policy::reject).build());
  BOOST_REQUIRE(q->cancel_pending(cancelled).ok());
  auto expired = submit(*job_of("u").payload("e").delay(1h).ttl(1s).unique_key("k", unique_policy::reject).build());
  advance(1h + 2s);
  BOOST_REQUIRE(log->wait_for(event_kind::expired, 1, expired));
  auto last = submit(keyed("k", unique_policy::reject));
  BOOST_TEST(std::set<job_id>({holders[0], holders[1], cancelled, expired, last}).size() == 5u);
}

BOOST_AUTO_TEST_CASE(a_hold_keeps_the_key_after_the_job_finishes_across_restarts) {
  worker_options w;
  w.runners["u"] = [](job_context&) {};
  auto first = submit(keyed("k", unique_policy::skip, "a", 10min));
  {
    auto wk = start(std::move(w));
    BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  }
  advance(9min);
  BOOST_TEST(submit(keyed("k", unique_policy::skip)) == first);
  auto rejected = q->submit(keyed("k", unique_policy::reject));
  BOOST_TEST(rejected.error().code() == error::already_exists);
  BOOST_TEST(rejected.error().message().find("finished") != std::string::npos);
  BOOST_TEST(q->submit(keyed("k", unique_policy::replace)).error().code()
             == error::already_exists);
  q->close();
  reopen();
  BOOST_TEST(submit(keyed("k", unique_policy::skip)) == first);
  advance(61s);  // the hold ends 10 min after the finish
  auto fresh = submit(keyed("k", unique_policy::reject));
  BOOST_TEST(fresh != first);
}

BOOST_AUTO_TEST_CASE(a_hold_of_max_holds_forever) {
  worker_options w;
  w.runners["u"] = [](job_context&) {};
  auto first = submit(keyed("k", unique_policy::skip, "a", std::chrono::milliseconds::max()));
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, first));
  advance(std::chrono::hours(24 * 365 * 100));
  BOOST_TEST(submit(keyed("k", unique_policy::skip)) == first);
}

BOOST_AUTO_TEST_CASE(requeue_runs_once_more_after_a_running_holder_with_the_latest_payload) {
  gate g;
  std::mutex mtx;
  std::vector<std::string> ran;
  worker_options w;
  w.runners["u"] = [&](job_context& ctx) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      ran.push_back(ctx.payload());
    }
    if (ctx.payload() == "a")
      g.pass();
    else
      throw std::runtime_error("the rerun fails; nothing follows it");
  };
  // A pending holder is kept, as with skip.
  auto first = submit(keyed("k", unique_policy::requeue, "a"));
  BOOST_TEST(submit(keyed("k", unique_policy::requeue, "x")) == first);
  BOOST_TEST(info(first).payload == "a");
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  // Running: the duplicate waits behind it and takes the key.
  auto second = submit(keyed("k", unique_policy::requeue, "b"));
  BOOST_TEST(second != first);
  auto behind = info(second);
  BOOST_TEST((behind.status == job_status::waiting));
  BOOST_TEST(behind.depends_on == std::vector<job_id>{first});
  BOOST_TEST(behind.unique_key.value_or("") == "k");
  // While it waits, a later duplicate gives it its payload.
  BOOST_TEST(submit(keyed("k", unique_policy::requeue, "c")) == second);
  BOOST_TEST(submit(keyed("k", unique_policy::skip, "d")) == second);  // skip keeps it
  BOOST_TEST(info(second).payload == "c");
  // A duplicate with another policy sees the waiting job as the holder; a
  // replace would start beside the running one, and is refused.
  BOOST_TEST(q->submit(keyed("k", unique_policy::reject)).error().code()
             == error::already_exists);
  auto replaced = q->submit(keyed("k", unique_policy::replace, "r"));
  BOOST_REQUIRE(!replaced.has_value());
  BOOST_TEST(replaced.error().code() == error::job_running);
  BOOST_TEST(replaced.error().message().find(second.to_string()) != std::string::npos);
  auto in_batch = q->submit_batch({keyed("j", unique_policy::replace, "x"),
                                   keyed("k", unique_policy::replace, "y")});
  BOOST_TEST(in_batch.error().code() == error::job_running);
  // A waiting holder is raised too; the job it waits behind keeps its own.
  auto urgent = keyed("k", unique_policy::requeue, "c");
  urgent.priority = 7;
  urgent.raise_holder_priority = true;
  BOOST_TEST(submit(urgent) == second);
  BOOST_TEST(info(second).priority == 7);
  BOOST_TEST(info(first).priority == 0);
  // The holder fails; the requeued job runs anyway, once.
  g.release();
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 1, second));
  {
    std::lock_guard<std::mutex> guard{mtx};
    BOOST_TEST(ran == (std::vector<std::string>{"a", "c"}));
  }
  BOOST_TEST(info(first).status == job_status::succeeded);
  BOOST_TEST(q->counts().total() == 2);
  // The key was the requeued job's: it is free now.
  auto fresh = submit(keyed("k", unique_policy::reject, "e"));
  BOOST_TEST(fresh != second);
}

BOOST_AUTO_TEST_CASE(requeue_in_a_batch_keeps_the_latest_and_runs_after_a_holder_lost_in_a_crash) {
  gate g;
  worker_options w;
  w.runners["u"] = [&](job_context& ctx) {
    if (ctx.payload() == "a")
      g.pass();
  };
  auto first = submit(keyed("k", unique_policy::requeue, "a"));
  job_id second;
  {
    auto wk = start(std::move(w));
    BOOST_REQUIRE(g.wait_for_waiting(1));
    // Within one batch the latest requeue duplicate is the one that waits.
    auto ids = q->submit_batch({keyed("k", unique_policy::requeue, "b"),
                                keyed("k", unique_policy::requeue, "c")});
    BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
    BOOST_TEST((*ids)[0] == (*ids)[1]);
    BOOST_TEST(info((*ids)[0]).payload == "c");
    BOOST_TEST(rows("status = 6") == 1);
    second = (*ids)[0];
    // A replace after a requeue in one batch would start beside the holder.
    auto both = q->submit_batch({keyed("k", unique_policy::requeue, "x"),
                                 keyed("k", unique_policy::replace, "y")});
    BOOST_TEST(both.error().code() == error::job_running);
    BOOST_TEST(info(second).payload == "c");
    // Closing leaves the holder running, as a crash does.
    BOOST_TEST(q->close(std::chrono::milliseconds(1)).code() == error::timeout);
    g.open();
  }
  // The holder's attempt was lost with the process; recovery ends it
  // (max_retries 0), which releases the requeued job: it runs, once.
  reopen();
  BOOST_TEST(is_final(info(first).status));
  BOOST_TEST((info(second).status == job_status::pending));
  BOOST_TEST(info(second).payload == "c");
  BOOST_TEST(rows("status = 6") == 0);
  // Pending now: a duplicate is kept out, as with skip.
  BOOST_TEST(submit(keyed("k", unique_policy::requeue, "d")) == second);
  BOOST_TEST(info(second).payload == "c");
  worker_options again;
  again.runners["u"] = [](job_context&) {};
  auto wk = start(std::move(again));
  BOOST_REQUIRE(q->wait(second, 60s)->status == job_status::succeeded);
  BOOST_TEST(q->counts().total() == 2);
}

BOOST_AUTO_TEST_CASE(a_duplicate_raises_a_holder_that_has_not_started) {
  auto low = *job_of("u").payload("low").priority(1).unique_key("k", unique_policy::skip).build();
  auto first = submit(low);
  auto urgent = *job_of("u").payload("urgent").priority(9).unique_key("k", unique_policy::skip)
                   .raise_holder_priority().build();
  BOOST_TEST(submit(urgent) == first);
  auto raised = info(first);
  BOOST_TEST(raised.priority == 9);
  BOOST_TEST(raised.payload == "low");
  // Lower, or without the flag, changes nothing.
  urgent.priority = 3;
  submit(urgent);
  auto plain = urgent;
  plain.priority = 20;
  plain.raise_holder_priority = false;
  submit(plain);
  BOOST_TEST(info(first).priority == 9);
  // The dispatcher runs it by its new priority: ahead of a job of 5,
  // which its old priority of 1 was behind.
  auto other = submit(*job_of("u").payload("other").priority(5).build());
  std::mutex mtx;
  std::vector<std::string> ran;
  worker_options w;
  w.max_concurrency = 1;
  w.runners["u"] = [&](job_context& ctx) {
    std::lock_guard<std::mutex> guard{mtx};
    ran.push_back(ctx.payload());
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, other));
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_TEST(ran == (std::vector<std::string>{"low", "other"}));
}

BOOST_AUTO_TEST_CASE(bad_unique_fields_name_the_field) {
  auto j = keyed("k", unique_policy::skip);
  j.unique_key = "";
  BOOST_TEST(q->submit(j).error().field() == "unique_key");
  j.unique_key = std::string(257, 'k');
  BOOST_TEST(q->submit(j).error().field() == "unique_key");
  j = keyed("k", unique_policy::skip);
  j.unique_hold_ms = -1;
  BOOST_TEST(q->submit(j).error().field() == "unique_hold");
  j = *job_of("u").build();
  j.unique_hold_ms = 5;
  BOOST_TEST(q->submit(j).error().field() == "unique_hold");
  j = keyed("k", unique_policy::skip);
  j.on_duplicate = static_cast<unique_policy>(9);
  BOOST_TEST(q->submit(j).error().field() == "on_duplicate");
  j = keyed("k", unique_policy::requeue);
  j.depends_on.push_back(job_id{});
  BOOST_TEST(q->submit(j).error().field() == "on_duplicate");
  j = *job_of("u").build();
  j.raise_holder_priority = true;
  BOOST_TEST(q->submit(j).error().field() == "raise_holder_priority");
  BOOST_TEST(job_of("u").raise_holder_priority().build().error().field()
             == "raise_holder_priority");
  j = keyed("k", unique_policy::replace);
  j.raise_holder_priority = true;
  BOOST_TEST(q->submit(j).error().field() == "raise_holder_priority");
  BOOST_TEST(q->counts().total() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(batches, unique_fixture)

BOOST_AUTO_TEST_CASE(a_batch_holding_one_key_twice_acts_as_if_submitted_in_order) {
  auto skip = q->submit_batch({keyed("s", unique_policy::skip, "1"), *job_of("u").build(),
                               keyed("s", unique_policy::skip, "2")});
  BOOST_REQUIRE(skip.has_value());
  BOOST_TEST((*skip)[0] == (*skip)[2]);
  BOOST_TEST(info((*skip)[0]).payload == "1");

  auto replace = q->submit_batch({keyed("r", unique_policy::replace, "1"),
                                  keyed("r", unique_policy::replace, "2")});
  BOOST_REQUIRE(replace.has_value());
  BOOST_TEST((*replace)[0] == (*replace)[1]);  // the first never reached the file
  BOOST_TEST(info((*replace)[1]).payload == "2");
  BOOST_TEST(rows("unique_key = 'r'") == 1);

  auto reject = q->submit_batch({*job_of("u").build(), keyed("x", unique_policy::reject),
                                 keyed("x", unique_policy::reject)});
  BOOST_REQUIRE(!reject.has_value());
  BOOST_TEST(reject.error().code() == error::already_exists);
  BOOST_TEST(reject.error().message().find("job 2 of 3") != std::string::npos,
             reject.error().to_string());
  BOOST_TEST(q->counts().total() == 3);  // s, the plain job, r: the rejected batch wrote nothing
}

BOOST_AUTO_TEST_CASE(a_batch_meets_a_stored_holder_in_input_order) {
  auto holder = submit(keyed("k", unique_policy::skip, "old"));
  // Job 0 skips to the holder; job 1 replaces it; job 2 skips to job 1.
  auto ids = q->submit_batch({keyed("k", unique_policy::skip, "a"),
                              keyed("k", unique_policy::replace, "b"),
                              keyed("k", unique_policy::skip, "c")});
  BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
  BOOST_TEST((*ids)[0] == holder);
  BOOST_TEST((*ids)[1] != holder);
  BOOST_TEST((*ids)[2] == (*ids)[1]);
  BOOST_TEST(info(holder).status == job_status::cancelled);
  BOOST_TEST(info((*ids)[1]).payload == "b");
  // A rejecting job meets the holder before a later job could replace it.
  auto rejected = q->submit_batch({keyed("k", unique_policy::reject),
                                   keyed("k", unique_policy::replace)});
  BOOST_TEST(rejected.error().code() == error::already_exists);
  BOOST_TEST(info((*ids)[1]).status == job_status::pending);
  BOOST_TEST(rows("unique_key = 'k' AND status < 2") == 1);
}

BOOST_AUTO_TEST_CASE(a_batch_that_meets_a_running_holder_with_replace_writes_nothing) {
  gate g;
  worker_options w;
  w.runners["u"] = [&](job_context&) { g.pass(); };
  submit(keyed("k", unique_policy::skip));
  auto wk = start(std::move(w));
  BOOST_REQUIRE(g.wait_for_waiting(1));
  auto r = q->submit_batch({*job_of("u").delay(1h).build(), keyed("k", unique_policy::replace)});
  BOOST_TEST(r.error().code() == error::job_running);
  BOOST_TEST(q->counts().total() == 1);
  g.open();
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(concurrent, unique_fixture)

// Eight threads submit the same key at once; the outcomes are exact.
BOOST_AUTO_TEST_CASE(eight_threads_with_each_policy) {
  for (auto policy : {unique_policy::skip, unique_policy::replace, unique_policy::reject}) {
    std::string key = std::string{"key-"} + to_string(policy);
    std::vector<result<job_id>> out(8, status{error::internal, "not run"});
    std::vector<std::thread> threads;
    gate start_line;
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&, i] {
        start_line.pass();
        out[i] = q->submit(keyed(key, policy, std::to_string(i)));
      });
    BOOST_REQUIRE(start_line.wait_for_waiting(8));
    start_line.open();
    for (auto& t : threads)
      t.join();
    std::set<job_id> ids;
    int ok = 0;
    int exists = 0;
    for (auto& r : out) {
      if (r) {
        ++ok;
        ids.insert(*r);
      } else if (r.error().code() == error::already_exists) {
        ++exists;
      }
    }
    auto holders = rows("unique_key = '" + key + "' AND status < 2");
    BOOST_TEST(holders == 1, to_string(policy));
    if (policy == unique_policy::skip) {
      BOOST_TEST(ok == 8);
      BOOST_TEST(ids.size() == 1u);
      BOOST_TEST(rows("unique_key = '" + key + "'") == 1);
    } else if (policy == unique_policy::replace) {
      BOOST_TEST(ok == 8);
      BOOST_TEST(ids.size() == 8u);
      BOOST_TEST(rows("unique_key = '" + key + "' AND status = 4") == 7);
    } else {
      BOOST_TEST(ok == 1);
      BOOST_TEST(exists == 7);
      BOOST_TEST(rows("unique_key = '" + key + "'") == 1);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(processes)

// Four processes submit two jobs each through one ergon-server.
BOOST_AUTO_TEST_CASE(eight_submitters_in_four_processes_share_one_key) {
  for (auto policy : {"skip", "replace", "reject"}) {
    temp_dir dir;
    auto location = ergon::test::test_location(dir);
    server_process server{location};
    std::vector<std::unique_ptr<child_process>> children;
    for (int i = 0; i < 4; ++i) {
      children.push_back(std::make_unique<child_process>(std::vector<std::string>{
        ERGON_TEST_UNIQUE_SUBMITTER, "127.0.0.1", std::to_string(server.port), "k", policy,
        "2"}));
      BOOST_REQUIRE_EQUAL(children.back()->read_line(), "ready");
    }
    for (auto& c : children)
      c->close_stdin();
    std::map<std::string, int> outcomes;
    std::set<std::string> ids;
    for (auto& c : children)
      for (auto line = c->read_line(); line != "done"; line = c->read_line()) {
        BOOST_REQUIRE_MESSAGE(!line.empty(), "a submitter died");
        auto space = line.find(' ');
        outcomes[line.substr(0, space)]++;
        if (line.rfind("id ", 0) == 0)
          ids.insert(line.substr(3));
        else
          BOOST_TEST(line == "error already_exists");
      }
    engine_probe p{location};
    BOOST_TEST(p.number("SELECT count(*) FROM jobs WHERE status < 2") == 1, policy);
    if (std::string{policy} == "skip") {
      BOOST_TEST(outcomes["id"] == 8);
      BOOST_TEST(ids.size() == 1u);
      BOOST_TEST(p.number("SELECT count(*) FROM jobs") == 1);
    } else if (std::string{policy} == "replace") {
      BOOST_TEST(outcomes["id"] == 8);
      BOOST_TEST(ids.size() == 8u);
      BOOST_TEST(p.number("SELECT count(*) FROM jobs WHERE status = 4") == 7);
    } else {
      BOOST_TEST(outcomes["id"] == 1);
      BOOST_TEST(outcomes["error"] == 7);
    }
    BOOST_TEST(server.stop(SIGTERM));
  }
}

BOOST_AUTO_TEST_SUITE_END()
