// Dispatch under pressure: admission and preemption.
//
//  - A pressure source (here a "load" dial the program turns) with the
//    default throttle: above 0.8 only jobs of priority >= 1 start, above 0.95
//    nothing new starts. Deferred jobs keep their place and start when the
//    pressure drops.
//  - The I/O budget: jobs declare the disk I/O they expect; while running
//    jobs' declared I/O would pass 80% of what the disk moves in 2 seconds,
//    more I/O jobs wait.
//  - Preemption: an urgent job (priority 10) arriving while every slot is
//    busy asks the lowest-priority running job to yield; that job
//    checkpoints, yields without spending a try, and resumes from its
//    checkpoint once the urgent job is done.
//
//   backpressure [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  std::atomic<double> load{0.9};
  ergon::options opts;
  ergon::admission_options admission;
  admission.sources.push_back({"load", [&load] { return load.load(); }});
  admission.io_budget = ergon::io_budget_options{};  // samples /proc/diskstats
  admission.recheck_interval = 100ms;
  opts.scheduling.admission = admission;
  opts.scheduling.preemption = ergon::preemption_options{10};
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "backpressure.db", opts);
  if (!q) {
    std::fprintf(stderr, "cannot open the queue: %s\n", q.error().to_string().c_str());
    return 1;
  }
  auto sub = q->subscribe([](const ergon::event& e) {
    using k = ergon::event_kind;
    if (e.kind == k::started || e.kind == k::preempted || e.kind == k::yielded
        || e.kind == k::resumed || e.kind == k::succeeded)
      std::printf("  %-9s %s (%s, priority %d)%s%s\n", ergon::to_string(e.kind),
                  e.id.to_string().c_str(), e.type.c_str(), e.effective_priority,
                  e.message.empty() ? "" : ": ", e.message.c_str());
  });

  // Work that checkpoints its step and yields when asked for its slot.
  ergon::worker_options w;
  w.max_concurrency = 2;
  w.runners["render"] = [](ergon::job_context& ctx) {
    int step = ctx.payload().empty() ? 0 : std::stoi(ctx.payload());
    for (; step < 20; ++step) {
      if (ctx.preempted()) {
        ctx.checkpoint(std::to_string(step));
        ctx.yield();
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
  };
  w.runners["urgent"] = [](ergon::job_context&) { std::this_thread::sleep_for(50ms); };
  w.runners["copy"] = [](ergon::job_context&) { std::this_thread::sleep_for(20ms); };
  auto worker = q->start_worker(std::move(w));
  if (!worker) {
    std::fprintf(stderr, "cannot start a worker: %s\n", worker.error().to_string().c_str());
    return 1;
  }

  std::printf("load 0.9: the priority-1 job starts, the priority-0 jobs wait\n");
  auto low = q->submit(*ergon::job_builder("render").build());
  auto low2 = q->submit(*ergon::job_builder("render").build());
  auto high = q->submit(*ergon::job_builder("render").priority(1).build());
  if (!low || !low2 || !high)
    return 1;
  q->wait(*high, 5s);
  auto m = q->metrics();
  std::printf("pressure %.2f, deferrals so far %lld\n", m ? m->pressure : 0.0,
              m ? static_cast<long long>(m->deferred_by_pressure) : 0LL);

  std::printf("load 0.3: the deferred jobs start; an urgent job preempts one of them\n");
  load = 0.3;
  std::this_thread::sleep_for(50ms);  // both render jobs are running now
  auto urgent = q->submit(*ergon::job_builder("urgent").priority(10).build());
  if (!urgent)
    return 1;
  for (auto& id : {*urgent, *low, *low2})
    if (auto done = q->wait(id, 10s); !done)
      std::fprintf(stderr, "wait failed: %s\n", done.error().to_string().c_str());

  std::printf("jobs declaring disk I/O share a budget of the disk's throughput\n");
  std::vector<ergon::job_id> copies;
  for (int i = 0; i < 4; ++i)
    if (auto id = q->submit(*ergon::job_builder("copy").expected_io(64 << 20, 64 << 20).build()))
      copies.push_back(*id);
  for (auto& id : copies)
    q->wait(id, 10s);
  m = q->metrics();
  if (m)
    std::printf("disk: %.0f B/s read, %.0f B/s written; preemptions %lld, resumptions %lld\n",
                m->io_read_bytes_per_second, m->io_write_bytes_per_second,
                static_cast<long long>(m->preemptions), static_cast<long long>(m->resumptions));
  for (auto id : {*low, *low2}) {
    auto info = q->job_info(id);
    if (info)
      std::printf("%s: %s after %d yield(s), try %d\n", id.to_string().c_str(),
                  ergon::to_string(info->status), info->yields, info->tries);
  }
  return 0;
}
