// Results and waiting: submit a job, wait for it, read its result. Also a
// job that fails for good, one that is cancelled while it runs, and the
// dead letters an operator would look at.
//
//   results [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <future>
#include <iostream>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "results.db");
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }

  std::promise<void> export_started;  // set once the export is under way
  ergon::worker_options opts;
  // Returning a string stores it as the job's result.
  opts.runners["square"] = [](ergon::job_context& ctx) {
    auto n = std::stoll(ctx.payload());
    return std::to_string(n * n);
  };
  // Bad input will not get better by retrying: fail for good.
  opts.runners["parse"] = [](ergon::job_context& ctx) {
    ctx.log(ergon::log_level::info, "parsing " + std::to_string(ctx.payload().size()) + " bytes");
    if (ctx.payload().empty())
      throw ergon::permanent_failure("empty document");
  };
  // A long job reports progress and stops when asked to.
  opts.runners["export"] = [&](ergon::job_context& ctx) {
    for (int64_t done = 0; done < 1'000; ++done) {
      ctx.progress(done, 1'000, "rows exported");
      if (done == 50)
        export_started.set_value();
      if (ctx.wait_cancelled(10ms))
        return;  // cancelled: the job ends `cancelled`
    }
  };
  auto worker = q->start_worker(std::move(opts));
  if (!worker) {
    std::cerr << "cannot start the worker: " << worker.error() << '\n';
    return 1;
  }

  // Submit, then wait for the result: no polling, the commit wakes us.
  auto id = q->submit(*ergon::job_builder("square").payload("12").result_ttl(1h).build());
  auto done = q->wait(*id, 10s);
  if (!done) {
    std::cerr << "wait: " << done.error() << '\n';
    return 1;
  }
  std::cout << "12 squared is " << done->result.value_or("?") << " (" << done->status << ")\n";

  // A permanent failure skips the retries it had left.
  auto bad = q->submit(*ergon::job_builder("parse").max_retries(5).build());
  auto failed = q->wait(*bad, 10s);
  std::cout << "parse " << failed->status << " after " << failed->tries
            << " try: " << failed->attempts.back().message << '\n';
  // What its code logged on the way, kept with the attempt.
  for (auto& line : failed->attempts.back().logs)
    std::cout << "  log: " << line.level << ' ' << line.text << '\n';

  // Cancel a running job once it has started.
  auto long_job = q->submit(*ergon::job_builder("export").max_retries(0).build());
  export_started.get_future().wait();
  q->cancel(*long_job);
  auto stopped = q->wait(*long_job, 10s);
  std::cout << "export " << stopped->status;
  if (stopped->progress)
    std::cout << " at " << stopped->progress->done << " of " << stopped->progress->total;
  std::cout << '\n';

  // Dead letters: what failed, and why; then give them another chance.
  auto dead = q->list_failed({});
  for (auto& j : dead->jobs)
    std::cout << "dead letter " << j.id << " (" << j.type
              << "): " << j.attempts.back().message << '\n';
  if (auto purged = q->purge_failed(ergon::job_filter{}))
    std::cout << "purged " << *purged << " failed job(s)\n";

  worker->stop();
  return q->close().ok() ? 0 : 1;
}
