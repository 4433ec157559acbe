// One owner per file, and reading a live queue without owning it.
//
//   inspect_live [database path]
//
// The queue that opens a file owns it until it closes: a second open, here
// or in another process, fails with `busy` and names the owner. Operator
// tools read the live file through an inspector instead, and back it up
// beside the owner (what `ergonctl backup` does).
#include <ergon/inspector.hpp>
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>

#include <cstdio>
#include <iostream>

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "inspect_live.db";
  auto q = ergon::queue::open(path);
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }
  auto id = q->submit(*ergon::job_builder("report").payload("2026-Q4").build());
  q->submit(*ergon::job_builder("report").payload("2026-Q3").build());

  // Someone else tries to run the same file: refused, nothing touched.
  auto second = ergon::queue::open(path);
  std::cout << "second open: " << second.error() << '\n';

  // An inspector reads beside the owner.
  auto in = ergon::queue::inspect(path);
  if (!in) {
    std::cerr << "cannot inspect: " << in.error() << '\n';
    return 1;
  }
  auto counts = in->counts();
  std::cout << "pending: " << (*counts)[ergon::job_status::pending] << '\n';
  auto job = in->job_info(*id);
  std::cout << "job " << job->id << ": " << job->type << ' ' << job->payload << ", "
            << ergon::to_string(job->status) << '\n';

  // A backup beside the owner: one consistent, checked file that never
  // replaces an existing one.
  auto backup_path = path + ".backup";
  std::remove(backup_path.c_str());
  auto bytes = in->backup(backup_path);
  if (!bytes) {
    std::cerr << "backup failed: " << bytes.error() << '\n';
    return 1;
  }
  auto copy = ergon::queue::inspect(backup_path);
  std::cout << "backup: " << *bytes << " bytes, pending in it: "
            << (*copy->counts())[ergon::job_status::pending] << '\n';

  // Once the owner closes, the next open succeeds.
  q->close();
  auto next = ergon::queue::open(path);
  std::cout << "after close: " << (next ? "opened" : next.error().to_string()) << '\n';
  return second.error().code() == ergon::error::busy && next ? 0 : 1;
}
