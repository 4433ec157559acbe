// A worker in its own process for a queue on another: ergon-server, or a
// program that publishes its queue (queue_server). Job code runs here;
// claims, heartbeats and outcomes go over the connection. If the
// connection drops, the queue retries this worker's running jobs at once
// ("worker lost") and the worker reconnects by itself.
//
//   ERGON_SECRET=... remote_worker [host] [port] [jobs]
//
// It stops after running `jobs` jobs (0: until SIGINT or SIGTERM).
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include <ergon/queue.hpp>
#include <ergon/queue_actor.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

namespace {

std::atomic<bool> stop_requested{false};

}  // namespace

int main(int argc, char** argv) {
  std::string host = argc > 1 ? argv[1] : "127.0.0.1";
  auto port = static_cast<uint16_t>(argc > 2 ? std::stoi(argv[2]) : 4781);
  int jobs = argc > 3 ? std::stoi(argv[3]) : 0;
  ergon::credentials creds;
  if (auto s = std::getenv("ERGON_SECRET"))
    creds.secret = s;
  std::signal(SIGINT, [](int) { stop_requested = true; });
  std::signal(SIGTERM, [](int) { stop_requested = true; });

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  ergon::queue::register_types(cfg);
  caf::actor_system sys{cfg};
  // The queue may still be starting: try for a few seconds.
  auto q = ergon::connect(sys, host, port, creds);
  for (int i = 0; !q && q.error().code() == ergon::error::unreachable && i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    q = ergon::connect(sys, host, port, creds);
  }
  if (!q) {
    std::cerr << "cannot connect: " << q.error() << '\n';
    return 1;
  }
  std::atomic<int> done{0};
  ergon::worker_options opts;
  opts.name = "remote-worker";
  opts.max_concurrency = 4;
  opts.runners["resize"] = [&](ergon::job_context& ctx) {
    ctx.complete("resized " + ctx.payload());
    if (++done == jobs)
      stop_requested = true;
  };
  auto worker = ergon::start_worker(*q, std::move(opts));
  if (!worker) {
    std::cerr << "cannot start a worker: " << worker.error() << '\n';
    return 1;
  }
  std::cout << "working for " << host << ":" << port << std::endl;
  while (!stop_requested)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Lets running jobs finish and gives back the ones that never started.
  auto st = worker->stop(std::chrono::seconds(30));
  std::cout << "ran " << done << " jobs; stopped: " << st << std::endl;
  return st ? 0 : 1;
}
