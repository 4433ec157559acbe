// Test helper for the recurring crash test: a process that runs the
// instances of one recurring job until the test kills it.
//
//   ergon-test-recurring-child <db> <clock ms>
//       Opens the queue on a manual clock set to <clock ms>, adds the
//       recurring job "tick" (every 1s, first run now) unless it exists, and runs its
//       instances. After each instance succeeds it prints "ran" and moves
//       the clock 1 s on, so the next one is due at once.
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"

int main(int argc, char** argv) {
  if (argc < 3)
    return 2;
  auto clock = std::make_shared<ergon::manual_clock>(std::stoll(argv[2]));
  ergon::options opts;
  opts.clock = clock;
  opts.recovery = ergon::recovery_mode::retry_immediately;
  auto q = ergon::queue::open(argv[1], opts);
  if (!q) {
    std::cerr << "open: " << q.error() << '\n';
    return 1;
  }
  std::mutex mtx;
  std::condition_variable ran;
  int done = 0;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind != ergon::event_kind::succeeded || e.recurring_id != "tick")
      return;
    std::lock_guard<std::mutex> guard{mtx};
    ++done;
    ran.notify_all();
  });
  ergon::recurring_job r;
  r.id = "tick";
  r.schedule = "every 1s";
  r.run_now = true;
  r.job = *ergon::job_builder("tick").max_retries(100'000).build();
  if (auto id = q->add_recurring(r); !id && id.error().code() != ergon::error::already_exists) {
    std::cerr << "add_recurring: " << id.error() << '\n';
    return 1;
  }
  ergon::worker_options w;
  w.runners["tick"] = [](ergon::job_context&) {};
  auto worker = q->start_worker(std::move(w));
  if (!worker)
    return 1;
  for (int seen = 0;; ++seen) {
    std::unique_lock<std::mutex> guard{mtx};
    ran.wait(guard, [&] { return done > seen; });
    guard.unlock();
    std::fputs("ran\n", stdout);
    std::fflush(stdout);
    clock->advance(std::chrono::seconds(1));
  }
}
