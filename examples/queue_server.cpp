// An embedded queue that takes workers from other processes: the program
// opens its database with options::listen, submits jobs, and
// remote_worker processes run them. Start embedded, add machines later.
// Kill it and start it again while workers run: they go on where they were.
//
//   ERGON_SECRET=$(openssl rand -hex 32) queue_server [database] [port] [jobs]
//   ERGON_SECRET=... remote_worker 127.0.0.1 4781 (in another shell)
//
// With ERGON_SECRET set, only nodes that prove the same secret get in. With
// ERGON_WORKER_SECRET set too, workers may prove that one instead: it lets
// them register and run jobs, and nothing else (docs/distribution.md,
// "Roles"), so a worker machine's secret can't purge or cancel:
//
//   ERGON_SECRET=... ERGON_WORKER_SECRET=... queue_server
//   ERGON_SECRET=$ERGON_WORKER_SECRET remote_worker 127.0.0.1 4781
//
// It exits once every job succeeded.
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "queue_server.db";
  auto port = static_cast<uint16_t>(argc > 2 ? std::stoi(argv[2]) : 4781);
  int jobs = argc > 3 ? std::stoi(argv[3]) : 20;

  ergon::options opts;
  opts.listen = ergon::listen_options{};
  opts.listen->port = port;  // address: 127.0.0.1 unless you set another
  if (auto s = std::getenv("ERGON_SECRET"))
    opts.listen->creds.secret = s;
  if (auto s = std::getenv("ERGON_WORKER_SECRET"))
    opts.listen->worker_secret = s;
  // If this program dies (or a worker's connection drops), the jobs the
  // workers run keep running: they come back for them within this time,
  // and only the ones whose worker does not come back run again.
  opts.remote_grace = std::chrono::seconds(30);
  auto q = ergon::queue::open(path, opts);
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }
  std::cout << "listening on 127.0.0.1:" << *q->listening_port()
            << (opts.listen->creds.secret.empty() ? " (no secret: loopback only)"
                                                  : " (secret required)")
            << std::endl;

  // Subscribe before submitting, so no completion is missed.
  std::mutex mtx;
  std::condition_variable progress;
  std::set<ergon::job_id> succeeded;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind != ergon::event_kind::succeeded)
      return;
    std::lock_guard<std::mutex> guard{mtx};
    succeeded.insert(e.id);
    progress.notify_all();
  });
  std::vector<ergon::job> batch;
  for (int i = 0; i < jobs; ++i)
    batch.push_back(*ergon::job_builder("resize").payload("image-" + std::to_string(i)).build());
  auto ids = q->submit_batch(std::move(batch));
  if (!ids) {
    std::cerr << "submit: " << ids.error() << '\n';
    return 1;
  }
  std::cout << "submitted " << ids->size() << " jobs; waiting for workers" << std::endl;
  auto left = [&] {
    return std::count_if(ids->begin(), ids->end(),
                         [&](const ergon::job_id& id) { return succeeded.count(id) == 0; });
  };
  std::unique_lock<std::mutex> guard{mtx};
  for (auto shown = left(); shown > 0;) {
    progress.wait(guard);
    if (auto now = left(); now != shown)
      std::cout << (shown = now) << " left" << std::endl;
  }
  guard.unlock();
  // Closes the port too; connected workers reconnect until a queue is back.
  if (auto st = q->close(); !st) {
    std::cerr << "close: " << st << '\n';
    return 1;
  }
  std::cout << "all jobs succeeded" << std::endl;
  return 0;
}
