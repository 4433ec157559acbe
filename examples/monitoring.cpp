// monitoring: a queue that serves its web dashboard, a JSON API and
// Prometheus metrics (options::http) while a worker runs jobs in three
// groups. Open the printed address in a browser, point Prometheus at
// /metrics, or run `ergonctl --db monitoring.db stats` beside it. It
// prints the registered workers and the worker each attempt ran on.
//
//   ./monitoring [DB] [--serve]     --serve: keep serving until Ctrl-C, with
//                                   a steady stream of 1-3 s jobs to watch
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <atomic>
#include <csignal>
#include <cstring>
#include <iostream>
#include <pthread.h>
#include <thread>

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "monitoring.db";
  bool serve = argc > 2 && std::strcmp(argv[2], "--serve") == 0;
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the queue's threads start

  ergon::options opts;
  opts.http = ergon::http_options{};  // 127.0.0.1, a free port
  auto q = ergon::queue::open(path, opts);
  if (!q) {
    std::cerr << "open: " << q.error() << '\n';
    return 1;
  }
  std::cout << "dashboard: http://127.0.0.1:" << *q->http_port() << "/\n"
            << "metrics:   http://127.0.0.1:" << *q->http_port() << "/metrics" << std::endl;

  ergon::worker_options w;
  w.name = "thumbnailer";  // recorded with each attempt, with host and pid
  w.max_concurrency = 4;
  w.runners["resize"] = [](ergon::job_context& ctx) {
    if (ctx.payload() == "corrupt.png")
      ctx.fail_permanently("not an image");
  };
  // --serve's stream: a render takes 1 to 3 s and reports its progress.
  w.runners["render"] = [](ergon::job_context& ctx) {
    int seconds = 1 + static_cast<int>(ctx.payload().size() % 3);
    for (int tenth = 1; tenth <= 10 * seconds && !ctx.cancelled(); ++tenth) {
      ctx.wait_cancelled(std::chrono::milliseconds(100));
      ctx.progress(tenth, 10 * seconds);
    }
  };
  auto worker = q->start_worker(std::move(w));
  if (!worker) {
    std::cerr << "worker: " << worker.error() << '\n';
    return 1;
  }
  std::vector<ergon::job_id> ids;
  for (int i = 0; i < 60; ++i) {
    auto j = ergon::job_builder("resize")
               .payload(i == 13 ? "corrupt.png" : "photo-" + std::to_string(i) + ".png")
               .group(i % 3 == 0 ? "free" : "paid")
               .build();
    ids.push_back(*q->submit(*j));
  }
  for (auto& id : ids)
    q->wait(id, std::chrono::minutes(1));

  // What a scrape sees, through the same snapshot.
  auto m = q->metrics();
  std::cout << "succeeded " << m->by_status[ergon::job_status::succeeded] << ", failed "
            << m->by_status[ergon::job_status::failed] << ", commits " << m->commit_us.total
            << ", attempts that failed for good "
            << m->attempts_by_outcome[static_cast<size_t>(
                 ergon::attempt_outcome::failed_permanently)]
            << '\n';
  // Who runs jobs now, and who ran the one that failed.
  auto workers = q->workers();
  if (!workers) {
    std::cerr << "workers: " << workers.error() << '\n';
    return 1;
  }
  for (auto& wk : *workers)
    std::cout << "worker " << wk.identity.name << " on " << wk.identity.host << " pid "
              << wk.identity.pid << ": " << wk.running_weight << " of " << wk.max_concurrency
              << " busy\n";
  auto failed = q->job_info(ids[13]);
  auto& ran = failed->attempts.at(0).worker;
  std::cout << "corrupt.png failed on " << ran.name << " (host " << ran.host << ", pid " << ran.pid
            << ")\n";
  if (serve) {
    std::cout << "serving; Ctrl-C stops" << std::endl;
    std::atomic<bool> stopping{false};
    std::thread stream{[&] {
      const char* groups[] = {"free", "paid", "paid", "batch"};
      for (int i = 0; !stopping; ++i) {
        q->submit(*ergon::job_builder("render")
                     .payload(std::string(static_cast<size_t>(i % 7), 'x'))
                     .group(groups[i % 4])
                     .priority(i % 4 == 3 ? 0 : 5)
                     .build());
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
      }
    }};
    int sig = 0;
    sigwait(&stop, &sig);
    stopping = true;
    stream.join();
  }
  return q->close().ok() ? 0 : 1;
}
