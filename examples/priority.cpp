// Higher priority runs first; equal priorities run by run_at, then in
// submission order. One worker slot makes the order visible.
//
//   priority [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <future>
#include <iostream>

int main(int argc, char** argv) {
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "priority.db");
  if (!q)
    return 1;
  // Submit before any worker runs, so all of them compete.
  q->submit(*ergon::job_builder("report").payload("nightly report (priority 0)").build());
  q->submit(*ergon::job_builder("report").payload("weekly digest (priority -5)").priority(-5).build());
  q->submit(*ergon::job_builder("report").payload("password reset (priority 10)").priority(10).build());
  q->submit(*ergon::job_builder("report").payload("invoice (priority 5)").priority(5).build());

  std::promise<void> done;
  int finished = 0;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind == ergon::event_kind::succeeded && ++finished == 4)
      done.set_value();
  });
  ergon::worker_options opts;
  opts.max_concurrency = 1;
  opts.runners["report"] = [](ergon::job_context& ctx) { std::cout << ctx.payload() << '\n'; };
  auto worker = q->start_worker(std::move(opts));
  done.get_future().wait();
  worker->stop();
  return q->close().ok() ? 0 : 1;
}
