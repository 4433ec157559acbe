// W1: enqueue_single, enqueue_bulk and enqueue_concurrent (benchmarks.md).
//
//   ergon-bench-enqueue [--json] [--jobs N] [workload...]
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "bench_common.hpp"
#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"

using namespace ergon;
using namespace ergon::bench;

namespace {

job make_job() {
  return *job_builder("bench").payload(payload_100()).build();
}

// Tuning knobs, settable from the command line (see main).
options tuned;

queue open_queue(const temp_dir& dir) {
  auto q = queue::open(dir.location("w1.db"), tuned);
  if (!q) {
    std::cerr << "open failed: " << q.error().to_string() << '\n';
    std::exit(1);
  }
  return std::move(*q);
}

void check(const status& st) {
  if (!st) {
    std::cerr << "submit failed: " << st.to_string() << '\n';
    std::exit(1);
  }
}

line enqueue_single(int n) {
  temp_dir dir{"single"};
  auto q = open_queue(dir);
  cpu_meter cpu;
  auto t0 = steady::now();
  for (int i = 0; i < n; ++i)
    check(q.submit(make_job()).error());
  return {"enqueue_single", n / seconds_since(t0), -1, -1, peak_rss_mb(), cpu.per_job(n)};
}

line enqueue_bulk(int n, int batch) {
  temp_dir dir{"bulk"};
  auto q = open_queue(dir);
  // Build the batches up front: the benchmark measures the queue, not malloc.
  std::vector<std::vector<job>> batches;
  for (int done = 0; done < n; done += batch)
    batches.emplace_back(static_cast<size_t>(std::min(batch, n - done)), make_job());
  cpu_meter cpu;
  auto t0 = steady::now();
  for (auto& b : batches)
    check(q.submit_batch(std::move(b)).error());
  return {"enqueue_bulk", n / seconds_since(t0), -1, -1, peak_rss_mb(), cpu.per_job(n)};
}

line enqueue_concurrent(int submitters, int per_submitter) {
  temp_dir dir{"concurrent"};
  auto q = open_queue(dir);
  std::vector<std::thread> threads;
  cpu_meter cpu;
  auto t0 = steady::now();
  for (int s = 0; s < submitters; ++s)
    threads.emplace_back([&] {
      for (int i = 0; i < per_submitter; ++i)
        check(q.submit(make_job()).error());
    });
  for (auto& t : threads)
    t.join();
  double n = submitters * per_submitter;
  return {"enqueue_concurrent", n / seconds_since(t0), -1, -1, peak_rss_mb(), cpu.per_job(n)};
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  int jobs = 20'000;
  std::vector<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else if (std::strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
      jobs = std::atoi(argv[++i]);
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
  if (want("enqueue_single"))
    enqueue_single(jobs).print(json);
  if (want("enqueue_bulk"))
    enqueue_bulk(jobs, 1'000).print(json);
  if (want("enqueue_concurrent"))
    enqueue_concurrent(16, jobs / 16).print(json);
}
