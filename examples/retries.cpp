// A flaky job: it fails twice, then succeeds. Each failure waits the backoff
// delay (100 ms, then 200 ms) before the next attempt.
//
//   retries [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <future>
#include <iostream>
#include <stdexcept>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "retries.db");
  if (!q)
    return 1;
  std::promise<void> done;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind == ergon::event_kind::retried)
      std::cout << "try " << e.try_number << " failed (" << e.message << "), next at +"
                << e.run_at_ms - e.at_ms << " ms\n";
    if (e.kind == ergon::event_kind::succeeded || e.kind == ergon::event_kind::failed)
      done.set_value();
  });

  ergon::worker_options opts;
  opts.runners["flaky"] = [](ergon::job_context& ctx) {
    if (ctx.try_number() < 3)
      throw std::runtime_error("upstream timed out");  // the attempt fails
    std::cout << "try " << ctx.try_number() << " succeeded\n";
  };
  auto worker = q->start_worker(std::move(opts));

  auto id = q->submit(*ergon::job_builder("flaky")
                         .max_retries(5)
                         .backoff(100ms, 2.0, 0.0)  // 100 ms, 200 ms, 400 ms, ...
                         .build());
  done.get_future().wait();

  auto info = q->job_info(*id);
  for (auto& a : info->attempts)
    std::cout << "attempt " << a.try_number << ": " << a.outcome
              << (a.message.empty() ? "" : " - " + a.message) << '\n';
  worker->stop();
  return q->close().ok() ? 0 : 1;
}
