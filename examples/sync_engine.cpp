// The main demo: the sync engine from docs/scheduling.md. Sixteen slots
// serve a user's HIGH-priority syncs, a 50,000-file background watch of
// profile A (group s3://prod, weight 3), a 200-file watch of profile B
// (group s3://b2-backup, weight 1) and five maintenance tasks. Without fair
// shares, A's backlog would hold every slot until it drained; with them, B
// keeps a quarter of the capacity. Prints per-group progress while it runs
// and ends with the slots, throughput and longest wait each group got.
//
//   sync_engine [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr int32_t low = 0;
constexpr int32_t high = 10;
const std::string prod = "s3://prod";
const std::string backup = "s3://b2-backup";

// What the event subscription saw per group. Callbacks must be quick: they
// only count.
struct group_tally {
  int64_t done = 0;
  int64_t total = 0;
  int64_t longest_wait_ms = 0;
  double first_start = -1;
  double last_finish = 0;
};

struct tallies {
  std::mutex mtx;
  std::map<std::string, group_tally> groups;
  int64_t user_syncs_done = 0;
  int64_t user_sync_longest_wait_ms = 0;
  steady::time_point t0 = steady::now();
  // Running slots summed over the samples taken while both watches had a
  // backlog: the fair shares under contention.
  int contended_samples = 0;
  std::map<std::string, int64_t> contended_slots;

  double now() const { return std::chrono::duration<double>(steady::now() - t0).count(); }

  void on(const ergon::event& e) {
    std::lock_guard<std::mutex> guard{mtx};
    auto name = e.group.rfind("maintenance/", 0) == 0 ? std::string{"maintenance"} : e.group;
    auto& g = groups[name];
    if (e.kind == ergon::event_kind::started) {
      g.longest_wait_ms = std::max(g.longest_wait_ms, e.wait_ms);
      if (g.first_start < 0)
        g.first_start = now();
      if (e.type == "user_sync")
        user_sync_longest_wait_ms = std::max(user_sync_longest_wait_ms, e.wait_ms);
    } else if (e.kind == ergon::event_kind::succeeded) {
      ++g.done;
      g.last_finish = now();
      if (e.type == "user_sync")
        ++user_syncs_done;
    }
  }
};

