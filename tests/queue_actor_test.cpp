// The queue as a typed actor: every request answered after its commit, the
// same errors as the blocking calls, events to subscribed actors, close.
#define BOOST_TEST_MODULE queue_actor
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/scoped_actor.hpp>

#include <cmath>
#include <limits>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::temp_dir;
using ergon::test::test_location;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

struct config : caf::actor_system_config {
  config() {
    queue::register_types(*this);
    set("scheduler.max-threads", 2);
  }
};

struct fixture {
  temp_dir dir;
  std::string location = test_location(dir);
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(t0);
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  queue_actor q = spawn();

  queue_actor spawn() {
    options opts;
    opts.clock = clock;
    auto r = spawn_queue(sys, location, opts);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    return *r;
  }

  ~fixture() { self->send_exit(q, caf::exit_reason::user_shutdown); }

  // The answer to a request, or the status its error stands for.
  template <class T, class... Ts>
  result<T> ask(Ts&&... xs) {
    result<T> out = status{error::internal, "no answer"};
    self->request(q, caf::infinite, std::forward<Ts>(xs)...)
      .receive([&](T& value) { out = std::move(value); },
               [&](caf::error& e) { out = to_status(e); });
    return out;
  }
};

job make(const std::string& type = "email") {
  auto j = job_builder(type).payload("hello").build();
  BOOST_REQUIRE(j.has_value());
  return *j;
}

template <class T>
T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer out{sys, buf};
  BOOST_REQUIRE(!out(x));
  T back;
  caf::binary_deserializer in{sys, buf};
  BOOST_REQUIRE(!in(back));
  return back;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(requests, fixture)

BOOST_AUTO_TEST_CASE(a_submitted_job_is_committed_before_the_answer) {
  auto id = ask<job_id>(submit_atom::value, make());
  BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
  auto info = ask<job_info>(job_info_atom::value, *id);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::pending);
  BOOST_TEST(info->payload == "hello");
  auto counts = ask<status_counts>(counts_atom::value);
  BOOST_REQUIRE(counts.has_value());
  BOOST_TEST((*counts)[job_status::pending] == 1);
  auto batch = ask<std::vector<job_id>>(submit_atom::value, std::vector<job>{make(), make()});
  BOOST_REQUIRE(batch.has_value());
  BOOST_TEST(batch->size() == 2u);
}

BOOST_AUTO_TEST_CASE(errors_are_those_of_the_blocking_calls) {
  auto bad = ask<job_id>(submit_atom::value, job{});
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().code() == error::invalid_argument);
  BOOST_TEST(bad.error().field() == "type");
  auto missing = ask<job_info>(job_info_atom::value, job_id{});
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().code() == error::not_found);
  auto id = ask<job_id>(submit_atom::value, make());
  BOOST_REQUIRE(id.has_value());
  BOOST_TEST(ask<ok_atom>(cancel_atom::value, *id).has_value());
  auto again = ask<ok_atom>(cancel_atom::value, *id);
  BOOST_REQUIRE(!again.has_value());
  BOOST_TEST(again.error().code() == error::job_finished);
  auto weight = ask<ok_atom>(group_weight_atom::value, std::string{"g"}, int32_t{0});
  BOOST_REQUIRE(!weight.has_value());
  BOOST_TEST(weight.error().field() == "weight");
}

