// Dependencies between jobs (issue 31, items 1 and 2): waiting jobs, their
// release in the commit that ends their last dependency, each failure
// policy, transitive cancels, and whole graphs in one submit_batch. Runs on
// both engines.
#define BOOST_TEST_MODULE workflow
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// Runs "step" jobs (success, their payload as the result) and "flaky" jobs
// (a failure that is permanent).
worker_options steps(int32_t concurrency = 4) {
  worker_options w;
  w.max_concurrency = concurrency;
  w.runners["step"] = [](job_context& ctx) { return ctx.payload(); };
  w.runners["flaky"] = [](job_context& ctx) { ctx.fail_permanently("flaky failed"); };
  return w;
}

job step(const std::string& payload) {
  return *job_of("step").payload(payload).build();
}

// Position of the first event of `kind` for `id` in `es`; es.size() if none.
size_t first(const std::vector<event>& es, event_kind kind, const job_id& id) {
  auto it = std::find_if(es.begin(), es.end(),
                         [&](const event& e) { return e.kind == kind && e.id == id; });
  return static_cast<size_t>(it - es.begin());
}

}  // namespace

// The queue's fixture, and the first event of a kind for a job, waited for:
// events reach subscribers after the commit's callers hear back.
struct workflow_fixture : queue_fixture {
  event first_event(event_kind kind, const job_id& id) {
    BOOST_REQUIRE(log->wait_for(kind, 1, id));
    return log->of(kind, &id).at(0);
  }

  // A recurring "parent" job every minute; its first instance.
  job_id add_nightly_parent() {
    recurring_job r;
    r.id = "nightly";
    r.schedule = "every 1m";
    r.job = *job_of("parent").max_retries(0).build();
    auto first = q->add_recurring(r);
    BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
    return *first;
  }
};

BOOST_FIXTURE_TEST_SUITE(dependencies, workflow_fixture)

BOOST_AUTO_TEST_CASE(a_chain_runs_in_order_and_each_job_waits_without_a_slot) {
  auto a = submit(step("a"));
  auto b = submit(*job_of("step").payload("b").depends_on(a).build());
  auto c = submit(*job_of("step").payload("c").depends_on(b).build());
  auto counts = q->counts();
  BOOST_TEST(counts[job_status::pending] == 1);
  BOOST_TEST(counts[job_status::waiting] == 2);
  auto bi = info(b);
  BOOST_TEST(bi.status == job_status::waiting);
  BOOST_TEST(bi.waiting_on == 1);
  BOOST_TEST(bi.depends_on == std::vector<job_id>{a});
  BOOST_TEST(bi.dependents == std::vector<job_id>{c});
  BOOST_TEST(info(a).dependents == std::vector<job_id>{b});
  auto wk = start(steps());
  auto done = q->wait(c, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "c");
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, c));
  auto es = log->snapshot();
  // Each one starts only after the one before succeeded, and its release
  // is in that commit's events.
  BOOST_TEST(first(es, event_kind::succeeded, a) < first(es, event_kind::unblocked, b));
  BOOST_TEST(first(es, event_kind::unblocked, b) < first(es, event_kind::started, b));
  BOOST_TEST(first(es, event_kind::succeeded, b) < first(es, event_kind::started, c));
  BOOST_TEST(first_event(event_kind::submitted, b).message == "waiting for its dependencies");
  counts = q->counts();
  BOOST_TEST(counts[job_status::waiting] == 0);
  BOOST_TEST(counts[job_status::succeeded] == 3);
  BOOST_TEST(info(b).waiting_on == 0);
}

BOOST_AUTO_TEST_CASE(a_diamond_in_one_batch_runs_its_join_after_both_branches) {
  auto ids = q->submit_batch({step("root"),
                              *job_of("step").payload("left").depends_on_batch(0).build(),
                              *job_of("step").payload("right").depends_on_batch(0).build(),
                              *job_of("step")
                                 .payload("join")
                                 .depends_on_batch(1)
                                 .depends_on_batch(2)
                                 .build()});
  BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
  auto& id = *ids;
  auto join = info(id[3]);
  BOOST_TEST(join.status == job_status::waiting);
  BOOST_TEST(join.waiting_on == 2);
  BOOST_TEST(join.depends_on == (std::vector<job_id>{id[1], id[2]}));
  BOOST_TEST(info(id[0]).dependents == (std::vector<job_id>{id[1], id[2]}));
  auto wk = start(steps());
  auto done = q->wait(id[3], 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id[3]));
  auto es = log->snapshot();
  for (size_t branch : {1, 2})
    BOOST_TEST(first(es, event_kind::succeeded, id[branch])
               < first(es, event_kind::started, id[3]));
  BOOST_TEST(log->of(event_kind::unblocked, &id[3]).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_failed_dependency_cancels_what_waits_on_it_transitively) {
  auto a = submit(*job_of("flaky").max_retries(0).build());
  auto b = submit(*job_of("step").depends_on(a).build());
  auto c = submit(*job_of("step").depends_on(b).build());
  auto wk = start(steps());
  auto cb = q->wait(c, 60s);
  BOOST_REQUIRE(cb.has_value());
  BOOST_TEST(cb->status == job_status::cancelled);
  auto bi = info(b);
  BOOST_TEST(bi.status == job_status::cancelled);
  BOOST_TEST(bi.tries == 0);
  BOOST_TEST(bi.attempts.empty());
  BOOST_TEST(first_event(event_kind::cancelled, b).message
             == "dependency " + a.to_string() + " ended failed");
  BOOST_TEST(first_event(event_kind::cancelled, c).message
             == "dependency " + b.to_string() + " ended cancelled");
  BOOST_REQUIRE(log->wait_for(event_kind::cancelled, 1, c));
  BOOST_TEST(log->of(event_kind::started, &b).empty());
  auto counts = q->counts();
  BOOST_TEST(counts[job_status::waiting] == 0);
  BOOST_TEST(counts[job_status::cancelled] == 2);
  BOOST_TEST(counts[job_status::failed] == 1);
}

