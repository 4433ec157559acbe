// Test helper: a process that uses a queue and gets killed by the test.
//
//   ergon-test-crash-worker <db> submit <n>   submit n jobs of type "work" one
//                                             at a time, printing "acked <id>"
//                                             after each, then wait for EOF
//   ergon-test-crash-worker <db> hang [p]     run "work" jobs: print
//                                             "started <id> <try>", then block;
//                                             one at a time, with a prefetch
//                                             window of p (default 0)
//   ergon-test-crash-worker <db> kill         run "work" jobs: each kills this
//                                             process (SIGKILL) mid-job
//   ergon-test-crash-worker <db> try-open     print "opened" or "refused <status>"
//                                             and exit
//
// ERGON_TEST_LEASE_MS sets options::lease_time (a PostgreSQL queue's).
// `hang` and `kill` recover with retry_immediately and exit with 0 when there
// is no pending "work" job to run.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"

int main(int argc, char** argv) {
  if (argc < 3)
    return 2;
  std::string path = argv[1];
  std::string mode = argv[2];
  ergon::options opts;
  opts.recovery = ergon::recovery_mode::retry_immediately;
  // PostgreSQL tests replace a stopped owner sooner than the default allows.
  if (const char* ms = std::getenv("ERGON_TEST_LEASE_MS"))
    opts.lease_time = std::chrono::milliseconds(std::atoi(ms));
  auto q = ergon::queue::open(path, opts);
  if (mode == "try-open") {
    if (q)
      std::puts("opened");
    else
      std::printf("refused %s\n", q.error().to_string().c_str());
    return 0;
  }
  if (!q) {
    std::cerr << "open: " << q.error() << '\n';
    return 1;
  }
  if (mode == "submit") {
    int n = argc > 3 ? std::atoi(argv[3]) : 100;
    for (int i = 0; i < n; ++i) {
      auto id = q->submit(*ergon::job_builder("work").payload(std::to_string(i)).build());
      // A connection lost mid-commit may fail one submit; an owner whose
      // queue was taken over fails `busy` from then on.
      if (!id) {
        std::printf("failed %s\n", id.error().to_string().c_str());
        std::fflush(stdout);
        if (id.error().code() == ergon::error::busy
            || id.error().message().find("this queue closed") != std::string::npos)
          return 2;
        continue;
      }
      std::printf("acked %s\n", id->to_string().c_str());
      std::fflush(stdout);
    }
    std::puts("all acked");
    std::fflush(stdout);
    while (std::getchar() != EOF) {
    }
    return 0;
  }
  if (q->counts()[ergon::job_status::pending] == 0) {
    std::puts("idle");
    return 0;
  }
  ergon::worker_options w;
  w.max_concurrency = 1;
  w.prefetch = argc > 3 ? std::atoi(argv[3]) : 0;
  w.runners["work"] = [mode](ergon::job_context& ctx) {
    std::printf("started %s %d\n", ctx.id().to_string().c_str(), ctx.try_number());
    std::fflush(stdout);
    if (mode == "kill")
      std::raise(SIGKILL);
    // hang: block until the test kills us; stdin stays open.
    while (std::getchar() != EOF) {
    }
  };
  auto worker = q->start_worker(std::move(w));
  if (!worker)
    return 1;
  while (std::getchar() != EOF) {
  }
  return 0;
}