BOOST_AUTO_TEST_CASE(updates_and_scheduling_calls_apply) {
  auto id = ask<job_id>(submit_atom::value, make());
  BOOST_REQUIRE(id.has_value());
  job_update u;
  u.priority = 7;
  BOOST_REQUIRE(ask<ok_atom>(update_atom::value, *id, u).has_value());
  BOOST_TEST(ask<job_info>(job_info_atom::value, *id)->priority == 7);
  BOOST_TEST(ask<ok_atom>(pause_group_atom::value, std::string{"g"}, 1'000ms).has_value());
  BOOST_TEST(ask<ok_atom>(resume_group_atom::value, std::string{"g"}).has_value());
  settings_change four;
  four.max_running = 4;
  BOOST_TEST(ask<ok_atom>(set_worker_atom::value, std::string{"mailer"}, four).has_value());
  auto listed = ask<std::vector<control_info>>(controls_atom::value);
  BOOST_REQUIRE(listed.has_value());
  BOOST_REQUIRE_EQUAL(listed->size(), 1u);
  BOOST_TEST((listed->at(0).scope == control_scope::worker));
  four.max_running = 0;
  auto zero = ask<ok_atom>(set_worker_atom::value, std::string{"mailer"}, four);
  BOOST_REQUIRE(!zero.has_value());
  BOOST_TEST(zero.error().field() == "max_running");
  BOOST_TEST(ask<ok_atom>(reset_worker_atom::value, std::string{"mailer"}).has_value());
  BOOST_TEST(ask<std::vector<control_info>>(controls_atom::value)->empty());
  auto m = ask<metrics_snapshot>(metrics_atom::value);
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->by_status[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(recurring_jobs_are_added_read_and_deleted_through_the_actor) {
  recurring_job r;
  r.id = "nightly";
  r.schedule = "0 3 * * *";
  r.time_zone = "Europe/Berlin";
  r.job = make();
  auto first = ask<job_id>(add_recurring_atom::value, r);
  BOOST_REQUIRE_MESSAGE(first.has_value(), first.error().to_string());
  auto again = ask<job_id>(add_recurring_atom::value, r);
  BOOST_TEST(again.error().code() == error::already_exists);
  r.job.payload = "v2";
  BOOST_TEST((ask<job_id>(update_recurring_atom::value, r).value() == *first));
  BOOST_TEST(ask<job_info>(job_info_atom::value, *first)->payload == "v2");
  auto info = ask<recurring_info>(recurring_info_atom::value, std::string{"nightly"});
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->time_zone == "Europe/Berlin");
  BOOST_TEST((info->next_job == *first));
  auto all = ask<std::vector<recurring_info>>(list_recurring_atom::value, std::string{"night"});
  BOOST_TEST(all->size() == 1u);
  // Paused through the actor, timed, then resumed.
  BOOST_REQUIRE(ask<ok_atom>(pause_recurring_atom::value, std::string{"nightly"},
                             std::chrono::milliseconds{3'600'000})
                  .has_value());
  auto paused = ask<recurring_info>(recurring_info_atom::value, std::string{"nightly"});
  BOOST_TEST(paused->paused_until_ms.has_value());
  BOOST_TEST(ask<ok_atom>(resume_recurring_atom::value, std::string{"nightly"}).has_value());
  BOOST_TEST(!ask<recurring_info>(recurring_info_atom::value, std::string{"nightly"})
                ->paused_since_ms.has_value());
  BOOST_TEST(ask<ok_atom>(pause_recurring_atom::value, std::string{""}).error().field() == "id");
  BOOST_TEST(ask<ok_atom>(delete_recurring_atom::value, std::string{"nightly"}).has_value());
  auto gone = ask<ok_atom>(delete_recurring_atom::value, std::string{"nightly"});
  BOOST_TEST(gone.error().code() == error::not_found);
  r.schedule = "0 25 * * *";
  auto bad = ask<job_id>(upsert_recurring_atom::value, r);
  BOOST_TEST(bad.error().field() == "schedule");
}

BOOST_AUTO_TEST_CASE(a_subscribed_actor_receives_events) {
  BOOST_REQUIRE(ask<ok_atom>(subscribe_atom::value, caf::actor{self}).has_value());
  auto id = ask<job_id>(submit_atom::value, make());
  BOOST_REQUIRE(id.has_value());
  bool seen = false;
  while (!seen)
    self->receive([&](const event& e) { seen = e.kind == event_kind::submitted && e.id == *id; });
  BOOST_REQUIRE(ask<ok_atom>(unsubscribe_atom::value, caf::actor{self}).has_value());
}

BOOST_AUTO_TEST_CASE(a_worker_started_for_the_actor_runs_its_jobs) {
  BOOST_REQUIRE(ask<ok_atom>(subscribe_atom::value, caf::actor{self}).has_value());
  worker_options w;
  w.runners["email"] = [](job_context& ctx) { ctx.complete("sent " + ctx.payload()); };
  auto wk = start_worker(q, std::move(w));
  BOOST_REQUIRE_MESSAGE(wk.has_value(), wk.error().to_string());
  auto id = ask<job_id>(submit_atom::value, make());
  BOOST_REQUIRE(id.has_value());
  bool done = false;
  while (!done)
    self->receive([&](const event& e) { done = e.kind == event_kind::succeeded && e.id == *id; });
  auto info = ask<job_info>(job_info_atom::value, *id);
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->status == job_status::succeeded);
  BOOST_TEST(info->result.value_or("") == "sent hello");
  BOOST_TEST(wk->stop().ok());
}

// The outcome calls answer with the types queue_actor names: a retry of one
// job answers ok, a bulk retry its summary, a purge its count.
BOOST_AUTO_TEST_CASE(listings_retries_purges_and_waits_through_the_actor) {
  worker_options w;
  w.runners["doomed"] = [](job_context& ctx) { ctx.fail_permanently("no " + ctx.payload()); };
  auto wk = start_worker(q, std::move(w));
  BOOST_REQUIRE_MESSAGE(wk.has_value(), wk.error().to_string());
  auto named = job_builder("doomed").payload("a").name("first").build();
  auto a = ask<job_id>(submit_atom::value, *named);
  auto b = ask<job_id>(submit_atom::value, make("doomed"));
  BOOST_REQUIRE(a.has_value());
  BOOST_REQUIRE(b.has_value());
  auto fail_both = [&] {
    for (auto& id : {*a, *b}) {
      auto info = ask<job_info>(wait_atom::value, id, std::chrono::milliseconds::max());
      BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
      BOOST_TEST(info->status == job_status::failed);
    }
  };
  fail_both();
  BOOST_REQUIRE(ask<ok_atom>(pause_type_atom::value, std::string{"doomed"}).has_value());
  auto failed = ask<job_page>(list_failed_atom::value, job_filter{}, page_request{});
  BOOST_REQUIRE(failed.has_value());
  BOOST_REQUIRE(failed->jobs.size() == 2u);
  BOOST_TEST(failed->jobs[0].attempts.at(0).message == "no a");
  auto by_name = ask<std::vector<job_info>>(jobs_by_name_atom::value, std::string{"first"});
  BOOST_REQUIRE(by_name.has_value());
  BOOST_TEST(by_name->size() == 1u);
  BOOST_TEST(ask<ok_atom>(retry_failed_atom::value, *a).has_value());
  auto pending_again = ask<ok_atom>(retry_failed_atom::value, *a);
  BOOST_REQUIRE(!pending_again.has_value());
  BOOST_TEST(pending_again.error().field() == "id");
  auto missing = ask<ok_atom>(retry_failed_atom::value, job_id{});
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().code() == error::not_found);
  auto summary = ask<retry_summary>(retry_failed_atom::value, job_filter{});
  BOOST_REQUIRE(summary.has_value());
  BOOST_TEST(summary->retried == 1);
  job_filter pending;
  pending.status = job_status::pending;
  auto listed = ask<job_page>(list_jobs_atom::value, pending, page_request{});
  BOOST_REQUIRE(listed.has_value());
  BOOST_TEST(listed->jobs.size() == 2u);
  BOOST_REQUIRE(ask<ok_atom>(resume_type_atom::value, std::string{"doomed"}).has_value());
  fail_both();
  clock->advance(1h);
  auto old = ask<int64_t>(purge_failed_atom::value, std::chrono::milliseconds{1h});
  BOOST_REQUIRE(old.has_value());
  BOOST_TEST(*old == 0);  // failed exactly an hour ago, not more
  clock->advance(1ms);
  auto purged = ask<int64_t>(purge_failed_atom::value, std::chrono::milliseconds{1h});
  BOOST_REQUIRE(purged.has_value());
  BOOST_TEST(*purged == 2);
  auto none_left = ask<int64_t>(purge_failed_atom::value, job_filter{});
  BOOST_REQUIRE(none_left.has_value());
  BOOST_TEST(*none_left == 0);
  BOOST_TEST(ask<job_info>(job_info_atom::value, *a).error().code() == error::not_found);
  BOOST_TEST(wk->stop().ok());
}

BOOST_AUTO_TEST_CASE(bulk_cancels_and_deletes_by_tag_through_the_actor) {
  auto tagged = [&](const std::string& tenant) {
    auto j = job_builder("later").tag("tenant", tenant).run_at(4'000'000'000'000).build();
    auto id = ask<job_id>(submit_atom::value, *j);
    BOOST_REQUIRE(id.has_value());
    return *id;
  };
  auto a = tagged("acme");
  auto b = tagged("acme");
  auto c = tagged("globex");
  job_filter acme;
  acme.tags["tenant"] = "acme";
  auto cancelled = ask<cancel_summary>(cancel_jobs_atom::value, acme);
  BOOST_REQUIRE_MESSAGE(cancelled.has_value(), cancelled.error().to_string());
  BOOST_TEST(cancelled->cancelled == 2);
  BOOST_TEST(cancelled->stop_requested == 0);
  BOOST_TEST(ask<job_info>(job_info_atom::value, c)->status == job_status::pending);
  auto listed = ask<job_page>(list_jobs_atom::value, acme, page_request{});
  BOOST_REQUIRE(listed.has_value());
  BOOST_TEST(listed->jobs.size() == 2u);
  BOOST_TEST(listed->jobs[0].tags.at("tenant") == "acme");
  job_filter pending = acme;
  pending.status = job_status::pending;
  auto refused = ask<int64_t>(delete_jobs_atom::value, pending);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().field() == "status");
  auto deleted = ask<int64_t>(delete_jobs_atom::value, acme);
  BOOST_REQUIRE_MESSAGE(deleted.has_value(), deleted.error().to_string());
  BOOST_TEST(*deleted == 2);
  for (auto& id : {a, b})
    BOOST_TEST(ask<job_info>(job_info_atom::value, id).error().code() == error::not_found);
  job_filter bad;
  bad.tag_prefix = "";
  BOOST_TEST(ask<cancel_summary>(cancel_jobs_atom::value, bad).error().field() == "tag_prefix");
}