BOOST_AUTO_TEST_CASE(the_fail_policy_fails_the_dependent_without_running_it) {
  auto a = submit(*job_of("flaky").max_retries(0).build());
  auto b = submit(
    *job_of("step").depends_on(a).on_dependency_failure(dependency_failure::fail).build());
  auto c = submit(
    *job_of("step").depends_on(b).on_dependency_failure(dependency_failure::run).build());
  auto wk = start(steps());
  auto cb = q->wait(c, 60s);
  BOOST_REQUIRE(cb.has_value());
  // c runs anyway: its dependency ended, if unsuccessfully.
  BOOST_TEST(cb->status == job_status::succeeded);
  auto bi = info(b);
  BOOST_TEST(bi.status == job_status::failed);
  BOOST_TEST(bi.on_dependency_failure == dependency_failure::fail);
  BOOST_TEST(bi.attempts.empty());
  BOOST_TEST(first_event(event_kind::failed, b).message
             == "dependency " + a.to_string() + " ended failed");
  // A failed dependent is a dead letter like any failed job.
  auto dead = q->list_failed({});
  BOOST_REQUIRE(dead.has_value());
  BOOST_TEST(dead->jobs.size() == 2u);
}

BOOST_AUTO_TEST_CASE(the_run_policy_runs_after_a_failed_dependency) {
  auto a = submit(*job_of("flaky").max_retries(0).build());
  auto b = submit(*job_of("step")
                     .payload("cleanup")
                     .depends_on(a)
                     .on_dependency_failure(dependency_failure::run)
                     .build());
  auto wk = start(steps());
  auto done = q->wait(b, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "cleanup");
}

BOOST_AUTO_TEST_CASE(bad_references_are_refused_naming_the_field_and_write_nothing) {
  auto a = submit(step("a"));
  // A forward reference, and one to itself.
  auto forward = q->submit_batch({*job_of("step").depends_on_batch(1).build(), step("b")});
  BOOST_TEST(forward.error().code() == error::invalid_argument);
  BOOST_TEST(forward.error().field() == "depends_on_batch");
  BOOST_TEST(forward.error().message().find("job 0 of 2") != std::string::npos);
  auto self = q->submit_batch({step("x"), *job_of("step").depends_on_batch(1).build()});
  BOOST_TEST(self.error().code() == error::invalid_argument);
  BOOST_TEST(self.error().field() == "depends_on_batch");
  // A single submit has no earlier jobs.
  auto alone = q->submit(*job_of("step").depends_on_batch(0).build());
  BOOST_TEST(alone.error().field() == "depends_on_batch");
  // An id that names no job, in a batch whose other jobs are fine.
  auto unknown_id = job_id::parse("01890a5d-ac96-774b-bcce-b302099a8057");
  BOOST_REQUIRE(unknown_id.has_value());
  auto unknown = q->submit_batch({step("y"), *job_of("step").depends_on(*unknown_id).build()});
  BOOST_TEST(unknown.error().code() == error::invalid_argument);
  BOOST_TEST(unknown.error().field() == "depends_on");
  BOOST_TEST(unknown.error().message().find(unknown_id->to_string()) != std::string::npos);
  // The nil id, and a bad policy, fail validation.
  BOOST_TEST(job_of("step").depends_on(job_id{}).build().error().field() == "depends_on");
  auto bad = step("z");
  bad.on_dependency_failure = static_cast<dependency_failure>(7);
  BOOST_TEST(q->submit(bad).error().field() == "on_dependency_failure");
  // Nothing of any refused batch was written.
  BOOST_TEST(q->counts().total() == 1);
  BOOST_TEST(info(a).dependents.empty());
}

BOOST_AUTO_TEST_CASE(a_dependency_that_already_ended_counts_as_it_ended) {
  auto ok = submit(step("ok"));
  auto bad = submit(*job_of("flaky").max_retries(0).build());
  {
    auto wk = start(steps());
    BOOST_REQUIRE(q->wait(ok, 60s).has_value());
    BOOST_REQUIRE(q->wait(bad, 60s).has_value());
  }
  auto after_ok = submit(*job_of("step").depends_on(ok).build());
  BOOST_TEST(info(after_ok).status == job_status::pending);
  BOOST_TEST(info(after_ok).depends_on == std::vector<job_id>{ok});
  auto after_bad = submit(*job_of("step").depends_on(ok).depends_on(bad).build());
  auto i = info(after_bad);
  BOOST_TEST(i.status == job_status::cancelled);
  BOOST_TEST(first_event(event_kind::cancelled, after_bad).message
             == "dependency " + bad.to_string() + " ended failed");
  // What waits on it in the same batch ends too.
  auto ids = q->submit_batch({*job_of("step").depends_on(bad).build(),
                              *job_of("step").depends_on_batch(0).build()});
  BOOST_REQUIRE(ids.has_value());
  BOOST_TEST(info((*ids)[1]).status == job_status::cancelled);
  auto counts = q->counts();
  BOOST_TEST(counts[job_status::waiting] == 0);
  BOOST_TEST(counts[job_status::cancelled] == 3);
  BOOST_TEST(counts[job_status::pending] == 1);
  // Jobs that came after their dependencies ended are listed as their
  // dependents all the same.
  BOOST_TEST(info(ok).dependents == (std::vector<job_id>{after_ok, after_bad}));
  BOOST_TEST(info(bad).dependents == (std::vector<job_id>{after_bad, (*ids)[0]}));
}

