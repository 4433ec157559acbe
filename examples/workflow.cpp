// A fan-out, fan-in pipeline: "ingest" splits a batch of files into one
// "resize" child per file and waits for them without holding a slot, then
// runs again to sum their results; "publish" depends on "ingest" and reads
// its result. A "cleanup" job runs after "publish" whatever happens to it.
// All of it is durable: kill the program at any point and run it again on
// the same file, and the pipeline goes on where it was.
//
//   workflow [database path]
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "workflow.db");
  if (!q) {
    std::cerr << q.error() << '\n';
    return 1;
  }
  ergon::worker_options w;
  w.max_concurrency = 4;
  w.runners["ingest"] = [](ergon::job_context& ctx) -> std::string {
    if (ctx.payload() != "sum") {
      // First run: one child per file. The children, the checkpoint "sum"
      // and the wait commit together, so a crash here spawns nothing twice.
      std::vector<ergon::job> children;
      for (int i = 0; i < 8; ++i)
        children.push_back(
          *ergon::job_builder("resize").payload("img-" + std::to_string(i) + ".png").build());
      auto st = ctx.submit_children(std::move(children), "sum");
      if (!st)
        throw std::runtime_error(st.to_string());
      return {};  // the job now waits for its children, holding no slot
    }
    // Second run, once every child ended: fan in.
    auto results = ctx.dependency_results();
    if (!results)
      throw std::runtime_error(results.error().to_string());
    long bytes = 0;
    for (auto& r : *results)
      bytes += std::stol(r.result.value_or("0"));
    return std::to_string(results->size()) + " files, " + std::to_string(bytes) + " bytes";
  };
  w.runners["resize"] = [](ergon::job_context& ctx) {
    return std::to_string(1000 + ctx.payload().size());  // the resized size
  };
  w.runners["publish"] = [](ergon::job_context& ctx) -> std::string {
    auto ingested = ctx.dependency_results();
    if (!ingested)
      throw std::runtime_error(ingested.error().to_string());
    return "published " + ingested->at(0).result.value_or("?");
  };
  w.runners["cleanup"] = [](ergon::job_context&) {};
  auto worker = q->start_worker(std::move(w));

  // The whole graph in one submit: later jobs name earlier ones by position.
  auto ids = q->submit_batch(
    {*ergon::job_builder("ingest").build(),
     *ergon::job_builder("publish").depends_on_batch(0).build(),
     *ergon::job_builder("cleanup")
        .depends_on_batch(1)
        .on_dependency_failure(ergon::dependency_failure::run)  // runs even if publish fails
        .build()});
  if (!ids) {
    std::cerr << ids.error() << '\n';
    return 1;
  }
  std::cout << "publish is " << q->job_info((*ids)[1])->status << '\n';  // waiting
  auto cleaned = q->wait((*ids)[2], 60s);
  if (!cleaned) {
    std::cerr << cleaned.error() << '\n';
    return 1;
  }
  auto ingest = q->job_info((*ids)[0]);
  auto publish = q->job_info((*ids)[1]);
  std::cout << "ingest: " << ingest->result.value_or("") << " (" << ingest->depends_on.size()
            << " children, attempts:";
  for (auto& a : ingest->attempts)
    std::cout << ' ' << a.outcome;
  std::cout << ")\npublish: " << publish->result.value_or("") << "\ncleanup: "
            << cleaned->status << '\n';
  worker->stop();
  return q->close().ok() && publish->status == ergon::job_status::succeeded ? 0 : 1;
}
