// The public API: submitting, inspecting and rejecting bad input.
#define BOOST_TEST_MODULE queue_submit
#include <boost/test/unit_test.hpp>

#include <functional>

#include "ergon/job_builder.hpp"
#include "ergon/msgpack.hpp"
#include "ergon/queue.hpp"
#include "support/test_engine.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using ergon::test::engine_probe;
using ergon::test::temp_dir;
using namespace std::chrono_literals;

namespace {

constexpr int64_t t0 = 1'700'000'000'000;

struct fixture {
  temp_dir dir;
  std::string location = ergon::test::test_location(dir);
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(t0);
  queue q = open_queue();

  queue open_queue(options opts = {}) {
    opts.clock = clock;
    auto r = queue::open(location, opts);
    BOOST_REQUIRE_MESSAGE(r.has_value(), r.error().to_string());
    return std::move(*r);
  }

  std::string dump() { return engine_probe{location}.dump(); }
};

job make(const std::string& type = "email") {
  auto j = job_builder(type).payload("hello").build();
  BOOST_REQUIRE(j.has_value());
  return *j;
}

struct point {
  int32_t x;
  std::string label;
  MSGPACK_DEFINE(x, label);
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(submit, fixture)

BOOST_AUTO_TEST_CASE(submitted_job_is_pending_with_every_field) {
  auto j = job_builder("resize")
             .payload("img-1")
             .name("thumb")
             .group("tenant-a")
             .priority(5)
             .weight(2)
             .delay(1500ms)
             .ttl(60s)
             .max_retries(4)
             .backoff(100ms, 3.0, 0.5)
             .timeout(10s)
             .heartbeat_increment(4s)
             .build();
  BOOST_REQUIRE(j.has_value());
  auto id = q.submit(*j);
  BOOST_REQUIRE_MESSAGE(id.has_value(), id.error().to_string());
  BOOST_TEST(id->timestamp_ms() == t0);
  auto info = q.job_info(*id);
  BOOST_REQUIRE_MESSAGE(info.has_value(), info.error().to_string());
  BOOST_TEST((info->id == *id));
  BOOST_TEST(info->type == "resize");
  BOOST_TEST(info->payload == "img-1");
  BOOST_TEST(info->name.value_or("") == "thumb");
  BOOST_TEST(info->group.value_or("") == "tenant-a");
  BOOST_TEST(info->status == job_status::pending);
  BOOST_TEST(info->priority == 5);
  BOOST_TEST(info->weight == 2);
  BOOST_TEST(info->run_at_ms == t0 + 1500);
  BOOST_TEST(info->deadline_ms.value_or(0) == t0 + 1500 + 60'000);
  BOOST_TEST(info->max_retries == 4);
  BOOST_TEST(info->backoff.initial_ms == 100);
  BOOST_TEST(info->backoff.multiplier == 3.0);
  BOOST_TEST(info->backoff.randomization == 0.5);
  BOOST_TEST(info->timeout_ms == 10'000);
  BOOST_TEST(info->heartbeat_increment_ms == 4'000);
  BOOST_TEST(info->added_at_ms == t0);
  BOOST_TEST(info->tries == 0);
  BOOST_TEST(info->attempts.empty());
  BOOST_TEST(!info->checkpoint.has_value());
  BOOST_TEST(!info->started_at_ms.has_value());
}

BOOST_AUTO_TEST_CASE(defaults_follow_effectum) {
  auto info = q.job_info(*q.submit(make()));
  BOOST_REQUIRE(info.has_value());
  BOOST_TEST(info->max_retries == 3);
  BOOST_TEST(info->backoff.initial_ms == 20'000);
  BOOST_TEST(info->backoff.multiplier == 2.0);
  BOOST_TEST(info->backoff.randomization == 0.2);
  BOOST_TEST(info->timeout_ms == 300'000);
  BOOST_TEST(info->heartbeat_increment_ms == 120'000);
  BOOST_TEST(info->priority == 0);
  BOOST_TEST(info->weight == 1);
}

BOOST_AUTO_TEST_CASE(batch_is_committed_together_and_ids_come_in_order) {
  std::vector<job> jobs;
  for (int i = 0; i < 5; ++i)
    jobs.push_back(*job_builder("b").payload(std::to_string(i)).build());
  auto ids = q.submit_batch(jobs);
  BOOST_REQUIRE(ids.has_value());
  BOOST_REQUIRE(ids->size() == 5u);
  for (size_t i = 0; i < 5; ++i) {
    BOOST_TEST(q.job_info((*ids)[i])->payload == std::to_string(i));
    if (i > 0)
      BOOST_TEST(((*ids)[i - 1] < (*ids)[i]));
  }
  BOOST_TEST(q.counts()[job_status::pending] == 5);
}

BOOST_AUTO_TEST_CASE(a_batch_with_one_invalid_job_writes_nothing) {
  q.submit(make());
  auto before = dump();
  std::vector<job> jobs{make(), make(), make()};
  jobs[2].max_retries = -1;
  auto ids = q.submit_batch(jobs);
  BOOST_REQUIRE(!ids.has_value());
  BOOST_TEST(ids.error().code() == error::invalid_argument);
  BOOST_TEST(ids.error().field() == "max_retries");
  BOOST_TEST(ids.error().message().find("job 2 of 3") != std::string::npos);
  BOOST_TEST(dump() == before);
  BOOST_TEST(q.counts()[job_status::pending] == 1);
}

BOOST_AUTO_TEST_CASE(an_empty_batch_is_invalid) {
  auto ids = q.submit_batch({});
  BOOST_REQUIRE(!ids.has_value());
  BOOST_TEST(ids.error().field() == "jobs");
}

BOOST_AUTO_TEST_CASE(jobs_by_name_lists_oldest_first) {
  auto a = *job_builder("x").name("nightly").build();
  auto b = *job_builder("y").name("other").build();
  auto id1 = *q.submit(a);
  q.submit(b);
  clock->advance(5ms);
  auto id3 = *q.submit(a);
  auto found = q.jobs_by_name("nightly");
  BOOST_REQUIRE(found.has_value());
  BOOST_REQUIRE(found->size() == 2u);
  BOOST_TEST(((*found)[0].id == id1));
  BOOST_TEST(((*found)[1].id == id3));
  BOOST_TEST(q.jobs_by_name("nobody")->empty());
}

BOOST_AUTO_TEST_CASE(counts_follow_every_commit_and_survive_reopen) {
  auto id = *q.submit(make());
  q.submit(make());
  BOOST_REQUIRE(q.cancel_pending(id).ok());
  auto c = q.counts();
  BOOST_TEST(c[job_status::pending] == 1);
  BOOST_TEST(c[job_status::cancelled] == 1);
  BOOST_TEST(c.total() == 2);
  BOOST_REQUIRE(q.close().ok());
  auto again = open_queue();
  BOOST_TEST(again.counts()[job_status::pending] == 1);
  BOOST_TEST(again.counts()[job_status::cancelled] == 1);
}

BOOST_AUTO_TEST_CASE(unknown_and_malformed_ids) {
  auto parsed = job_id::parse("0190163d-8694-739b-aea5-966c26f8ad91");
  BOOST_REQUIRE(parsed.has_value());
  BOOST_TEST(q.job_info(*parsed).error().code() == error::not_found);
  BOOST_TEST(q.job_info(job_id{}).error().code() == error::not_found);
}

BOOST_AUTO_TEST_CASE(typed_payloads_round_trip_through_msgpack) {
  auto id = q.submit(*job_builder("p").payload(pack(point{7, "seven"})).build());
  auto back = unpack<point>(q.job_info(*id)->payload);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(back->x == 7);
  BOOST_TEST(back->label == "seven");
  auto wrong = unpack<point>("\xc1");  // 0xc1 is never valid msgpack
  BOOST_REQUIRE(!wrong.has_value());
  BOOST_TEST(wrong.error().field() == "payload");
  auto trailing = unpack<int>(pack(1) + pack(2));
  BOOST_TEST(trailing.error().field() == "payload");
}

BOOST_AUTO_TEST_CASE(calls_after_close_fail_with_closed) {
  BOOST_REQUIRE(q.close().ok());
  BOOST_TEST(q.close().ok());  // closing twice is not an error
  BOOST_TEST(q.submit(make()).error().code() == error::closed);
  BOOST_TEST(q.cancel_pending(job_id{}).code() == error::closed);
  BOOST_TEST(q.job_info(job_id{}).error().code() == error::closed);
}

BOOST_AUTO_TEST_SUITE_END()

// Every invalid field, through the builder and through submit: a typed error
// naming the field, and nothing written.
BOOST_FIXTURE_TEST_SUITE(bad_input, fixture)

BOOST_AUTO_TEST_CASE(the_builder_names_every_invalid_field) {
  struct bad_case {
    const char* field;
    std::function<void(job_builder&)> spoil;
  };
  std::vector<bad_case> cases{
    {"type", [](job_builder& b) { b = job_builder(""); }},
    {"type", [](job_builder& b) { b = job_builder(std::string(257, 't')); }},
    {"name", [](job_builder& b) { b.name(""); }},
    {"name", [](job_builder& b) { b.name(std::string(300, 'n')); }},
    {"group", [](job_builder& b) { b.group(""); }},
    // Labels reach metrics, logs and the dashboard: UTF-8, no control characters.
    {"type", [](job_builder& b) { b = job_builder(std::string{"a\0b", 3}); }},
    {"type", [](job_builder& b) { b = job_builder("tab\there"); }},
    {"name", [](job_builder& b) { b.name("bell\x07"); }},
    {"name", [](job_builder& b) { b.name("del\x7f"); }},
    {"group", [](job_builder& b) { b.group("\xc2\x9b[31m"); }},  // C1 CSI
    {"group", [](job_builder& b) { b.group("\xff\xfe"); }},
    {"group", [](job_builder& b) { b.group("\xc0\xaf"); }},      // overlong '/'
    {"group", [](job_builder& b) { b.group("\xed\xa0\x80"); }},  // a surrogate
    {"group", [](job_builder& b) { b.group("\xf4\x90\x80\x80"); }},  // past U+10FFFF
    {"group", [](job_builder& b) { b.group("cut\xe2\x82"); }},
    {"weight", [](job_builder& b) { b.weight(0); }},
    {"weight", [](job_builder& b) { b.weight(-3); }},
    {"weight", [](job_builder& b) { b.weight(max_weight + 1); }},
    {"run_at", [](job_builder& b) { b.run_at(-1); }},
    {"delay", [](job_builder& b) { b.delay(-1ms); }},
    {"delay", [](job_builder& b) { b.run_at(t0).delay(5ms); }},
    {"ttl", [](job_builder& b) { b.ttl(0ms); }},
    {"max_retries", [](job_builder& b) { b.max_retries(-1); }},
    {"max_retries", [](job_builder& b) { b.max_retries(max_retries_limit + 1); }},
    {"backoff.initial", [](job_builder& b) { b.backoff(-1ms); }},
    {"backoff.multiplier", [](job_builder& b) { b.backoff(1s, 0.5); }},
    {"backoff.multiplier", [](job_builder& b) { b.backoff(1s, std::nan("")); }},
    {"backoff.randomization", [](job_builder& b) { b.backoff(1s, 2.0, -0.1); }},
    {"backoff.randomization", [](job_builder& b) { b.backoff(1s, 2.0, std::nan("")); }},
    {"timeout", [](job_builder& b) { b.timeout(0ms); }},
    {"heartbeat_increment", [](job_builder& b) { b.heartbeat_increment(-5ms); }},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT("field " << c.field) {
      job_builder b("ok");
      c.spoil(b);
      auto built = b.build();
      BOOST_REQUIRE(!built.has_value());
      BOOST_TEST(built.error().code() == error::invalid_argument);
      BOOST_TEST(built.error().field() == c.field);
    }
  }
  // Any script is fine; a unique key may be any bytes (a hash, say).
  auto fine = job_builder("r\xc3\xa9sum\xc3\xa9").name("\xe6\x97\xa5\xe6\x9c\xac")
                .group("\xf0\x9f\x9a\x80 launch")
                .unique_key(std::string{"\0\xff\x01", 3})
                .build();
  BOOST_TEST(fine.has_value());
  auto named = job_builder(std::string{"a\x1b[2J", 6}).build();
  BOOST_REQUIRE(!named.has_value());
  BOOST_TEST(named.error().message().find("U+001B at byte 1") != std::string::npos,
             named.error().message());
}

BOOST_AUTO_TEST_CASE(submit_revalidates_hand_filled_jobs) {
  q.submit(make());
  auto before = dump();
  std::vector<std::pair<const char*, std::function<void(job&)>>> cases{
    {"type", [](job& j) { j.type.clear(); }},
    {"weight", [](job& j) { j.weight = 0; }},
    {"max_retries", [](job& j) { j.max_retries = -2; }},
    {"timeout", [](job& j) { j.timeout_ms = 0; }},
    {"heartbeat_increment", [](job& j) { j.heartbeat_increment_ms = 0; }},
    {"backoff.multiplier", [](job& j) { j.backoff.multiplier = 0.1; }},
    {"run_at", [](job& j) { j.run_at_ms = -7; }},
    {"delay", [](job& j) { j.delay_ms = -7; }},
    {"ttl", [](job& j) { j.ttl_ms = -1; }},
    {"name", [](job& j) { j.name = ""; }},
    {"group", [](job& j) { j.group = std::string(257, 'g'); }},
    {"backoff.initial", [](job& j) { j.backoff.initial_ms = -1; }},
    {"backoff.randomization", [](job& j) { j.backoff.randomization = 11; }},
  };
  for (auto& [field, spoil] : cases) {
    BOOST_TEST_CONTEXT("field " << field) {
      auto j = make();
      spoil(j);
      auto r = q.submit(j);
      BOOST_REQUIRE(!r.has_value());
      BOOST_TEST(r.error().code() == error::invalid_argument);
      BOOST_TEST(r.error().field() == field);
    }
  }
  BOOST_TEST(dump() == before);
  BOOST_TEST(q.counts().total() == 1);
}

BOOST_AUTO_TEST_CASE(payload_over_the_queue_limit_is_rejected) {
  BOOST_REQUIRE(q.close().ok());
  options opts;
  opts.max_payload_bytes = 64;
  auto small = open_queue(opts);
  auto before = dump();
  auto r = small.submit(*job_builder("big").payload(std::string(65, 'x')).build());
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().field() == "payload");
  BOOST_TEST(r.error().message().find("65 bytes") != std::string::npos);
  BOOST_TEST(dump() == before);
  BOOST_TEST(small.submit(*job_builder("fits").payload(std::string(64, 'x')).build())
               .has_value());
}

BOOST_AUTO_TEST_SUITE_END()