BOOST_AUTO_TEST_CASE(cancelling_a_job_cancels_what_waits_on_it) {
  auto a = submit(*job_of("step").delay(1h).build());
  auto b = submit(*job_of("step").depends_on(a).build());
  auto c = submit(*job_of("step").depends_on(b).build());
  auto d = submit(*job_of("step").depends_on(b).on_dependency_failure(dependency_failure::run).build());
  // A waiting job can be cancelled itself, and so can what it waits on.
  BOOST_TEST(q->cancel(c).ok());
  BOOST_TEST(info(c).status == job_status::cancelled);
  BOOST_TEST(q->cancel_pending(a).ok());
  BOOST_TEST(info(b).status == job_status::cancelled);
  BOOST_TEST(info(d).status == job_status::pending);
  BOOST_TEST(first_event(event_kind::cancelled, b).message
             == "dependency " + a.to_string() + " ended cancelled");
  BOOST_TEST(q->cancel(c).code() == error::job_finished);
  auto counts = q->counts();
  BOOST_TEST(counts[job_status::waiting] == 0);
  BOOST_TEST(counts[job_status::cancelled] == 3);
  BOOST_TEST(counts[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(a_waiting_job_is_not_updated_or_retried_and_lists_as_waiting) {
  auto a = submit(*job_of("step").delay(1h).build());
  auto b = submit(*job_of("step").depends_on(a).build());
  job_update u;
  u.priority = 5;
  auto st = q->update_pending(b, u);
  BOOST_TEST(st.code() == error::invalid_argument);
  BOOST_TEST(st.field() == "id");
  BOOST_TEST(q->retry_failed(b).code() == error::invalid_argument);
  job_filter waiting;
  waiting.status = job_status::waiting;
  auto page = q->list_jobs(waiting);
  BOOST_REQUIRE(page.has_value());
  BOOST_REQUIRE(page->jobs.size() == 1u);
  BOOST_TEST(page->jobs[0].id == b);
  BOOST_TEST(page->jobs[0].depends_on == std::vector<job_id>{a});
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->by_status[job_status::waiting] == 1);
}

BOOST_AUTO_TEST_CASE(waiting_jobs_survive_a_reopen_and_run_after_it) {
  auto a = submit(*job_of("step").delay(10s).build());
  auto b = submit(*job_of("step").payload("after").depends_on(a).build());
  reopen();
  BOOST_TEST(q->counts()[job_status::waiting] == 1);
  BOOST_TEST(info(b).status == job_status::waiting);
  auto wk = start(steps());
  advance(10s);
  auto done = q->wait(b, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
}

BOOST_AUTO_TEST_CASE(positions_follow_unique_and_idempotency_keys) {
  // Position 0 skips to the holder of its unique key; position 1 depends on
  // that holder, which has not run yet.
  auto holder = submit(*job_of("step").delay(1h).unique_key("k").build());
  auto ids = q->submit_batch({*job_of("step").unique_key("k").build(),
                              *job_of("step").depends_on_batch(0).build()});
  BOOST_REQUIRE(ids.has_value());
  BOOST_TEST((*ids)[0] == holder);
  BOOST_TEST(info((*ids)[1]).depends_on == std::vector<job_id>{holder});
  BOOST_TEST(info((*ids)[1]).status == job_status::waiting);
  // A job replaced by a later job of its batch can't be depended on by a
  // job between them: depend on the replacement instead.
  auto replaced = q->submit_batch({*job_of("step").unique_key("r").build(),
                                   *job_of("step").depends_on_batch(0).build(),
                                   *job_of("step").unique_key("r", unique_policy::replace).build()});
  BOOST_TEST(replaced.error().field() == "depends_on_batch");
  // Replacing a waiting holder cancels it and what waits on it.
  auto waiting_holder = submit(*job_of("step").unique_key("w").depends_on(holder).build());
  auto behind = submit(*job_of("step").depends_on(waiting_holder).build());
  auto replacement = submit(*job_of("step").unique_key("w", unique_policy::replace).build());
  BOOST_TEST(info(waiting_holder).status == job_status::cancelled);
  BOOST_TEST(info(behind).status == job_status::cancelled);
  BOOST_TEST(info(replacement).status == job_status::pending);
  // The same batch sent again under its idempotency keys makes nothing new,
  // and its positions name the first jobs.
  auto keyed = [&] {
    return std::vector<job>{*job_of("step").idempotency_key("i0").delay(1h).build(),
                            *job_of("step").idempotency_key("i1").depends_on_batch(0).build()};
  };
  auto first_ids = q->submit_batch(keyed());
  auto again = q->submit_batch(keyed());
  BOOST_REQUIRE(first_ids.has_value());
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(*first_ids == *again);
  BOOST_TEST(info((*first_ids)[1]).depends_on == std::vector<job_id>{(*first_ids)[0]});
  BOOST_TEST(q->counts()[job_status::waiting] == 2);
}

// A file or schema from before a job's only dependency moved into its row
// (SQLite 10, PostgreSQL 7) held every dependency as an edge, and marked
// only unfinished dependencies as depended on. After the migration its
// jobs still list their links and run in order.
BOOST_AUTO_TEST_CASE(dependencies_written_before_only_dependency_survive_the_migration) {
  auto a = submit(*job_of("step").payload("a").build());
  auto b = submit(*job_of("step").payload("b").depends_on(a).build());
  auto c = submit(*job_of("step").payload("c").depends_on(a).depends_on(b).build());
  q.reset();
  log.reset();
  auto down = downgrade_sql(10);
  down.erase(down.rfind("PRAGMA"));  // each engine marks its version below
  auto back = "INSERT INTO job_dependencies (depends_on, job_id) "
              "SELECT only_dependency, id FROM jobs WHERE only_dependency IS NOT NULL; "
              "UPDATE jobs SET has_dependents = 0; " + down;
  engine_probe{location}.exec(back + "PRAGMA user_version = 10",
                              back + "UPDATE schema_version SET version = 7");
  reopen();
  BOOST_TEST(info(b).depends_on == std::vector<job_id>{a});
  BOOST_TEST(info(c).depends_on == (std::vector<job_id>{a, b}));
  BOOST_TEST(info(a).dependents == (std::vector<job_id>{b, c}));
  BOOST_TEST(info(b).dependents == std::vector<job_id>{c});
  auto wk = start(steps());
  auto done = q->wait(c, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  auto es = log->snapshot();
  BOOST_TEST(first(es, event_kind::succeeded, b) < first(es, event_kind::started, c));
}

// Two dependencies a job are edge rows; one is kept in the job's row.
BOOST_AUTO_TEST_CASE(deleting_finished_jobs_deletes_their_edges) {
  auto a = submit(*job_of("flaky").max_retries(0).build());
  auto a2 = submit(*job_of("flaky").max_retries(0).build());
  auto b = submit(*job_of("step")
                     .depends_on(a)
                     .depends_on(a2)
                     .on_dependency_failure(dependency_failure::fail)
                     .build());
  auto keep = submit(*job_of("step").delay(1h).build());
  auto keep2 = submit(*job_of("step").delay(1h).build());
  auto waits = submit(*job_of("step").depends_on(keep).depends_on(keep2).build());
  auto waits_once = submit(*job_of("step").depends_on(keep).build());
  {
    auto wk = start(steps());
    BOOST_REQUIRE(q->wait(b, 60s).has_value());
    BOOST_REQUIRE(q->wait(a2, 60s).has_value());
  }
  engine_probe probe{location};
  BOOST_TEST(probe.number("SELECT count(*) FROM job_dependencies") == 4);
  BOOST_TEST(probe.number("SELECT count(*) FROM dependency_edges") == 5);
  BOOST_TEST(probe.number("SELECT count(*) FROM jobs WHERE only_dependency IS NOT NULL") == 1);
  auto purged = q->purge_failed(job_filter{});
  BOOST_REQUIRE(purged.has_value());
  BOOST_TEST(*purged == 3);
  // The edges of the deleted jobs went with them; the others stay.
  BOOST_TEST(probe.number("SELECT count(*) FROM job_dependencies") == 2);
  BOOST_TEST(info(waits).depends_on == (std::vector<job_id>{keep, keep2}));
  BOOST_TEST(info(waits_once).depends_on == std::vector<job_id>{keep});
  BOOST_TEST(info(keep).dependents == (std::vector<job_id>{waits, waits_once}));
}

BOOST_AUTO_TEST_CASE(a_fan_out_of_10000_children_joins_after_all_of_them) {
  constexpr uint32_t children = 10'000;
  std::vector<job> batch;
  batch.push_back(step("root"));
  auto join = job_of("step").payload("join");
  for (uint32_t i = 1; i <= children; ++i) {
    batch.push_back(*job_of("step").payload("child").depends_on_batch(0).build());
    join.depends_on_batch(i);
  }
  batch.push_back(*join.build());
  auto ids = q->submit_batch(std::move(batch));
  BOOST_REQUIRE_MESSAGE(ids.has_value(), ids.error().to_string());
  BOOST_TEST(q->counts()[job_status::waiting] == children + 1);
  auto j = ids->back();
  BOOST_TEST(info(j).waiting_on == static_cast<int32_t>(children));
  auto wk = start(steps(64));
  auto done = q->wait(j, 300s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->depends_on.size() == children);
  // The join started after every child had succeeded.
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, j));
  auto es = log->snapshot();
  auto join_started = first(es, event_kind::started, j);
  size_t before = 0;
  for (size_t k = 0; k < join_started; ++k)
    before += es[k].kind == event_kind::succeeded ? 1 : 0;
  BOOST_TEST(before == children + 1);
  BOOST_TEST(q->counts()[job_status::succeeded] == children + 2);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// "parent" jobs: the first attempt submits `kids` children of type "step"
// (their payloads "kid0", "kid1", ...) and waits; the next one joins the
// children's results in order, as its result.
worker_options parents(size_t kids, int32_t concurrency = 1,
                       std::function<void(std::vector<job>&)> shape = nullptr) {
  auto w = steps(concurrency);
  w.runners["parent"] = [kids, shape](job_context& ctx) -> std::string {
    if (ctx.payload() != "join") {
      std::vector<job> children;
      for (size_t i = 0; i < kids; ++i)
        children.push_back(step("kid" + std::to_string(i)));
      if (shape)
        shape(children);
      if (auto st = ctx.submit_children(std::move(children), "join"); !st)
        throw std::runtime_error(st.to_string());
      return {};
    }
    auto results = ctx.dependency_results();
    if (!results)
      throw std::runtime_error(results.error().to_string());
    std::string joined;
    for (auto& r : *results)
      joined += (joined.empty() ? "" : "+") + r.result.value_or("-");
    return joined;
  };
  return w;
}

// Runs "read" jobs: their result joins `each` of their dependency results.
worker_options reading(std::function<std::string(const dependency_result&)> each) {
  auto w = steps();
  w.runners["read"] = [each](job_context& ctx) -> std::string {
    auto results = ctx.dependency_results();
    if (!results)
      throw std::runtime_error(results.error().to_string());
    std::string out;
    for (auto& r : *results)
      out += each(r);
    return out;
  };
  return w;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(children, workflow_fixture)

BOOST_AUTO_TEST_CASE(a_dependent_reads_its_dependencies_results) {
  auto a = submit(step("alpha"));
  auto b = submit(step("beta"));
  auto reader = submit(*job_of("read").depends_on(a).depends_on(b).build());
  auto wk = start(reading([](const dependency_result& r) {
    return to_string(r.status) + std::string{":"} + r.result.value_or("-") + ";";
  }));
  auto done = q->wait(reader, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->result.value_or("") == "succeeded:alpha;succeeded:beta;");
}

// Results of 900 KiB each: the reader's pages end by bytes (4 MiB), and
// every result arrives once, in order.
BOOST_AUTO_TEST_CASE(large_results_are_read_in_pages_without_losing_one) {
  std::vector<job_id> deps;
  for (char c = 'a'; c < 'g'; ++c)
    deps.push_back(submit(step(std::string(900 * 1024, c))));
  auto reader = job_of("read");
  for (auto& d : deps)
    reader.depends_on(d);
  auto r = submit(*reader.build());
  auto wk = start(reading([](const dependency_result& d) {
    return d.result && d.result->size() == 900 * 1024 ? d.result->substr(0, 1) : "?";
  }));
  auto done = q->wait(r, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "abcdef");
}

// One slot: the parent gives its slot up while it waits, or its children
// could never run.
BOOST_AUTO_TEST_CASE(a_parent_waits_for_its_children_without_a_slot_and_joins_their_results) {
  auto p = submit(*job_of("parent").max_retries(0).build());
  auto wk = start(parents(3, 1));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "kid0+kid1+kid2");
  // Two attempts with max_retries 0: the wait spent no try.
  BOOST_TEST(done->tries == 2);
  BOOST_TEST(done->tries_before_retry == 1);
  BOOST_REQUIRE(done->attempts.size() == 2u);
  BOOST_TEST(done->attempts[0].outcome == attempt_outcome::spawned);
  BOOST_TEST(done->attempts[0].message == "spawned 3 children; waits for 3");
  BOOST_REQUIRE(done->depends_on.size() == 3u);
  for (auto& kid : done->depends_on) {
    auto k = info(kid);
    BOOST_TEST(k.parent.value_or(job_id{}) == p);
    BOOST_TEST(k.status == job_status::succeeded);
  }
  auto spawned = first_event(event_kind::spawned, p);
  BOOST_TEST(spawned.message == "spawned 3 children; waits for 3");
  BOOST_TEST(q->counts()[job_status::succeeded] == 4);
}

BOOST_AUTO_TEST_CASE(a_child_that_fails_cancels_its_parent_and_the_rest_of_its_children) {
  auto p = submit(*job_of("parent").build());
  // Child 0 fails for good; child 1 is not due for an hour.
  auto wk = start(parents(2, 1, [](std::vector<job>& kids) {
    kids[0] = *job_of("flaky").max_retries(0).build();
    kids[1] = *job_of("step").delay(1h).build();
  }));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::cancelled);
  auto kids = done->depends_on;
  BOOST_REQUIRE(kids.size() == 2u);
  BOOST_TEST(first_event(event_kind::cancelled, p).message
             == "dependency " + kids[0].to_string() + " ended failed");
  BOOST_TEST(info(kids[1]).status == job_status::cancelled);
  BOOST_TEST(first_event(event_kind::cancelled, kids[1]).message
             == "parent " + p.to_string() + " ended cancelled");
  auto counts = q->counts();
  BOOST_TEST(counts[job_status::pending] == 0);
  BOOST_TEST(counts[job_status::waiting] == 0);
}

// A job that waits on a parent must not make the parent forget its
// children (has_dependents keeps both bits).
BOOST_AUTO_TEST_CASE(a_parent_with_a_dependent_still_cancels_its_children) {
  auto p = submit(*job_of("parent").build());
  auto wk = start(parents(2, 1, [](std::vector<job>& kids) {
    kids[0] = *job_of("flaky").max_retries(0).delay(1min).build();
    kids[1] = *job_of("step").delay(1h).build();
  }));
  BOOST_REQUIRE(log->wait_for(event_kind::spawned, 1, p));
  auto r = submit(*job_of("step").depends_on(p).build());
  auto kids = info(p).depends_on;
  BOOST_REQUIRE(kids.size() == 2u);
  advance(1min);
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::cancelled);
  BOOST_TEST(first_event(event_kind::cancelled, kids[1]).message
             == "parent " + p.to_string() + " ended cancelled");
  BOOST_TEST(info(r).status == job_status::cancelled);
}

BOOST_AUTO_TEST_CASE(with_the_run_policy_a_parent_joins_after_a_failed_child) {
  auto p = submit(*job_of("parent").on_dependency_failure(dependency_failure::run).build());
  auto wk = start(parents(2, 1, [](std::vector<job>& kids) {
    kids[0] = *job_of("flaky").max_retries(0).build();
  }));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "-+kid1");
}

