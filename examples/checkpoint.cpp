// A long job that records its progress with checkpoints. The first attempt
// crashes halfway; the retry resumes from the last checkpoint instead of
// starting over.
//
//   checkpoint [database path]
#include <ergon/job_builder.hpp>
#include <ergon/msgpack.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <future>
#include <iostream>
#include <stdexcept>

struct progress {
  int next_item = 0;
  int total = 10;
  MSGPACK_DEFINE(next_item, total);
};

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "checkpoint.db");
  if (!q)
    return 1;
  std::promise<void> done;
  auto sub = q->subscribe([&](const ergon::event& e) {
    if (e.kind == ergon::event_kind::succeeded || e.kind == ergon::event_kind::failed)
      done.set_value();
  });

  ergon::worker_options opts;
  opts.runners["import"] = [](ergon::job_context& ctx) {
    auto p = ergon::unpack<progress>(ctx.payload());  // the checkpoint, if any
    std::cout << "try " << ctx.try_number() << " starts at item " << p->next_item << '\n';
    for (; p->next_item < p->total; ++p->next_item) {
      if (ctx.try_number() == 1 && p->next_item == 6)
        throw std::runtime_error("connection lost");
      std::cout << "  imported item " << p->next_item << '\n';
      progress saved{p->next_item + 1, p->total};
      ctx.checkpoint(ergon::pack(saved));  // the next attempt starts here
    }
  };
  auto worker = q->start_worker(std::move(opts));
  q->submit(*ergon::job_builder("import").payload(ergon::pack(progress{})).backoff(50ms).build());
  done.get_future().wait();
  worker->stop();
  return q->close().ok() ? 0 : 1;
}
