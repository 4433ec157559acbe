// Admission under pressure through real workers on the manual clock: a
// pressure source at 0.9 defers LOW work and admits HIGH work, and a drop
// in pressure is seen on the recheck timer; the I/O budget defers a job whose
// declared I/O would pass the window and admits it when running I/O drops;
// throwing and NaN sources; bad options are named. Also the plain parts:
// throttle steps, the disk sampler and /proc/diskstats parsing.
#define BOOST_TEST_MODULE admission
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

#include "dispatch/disk_throughput.hpp"
#include "ergon/recurring.hpp"
#include "dispatch/pressure_gauge.hpp"
#include "support/queue_fixture.hpp"

using namespace ergon;
using namespace ergon::test;
using namespace std::chrono_literals;

namespace {

// A pressure source the test sets. The source shares the value: the queue
// (a fixture member) reads it until it closes, after the test body ends.
struct dial {
  std::shared_ptr<std::atomic<double>> value = std::make_shared<std::atomic<double>>(0.0);
  void set(double x) { value->store(x); }
  pressure_source source(const std::string& name = "dial") {
    return {name, [v = value] { return v->load(); }};
  }
};

options admitting(admission_options a) {
  options o;
  o.scheduling.admission = std::move(a);
  return o;
}

job_status status_of(queue& q, const job_id& id) {
  auto i = q.job_info(id);
  BOOST_REQUIRE(i.has_value());
  return i->status;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(throttle)

BOOST_AUTO_TEST_CASE(the_default_steps_defer_low_work_above_0_8_and_everything_above_0_95) {
  throttle_policy t;
  BOOST_TEST(t.admits(0.0, -5));
  BOOST_TEST(t.admits(0.8, 0));  // at the step: not above it
  BOOST_TEST(!t.admits(0.81, 0));
  BOOST_TEST(t.admits(0.81, 1));
  BOOST_TEST(t.admits(0.95, 100));
  BOOST_TEST(!t.admits(0.96, 100));
  BOOST_TEST(!t.admits(1.0, std::numeric_limits<int32_t>::max()));
  throttle_policy none{{}};
  BOOST_TEST(none.admits(1.0, std::numeric_limits<int32_t>::min()));
  // The highest step passed decides, whatever the order they are listed in.
  throttle_policy listed{{{0.9, 5}, {0.5, 1}}};
  BOOST_TEST(!listed.admits(0.95, 4));
  BOOST_TEST(listed.admits(0.95, 5));
  BOOST_TEST(listed.admits(0.6, 1));
  BOOST_TEST(!listed.admits(0.6, 0));
}

BOOST_AUTO_TEST_CASE(sources_combine_by_maximum_and_bad_readings_are_skipped_and_counted) {
  int calls = 0;
  actors::pressure_gauge g{{{"low", [] { return 0.3; }},
                            {"high", [] { return 7.0; }},  // clamped to 1
                            {"nan", [] { return std::nan(""); }},
                            {"throws", [&]() -> double {
                               ++calls;
                               throw std::runtime_error("sensor gone");
                             }}}};
  BOOST_TEST(g.read() == 1.0);
  BOOST_TEST(g.read() == 1.0);
  BOOST_TEST(calls == 2);
  BOOST_TEST(g.errors() == 4);
  BOOST_REQUIRE_EQUAL(g.readings().size(), 4u);
  BOOST_TEST(g.readings()[0].source == "low");
  BOOST_TEST(g.readings()[0].value == 0.3);
  BOOST_TEST(g.readings()[1].value == 1.0);
  BOOST_TEST(g.readings()[2].value == 0.0);  // never a good reading
  actors::pressure_gauge negative{{{"neg", [] { return -3.0; }}}};
  BOOST_TEST(negative.read() == 0.0);
  actors::pressure_gauge empty{{}};
  BOOST_TEST(empty.read() == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(io_budget)

// Rates from a fake reader: the first rate is taken as is, later ones are
// smoothed; counters that go back start a new baseline; a reader that throws
// or reads nothing skips its sample.
BOOST_AUTO_TEST_CASE(the_sampler_smooths_the_disk_rate_on_the_queue_clock) {
  io_totals totals;
  bool fail = false;
  bool none = false;
  io_budget_options o;
  o.sample_interval = 1'000ms;
  o.smoothing = 0.5;
  o.read_totals = [&]() -> std::optional<io_totals> {
    if (fail)
      throw std::runtime_error("no disk");
    if (none)
      return std::nullopt;
    return totals;
  };
  actors::disk_throughput d{o};
  d.sample(0);
  BOOST_TEST(d.read_rate() == 0.0);
  BOOST_TEST(d.next_sample_at() == 1'000);
  totals = {1'000, 4'000};
  d.sample(500);  // not due
  BOOST_TEST(d.read_rate() == 0.0);
  d.sample(1'000);
  BOOST_TEST(d.read_rate() == 1'000.0);
  BOOST_TEST(d.write_rate() == 4'000.0);
  totals = {4'000, 4'000};
  d.sample(2'000);
  BOOST_TEST(d.read_rate() == 2'000.0);  // 0.5 * 3000 + 0.5 * 1000
  BOOST_TEST(d.write_rate() == 2'000.0);
  fail = true;
  d.sample(3'000);
  none = true;
  fail = false;
  d.sample(4'000);
  BOOST_TEST(d.read_rate() == 2'000.0);
  none = false;
  totals = {0, 0};  // a device went away: a new baseline, no rate from it
  d.sample(5'000);
  BOOST_TEST(d.read_rate() == 2'000.0);
  totals = {1'000, 0};
  d.sample(6'000);
  BOOST_TEST(d.read_rate() == 1'500.0);
  BOOST_TEST(d.write_rate() == 1'000.0);
}

BOOST_AUTO_TEST_CASE(diskstats_counts_whole_disks_only) {
  temp_dir dir;
  auto stats = dir.file("diskstats");
  std::ofstream{stats} << "   8       0 sda 100 0 2000 5 50 0 4000 9 0 0 0\n"
                       << "   8       1 sda1 90 0 1800 5 40 0 3000 9 0 0 0\n"
                       << "   7       0 loop0 10 0 80 0 0 0 0 0 0 0 0\n"
                       << " 259       0 nvme0n1 1 0 10 0 1 0 20 0 0 0 0\n"
                       << "garbage line\n";
  auto sys = dir.file("block");
  for (auto disk : {"sda", "nvme0n1"})
    std::filesystem::create_directories(sys + "/" + disk + "/device");
  std::filesystem::create_directories(sys + "/loop0");
  auto t = actors::read_diskstats(stats, sys);
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(t->read_bytes == (2'000 + 10) * 512);
  BOOST_TEST(t->write_bytes == (4'000 + 20) * 512);
  BOOST_TEST(!actors::read_diskstats(dir.file("missing"), sys).has_value());
  // This machine's own file parses (its numbers are whatever they are).
  BOOST_TEST(actors::read_diskstats().has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(through_workers)

BOOST_FIXTURE_TEST_CASE(pressure_at_0_9_defers_low_work_and_admits_high_work, queue_fixture) {
  dial d;
  d.set(0.9);
  admission_options a;
  a.sources = {d.source()};
  a.recheck_interval = 500ms;
  reopen(admitting(a));
  worker_options w;
  w.max_concurrency = 4;
  w.runners["job"] = [](job_context&) {};
  auto low = submit(*job_of("job").build());
  auto high = submit(*job_of("job").priority(1).build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
  // Deferred, not dropped: still pending and first in its line, through
  // timer rechecks while the pressure stays up.
  advance(500ms);
  advance(500ms);
  BOOST_TEST(status_of(*q, low) == job_status::pending);
  auto m = q->metrics();
  BOOST_REQUIRE(m.has_value());
  BOOST_TEST(m->pressure == 0.9);
  BOOST_TEST(m->deferred_by_pressure > 0);
  BOOST_REQUIRE_EQUAL(m->pressure_by_source.size(), 1u);
  BOOST_TEST(m->pressure_by_source[0].source == "dial");
  // The pressure drops; nothing else happens but the recheck timer.
  d.set(0.2);
  advance(500ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, low));
  BOOST_TEST(q->metrics()->pressure == 0.2);
}

BOOST_FIXTURE_TEST_CASE(above_0_95_nothing_new_starts, queue_fixture) {
  dial d;
  d.set(0.99);
  admission_options a;
  a.sources = {d.source(), {"calm", [] { return 0.0; }}};
  reopen(admitting(a));
  worker_options w;
  w.runners["job"] = [](job_context&) {};
  auto high = submit(*job_of("job").priority(1'000).build());
  auto wk = start(std::move(w));
  advance(1'000ms);
  advance(1'000ms);
  BOOST_TEST(status_of(*q, high) == job_status::pending);
  d.set(0.5);
  advance(1'000ms);
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, high));
}

BOOST_FIXTURE_TEST_CASE(a_throwing_source_is_skipped_and_counted, queue_fixture) {
  admission_options a;
  a.sources = {{"broken", []() -> double { throw std::runtime_error("sensor gone"); }}};
  reopen(admitting(a));
  worker_options w;
  w.runners["job"] = [](job_context&) {};
  auto id = submit(*job_of("job").build());
  auto wk = start(std::move(w));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, id));
  BOOST_TEST(q->metrics()->pressure_errors > 0);
}

// Disk reads of 1,000 B/s make a window of 0.8 * 1,000 * 2 = 1,600 bytes.
BOOST_FIXTURE_TEST_CASE(the_io_budget_defers_a_job_until_running_io_drops, queue_fixture) {
  // Shared with the reader, which the queue calls until it closes.
  auto read_total = std::make_shared<std::atomic<int64_t>>(0);
  admission_options a;
  a.throttle.steps.clear();
  io_budget_options b;
  b.smoothing = 1.0;  // the newest sample only: the rate does not depend on earlier ones
  b.read_totals = [read_total]() -> std::optional<io_totals> {
    return io_totals{read_total->load(), 0};
  };
  a.io_budget = b;
  reopen(admitting(a));
  // metrics() before and after each step: the dispatcher has started (and
  // subscribed to the clock's advances) and then taken each tick, with its
  // sample, before it answers.
  BOOST_REQUIRE(q->metrics().has_value());
  advance(1'000ms);  // first sample
  BOOST_REQUIRE(q->metrics().has_value());
  read_total->store(1'000);
  advance(1'000ms);  // a rate of 1,000 B/s
  BOOST_REQUIRE(q->metrics().has_value());
  // One gate per job (its payload), made before any job thread reads the map.
  std::map<std::string, gate> hold;
  for (auto name : {"big", "next", "writer", "huge"})
    hold[name];
  worker_options w;
  w.max_concurrency = 4;
  w.runners["io"] = [&](job_context& ctx) { hold.find(ctx.payload())->second.pass(); };
  w.runners["cpu"] = [](job_context&) {};
  auto io_job = [](const std::string& name, int64_t read, int64_t write, int32_t priority = 0) {
    return *job_of("io").payload(name).priority(priority).expected_io(read, write).build();
  };
  // Alone, a job larger than the whole window runs.
  auto big = submit(io_job("big", 10'000, 0));
  auto wk = start(std::move(w));
  BOOST_REQUIRE(hold.at("big").wait_for_waiting(1));
  auto m = q->metrics();
  BOOST_TEST(m->io_read_bytes_per_second == 1'000.0);
  BOOST_TEST(m->io_running_read_bytes == 10'000);
  // With it running, another I/O job waits; work without declared I/O runs.
  auto next = submit(io_job("next", 1'000, 0));
  auto cpu = submit(*job_of("cpu").build());
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, cpu));
  advance(1'000ms);
  BOOST_TEST(status_of(*q, next) == job_status::pending);
  BOOST_TEST(q->metrics()->deferred_by_io > 0);
  // Writes do not count against reads: a write-only job is admitted.
  // (Another line than `next`'s, which it would not overtake.)
  auto writer = submit(io_job("writer", 0, 5'000, 1));
  BOOST_REQUIRE(hold.at("writer").wait_for_waiting(1));
  // `big` ends: running reads drop to 0 and `next` starts.
  hold.at("big").open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, big));
  BOOST_REQUIRE(hold.at("next").wait_for_waiting(1));
  // A job larger than the whole window waits while `next` reads, and starts
  // once it ends.
  auto huge = submit(io_job("huge", 20'000, 0));
  advance(1'000ms);
  BOOST_TEST(status_of(*q, huge) == job_status::pending);
  hold.at("next").open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, next));
  BOOST_REQUIRE(hold.at("huge").wait_for_waiting(1));
  hold.at("huge").open();
  hold.at("writer").open();
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, huge));
  BOOST_REQUIRE(log->wait_for(event_kind::succeeded, 1, writer));
  BOOST_TEST(q->metrics()->io_running_read_bytes == 0);
  BOOST_TEST(q->metrics()->io_running_write_bytes == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(inputs)

BOOST_AUTO_TEST_CASE(declared_io_is_stored_and_negative_io_is_named) {
  auto bad = job_builder{"io"}.expected_io(-1, 0).build();
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(bad.error().code() == error::invalid_argument);
  BOOST_TEST(bad.error().field() == "expected_io.read_bytes");
  auto bad_write = job_builder{"io"}.expected_io(0, std::numeric_limits<int64_t>::min()).build();
  BOOST_TEST(bad_write.error().field() == "expected_io.write_bytes");
  auto too_big = job_builder{"io"}.expected_io((int64_t{1} << 40) + 1, 0).build();
  BOOST_TEST(too_big.error().field() == "expected_io.read_bytes");
  temp_dir dir;
  job_id id;
  {
    auto q = queue::open(dir.file("q.db"));
    BOOST_REQUIRE(q.has_value());
    id = *q->submit(*job_builder{"io"}.expected_io(int64_t{1} << 40, 7).build());
    BOOST_TEST(!q->job_info(*q->submit(*job_builder{"plain"}.build()))->expected_io.has_value());
  }
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(q.has_value());
  auto i = q->job_info(id);
  BOOST_REQUIRE(i.has_value());
  BOOST_REQUIRE(i->expected_io.has_value());
  BOOST_TEST(i->expected_io->read_bytes == int64_t{1} << 40);
  BOOST_TEST(i->expected_io->write_bytes == 7);
}

BOOST_AUTO_TEST_CASE(recurring_jobs_refuse_declared_io) {
  temp_dir dir;
  auto q = queue::open(dir.file("q.db"));
  BOOST_REQUIRE(q.has_value());
  recurring_job r;
  r.id = "nightly-copy";
  r.schedule = "0 3 * * *";
  r.job = *job_builder{"copy"}.expected_io(1'000, 1'000).build();
  auto id = q->upsert_recurring(r);
  BOOST_REQUIRE(!id.has_value());
  BOOST_TEST(id.error().code() == error::invalid_argument);
  BOOST_TEST(id.error().field() == "job.expected_io");
}

BOOST_AUTO_TEST_CASE(bad_admission_options_are_named_and_create_nothing) {
  struct bad {
    std::function<void(admission_options&)> set;
    std::string field;
  };
  std::vector<bad> cases = {
    {[](admission_options& a) { a.sources = {{"", [] { return 0.0; }}}; },
     "scheduling.admission.sources[0].name"},
    {[](admission_options& a) { a.sources = {{"x", [] { return 0.0; }}, {"x", [] { return 0.0; }}}; },
     "scheduling.admission.sources[1].name"},
    {[](admission_options& a) { a.sources = {{"x", nullptr}}; },
     "scheduling.admission.sources[0].read"},
    {[](admission_options& a) { a.throttle.steps = {{1.5, 1}}; },
     "scheduling.admission.throttle.steps[0].above"},
    {[](admission_options& a) { a.throttle.steps = {{0.5, 1}, {1.0, std::nullopt}}; },
     "scheduling.admission.throttle.steps[1].above"},
    {[](admission_options& a) { a.throttle.steps = {{std::nan(""), 1}}; },
     "scheduling.admission.throttle.steps[0].above"},
    {[](admission_options& a) { a.recheck_interval = 0ms; },
     "scheduling.admission.recheck_interval"},
    {[](admission_options& a) { a.io_budget = io_budget_options{}; a.io_budget->window = -1ms; },
     "scheduling.admission.io_budget.window"},
    {[](admission_options& a) { a.io_budget = io_budget_options{}; a.io_budget->share = 0; },
     "scheduling.admission.io_budget.share"},
    {[](admission_options& a) { a.io_budget = io_budget_options{}; a.io_budget->smoothing = 2; },
     "scheduling.admission.io_budget.smoothing"},
    {[](admission_options& a) {
       a.io_budget = io_budget_options{};
       a.io_budget->sample_interval = std::chrono::milliseconds::min();
     },
     "scheduling.admission.io_budget.sample_interval"},
  };
  for (auto& c : cases) {
    temp_dir dir;
    admission_options a;
    c.set(a);
    auto q = queue::open(dir.file("q.db"), admitting(a));
    BOOST_REQUIRE(!q.has_value());
    BOOST_TEST(q.error().code() == error::invalid_argument);
    BOOST_TEST(q.error().field() == c.field);
    BOOST_TEST(!std::filesystem::exists(dir.file("q.db")));
  }
}

BOOST_AUTO_TEST_SUITE_END()