BOOST_AUTO_TEST_CASE(cancelling_a_waiting_parent_cancels_its_children) {
  auto p = submit(*job_of("parent").build());
  auto wk = start(parents(2, 1, [](std::vector<job>& kids) {
    for (auto& k : kids)
      k.delay_ms = 3'600'000;
  }));
  BOOST_REQUIRE(log->wait_for(event_kind::spawned, 1, p));
  auto kids = info(p).depends_on;
  BOOST_REQUIRE(kids.size() == 2u);
  BOOST_TEST(info(p).status == job_status::waiting);
  BOOST_TEST(q->cancel(p).ok());
  for (auto& k : kids) {
    BOOST_TEST(info(k).status == job_status::cancelled);
    BOOST_TEST(first_event(event_kind::cancelled, k).message
               == "parent " + p.to_string() + " ended cancelled");
  }
  BOOST_TEST(q->counts()[job_status::cancelled] == 3);
}

BOOST_AUTO_TEST_CASE(a_running_child_is_asked_to_stop_when_its_parent_is_cancelled) {
  auto p = submit(*job_of("parent").build());
  auto w = parents(1, 2, [](std::vector<job>& kids) { kids[0] = *job_of("long").build(); });
  w.runners["long"] = [](job_context& ctx) { ctx.wait_cancelled(std::chrono::hours{1}); };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::spawned, 1, p));
  auto kid = info(p).depends_on.at(0);
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, kid));
  BOOST_TEST(q->cancel(p).ok());
  auto k = q->wait(kid, 60s);
  BOOST_REQUIRE(k.has_value());
  BOOST_TEST(k->status == job_status::cancelled);
  BOOST_TEST(info(p).status == job_status::cancelled);
}

