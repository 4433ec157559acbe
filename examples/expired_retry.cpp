// A job that hangs past its timeout: the attempt expires, its context is
// flagged cancelled, and the job is retried. The second attempt is quick.
//
//   expired_retry [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <future>
#include <iostream>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "expired_retry.db");
  if (!q)
    return 1;
  std::promise<void> done;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind == ergon::event_kind::expired)
      std::cout << "attempt " << e.try_number << " expired\n";
    if (e.kind == ergon::event_kind::succeeded || e.kind == ergon::event_kind::failed)
      done.set_value();
  });

  ergon::worker_options opts;
  opts.runners["fetch"] = [](ergon::job_context& ctx) {
    if (ctx.try_number() == 1) {
      // Stuck on a dead connection; no heartbeat, so the attempt expires.
      ctx.wait_cancelled(std::chrono::milliseconds::max());
      auto late = ctx.complete("too late");
      std::cout << "late result rejected: " << late << '\n';
      return;
    }
    std::cout << "attempt " << ctx.try_number() << " finished in time\n";
  };
  auto worker = q->start_worker(std::move(opts));
  q->submit(*ergon::job_builder("fetch").timeout(300ms).backoff(100ms).build());
  done.get_future().wait();
  worker->stop();
  return q->close().ok() ? 0 : 1;
}