BOOST_AUTO_TEST_CASE(bad_handles_and_subscribers_are_named) {
  auto none = start_worker(queue_actor{}, worker_options{});
  BOOST_REQUIRE(!none.has_value());
  BOOST_TEST(none.error().code() == error::closed);
  auto bad = ask<ok_atom>(subscribe_atom::value, caf::actor{});
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().code() == error::invalid_argument);
  BOOST_TEST(bad.error().field() == "subscriber");
  worker_options no_runners;
  auto refused = start_worker(q, std::move(no_runners));
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().code() == error::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_second_queue_on_the_same_data_is_busy) {
  auto second = spawn_queue(sys, location);
  BOOST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().code() == error::busy);
}

BOOST_AUTO_TEST_CASE(close_answers_and_later_requests_get_closed) {
  BOOST_REQUIRE(ask<ok_atom>(close_atom::value).has_value());
  auto late = ask<job_id>(submit_atom::value, make());
  BOOST_REQUIRE(!late.has_value());
  BOOST_TEST(late.error().code() == error::closed);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(public_types_survive_the_wire) {
  config cfg;
  caf::actor_system sys{cfg};
  job j = make();
  j.name = "n";
  j.ttl_ms = 5;
  j.tags = {{"tenant", "acme"}, {"empty", ""}};
  auto back = round_trip(sys, j);
  BOOST_TEST((back.tags == j.tags));
  job_filter f;
  f.tags = {{"a", "b"}};
  f.tag_prefix = "x.";
  auto f2 = round_trip(sys, f);
  BOOST_TEST((f2.tags == f.tags));
  BOOST_TEST(f2.tag_prefix.value_or("") == "x.");
  auto c2 = round_trip(sys, cancel_summary{3, 4});
  BOOST_TEST(c2.cancelled == 3);
  BOOST_TEST(c2.stop_requested == 4);
  BOOST_TEST(back.type == "email");
  BOOST_TEST(back.name.value_or("") == "n");
  BOOST_TEST(!back.group.has_value());
  BOOST_TEST(back.ttl_ms.value_or(0) == 5);
  job_update u;
  u.payload = std::string{};
  auto u2 = round_trip(sys, u);
  BOOST_TEST(u2.payload.has_value());
  BOOST_TEST(!u2.priority.has_value());
  // Infinities and NaN travel bit for bit (CAF's own double packing never
  // ends on an infinity).
  j.backoff.multiplier = std::numeric_limits<double>::infinity();
  j.backoff.randomization = std::numeric_limits<double>::quiet_NaN();
  auto odd = round_trip(sys, j);
  BOOST_TEST(std::isinf(odd.backoff.multiplier));
  BOOST_TEST(std::isnan(odd.backoff.randomization));
  auto st = to_status(to_caf_error({error::invalid_argument, "bad", "field"}));
  BOOST_TEST(st.code() == error::invalid_argument);
  BOOST_TEST(st.message() == "bad");
  BOOST_TEST(st.field() == "field");
  BOOST_TEST(to_status(caf::error{}).ok());
}
