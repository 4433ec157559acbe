// W2 drain, W3 latency and W4 scale (benchmarks.md), and open: how long
// queue::open takes on a file holding many finished jobs.
//
//   ergon-bench-run [--json] [drain] [latency] [scale] [open] [sweeping]
//                   [inbox (with --db postgresql://...)] [workflow]
//                   [--scale-sizes 10000,100000,1000000] [--open-sizes 10000,100000,1000000]
#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "bench_common.hpp"
#include "ergon/job_builder.hpp"
#include "ergon/pg.hpp"
#include "ergon/queue.hpp"

using namespace ergon;
using namespace ergon::bench;
using namespace std::chrono_literals;

namespace {

// Tuning knobs, settable from the command line (see main).
options tuned;

queue open_queue(const temp_dir& dir) {
  auto q = queue::open(dir.location("run.db"), tuned);
  if (!q) {
    std::cerr << "open failed: " << q.error() << '\n';
    std::exit(1);
  }
  return std::move(*q);
}

void check(const status& st, const char* what) {
  if (!st) {
    std::cerr << what << " failed: " << st << '\n';
    std::exit(1);
  }
}

void submit_bulk(queue& q, std::vector<job>& jobs) {
  for (size_t i = 0; i < jobs.size(); i += 1'000) {
    std::vector<job> batch(jobs.begin() + static_cast<long>(i),
                           jobs.begin() + static_cast<long>(std::min(jobs.size(), i + 1'000)));
    check(q.submit_batch(std::move(batch)).error(), "submit_batch");
  }
}

// Pending jobs of types no worker serves, with mixed priorities: the backlog
// that W4 keeps in the queue while it measures.
void add_backlog(queue& q, size_t n) {
  std::mt19937 rng{42};
  // In chunks, so the benchmark's own copies don't count toward peak RSS.
  for (size_t done = 0; done < n; done += 1'000) {
    std::vector<job> batch;
    for (size_t i = done; i < std::min(n, done + 1'000); ++i)
      batch.push_back(*job_builder("backlog-" + std::to_string(rng() % 8))
                         .payload(payload_100())
                         .priority(static_cast<int32_t>(rng() % 10))
                         .build());
    check(q.submit_batch(std::move(batch)).error(), "submit_batch");
  }
}

void wait_until_succeeded(queue& q, int64_t n) {
  while (q.counts()[job_status::succeeded] < n)
    std::this_thread::sleep_for(2ms);
}

// Starts `w` running "bench" jobs that return at once, and waits until `n`
// jobs succeeded: how long that took in seconds, and the CPU per job.
std::pair<double, std::string> run_until_succeeded(queue& q, worker_options w, int64_t n,
                                                   std::optional<worker>* keep = nullptr) {
  w.runners["bench"] = [](job_context&) {};
  cpu_meter cpu;
  auto t0 = steady::now();
  auto wk = q.start_worker(std::move(w));
  check(wk.error(), "start_worker");
  wait_until_succeeded(q, n);
  double took = seconds_since(t0);
  if (keep)
    keep->emplace(std::move(*wk));
  return {took, cpu.per_job(n)};
}

line drain(size_t backlog, const std::string& name) {
  constexpr int jobs_n = 20'000;
  temp_dir dir{name};
  auto q = open_queue(dir);
  add_backlog(q, backlog);
  std::vector<job> jobs(jobs_n, *job_builder("bench").payload(payload_100()).build());
  submit_bulk(q, jobs);
  worker_options w;
  w.max_concurrency = 16;
  if (auto m = std::getenv("ERGON_BENCH_MIN"))
    w.min_concurrency = std::atoi(m);
  // A window as deep as the worker: these jobs take microseconds.
  w.prefetch = 16;
  if (auto p = std::getenv("ERGON_BENCH_PREFETCH"))
    w.prefetch = std::atoi(p);
  std::optional<worker> wk;
  auto [took, extra] = run_until_succeeded(q, std::move(w), jobs_n, &wk);
  double rate = jobs_n / took;
  // Where the rounds went: hand-overs, reports, commits and their size.
  if (std::getenv("ERGON_BENCH_DETAIL")) {
    auto ws = wk->stats();
    auto m = q.metrics();
    extra += " batches=" + std::to_string(ws.batches_received)
             + " reports=" + std::to_string(ws.requests_sent);
    if (m)
      extra += " commits=" + std::to_string(m->writer_batch_requests.total) + " requests="
               + std::to_string(m->writer_batch_requests.sum) + " commit_us="
               + std::to_string(m->commit_us.total ? m->commit_us.sum / m->commit_us.total : 0);
  }
  return {name, rate, -1, -1, peak_rss_mb(), extra};
}

// W2 on a file that holds `history` finished jobs, with the retention
// sweeper deleting them (and the drained jobs) all along, or without one:
// issue 11 wants the first within 10% of the second. Completion is read
// from the worker's committed outcomes, as deletions lower the counts.
line drain_history(size_t history, bool sweeping, const std::string& name) {
  constexpr int jobs_n = 20'000;
  temp_dir dir{name};
  {
    auto q = open_queue(dir);
    std::vector<job> old(history, *job_builder("old").payload(payload_100()).build());
    submit_bulk(q, old);
    worker_options w;
    w.max_concurrency = 16;
    w.prefetch = 16;
    w.runners["old"] = [](job_context&) {};
    auto wk = q.start_worker(std::move(w));
    check(wk.error(), "start_worker");
    wait_until_succeeded(q, static_cast<int64_t>(history));
    check(q.close(), "close");
  }
  auto opts = tuned;
  if (sweeping) {
    opts.retention.succeeded = 1ms;
    opts.retention.interval = 1s;
  }
  auto q = queue::open(dir.location("run.db"), opts);
  check(q.error(), "open");
  std::vector<job> jobs(jobs_n, *job_builder("bench").payload(payload_100()).build());
  submit_bulk(*q, jobs);
  worker_options w;
  w.max_concurrency = 16;
  w.prefetch = 16;
  w.runners["bench"] = [](job_context&) {};
  cpu_meter cpu;
  auto t0 = steady::now();
  auto wk = q->start_worker(std::move(w));
  check(wk.error(), "start_worker");
  while (wk->stats().outcomes_committed < jobs_n)
    std::this_thread::sleep_for(2ms);
  double rate = jobs_n / seconds_since(t0);
  auto left = q->metrics()->by_type["old"][job_status::succeeded];
  return {name, rate, -1, -1, peak_rss_mb(),
          cpu.per_job(jobs_n) + " history_left=" + std::to_string(left)};
}

// PostgreSQL only: jobs that an application's transactions enqueue
// (ergon/pg.hpp), on a connection of the benchmark's own.
struct app_session {
  PGconn* conn;
  pg::inbox_options inbox;

  explicit app_session(const std::string& location)
      : conn(PQconnectdb(postgres_base().c_str())) {
    if (PQstatus(conn) != CONNECTION_OK) {
      std::cerr << "connect failed: " << PQerrorMessage(conn);
      std::exit(1);
    }
    inbox.schema = location.substr(location.find("schema=") + 7);
  }
  ~app_session() { PQfinish(conn); }

  void exec(const char* sql) {
    PGresult* r = PQexec(conn, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      std::cerr << sql << ": " << PQresultErrorMessage(r);
      std::exit(1);
    }
    PQclear(r);
  }
};

// W3: one job every 2 ms, timed from before its submit to its start. With
// `through_inbox` (PostgreSQL only), each is a lone pg::submit on an
// application's connection, which commits at once.
line latency(size_t backlog, const std::string& name, bool through_inbox = false) {
  constexpr int jobs_n = 1'000;
  temp_dir dir{name};
  auto location = dir.location("run.db");
  auto q = open_queue(dir);
  std::optional<app_session> app;
  if (through_inbox)
    app.emplace(location);
  add_backlog(q, backlog);
  std::vector<double> samples(jobs_n, 0.0);
  std::atomic<int> seen{0};
  worker_options w;
  w.max_concurrency = 16;
  w.runners["bench"] = [&](job_context& ctx) {
    auto now = steady::now().time_since_epoch().count();
    auto sent = std::stoll(ctx.payload().substr(0, ctx.payload().find(':')));
    auto index = std::stoi(ctx.payload().substr(ctx.payload().find(':') + 1));
    samples[static_cast<size_t>(index)] = static_cast<double>(now - sent) / 1e6;
    ++seen;
  };
  auto wk = q.start_worker(std::move(w));
  check(wk.error(), "start_worker");
  std::this_thread::sleep_for(100ms);  // the worker is idle and waiting
  cpu_meter cpu;
  auto t0 = steady::now();
  auto next = steady::now();
  for (int i = 0; i < jobs_n; ++i) {
    std::this_thread::sleep_until(next);
    next += 2ms;
    auto sent = steady::now().time_since_epoch().count();
    auto j = *job_builder("bench").payload(std::to_string(sent) + ":" + std::to_string(i)).build();
    if (app)
      check(pg::submit(app->conn, j, app->inbox).error(), "pg::submit");
    else
      check(q.submit(std::move(j)).error(), "submit");
  }
  while (seen < jobs_n)
    std::this_thread::sleep_for(1ms);
  double rate = jobs_n / seconds_since(t0);
  auto p50 = percentile(samples, 50);
  auto p99 = percentile(samples, 99);
  return {name, rate, p50, p99, peak_rss_mb(), cpu.per_job(jobs_n)};
}

// Issue 31: one submit_batch of a root and 10,000 jobs, timed from the
// call to its return, in ms. `shape` "plain": no dependencies; "fanout":
// each depends on the root; "fanin": also a join that depends on all
// 10,000.
double graph_submit(const std::string& shape) {
  constexpr uint32_t fan = 10'000;
  temp_dir dir{"graph_" + shape};
  auto q = open_queue(dir);
  std::vector<job> jobs;
  jobs.push_back(*job_builder("bench").payload(payload_100()).delay(1h).build());
  auto join = job_builder("bench").payload(payload_100());
  for (uint32_t i = 1; i <= fan; ++i) {
    auto b = job_builder("bench").payload(payload_100());
    if (shape != "plain")
      b.depends_on_batch(0);
    jobs.push_back(*b.build());
    join.depends_on_batch(i);
  }
  if (shape == "fanin")
    jobs.push_back(*join.build());
  else
    jobs.push_back(*job_builder("bench").payload(payload_100()).build());
  auto t0 = steady::now();
  check(q.submit_batch(std::move(jobs)).error(), "submit_batch");
  return seconds_since(t0) * 1e3;
}

// The three shapes in turn, `rounds` times, so each shape's median and the
// ratio to plain come from the same stretch of the machine's speed. p50_ms
// is the median submit time; jobs_per_s the batch's jobs over it; extra
// gives the range and the median ratio to plain.
std::vector<line> graph_submits(int rounds) {
  std::vector<std::string> shapes{"plain", "fanout", "fanin"};
  std::map<std::string, std::vector<double>> ms;
  std::vector<std::vector<double>> ratios(shapes.size());
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> round;
    for (auto& s : shapes)
      round.push_back(graph_submit(s));
    for (size_t i = 0; i < shapes.size(); ++i) {
      ms[shapes[i]].push_back(round[i]);
      ratios[i].push_back(round[i] / round[0]);
    }
  }
  std::vector<line> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto& v = ms[shapes[i]];
    auto median = percentile(v, 50);
    std::ostringstream extra;
    extra << "min_ms=" << *std::min_element(v.begin(), v.end())
          << " max_ms=" << *std::max_element(v.begin(), v.end())
          << " ratio_to_plain=" << percentile(ratios[i], 50);
    out.push_back({"graph_submit_" + shapes[i], 10'002 / (median / 1e3), median, -1,
                   peak_rss_mb(), extra.str()});
  }
  return out;
}

// Issue 31: a chain of 1,000 jobs, each depending on the one before,
// submitted in one batch and run by one worker of one slot; jobs/s from
// the worker's start to the last success. Each step is a commit that ends
// one job and releases the next, then a claim.
line chain() {
  constexpr uint32_t jobs_n = 1'000;
  temp_dir dir{"chain"};
  auto q = open_queue(dir);
  std::vector<job> jobs;
  for (uint32_t i = 0; i < jobs_n; ++i) {
    auto b = job_builder("bench").payload(payload_100());
    if (i > 0)
      b.depends_on_batch(i - 1);
    jobs.push_back(*b.build());
  }
  check(q.submit_batch(std::move(jobs)).error(), "submit_batch");
  worker_options w;
  w.max_concurrency = 1;
  auto [took, cpu] = run_until_succeeded(q, std::move(w), jobs_n);
  return {"chain", jobs_n / took, took * 1e3 / jobs_n, -1, peak_rss_mb(), cpu};
}

// W2 through the inbox: 20,000 jobs enqueued in one application
// transaction; jobs_per_s is from its COMMIT to the last job's success
// (taking them in, dispatching and running them).
line inbox_drain(const std::string& name) {
  constexpr int jobs_n = 20'000;
  temp_dir dir{name};
  auto location = dir.location("run.db");
  auto q = open_queue(dir);
  app_session app{location};
  worker_options w;
  w.max_concurrency = 16;
  w.prefetch = 16;
  w.runners["bench"] = [](job_context&) {};
  auto wk = q.start_worker(std::move(w));
  check(wk.error(), "start_worker");
  auto j = *job_builder("bench").payload(payload_100()).build();
  app.exec("BEGIN");
  for (int i = 0; i < jobs_n; ++i)
    check(pg::submit(app.conn, j, app.inbox).error(), "pg::submit");
  cpu_meter cpu;
  auto t0 = steady::now();
  app.exec("COMMIT");
  wait_until_succeeded(q, jobs_n);
  return {name, jobs_n / seconds_since(t0), -1, -1, peak_rss_mb(), cpu.per_job(jobs_n)};
}

// Builds a file with `n` succeeded jobs the ordinary way (bulk submit, then
// one worker drains them; jobs_per_s is that drain), closes it, and times
// queue::open on it: once right after the build, when the start-up scan
// still covers the new rows, then three more times (median, min, max).
// Each open is followed by an untimed close.
line open_time(size_t n, const std::string& name) {
  temp_dir dir{name};
  auto path = dir.location("run.db");  // open_queue's file
  double build_s = 0;
  double drain_rate = 0;
  {
    auto q = open_queue(dir);
    auto t0 = steady::now();
    std::vector<job> jobs(n, *job_builder("bench").payload(payload_100()).build());
    submit_bulk(q, jobs);
    jobs = {};
    worker_options w;
    w.max_concurrency = 16;
    w.runners["bench"] = [](job_context&) {};
    auto t1 = steady::now();
    auto wk = q.start_worker(std::move(w));
    check(wk.error(), "start_worker");
    wait_until_succeeded(q, static_cast<int64_t>(n));
    drain_rate = static_cast<double>(n) / seconds_since(t1);
    check(wk->stop(), "stop worker");
    check(q.close(), "close");
    build_s = seconds_since(t0);
  }
  std::vector<double> ms;
  for (int i = 0; i < 4; ++i) {
    auto t0 = steady::now();
    auto q = queue::open(path, tuned);
    ms.push_back(seconds_since(t0) * 1e3);
    check(q.error(), "open");
    if (q->counts()[job_status::succeeded] != static_cast<int64_t>(n)) {
      std::cerr << "open: expected " << n << " succeeded jobs\n";
      std::exit(1);
    }
    check(q->close(), "close");
  }
  double first = ms.front();
  std::vector<double> rest(ms.begin() + 1, ms.end());
  std::sort(rest.begin(), rest.end());
  char extra[200];
  std::snprintf(extra, sizeof extra,
                "jobs=%zu open_ms=%.2f open_ms_min=%.2f open_ms_max=%.2f first_open_ms=%.2f "
                "build_s=%.1f",
                n, rest[1], rest[0], rest[2], first, build_s);
  return {name, drain_rate, -1, -1, peak_rss_mb(), extra};
}

std::string size_tag(size_t n) {
  return n >= 1'000'000 ? std::to_string(n / 1'000'000) + "m" : std::to_string(n / 1'000) + "k";
}

std::vector<size_t> parse_sizes(const std::string& s) {
  std::vector<size_t> out;
  std::stringstream in{s};
  for (std::string item; std::getline(in, item, ',');)
    out.push_back(std::stoul(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::vector<std::string> wanted;
  std::vector<size_t> sizes{10'000, 100'000, 1'000'000};
  std::vector<size_t> open_sizes{10'000, 100'000, 1'000'000};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else if (std::strcmp(argv[i], "--scale-sizes") == 0 && i + 1 < argc)
      sizes = parse_sizes(argv[++i]);
    else if (std::strcmp(argv[i], "--open-sizes") == 0 && i + 1 < argc)
      open_sizes = parse_sizes(argv[++i]);
    else if (std::strcmp(argv[i], "--writer-spin-us") == 0 && i + 1 < argc)
      tuned.writer_idle_spin = std::chrono::microseconds(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--caf-moderate-polls") == 0 && i + 1 < argc)
      tuned.scheduler.moderate_poll_attempts = static_cast<size_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--caf-aggressive-polls") == 0 && i + 1 < argc)
      tuned.scheduler.aggressive_poll_attempts = static_cast<size_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--db") == 0 && i + 1 < argc)
      postgres_base() = argv[++i];
    else if (std::strcmp(argv[i], "--caf-threads") == 0 && i + 1 < argc)
      tuned.scheduler.threads = static_cast<size_t>(std::atoi(argv[++i]));
    else
      wanted.emplace_back(argv[i]);
  }
  auto want = [&](const char* name) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
  };
  if (want("drain"))
    drain(0, "drain").print(json);
  if (want("latency"))
    latency(0, "latency").print(json);
  // PostgreSQL only (--db), and not part of a run without arguments.
  if (std::find(wanted.begin(), wanted.end(), "inbox") != wanted.end()) {
    if (postgres_base().empty()) {
      std::cerr << "inbox needs --db postgresql://...\n";
      return 1;
    }
    latency(0, "inbox_latency", true).print(json);
    inbox_drain("inbox_drain").print(json);
  }
  // Not part of a run without arguments: latency (W3) first, for the ratio.
  if (std::find(wanted.begin(), wanted.end(), "workflow") != wanted.end()) {
    for (auto& l : graph_submits(5))
      l.print(json);
    chain().print(json);
  }
  // Not part of a run without arguments.
  if (std::find(wanted.begin(), wanted.end(), "sweeping") != wanted.end()) {
    drain_history(200'000, false, "drain_history_200k").print(json);
    drain_history(200'000, true, "drain_sweeping_200k").print(json);
  }
  if (want("scale")) {
    for (auto n : sizes) {
      drain(n, "scale_drain_" + size_tag(n)).print(json);
      latency(n, "scale_latency_" + size_tag(n)).print(json);
    }
  }
  // Not part of a run without arguments: building 1M jobs takes about a minute.
  if (std::find(wanted.begin(), wanted.end(), "open") != wanted.end())
    for (auto n : open_sizes)
      open_time(n, "open_" + size_tag(n)).print(json);
}