void submit(ergon::queue& q, const std::string& type, const std::string& group,
            int32_t priority, int n) {
  std::vector<ergon::job> batch;
  for (int i = 0; i < n; ++i) {
    batch.push_back(*ergon::job_builder(type).group(group).priority(priority)
                       .payload(group + "/file-" + std::to_string(i)).build());
    if (batch.size() == 1'000 || i == n - 1) {
      if (auto ids = q.submit_batch(std::move(batch)); !ids)
        std::fprintf(stderr, "submit failed: %s\n", ids.error().to_string().c_str());
      batch.clear();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ergon::options opts;
  opts.scheduling.groups[prod].weight = 3;
  opts.scheduling.groups[backup].weight = 1;
  ergon::aging_options aging;  // LOW work reaches HIGH after 5 s + 10 x 1 s
  aging.grace_period = 5s;
  aging.interval = 1s;
  aging.max_effective_priority = high;
  opts.scheduling.aging = aging;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "sync_engine.db", opts);
  if (!q) {
    std::fprintf(stderr, "cannot open the queue: %s\n", q.error().to_string().c_str());
    return 1;
  }

  tallies seen;
  auto sub = q->subscribe([&](const ergon::event& e) { seen.on(e); });

  // Uploads to the backup endpoint are slower than to prod.
  ergon::worker_options w;
  w.name = "sync";
  w.max_concurrency = 16;
  w.runners["user_sync"] = [](ergon::job_context&) { std::this_thread::sleep_for(2ms); };
  w.runners["watch_sync"] = [](ergon::job_context& ctx) {
    std::this_thread::sleep_for(ctx.group() == backup ? 80ms : 2ms);
  };
  w.runners["maintenance"] = [](ergon::job_context&) { std::this_thread::sleep_for(50ms); };
  auto worker = q->start_worker(std::move(w));
  if (!worker) {
    std::fprintf(stderr, "cannot start the worker: %s\n", worker.error().to_string().c_str());
    return 1;
  }

  std::printf("16 slots; s3://prod weight 3, s3://b2-backup weight 1; a LOW job waits at "
              "most %lld s before aging lifts it to HIGH\n\n",
              static_cast<long long>(q->max_wait(low)->count() / 1000));
  submit(*q, "user_sync", prod, high, 50);
  submit(*q, "watch_sync", prod, low, 50'000);
  submit(*q, "watch_sync", backup, low, 200);
  for (auto task : {"vacuum", "compact", "reindex", "prune", "verify"})
    submit(*q, "maintenance", std::string{"maintenance/"} + task, low, 1);
  {
    std::lock_guard<std::mutex> guard{seen.mtx};
    seen.groups[prod].total = 50'050;
    seen.groups[backup].total = 200;
    seen.groups["maintenance"].total = 5;
  }

  // Samples slots often for the averages; prints a line every half second.
  constexpr auto sample_every = 20ms;
  int samples = 0;
  for (;;) {
    std::this_thread::sleep_for(sample_every);
    auto m = q->metrics();
    if (!m)
      break;
    std::map<std::string, int32_t> running, allocated;
    bool contended = true;
    for (auto& g : m->groups) {
      auto name = g.group.rfind("maintenance/", 0) == 0 ? std::string{"maintenance"} : g.group;
      running[name] += g.running_slots;
      allocated[name] += g.allocated_slots;
      if ((g.group == prod || g.group == backup) && g.ready_jobs == 0)
        contended = false;
    }
    std::lock_guard<std::mutex> guard{seen.mtx};
    if (contended) {
      ++seen.contended_samples;
      seen.contended_slots[prod] += running[prod];
      seen.contended_slots[backup] += running[backup];
    }
    auto& a = seen.groups[prod];
    auto& b = seen.groups[backup];
    auto& mt = seen.groups["maintenance"];
    bool finished = a.done + b.done + mt.done == a.total + b.total + mt.total;
    if (++samples % 25 == 0 || finished)
      std::printf("%5.1f s  s3://prod %6lld/%lld (%2d slots, %2d running)  "
                  "s3://b2-backup %3lld/%lld (%d slots, %d running)  maintenance %lld/5  "
                  "user syncs %lld/50\n",
                  seen.now(), static_cast<long long>(a.done), static_cast<long long>(a.total),
                  allocated[prod], running[prod], static_cast<long long>(b.done),
                  static_cast<long long>(b.total), allocated[backup], running[backup],
                  static_cast<long long>(mt.done), static_cast<long long>(seen.user_syncs_done));
    if (finished)
      break;
  }

  sub.cancel();  // the tallies are final
  std::printf("\n%-16s %7s %10s %13s\n", "group", "jobs", "jobs/s", "longest wait");
  for (auto& name : {prod, backup, std::string{"maintenance"}}) {
    auto& g = seen.groups[name];
    auto span = std::max(1e-3, g.last_finish - g.first_start);
    std::printf("%-16s %7lld %10.0f %11.2f s\n", name.c_str(), static_cast<long long>(g.done),
                static_cast<double>(g.done) / span, static_cast<double>(g.longest_wait_ms) / 1e3);
  }
  if (seen.contended_samples > 0)
    std::printf("\nwhile both watches had a backlog, s3://prod ran %.1f slots and "
                "s3://b2-backup %.1f on average (weights 3:1 of 16 slots)\n",
                static_cast<double>(seen.contended_slots[prod]) / seen.contended_samples,
                static_cast<double>(seen.contended_slots[backup]) / seen.contended_samples);
  std::printf("user syncs (HIGH): %lld done, longest wait %.3f s\n",
              static_cast<long long>(seen.user_syncs_done),
              static_cast<double>(seen.user_sync_longest_wait_ms) / 1e3);
  auto m = q->metrics();
  if (m)
    std::printf("excess slots redistributed: %lld, aging promotions: %lld\n",
                static_cast<long long>(m->excess_slots_redistributed),
                static_cast<long long>(m->aging_promotions));
  return q->close().ok() ? 0 : 1;
}
