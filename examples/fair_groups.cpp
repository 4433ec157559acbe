// Fair shares across groups, changed at run time: weights, a timed pause, a
// rate limit, and what metrics() and allocation events report.
//
//   fair_groups [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <cstdio>
#include <thread>

using namespace std::chrono_literals;

namespace {

void print_shares(ergon::queue& q, const char* when) {
  auto m = q.metrics();
  if (!m)
    return;
  std::printf("%s:", when);
  for (auto& g : m->groups)
    std::printf("  %s %d/%d slots%s", g.group.c_str(), g.running_slots, g.allocated_slots,
                g.paused ? " (paused)" : "");
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  ergon::options opts;
  opts.scheduling.groups["tenant-a"].weight = 3;  // 3:1 against tenant-b
  opts.scheduling.groups["tenant-b"].min_slots = 1;
  opts.scheduling.group_rate_limits["tenant-c"] = {50.0, 1};  // 50 starts per second
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "fair_groups.db", opts);
  if (!q) {
    std::fprintf(stderr, "cannot open the queue: %s\n", q.error().to_string().c_str());
    return 1;
  }
  auto sub = q->subscribe([](const ergon::event& e) {
    if (e.kind == ergon::event_kind::group_allocation_changed)
      std::printf("  %s: %d -> %d slots (%s)\n", e.group.c_str(), e.previous_slots,
                  e.new_slots, ergon::to_string(e.reason));
  });

  std::vector<ergon::job> jobs;
  for (auto tenant : {"tenant-a", "tenant-b", "tenant-c"})
    for (int i = 0; i < 300; ++i)
      jobs.push_back(*ergon::job_builder("report").group(tenant).build());
  if (auto ids = q->submit_batch(std::move(jobs)); !ids) {
    std::fprintf(stderr, "submit failed: %s\n", ids.error().to_string().c_str());
    return 1;
  }

  ergon::worker_options w;
  w.max_concurrency = 8;
  w.runners["report"] = [](ergon::job_context&) { std::this_thread::sleep_for(10ms); };
  auto worker = q->start_worker(std::move(w));
  std::this_thread::sleep_for(200ms);
  // tenant-c is held to 50 starts a second: the rest of its share is lent.
  print_shares(*q, "weights 3:1:1, tenant-c rate-limited");

  q->set_group_weight("tenant-b", 3);
  std::this_thread::sleep_for(200ms);
  print_shares(*q, "tenant-b raised to weight 3");

  q->pause_group("tenant-a", 300ms);  // resumes by itself
  std::this_thread::sleep_for(100ms);
  print_shares(*q, "tenant-a paused");
  std::this_thread::sleep_for(400ms);
  print_shares(*q, "tenant-a resumed");

  q->reset_group_weights();
  while (q->counts()[ergon::job_status::pending] > 0)
    std::this_thread::sleep_for(50ms);
  auto m = q->metrics();
  if (m)
    std::printf("done; %lld slot(s) were lent beyond their group's share\n",
                static_cast<long long>(m->excess_slots_redistributed));
  sub.cancel();
  return q->close().ok() ? 0 : 1;
}
