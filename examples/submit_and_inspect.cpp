// Submit jobs, look at them, change and cancel one, and see a typed error.
//
//   submit_and_inspect [database path]     (default: ./submit_and_inspect.db)
#include <ergon/job_builder.hpp>
#include <ergon/msgpack.hpp>
#include <ergon/queue.hpp>

#include <chrono>
#include <iostream>

struct email {
  std::string to;
  std::string subject;
  MSGPACK_DEFINE(to, subject);
};

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto q = ergon::queue::open(argc > 1 ? argv[1] : "submit_and_inspect.db");
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }

  // One job with a typed payload; durable once submit returns.
  auto welcome = ergon::job_builder("send_email")
                   .payload(ergon::pack(email{"ada@example.com", "Welcome"}))
                   .name("welcome-ada")
                   .priority(10)
                   .max_retries(5)
                   .timeout(30s)
                   .build();
  auto id = q->submit(*welcome);
  std::cout << "submitted " << *id << '\n';

  // A batch is one transaction: all of these are stored, or none.
  std::vector<ergon::job> batch;
  for (int i = 0; i < 3; ++i)
    batch.push_back(*ergon::job_builder("resize").payload("img-" + std::to_string(i))
                       .delay(1min).build());
  auto ids = q->submit_batch(batch);
  std::cout << "batch of " << ids->size() << " submitted\n";

  // Inspect: status, tries, payloads, attempt history.
  auto info = q->job_info(*id);
  auto mail = ergon::unpack<email>(info->payload);
  std::cout << "job " << info->id << ": " << info->status << ", priority "
            << info->priority << ", tries " << info->tries << ", to " << mail->to << '\n';

  // Change a pending job, then cancel another.
  ergon::job_update bump;
  bump.priority = 20;
  std::cout << "update: " << q->update_pending(ids->at(0), bump) << '\n';
  std::cout << "cancel: " << q->cancel_pending(ids->at(1)) << '\n';
  std::cout << "cancel again: " << q->cancel_pending(ids->at(1)) << '\n';

  // Bad input is a typed error naming the field; nothing is written.
  auto bad = ergon::job_builder("resize").weight(0).build();
  std::cout << "invalid job: " << bad.error() << '\n';

  auto counts = q->counts();
  std::cout << "pending " << counts[ergon::job_status::pending] << ", cancelled "
            << counts[ergon::job_status::cancelled] << '\n';
  return q->close().ok() ? 0 : 1;
}
