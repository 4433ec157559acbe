// Test helper for the SIGKILL loop: a process that submits and runs jobs
// until the test kills it.
//
//   ergon-test-kill-loop-child <db> <start log> run <n>
//       Starts a worker (4 slots) and submits n jobs of type "work", singly
//       and in batches of 3, printing "acked <id>" once each submit returns.
//       Then runs jobs until killed or until stdin closes.
//   ergon-test-kill-loop-child <db> <start log> graph <n>
//       As run, but submits n workflows, each one batch: a diamond of
//       "work" jobs (b and c depend on a, d on both) and a "parent" that
//       submits two "work" children and, run again, checks that both
//       succeeded. Prints "acked <id>" for the batch's five jobs.
//   ergon-test-kill-loop-child <db> <start log> drain
//       Runs jobs until none is waiting, pending or running, then prints
//       "drained".
//
// Both modes first print "opened <ms>": how long the open took. On
// PostgreSQL a killed owner's lease may still look held for a moment, so the
// open tries again while it fails `busy`, for up to 30 s, as a supervisor
// would. Job code appends "start <id> <try>" to the start log before it does
// anything else, checkpoints, heartbeats, and returns.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"

namespace {

// One write(2) per line: O_APPEND keeps lines whole, and the page cache
// keeps them across SIGKILL.
void log_start(int fd, const ergon::job_context& ctx) {
  auto line = "start " + ctx.id().to_string() + " " + std::to_string(ctx.try_number()) + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    std::abort();
}

void print(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4)
    return 2;
  std::string mode = argv[3];
  int fd = ::open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return 1;
  ergon::options opts;
  opts.recovery = ergon::recovery_mode::retry_immediately;
  auto started = std::chrono::steady_clock::now();
  auto q = ergon::queue::open(argv[1], opts);
  while (!q && q.error().code() == ergon::error::busy
         && std::chrono::steady_clock::now() - started < std::chrono::seconds(30))
    q = ergon::queue::open(argv[1], opts);
  if (!q) {
    std::cerr << "open: " << q.error() << '\n';
    return 1;
  }
  print("opened " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - started)
                                      .count()));
  std::mutex mtx;
  std::condition_variable idle;
  auto sub = q->subscribe([&](const ergon::event&) {
    { std::lock_guard<std::mutex> guard{mtx}; }  // no wake-up lost between check and wait
    idle.notify_all();
  });
  ergon::worker_options w;
  w.max_concurrency = 4;
  w.runners["work"] = [fd](ergon::job_context& ctx) {
    log_start(fd, ctx);
    if (!ctx.checkpoint(ctx.payload() + "+").ok() || !ctx.heartbeat().ok())
      throw std::runtime_error("checkpoint or heartbeat refused");
  };
  w.runners["parent"] = [fd](ergon::job_context& ctx) {
    log_start(fd, ctx);
    if (ctx.payload() != "join") {
      std::vector<ergon::job> kids(
        2, *ergon::job_builder("work").payload("k").max_retries(100'000).build());
      auto st = ctx.submit_children(std::move(kids), "join");
      if (!st)
        throw std::runtime_error("submit_children: " + st.to_string());
      return;
    }
    auto results = ctx.dependency_results();
    if (!results || results->size() != 2)
      throw std::runtime_error("the parent did not find its two children");
    for (auto& r : *results)
      if (r.status != ergon::job_status::succeeded)
        throw std::runtime_error("a child did not succeed");
  };
  auto worker = q->start_worker(std::move(w));
  if (!worker)
    return 1;
  // Submits the batches `batch(i)` makes until one is empty, acknowledging
  // each id, then runs jobs until stdin closes.
  auto submit_all = [&](auto batch) {
    for (int i = 0;; ++i) {
      auto jobs = batch(i);
      if (jobs.empty())
        break;
      auto ids = q->submit_batch(std::move(jobs));
      if (!ids) {
        std::cerr << "submit: " << ids.error() << '\n';
        return 1;
      }
      for (auto& id : *ids)
        print("acked " + id.to_string());
    }
    print("submitted");
    while (std::getchar() != EOF) {
    }
    return 0;
  };
  auto work = [](ergon::job_builder b) { return *b.payload("p").max_retries(100'000).build(); };
  int n = argc > 4 ? std::atoi(argv[4]) : 0;
  if (mode == "graph")
    return submit_all([&](int i) {
      if (i == n)
        return std::vector<ergon::job>{};
      return std::vector<ergon::job>{
        work(ergon::job_builder("work")),
        work(ergon::job_builder("work").depends_on_batch(0)),
        work(ergon::job_builder("work").depends_on_batch(0)),
        work(ergon::job_builder("work").depends_on_batch(1).depends_on_batch(2)),
        *ergon::job_builder("parent").payload("go").max_retries(100'000).build()};
    });
  if (mode == "run")  // singly and in batches of 3
    return submit_all([&, left = n](int i) mutable {
      int size = std::min(left, i % 2 == 0 ? 1 : 3);
      left -= size;
      return std::vector<ergon::job>(static_cast<size_t>(size), work(ergon::job_builder("work")));
    });
  // drain: wait until nothing is pending or running.
  std::unique_lock<std::mutex> guard{mtx};
  idle.wait(guard, [&] {
    auto c = q->counts();
    return c[ergon::job_status::pending] == 0 && c[ergon::job_status::running] == 0
           && c[ergon::job_status::waiting] == 0;
  });
  guard.unlock();
  worker->stop();
  q->close();
  print("drained");
  return 0;
}
