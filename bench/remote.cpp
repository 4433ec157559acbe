// W2 drain and W3 latency with workers in other processes (issue 9): the
// bench process owns the queue and publishes it on 127.0.0.1; each worker
// process connects with ergon::connect and runs a worker of max concurrency
// 16 (prefetch 16). "local" runs the same drain with the worker in the
// queue's own process, for the ratio in the same run.
//
//   ergon-bench-remote [--json] [local] [drain1] [drain2] [drain4] [latency]
//   ergon-bench-remote --worker HOST PORT   (what the bench starts)
//
// Drain: 20,000 jobs are queued with their type paused, the workers start
// and register, and the clock runs from the resume until every job
// succeeded. Latency: one idle remote worker; 1,000 submits 2 ms apart;
// from the submit call to the handler's start (steady_clock is one clock
// for every process of the machine), reported back as the job's result.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.hpp"
#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"

using namespace ergon;
using namespace ergon::bench;
using namespace std::chrono_literals;

namespace {

struct config : caf::actor_system_config {
  config() {
    load<caf::io::middleman>();
    // As a queue that owns its system sets them (options.hpp).
    set("scheduler.max-threads", 2);
    set("work-stealing.moderate-poll-attempts", 0);
    queue::register_types(*this);
  }
};

void check(const status& st, const char* what) {
  if (!st) {
    std::cerr << what << " failed: " << st << '\n';
    std::exit(1);
  }
}

worker_options bench_worker() {
  worker_options w;
  w.max_concurrency = 16;
  w.prefetch = 16;
  w.runners["bench"] = [](job_context& ctx) {
    if (ctx.payload().rfind("t", 0) == 0) {  // latency: "t<sent ns>"
      auto sent = std::stoll(ctx.payload().substr(1));
      ctx.complete(std::to_string(steady::now().time_since_epoch().count() - sent));
    }
  };
  return w;
}

int run_worker(const std::string& host, uint16_t port) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  config cfg;
  caf::actor_system sys{cfg};
  auto q = connect(sys, host, port);
  check(q.error(), "connect");
  auto w = start_worker(*q, bench_worker());
  check(w.error(), "start_worker");
  std::cout << "ready" << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  check(w->stop(10s), "stop");
  return 0;
}

// A worker process of this same binary, ended by SIGTERM and reaped.
struct worker_process {
  pid_t pid = -1;
  FILE* out = nullptr;

  worker_process(const char* self_path, uint16_t port) {
    int fds[2];
    if (::pipe(fds) != 0)
      std::exit(1);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      auto p = std::to_string(port);
      ::execl(self_path, self_path, "--worker", "127.0.0.1", p.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    out = ::fdopen(fds[0], "r");
    char buf[64] = {};
    if (!std::fgets(buf, sizeof buf, out) || std::strncmp(buf, "ready", 5) != 0) {
      std::cerr << "worker process did not start\n";
      std::exit(1);
    }
  }
  ~worker_process() {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    std::fclose(out);
  }
};

struct bench_queue {
  temp_dir dir;
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  queue_actor q;
  uint16_t port = 0;

  explicit bench_queue(const std::string& name) : dir(name) {
    auto spawned = spawn_queue(sys, dir.file("run.db"));
    check(spawned.error(), "spawn_queue");
    q = *spawned;
    auto bound = publish(q, 0);
    check(bound.error(), "publish");
    port = *bound;
  }
  ~bench_queue() { call<ok_atom>(close_atom::value); }

  template <class T, class... Ts>
  T call(Ts... xs) {
    T out{};
    self->request(q, caf::infinite, xs...)
      .receive([&](T& x) { out = std::move(x); },
               [&](caf::error& e) { check(to_status(e), "request"); });
    return out;
  }

  void wait_until_succeeded(int64_t n) {
    while (call<status_counts>(counts_atom::value)[job_status::succeeded] < n)
      std::this_thread::sleep_for(2ms);
  }
};

line drain(const char* self_path, int processes, const std::string& name) {
  constexpr int jobs_n = 20'000;
  bench_queue b{name};
  b.call<ok_atom>(pause_type_atom::value, std::string{"bench"});
  for (int i = 0; i < jobs_n; i += 1'000) {
    std::vector<job> batch(1'000, *job_builder("bench").payload(payload_100()).build());
    b.call<std::vector<job_id>>(submit_atom::value, std::move(batch));
  }
  std::vector<std::unique_ptr<worker_process>> workers;
  std::optional<worker> local;
  if (processes == 0) {
    auto w = start_worker(b.q, bench_worker());
    check(w.error(), "start_worker");
    local.emplace(std::move(*w));
  }
  for (int i = 0; i < processes; ++i)
    workers.push_back(std::make_unique<worker_process>(self_path, b.port));
  cpu_meter cpu;
  auto t0 = steady::now();
  b.call<ok_atom>(resume_type_atom::value, std::string{"bench"});
  b.wait_until_succeeded(jobs_n);
  double rate = jobs_n / seconds_since(t0);
  auto extra = "processes=" + std::to_string(processes) + " queue_" + cpu.per_job(jobs_n);
  if (local)
    check(local->stop(10s), "stop");
  return {name, rate, -1, -1, peak_rss_mb(), extra};
}

line latency(const char* self_path) {
  constexpr int jobs_n = 1'000;
  bench_queue b{"remote_latency"};
  worker_process w{self_path, b.port};
  std::this_thread::sleep_for(100ms);  // the worker is idle and waiting
  std::vector<job_id> ids;
  auto t0 = steady::now();
  auto next = steady::now();
  for (int i = 0; i < jobs_n; ++i) {
    std::this_thread::sleep_until(next);
    next += 2ms;
    auto sent = steady::now().time_since_epoch().count();
    auto j = *job_builder("bench").payload("t" + std::to_string(sent)).build();
    ids.push_back(b.call<job_id>(submit_atom::value, std::move(j)));
  }
  b.wait_until_succeeded(jobs_n);
  double rate = jobs_n / seconds_since(t0);
  std::vector<double> samples;
  for (auto& id : ids)
    samples.push_back(
      std::stod(b.call<job_info>(job_info_atom::value, id).result.value_or("0")) / 1e6);
  auto p50 = percentile(samples, 50);
  auto p99 = percentile(samples, 99);
  return {"remote_latency", rate, p50, p99, peak_rss_mb(), "processes=1"};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "--worker") == 0)
    return run_worker(argv[2], static_cast<uint16_t>(std::stoi(argv[3])));
  bool json = false;
  std::vector<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else
      wanted.emplace_back(argv[i]);
  }
  auto want = [&](const std::string& w) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), w) != wanted.end();
  };
  auto self_path = "/proc/self/exe";
  if (want("local"))
    drain(self_path, 0, "local_drain").print(json);
  for (int n : {1, 2, 4})
    if (want("drain" + std::to_string(n)))
      drain(self_path, n, "remote_drain_" + std::to_string(n)).print(json);
  if (want("latency"))
    latency(self_path).print(json);
  return 0;
}
