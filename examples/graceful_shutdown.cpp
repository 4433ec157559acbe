// Runs a steady stream of jobs until SIGINT or SIGTERM, then stops cleanly:
// no new jobs start, running ones get up to 10 s to finish, and every job is
// left succeeded or pending. Jobs still running after 10 s are retried when
// the queue is opened again.
//
//   graceful_shutdown [database path] [jobs]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

namespace {
std::atomic<bool> stop_requested{false};
extern "C" void on_signal(int) {
  stop_requested = true;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "graceful_shutdown.db");
  if (!q)
    return 1;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 2'000;

  ergon::worker_options opts;
  opts.max_concurrency = 4;
  opts.runners["work"] = [](ergon::job_context&) { std::this_thread::sleep_for(5ms); };
  auto worker = q->start_worker(std::move(opts));
  std::vector<ergon::job> batch(static_cast<size_t>(jobs), *ergon::job_builder("work").build());
  q->submit_batch(std::move(batch));
  std::cout << "running; press Ctrl-C to stop" << std::endl;

  while (!stop_requested && q->counts()[ergon::job_status::succeeded] < jobs)
    std::this_thread::sleep_for(50ms);

  std::cout << (stop_requested ? "signal received, " : "all done, ") << "closing" << std::endl;
  auto st = q->close(10s);  // stops workers, waits for running jobs
  auto c = q->counts();
  std::cout << "close: " << st << "; succeeded " << c[ergon::job_status::succeeded]
            << ", pending " << c[ergon::job_status::pending] << ", running "
            << c[ergon::job_status::running] << std::endl;
  return st.ok() ? 0 : 1;
}
