// The smallest useful program: a worker, some jobs, wait until they ran.
//
//   simple [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <future>
#include <iostream>

int main(int argc, char** argv) {
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "simple.db");
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }

  // Learn when all five jobs are done from the queue's events.
  std::promise<void> all_done;
  int finished = 0;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind == ergon::event_kind::succeeded && ++finished == 5)
      all_done.set_value();
  });

  ergon::worker_options opts;
  opts.max_concurrency = 2;
  opts.runners["greet"] = [](ergon::job_context& ctx) {
    std::cout << "hello, " << ctx.payload() << " (try " << ctx.try_number() << ")\n";
  };
  auto worker = q->start_worker(std::move(opts));

  for (auto name : {"ada", "grace", "edsger", "barbara", "ken"})
    q->submit(*ergon::job_builder("greet").payload(name).build());

  all_done.get_future().wait();
  std::cout << q->counts()[ergon::job_status::succeeded] << " jobs succeeded\n";
  worker->stop();
  return q->close().ok() ? 0 : 1;
}
