// A queue whose state lives in PostgreSQL rather than in a file: the same
// API, and a lease that makes one process at a time the queue's owner.
//
//   postgres "postgresql://app@db.example.com/app?schema=jobs"
//
// The role needs CREATE on the database the first time (ergon creates its
// schema and tables), then USAGE on the schema and writes on its tables
// (docs/postgres.md).
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <iostream>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  std::string uri = argc > 1 ? argv[1] : "postgresql:///postgres?schema=ergon_example";
  ergon::options opts;
  // A stopped or cut-off owner is replaced after this; a crashed one at once.
  opts.lease_time = 10s;
  auto q = ergon::queue::open(uri, opts);
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }

  ergon::worker_options w;
  w.runners["word_count"] = [](ergon::job_context& ctx) {
    auto text = ctx.payload();
    size_t words = 0;
    bool in_word = false;
    for (char c : text) {
      bool letter = c != ' ' && c != '\n';
      words += letter && !in_word;
      in_word = letter;
    }
    return std::to_string(words);
  };
  auto worker = q->start_worker(std::move(w));
  if (!worker) {
    std::cerr << "cannot start the worker: " << worker.error() << '\n';
    return 1;
  }

  // One transaction for the batch, as on SQLite; durable once it returns.
  std::vector<ergon::job> batch;
  for (auto text : {"to be or not to be", "the rest is silence", "ripeness is all"})
    batch.push_back(*ergon::job_builder("word_count").payload(text).build());
  auto ids = q->submit_batch(batch);
  if (!ids) {
    std::cerr << "cannot submit: " << ids.error() << '\n';
    return 1;
  }
  for (auto& id : *ids) {
    auto done = q->wait(id, 30s);
    if (!done) {
      std::cerr << "waiting for " << id << ": " << done.error() << '\n';
      return 1;
    }
    std::cout << id << ": " << done->status << ", " << done->result.value_or("") << " words\n";
  }

  // The queue has one owner: a second open is refused while this one lives.
  auto second = ergon::queue::open(uri, opts);
  std::cout << "a second owner: " << (second ? "opened?!" : second.error().to_string()) << '\n';

  worker->stop();
  // close() says why if the queue closed by itself before: `busy` when
  // another process took it over (this one was stopped or cut off past its
  // lease), `unreachable` when a commit's fate could not be learned. Open
  // it again to go on; what was acknowledged is there.
  auto closed = q->close();
  if (!closed)
    std::cerr << "the queue had closed: " << closed << '\n';
  return closed.ok() ? 0 : 1;
}
