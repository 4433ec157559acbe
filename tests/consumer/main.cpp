// Submits one job through the installed ergon package and reads it back.
#include <ergon/job_builder.hpp>
#include <ergon/msgpack.hpp>
#include <ergon/queue.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2)
    return 2;
  auto q = ergon::queue::open(argv[1]);
  if (!q) {
    std::cerr << q.error() << '\n';
    return 1;
  }
  auto job = ergon::job_builder("consumer").payload(ergon::pack(42)).build();
  auto id = q->submit(*job);
  if (!id) {
    std::cerr << id.error() << '\n';
    return 1;
  }
  auto info = q->job_info(*id);
  auto value = ergon::unpack<int>(info->payload);
  std::cout << "consumer ok " << *value << ' ' << info->status << '\n';
  return *value == 42 && info->status == ergon::job_status::pending ? 0 : 1;
}
