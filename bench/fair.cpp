// W5 fair (benchmarks.md) and the cost of fair scheduling with many groups.
//
//   ergon-bench-fair [--json] [--job-ms N] [w5] [groups]
//
// w5:     16 slots; 50 HIGH jobs, then 50,000 LOW jobs in group A (weight 3),
//         200 LOW jobs in group B (weight 1) and 5 maintenance jobs, each in
//         its own group. Each job sleeps --job-ms (default 1). Prints the
//         running slots per group over time, the slots A and B got while
//         both had a backlog, and the wait of the oldest job.
//         ERGON_BENCH_PREFETCH=N gives the worker a window (default 0). A
//         job's wait ends at its claim, so with a window it leaves out the
//         time the job then spends in the window.
// groups: 1,000 groups. The allocation's cost (allocate_slots, as run on
//         every membership or weight change), and picks per second of the
//         dispatch policy with every group holding ready work, on 2,000 and
//         on 16 slots, without and with an urgent threshold.
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "bench_common.hpp"
#include "ergon/actors/fair_share.hpp"
#include "ergon/actors/scheduling_policy.hpp"

using namespace ergon;
using namespace ergon::bench;

namespace {

bool json = false;
int job_ms = 1;

// Waits seen at start, per group kind.
struct waits {
  std::mutex mtx;
  std::vector<double> high_ms;
  int64_t oldest_ms = 0;
  int64_t done = 0;
};

line w5() {
  temp_dir dir{"fair"};
  options o;
  o.scheduling.groups["A"].weight = 3;
  o.scheduling.groups["B"].weight = 1;
  auto q = queue::open(dir.file("fair.db"), o);
  if (!q) {
    std::fprintf(stderr, "open: %s\n", q.error().to_string().c_str());
    std::exit(1);
  }
  waits seen;
  auto sub = q->subscribe([&](const event& e) {
    std::lock_guard<std::mutex> guard{seen.mtx};
    if (e.kind == event_kind::started) {
      seen.oldest_ms = std::max(seen.oldest_ms, e.wait_ms);
      if (e.base_priority == 10)
        seen.high_ms.push_back(static_cast<double>(e.wait_ms));
    } else if (e.kind == event_kind::succeeded) {
      ++seen.done;
    }
  });
  worker_options w;
  w.max_concurrency = 16;
  if (auto p = std::getenv("ERGON_BENCH_PREFETCH"))
    w.prefetch = std::atoi(p);
  w.runners["sync"] = [](job_context&) {
    if (job_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(job_ms));
  };
  auto wk = q->start_worker(std::move(w));

  auto t0 = steady::now();
  auto submit = [&](const std::string& group, int32_t priority, int n) {
    std::vector<job> batch;
    for (int i = 0; i < n; ++i) {
      batch.push_back(*job_builder("sync").group(group).priority(priority)
                         .payload(payload_100()).build());
      if (batch.size() == 1'000 || i == n - 1) {
        if (!q->submit_batch(std::move(batch)))
          std::exit(1);
        batch.clear();
      }
    }
  };
  submit("A", 10, 50);
  submit("A", 0, 50'000);
  submit("B", 0, 200);
  for (int i = 0; i < 5; ++i)
    submit("maintenance-" + std::to_string(i), 0, 1);
  constexpr int64_t total = 50'255;

  // Samples the dispatcher's running slots per group.
  int64_t contended = 0, contended_a = 0, contended_b = 0;
  std::vector<std::string> timeline;
  auto next_print = 0.0;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    auto m = q->metrics();
    if (!m)
      std::exit(1);
    std::map<std::string, group_metrics> g;
    for (auto& x : m->groups)
      g[x.group] = x;
    int maint = 0;
    for (auto& [name, x] : g)
      if (name.rfind("maintenance-", 0) == 0)
        maint += x.running_slots;
    if (g["A"].ready_jobs > 0 && g["B"].ready_jobs > 0) {
      ++contended;
      contended_a += g["A"].running_slots;
      contended_b += g["B"].running_slots;
    }
    auto t = seconds_since(t0);
    if (t >= next_print) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "t=%.2fs A=%d/%d B=%d/%d maintenance=%d", t,
                    g["A"].running_slots, g["A"].allocated_slots, g["B"].running_slots,
                    g["B"].allocated_slots, maint);
      timeline.emplace_back(buf);
      next_print = t + 0.25;
    }
    std::lock_guard<std::mutex> guard{seen.mtx};
    if (seen.done >= total)
      break;
  }
  auto secs = seconds_since(t0);
  sub.cancel();
  q->close();
  if (!json)
    for (auto& l : timeline)
      std::printf("# %s\n", l.c_str());
  line r;
  r.workload = "w5_fair";
  r.jobs_per_s = static_cast<double>(total) / secs;
  r.p50_ms = percentile(seen.high_ms, 50);
  r.p99_ms = percentile(seen.high_ms, 99);
  r.rss_mb = peak_rss_mb();
  char extra[200];
  std::snprintf(extra, sizeof extra,
                "(p50/p99 = HIGH jobs' wait) job_ms=%d slots_a=%.1f slots_b=%.1f "
                "oldest_wait_ms=%lld",
                job_ms, contended ? static_cast<double>(contended_a) / contended : 0.0,
                contended ? static_cast<double>(contended_b) / contended : 0.0,
                static_cast<long long>(seen.oldest_ms));
  r.extra = extra;
  return r;
}