BOOST_AUTO_TEST_CASE(a_parent_that_crashes_before_spawning_spawns_its_children_once) {
  std::atomic<int> runs{0};
  auto p = submit(*job_of("parent").max_retries(2).build());
  auto w = parents(2);
  auto spawn = w.runners["parent"];
  w.runners["parent"] = [&runs, spawn](job_context& ctx) -> std::string {
    // The first attempt dies before it spawns; the second spawns and then
    // throws, which changes nothing: its attempt already ended.
    auto n = ++runs;
    if (n == 1)
      throw std::runtime_error("crashed before spawning");
    auto out = spawn(ctx);
    if (n == 2)
      throw std::runtime_error("crashed after spawning");
    return out;
  };
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::retried, 1, p));
  advance(1s);
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "kid0+kid1");
  BOOST_TEST(done->depends_on.size() == 2u);
  BOOST_TEST(q->counts()[job_status::succeeded] == 3);
  BOOST_TEST(runs.load() == 3);
}

BOOST_AUTO_TEST_CASE(bad_children_are_refused_before_anything_is_sent) {
  std::vector<status> got;
  std::mutex mtx;
  auto p = submit(*job_of("check").build());
  auto w = steps();
  w.runners["check"] = [&](job_context& ctx) {
    auto heavy = step("heavy");
    heavy.weight = 0;
    auto typeless = step("typeless");
    typeless.type.clear();
    std::vector<status> calls{
      ctx.submit_children({}, "x"), ctx.submit_children({step("ok"), heavy}, "x"),
      ctx.submit_children({step("ok"), typeless}, "x"),
      ctx.submit_children({*job_of("step").depends_on_batch(0).build()}, "x")};
    std::lock_guard<std::mutex> guard{mtx};
    got = std::move(calls);
  };
  auto wk = start(std::move(w));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  // Nothing was sent, and the attempt went on and completed.
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(q->counts().total() == 1);
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_REQUIRE(got.size() == 4u);
  BOOST_TEST(got[0].field() == "children");
  BOOST_TEST(got[1].field() == "children[1].weight");
  BOOST_TEST(got[2].field() == "children[1].type");
  BOOST_TEST(got[3].field() == "children[0].depends_on_batch");
  for (auto& st : got)
    BOOST_TEST(st.code() == error::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_child_the_queue_refuses_fails_the_parents_attempt) {
  auto unknown = job_id::parse("01890a5d-ac96-774b-bcce-b302099a8057");
  BOOST_REQUIRE(unknown.has_value());
  auto p = submit(*job_of("parent").max_retries(0).build());
  auto wk = start(parents(1, 1, [&](std::vector<job>& kids) {
    kids[0].depends_on.push_back(*unknown);
  }));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::failed);
  BOOST_TEST(done->attempts.back().message.find("submit_children: ") == 0u);
  BOOST_TEST(done->attempts.back().message.find(unknown->to_string()) != std::string::npos);
  BOOST_TEST(q->counts().total() == 1);
}

