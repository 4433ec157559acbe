// Tags and bulk actions: tag jobs by tenant and import batch, list them by
// tag, cancel one batch with a single call, and delete what finished.
//
//   tags [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <iostream>
#include <string>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "tags.db");
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }

  // Two import batches of one tenant, and one of another. Batch 2 is due
  // tomorrow, so it is still pending when we cancel it.
  std::vector<ergon::job> jobs;
  for (int row = 0; row < 6; ++row) {
    auto batch = row < 2 ? "1" : "2";
    auto j = ergon::job_builder("import_row")
               .payload(std::to_string(row))
               .tag("tenant", row < 5 ? "acme" : "globex")
               .tag("import.batch", batch)
               .delay(row < 2 ? 0ms : std::chrono::milliseconds{24h})
               .build();
    if (!j) {
      std::cerr << "bad job: " << j.error() << '\n';
      return 1;
    }
    jobs.push_back(std::move(*j));
  }
  auto ids = q->submit_batch(jobs);
  if (!ids) {
    std::cerr << "submit: " << ids.error() << '\n';
    return 1;
  }

  // Run batch 1.
  ergon::worker_options opts;
  opts.runners["import_row"] = [](ergon::job_context&) {};
  auto worker = q->start_worker(std::move(opts));
  if (!worker) {
    std::cerr << "cannot start the worker: " << worker.error() << '\n';
    return 1;
  }
  for (int row = 0; row < 2; ++row)
    q->wait((*ids)[row], 10s);

  // Every job of tenant acme, with its tags.
  ergon::job_filter acme;
  acme.tags = {{"tenant", "acme"}};
  auto page = q->list_jobs(acme, {});
  if (!page) {
    std::cerr << "list: " << page.error() << '\n';
    return 1;
  }
  for (auto& j : page->jobs)
    std::cout << j.id << " " << j.status << " batch " << j.tags.at("import.batch") << '\n';

  // Cancel batch 2, whoever its tenant: a bulk action, in steps.
  ergon::job_filter batch2;
  batch2.tags = {{"import.batch", "2"}};
  auto cancelled = q->cancel_jobs(batch2);
  if (!cancelled) {
    std::cerr << "cancel: " << cancelled.error() << '\n';
    return 1;
  }
  std::cout << "cancelled " << cancelled->cancelled << " jobs, asked "
            << cancelled->stop_requested << " running ones to stop\n";

  // Delete every finished job with an "import." tag.
  ergon::job_filter imports;
  imports.tag_prefix = "import.";
  auto deleted = q->delete_jobs(imports);
  if (!deleted) {
    std::cerr << "delete: " << deleted.error() << '\n';
    return 1;
  }
  std::cout << "deleted " << *deleted << " finished jobs\n";
  return *deleted == 6 ? 0 : 1;
}
