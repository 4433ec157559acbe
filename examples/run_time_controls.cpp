// Run-time controls: pause the queue, change a tenant's share, cap and rate
// limit and the report workers' concurrency while jobs run, and find them
// all again after a restart: they are kept in the database, not in the
// process.
//
//   run_time_controls [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

using namespace std::chrono_literals;

namespace {

void print_controls(ergon::queue& q, const char* when) {
  std::printf("%s:\n", when);
  auto controls = q.controls();
  if (!controls || controls->empty())
    std::printf("  none\n");
  else
    for (auto& c : *controls)
      std::printf("  %s %s%s %s\n", ergon::to_string(c.scope), c.name.c_str(),
                  c.paused ? " paused" : "", ergon::to_string(c.settings).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "run_time_controls.db";
  {
    auto q = ergon::queue::open(path);
    if (!q) {
      std::fprintf(stderr, "cannot open the queue: %s\n", q.error().to_string().c_str());
      return 1;
    }
    // Hold everything for a maintenance window; it ends by itself.
    q->pause_queue(10min);
    // tenant-a: three times the share, at most 4 at once, 20 starts a second.
    ergon::settings_change tenant_a;
    tenant_a.weight = 3;
    tenant_a.max_running = 4;
    tenant_a.rate = ergon::rate_limit{20.0, 5};
    if (auto st = q->set_group("tenant-a", tenant_a); !st) {
      std::fprintf(stderr, "set_group failed: %s\n", st.to_string().c_str());
      return 1;
    }
    // Reports are slow: two at a time, whatever the configuration said.
    ergon::settings_change reports;
    reports.max_running = 2;
    q->set_type("report", reports);
    // Every worker named "reporter", here or on other machines, runs 8 at
    // once, now and whenever one starts.
    ergon::settings_change eight;
    eight.max_running = 8;
    q->set_worker("reporter", eight);
    print_controls(*q, "before the restart");
    q->close();
  }
  // A restart (or a standby taking over) finds the same controls.
  auto q = ergon::queue::open(path);
  if (!q)
    return 1;
  print_controls(*q, "after the restart");
  q->resume_queue();
  q->reset_type("report");  // back to the configured settings
  auto job = ergon::job_builder("report").group("tenant-a").build();
  auto id = q->submit(*job);
  ergon::worker_options w;
  w.name = "reporter";
  w.max_concurrency = 2;  // 8 while the control above is in force
  w.runners["report"] = [](ergon::job_context&) { std::this_thread::sleep_for(10ms); };
  auto worker = q->start_worker(std::move(w));
  if (!worker || !id || !q->wait(*id, 10s))
    return 1;
  std::printf("the reporter runs up to %d at once\n", worker->stats().max_concurrency);
  q->reset_worker("reporter");
  print_controls(*q, "after resume_queue and reset_type");
  return q->close().ok() ? 0 : 1;
}
