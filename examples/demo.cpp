// The main demo: a real workload end to end. Submits 50,000 jobs of three
// types (some flaky, so they retry), runs them on two workers, shows a live
// progress line, and ends with throughput and final statuses.
//
//   demo [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  using clock = std::chrono::steady_clock;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "demo.db");
  if (!q) {
    std::fprintf(stderr, "cannot open the queue: %s\n", q.error().to_string().c_str());
    return 1;
  }
  constexpr int total = 50'000;
  const char* types[] = {"thumbnail", "email", "webhook"};
  auto t0 = clock::now();
  for (int first = 0; first < total; first += 1'000) {
    std::vector<ergon::job> batch;  // one transaction per 1,000 jobs
    for (int i = first; i < first + 1'000; ++i)
      batch.push_back(*ergon::job_builder(types[i % 3])
                         .payload(std::to_string(i))
                         .priority(i % 5)
                         .backoff(20ms, 2.0, 0.2)
                         .build());
    q->submit_batch(std::move(batch));
  }
  auto submitted = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("submitted %d jobs in %.2f s\n", total, submitted);

  std::atomic<int> retries{0};
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind == ergon::event_kind::retried)
      ++retries;
  });
  ergon::worker_options media;
  media.name = "media";
  media.max_concurrency = 8;
  media.runners["thumbnail"] = [](ergon::job_context&) {};
  ergon::worker_options notify;
  notify.name = "notify";
  notify.max_concurrency = 8;
  notify.runners["email"] = [](ergon::job_context&) {};
  notify.runners["webhook"] = [](ergon::job_context& ctx) {
    // One webhook in a hundred fails on its first try and is retried.
    if (ctx.try_number() == 1 && std::stoi(ctx.payload()) % 300 == 2)
      throw std::runtime_error("503 from endpoint");
  };
  auto t1 = clock::now();
  auto w1 = q->start_worker(std::move(media));
  auto w2 = q->start_worker(std::move(notify));

  for (;;) {
    auto c = q->counts();
    auto done = c[ergon::job_status::succeeded] + c[ergon::job_status::failed];
    auto secs = std::chrono::duration<double>(clock::now() - t1).count();
    std::printf("\r  %6lld / %d done  pending %6lld  running %3lld  retries %4d  %7.0f jobs/s ",
                static_cast<long long>(done), total,
                static_cast<long long>(c[ergon::job_status::pending]),
                static_cast<long long>(c[ergon::job_status::running]), retries.load(),
                secs > 0 ? static_cast<double>(done) / secs : 0.0);
    std::fflush(stdout);
    if (done >= total)
      break;
    std::this_thread::sleep_for(250ms);
  }
  auto secs = std::chrono::duration<double>(clock::now() - t1).count();
  auto c = q->counts();
  std::printf("\n\nran %d jobs in %.2f s: %.0f jobs/s (every claim and completion committed)\n",
              total, secs, total / secs);
  std::printf("succeeded %lld, failed %lld, retried attempts %d\n",
              static_cast<long long>(c[ergon::job_status::succeeded]),
              static_cast<long long>(c[ergon::job_status::failed]), retries.load());
  return q->close().ok() ? 0 : 1;
}