BOOST_AUTO_TEST_CASE(a_childs_deadline_is_at_most_its_parents) {
  auto p = submit(*job_of("parent").ttl(10min).build());
  auto wk = start(parents(2, 1, [](std::vector<job>& kids) {
    kids[0].delay_ms = 60'000;
    kids[1].delay_ms = 60'000;
    kids[1].ttl_ms = 1'000;
  }));
  BOOST_REQUIRE(log->wait_for(event_kind::spawned, 1, p));
  auto kids = info(p).depends_on;
  BOOST_REQUIRE(kids.size() == 2u);
  BOOST_TEST(info(kids[0]).deadline_ms.value_or(0) == t0 + 600'000);
  BOOST_TEST(info(kids[1]).deadline_ms.value_or(0) == t0 + 61'000);
}

BOOST_AUTO_TEST_CASE(a_parent_spawns_10000_children_and_joins_them) {
  auto p = submit(*job_of("parent").build());
  auto w = parents(10'000, 64);
  w.runners["parent"] = [](job_context& ctx) -> std::string {
    if (ctx.payload() != "join") {
      std::vector<job> kids(10'000, step("k"));
      if (auto st = ctx.submit_children(std::move(kids), "join"); !st)
        throw std::runtime_error(st.to_string());
      return {};
    }
    auto results = ctx.dependency_results();
    if (!results)
      throw std::runtime_error(results.error().to_string());
    return std::to_string(results->size());
  };
  auto wk = start(std::move(w));
  auto done = q->wait(p, 300s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "10000");
  BOOST_TEST(q->counts()[job_status::succeeded] == 10'001);
}

// A dependent with the run policy counted its dependency's failure; a
// retry of that dependency makes it wait for the rerun, not count twice.
BOOST_AUTO_TEST_CASE(retrying_a_failed_dependency_makes_its_dependents_wait_for_it_again) {
  auto a = submit(*job_of("flaky").max_retries(0).build());
  auto c = submit(*job_of("step").delay(1h).build());
  auto b = submit(*job_of("step")
                     .depends_on(a)
                     .depends_on(c)
                     .on_dependency_failure(dependency_failure::run)
                     .build());
  auto wk = start(steps());
  BOOST_REQUIRE(q->wait(a, 60s).has_value());
  BOOST_TEST(info(b).waiting_on == 1);
  // Held while b is read: the worker would otherwise fail the rerun first.
  BOOST_TEST(q->pause_type("flaky").ok());
  BOOST_TEST(q->retry_failed(a).ok());
  BOOST_TEST(info(b).waiting_on == 2);
  BOOST_TEST(q->resume_type("flaky").ok());
  BOOST_REQUIRE(log->wait_for(event_kind::failed, 2, a));
  auto bi = info(b);
  BOOST_TEST(bi.status == job_status::waiting);
  BOOST_TEST(bi.waiting_on == 1);
  advance(1h);
  auto done = q->wait(b, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  auto es = log->snapshot();
  BOOST_TEST(first(es, event_kind::succeeded, c) < first(es, event_kind::started, b));
  BOOST_TEST(q->counts()[job_status::waiting] == 0);
}

// Retry the failed dependency, then the dependent it failed: the dependent
// waits for the rerun instead of running at once.
BOOST_AUTO_TEST_CASE(a_retried_dependent_waits_again_for_its_unfinished_dependencies) {
  std::atomic<int> runs{0};
  auto a = submit(*job_of("once").max_retries(0).build());
  auto b = submit(*job_of("step")
                     .payload("b")
                     .depends_on(a)
                     .on_dependency_failure(dependency_failure::fail)
                     .build());
  auto w = steps();
  w.runners["once"] = [&runs](job_context& ctx) {
    if (++runs == 1)
      ctx.fail("first run fails");
  };
  // The dependency fails and fails its dependent; with the worker stopped,
  // both are retried, and the retried dependency cannot run in between.
  auto wk = start(std::move(w));
  auto bd = q->wait(b, 60s);
  BOOST_REQUIRE(bd.has_value());
  BOOST_TEST(bd->status == job_status::failed);
  BOOST_REQUIRE(wk.stop().ok());
  BOOST_TEST(q->retry_failed(a).ok());
  BOOST_TEST(q->retry_failed(b).ok());
  auto bi = info(b);
  BOOST_TEST(bi.status == job_status::waiting);
  BOOST_TEST(bi.waiting_on == 1);
  auto requeued = first_event(event_kind::requeued, b);
  BOOST_TEST(requeued.message == "waiting for its dependencies");
  BOOST_TEST(q->counts()[job_status::waiting] == 1);
  w = steps();
  w.runners["once"] = [&runs](job_context&) { ++runs; };
  auto again = start(std::move(w));
  auto done = q->wait(b, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(info(a).status == job_status::succeeded);
  auto es = log->snapshot();
  BOOST_TEST(first(es, event_kind::succeeded, a) < first(es, event_kind::started, b));
  BOOST_TEST(q->counts()[job_status::waiting] == 0);
}

// A bulk retry takes rows in order, and a parent's row comes before its
// children's: the parent must still wait for the children retried with it.
BOOST_AUTO_TEST_CASE(a_bulk_retry_makes_a_parent_wait_for_its_retried_children) {
  std::atomic<int> runs{0};
  auto p = submit(*job_of("parent")
                     .max_retries(0)
                     .on_dependency_failure(dependency_failure::fail)
                     .build());
  auto w = parents(1, 1, [](std::vector<job>& kids) {
    kids[0] = *job_of("once").max_retries(0).build();
  });
  w.runners["once"] = [&runs](job_context& ctx) -> std::string {
    if (++runs == 1)
      ctx.fail("first run fails");
    return "ok";
  };
  auto wk = start(std::move(w));
  auto failed = q->wait(p, 60s);
  BOOST_REQUIRE(failed.has_value());
  BOOST_TEST(failed->status == job_status::failed);
  BOOST_REQUIRE(wk.stop().ok());
  auto summary = q->retry_failed(job_filter{});
  BOOST_REQUIRE(summary.has_value());
  BOOST_TEST(summary->retried == 2);
  auto pi = info(p);
  BOOST_TEST(pi.status == job_status::waiting);
  BOOST_TEST(pi.waiting_on == 1);
  auto again = parents(1, 1);
  again.runners["once"] = [&runs](job_context&) -> std::string {
    ++runs;
    return "ok";
  };
  auto wk2 = start(std::move(again));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "ok");
}

// A child naming its parent, or a job that waits on the parent, would make
// the parent wait on itself: the queue refuses it, and the attempt fails
// with nothing inserted.
BOOST_AUTO_TEST_CASE(a_child_may_not_depend_on_its_parent_or_on_what_waits_on_it) {
  auto self = submit(*job_of("parent").payload("self").max_retries(0).build());
  auto through = submit(*job_of("parent").payload("through").max_retries(0).build());
  auto held = submit(*job_of("parent")
                        .payload("held")
                        .unique_key("held-parent")
                        .max_retries(0)
                        .build());
  auto waiter = submit(*job_of("step").depends_on(through).build());
  auto w = steps();
  w.runners["parent"] = [waiter](job_context& ctx) {
    auto kid = step("kid");
    if (ctx.payload() == "self")
      kid.depends_on.push_back(ctx.id());
    else if (ctx.payload() == "through")
      kid.depends_on.push_back(waiter);
    else
      kid.unique_key = "held-parent";  // resolves to the parent itself
    if (auto st = ctx.submit_children({step("fine"), kid}, "join"); !st)
      throw std::runtime_error(st.to_string());
  };
  auto wk = start(std::move(w));
  for (auto& [p, field] : {std::pair{self, "depends_on"}, std::pair{through, "depends_on"},
                           std::pair{held, "unique_key"}}) {
    auto done = q->wait(p, 60s);
    BOOST_REQUIRE(done.has_value());
    BOOST_TEST(done->status == job_status::failed);
    auto& m = done->attempts.back().message;
    BOOST_TEST(m.find("is the parent or waits on it") != std::string::npos, m);
    BOOST_TEST(m.find(std::string{"field '"} + field + "'") != std::string::npos, m);
    BOOST_TEST(m.find("job 1 of 2") != std::string::npos, m);
  }
  // Nothing but the four submitted jobs: no child was inserted.
  BOOST_TEST(q->counts().total() == 4);
}

// A child whose idempotency key resolves to a child of the parent's
// earlier spawn joins once: the edge to it exists already.
BOOST_AUTO_TEST_CASE(a_second_spawn_may_name_an_earlier_child_by_its_key) {
  auto p = submit(*job_of("parent").max_retries(0).build());
  auto w = steps();
  w.runners["parent"] = [](job_context& ctx) -> std::string {
    auto kid = *job_of("step").payload("kid").idempotency_key("the-kid").build();
    if (ctx.payload() == "" || ctx.payload() == "again") {
      auto next = ctx.payload() == "" ? "again" : "join";
      if (auto st = ctx.submit_children({kid}, next); !st)
        throw std::runtime_error(st.to_string());
      return {};
    }
    auto results = ctx.dependency_results();
    if (!results)
      throw std::runtime_error(results.error().to_string());
    return std::to_string(results->size()) + ":" + results->at(0).result.value_or("-");
  };
  auto wk = start(std::move(w));
  auto done = q->wait(p, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(done->result.value_or("") == "1:kid");
  BOOST_TEST(done->depends_on.size() == 1u);
  BOOST_REQUIRE(done->attempts.size() == 3u);
  BOOST_TEST(done->attempts[1].message == "spawned 1 children; waits for 0");
  BOOST_TEST(q->counts().total() == 2);
}

// A recurring instance that spawns children and ends because one failed
// still schedules the next instance.
BOOST_AUTO_TEST_CASE(a_recurring_instance_ended_by_its_children_schedules_the_next) {
  auto first_instance = add_nightly_parent();
  auto wk = start(parents(1, 1, [](std::vector<job>& kids) {
    kids[0] = *job_of("flaky").max_retries(0).build();
  }));
  advance(1min);
  auto done = q->wait(first_instance, 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::cancelled);
  auto ri = q->recurring_info("nightly");
  BOOST_REQUIRE(ri.has_value());
  BOOST_TEST((ri->last_job == first_instance));
  BOOST_TEST((ri->last_status == job_status::cancelled));
  BOOST_REQUIRE(ri->next_job.has_value());
  BOOST_TEST((ri->next_status == job_status::pending));
  BOOST_TEST(ri->next_scheduled_at_ms.value_or(0) == t0 + 120'000);
  BOOST_REQUIRE(log->wait_for(event_kind::submitted, 1, *ri->next_job));
}

// Recovery at open fails a child a crash left running, which ends its
// waiting parent, a recurring instance: the next instance made in that
// transaction is handed to the dispatcher and runs when due.
BOOST_AUTO_TEST_CASE(a_recurring_parent_ended_by_recovery_has_a_next_instance_that_runs) {
  auto first_instance = add_nightly_parent();
  {
    auto wk = start(parents(1, 1, [](std::vector<job>& kids) {
      kids[0] = *job_of("step").max_retries(0).delay(1h).build();
    }));
    advance(1min);
    BOOST_REQUIRE(log->wait_for(event_kind::spawned, 1, first_instance));
    BOOST_REQUIRE(wk.stop().ok());
  }
  log.reset();
  q.reset();
  // As a crash leaves it: the child running.
  engine_probe{location}.exec(
    "UPDATE jobs SET status = 1, attempt_token = 7, current_try = 1, started_at = "
    + std::to_string(t0 + 60'000) + ", expires_at = " + std::to_string(t0 + 120'000)
    + " WHERE parent IS NOT NULL");
  reopen();
  BOOST_TEST(info(first_instance).status == job_status::cancelled);
  auto ri = q->recurring_info("nightly");
  BOOST_REQUIRE(ri.has_value());
  BOOST_REQUIRE(ri->next_job.has_value());
  auto wk = start(parents(1, 1));
  advance(1min);
  BOOST_REQUIRE(log->wait_for(event_kind::started, 1, *ri->next_job));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A queue whose "flaky" type has a breaker: 3 failures within a minute open
// it for 30 s.
options with_breaker() {
  options o;
  o.scheduling.breakers["flaky"] = breaker_options{3, 60s, 30s};
  return o;
}

// "flaky" jobs fail while `failing` is set, and succeed after.
worker_options switchable(std::atomic<bool>& failing) {
  auto w = steps(1);
  w.runners["flaky"] = [&failing](job_context& ctx) {
    if (failing.load())
      ctx.fail("downstream is down");
  };
  return w;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(breakers, workflow_fixture)

BOOST_AUTO_TEST_CASE(a_breaker_opens_half_opens_and_closes_on_the_manual_clock) {
  reopen(with_breaker());
  std::vector<job_id> flaky;
  for (int i = 0; i < 6; ++i)
    flaky.push_back(submit(*job_of("flaky").max_retries(0).build()));
  std::atomic<bool> failing{true};
  auto wk = start(switchable(failing));
  auto opened = first_event(event_kind::breaker_opened, job_id{});
  BOOST_TEST(opened.type == "flaky");
  BOOST_TEST(opened.message == "3 failures within 60000 ms");
  BOOST_TEST(opened.run_at_ms == t0 + 30'000);
  // Other types run; no flaky job starts or spends a try while it is open.
  auto other = submit(step("other"));
  BOOST_REQUIRE(q->wait(other, 60s).has_value());
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_REQUIRE(m->breakers.size() == 1u);
  BOOST_TEST(m->breakers[0].state == breaker_state::open);
  BOOST_TEST(m->breakers[0].open_until_ms.value_or(0) == t0 + 30'000);
  BOOST_TEST(m->breakers[0].trips == 1);
  BOOST_TEST(q->counts()[job_status::failed] == 3);
  for (size_t i = 3; i < flaky.size(); ++i) {
    BOOST_TEST(info(flaky[i]).status == job_status::pending);
    BOOST_TEST(info(flaky[i]).tries == 0);
  }
  // Not a millisecond early; then one trial, which fails: open again.
  advance(29'999ms);
  BOOST_TEST(log->of(event_kind::breaker_half_open).empty());
  advance(1ms);
  BOOST_REQUIRE(log->wait_for(event_kind::breaker_opened, 2));
  BOOST_TEST(log->of(event_kind::breaker_half_open).size() == 1u);
  BOOST_TEST(log->of(event_kind::breaker_opened).at(1).message == "the trial job failed");
  BOOST_TEST(q->counts()[job_status::failed] == 4);
  // The next trial succeeds: closed, and the rest run.
  failing = false;
  advance(30s);
  BOOST_REQUIRE(log->wait_for(event_kind::breaker_closed, 1));
  BOOST_TEST(log->of(event_kind::breaker_closed).at(0).message == "the trial job succeeded");
  for (size_t i = 4; i < flaky.size(); ++i)
    BOOST_REQUIRE(q->wait(flaky[i], 60s).has_value());
  BOOST_TEST(q->counts()[job_status::succeeded] == 3);
  m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->breakers[0].state == breaker_state::closed);
  BOOST_TEST(m->breakers[0].trips == 2);
}

BOOST_AUTO_TEST_CASE(an_operator_resets_a_breaker) {
  reopen(with_breaker());
  std::vector<job_id> flaky;
  for (int i = 0; i < 4; ++i)
    flaky.push_back(submit(*job_of("flaky").max_retries(0).build()));
  std::atomic<bool> failing{true};
  auto wk = start(switchable(failing));
  BOOST_REQUIRE(log->wait_for(event_kind::breaker_opened, 1));
  failing = false;
  BOOST_TEST(q->reset_breaker("flaky").ok());
  BOOST_REQUIRE(log->wait_for(event_kind::breaker_closed, 1));
  BOOST_TEST(log->of(event_kind::breaker_closed).at(0).message == "reset");
  auto done = q->wait(flaky[3], 60s);
  BOOST_REQUIRE(done.has_value());
  BOOST_TEST(done->status == job_status::succeeded);
  BOOST_TEST(q->reset_breaker("flaky").ok());  // closed already: not an error
  BOOST_TEST(q->reset_breaker("other").code() == error::not_found);
  BOOST_TEST(q->reset_breaker("").field() == "type");
}

BOOST_AUTO_TEST_CASE(bad_breaker_options_are_refused_at_open) {
  auto refused = [&](breaker_options b) {
    options o;
    o.scheduling.breakers["flaky"] = b;
    q.reset();
    log.reset();
    auto r = queue::open(location, o);
    return r ? std::string{} : r.error().field();
  };
  BOOST_TEST(refused({0, 60s, 30s}) == "scheduling.breakers[flaky].failures");
  BOOST_TEST(refused({3, 0s, 30s}) == "scheduling.breakers[flaky].window");
  BOOST_TEST(refused({3, 60s, -1s}) == "scheduling.breakers[flaky].cool_down");
  reopen();
}

BOOST_AUTO_TEST_SUITE_END()
