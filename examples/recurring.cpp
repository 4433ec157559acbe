// A recurring job on a schedule, paused for a while and resumed; a unique
// job that is submitted twice but queued once; and a re-index that runs
// once more when its document changes while it runs.
//
//   recurring [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <condition_variable>
#include <iostream>
#include <mutex>

int main(int argc, char** argv) {
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "recurring.db");
  if (!q) {
    std::cerr << q.error() << '\n';
    return 1;
  }
  std::mutex mtx;
  std::condition_variable cv;
  int reports = 0;
  int mails = 0;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind != ergon::event_kind::succeeded)
      return;
    std::lock_guard<std::mutex> guard{mtx};
    (e.recurring_id == "usage-report" ? reports : mails)++;
    cv.notify_all();
  });

  ergon::worker_options opts;
  opts.runners["report"] = [](ergon::job_context& ctx) {
    std::cout << "report for " << ctx.payload() << '\n';
  };
  opts.runners["welcome"] = [](ergon::job_context& ctx) {
    std::cout << "welcome mail to " << ctx.payload() << '\n';
  };
  auto worker = q->start_worker(std::move(opts));

  // A cron spec such as "0 7 * * MON-FRI" with time_zone "Europe/Berlin"
  // works the same way; this one is quick enough to watch.
  ergon::recurring_job r;
  r.id = "usage-report";
  r.schedule = "every 300ms";
  r.job = *ergon::job_builder("report").payload("team-a").build();
  if (auto first = q->upsert_recurring(r); !first) {
    std::cerr << first.error() << '\n';
    return 1;
  }
  {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait(guard, [&] { return reports >= 3; });
  }
  auto info = q->recurring_info("usage-report");
  std::cout << "last run: " << ergon::to_string(*info->last_status) << ", next instance "
            << *info->next_job << '\n';
  // A pause keeps the job and runs none of its instances until it ends; it
  // is stored, so a restart keeps it too.
  q->pause_recurring("usage-report", std::chrono::hours(1));
  std::cout << "paused until " << *q->recurring_info("usage-report")->paused_until_ms << '\n';
  q->resume_recurring("usage-report");
  q->delete_recurring("usage-report");  // a running instance would finish; none follows

  // Two clicks on "sign up" queue one welcome mail: the second submit
  // returns the first job's id while the first is unfinished.
  auto mail = [] {
    return *ergon::job_builder("welcome")
              .payload("user-42")
              .delay(std::chrono::milliseconds(100))
              .unique_key("welcome:user-42", ergon::unique_policy::skip)
              .build();
  };
  auto a = q->submit(mail());
  auto b = q->submit(mail());
  std::cout << "same job: " << std::boolalpha << (*a == *b) << '\n';
  {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait(guard, [&] { return mails >= 1; });
  }

  // An edit while the document is being indexed queues one more run, after
  // this one: requeue. Later edits while that one waits give it their
  // payload, so the latest version is indexed, and never twice at once.
  std::mutex gate_mtx;
  std::condition_variable gate_cv;
  bool indexing = false, edited = false;
  ergon::worker_options indexer;
  indexer.runners["reindex"] = [&](ergon::job_context& ctx) {
    std::cout << "indexing " << ctx.payload() << '\n';
    std::unique_lock<std::mutex> guard{gate_mtx};
    indexing = true;
    gate_cv.notify_all();
    gate_cv.wait(guard, [&] { return edited; });
  };
  auto indexing_worker = q->start_worker(std::move(indexer));
  auto reindex = [](const std::string& version) {
    return *ergon::job_builder("reindex")
              .payload(version)
              .unique_key("reindex:doc-7", ergon::unique_policy::requeue)
              .build();
  };
  auto first = q->submit(reindex("doc-7 v1"));
  {
    std::unique_lock<std::mutex> guard{gate_mtx};
    gate_cv.wait(guard, [&] { return indexing; });
  }
  auto again = q->submit(reindex("doc-7 v2"));  // waits behind the running one
  q->submit(reindex("doc-7 v3"));                 // gives the waiting one its payload
  {
    std::lock_guard<std::mutex> guard{gate_mtx};
    edited = true;
  }
  gate_cv.notify_all();
  auto last = q->wait(*again, std::chrono::seconds(30));
  std::cout << "ran after " << *first << ": " << last->payload << '\n';
  indexing_worker->stop();
  worker->stop();
  return q->close().ok() ? 0 : 1;
}