std::vector<actors::group_share> thousand_groups() {
  std::mt19937 rng{42};
  std::vector<actors::group_share> groups;
  for (int i = 0; i < 1'000; ++i) {
    actors::group_share g;
    g.name = "endpoint-" + std::to_string(i);
    g.weight = 1 + static_cast<int32_t>(rng() % 10);
    if (i % 10 == 0)
      g.min_slots = 1;
    if (i % 7 == 0)
      g.max_slots = 1 + static_cast<int32_t>(rng() % 3);
    groups.push_back(std::move(g));
  }
  return groups;
}

line allocation_cost() {
  auto groups = thousand_groups();
  std::vector<double> us;
  int32_t sink = 0;
  for (int round = 0; round < 2'000; ++round) {
    auto t = steady::now();
    auto a = actors::allocate_slots(groups, 2'000);
    us.push_back(seconds_since(t) * 1e6);
    sink += a[static_cast<size_t>(round) % a.size()];
  }
  line r;
  r.workload = "alloc_1000_groups";
  r.p50_ms = percentile(us, 50) / 1e3;
  r.p99_ms = percentile(us, 99) / 1e3;
  r.jobs_per_s = 1e6 / percentile(us, 50);  // allocations per second
  r.rss_mb = peak_rss_mb();
  r.extra = "(jobs_per_s = allocations/s; 2,000 slots) checksum=" + std::to_string(sink % 10);
  return r;
}

line pick_cost(bool urgent, int32_t slots) {
  scheduling_options s;
  aging_options a;
  a.grace_period = std::chrono::milliseconds(1'000);
  a.interval = std::chrono::milliseconds(100);
  if (urgent)
    a.urgent_threshold = 10;
  s.aging = a;
  for (auto& g : thousand_groups())
    s.groups[g.name] = group_options{g.weight, g.min_slots, g.max_slots};
  actors::scheduling_policy p{s};
  auto type = p.type_id("sync");
  std::vector<uint32_t> types{type};
  int64_t row = 0;
  for (int i = 0; i < 1'000; ++i) {
    auto gid = p.group_id("endpoint-" + std::to_string(i));
    for (int j = 0; j < 100; ++j) {
      actors::pending_job e;
      e.row = ++row;
      e.priority = j % 3;
      e.type = type;
      e.group = gid;
      p.add(e, 0);
    }
  }
  p.set_capacity(slots);
  p.rebalance();
  // Steady state: every slot busy; each finish frees one for the next pick.
  std::vector<actors::pending_job> running;
  for (int i = 0; i < slots; ++i)
    if (auto j = p.pick(types, 1, 0))
      running.push_back(j->job);
  constexpr int picks = 50'000;
  int64_t now = 0;
  auto t = steady::now();
  for (int i = 0; i < picks; ++i) {
    auto done = running[static_cast<size_t>(i) % running.size()];
    p.finished(done.row, done.group, done.type, done.weight);
    p.rebalance();
    auto j = p.pick(types, 1, ++now);
    if (!j)
      break;
    running[static_cast<size_t>(i) % running.size()] = j->job;
  }
  auto secs = seconds_since(t);
  line r;
  r.workload = std::string{"pick_1000_groups_"} + std::to_string(slots) + "_slots"
               + (urgent ? "_urgent" : "");
  r.jobs_per_s = picks / secs;
  r.rss_mb = peak_rss_mb();
  r.extra = urgent ? "(with an urgent threshold: every pick scans all groups)"
                   : "(policy only: finish + rebalance + pick, 100,000 ready jobs, aging on)";
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else if (std::strcmp(argv[i], "--job-ms") == 0 && i + 1 < argc)
      job_ms = std::atoi(argv[++i]);
    else
      wanted.emplace_back(argv[i]);
  }
  auto want = [&](const char* name) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
  };
  if (want("w5"))
    w5().print(json);
  if (want("groups")) {
    allocation_cost().print(json);
    for (int32_t slots : {2'000, 16}) {
      pick_cost(false, slots).print(json);
      pick_cost(true, slots).print(json);
    }
  }
}
