// An embedded queue that takes workers from other processes: the program
// owns the database, publishes the queue on a port of 127.0.0.1 and submits
// jobs; remote_worker processes run them.
//
//   ERGON_SECRET=$(openssl rand -hex 32) queue_server [database] [port] [jobs]
//   ERGON_SECRET=... remote_worker 127.0.0.1 4781 (in another shell)
//
// With ERGON_SECRET set, only nodes that prove the same secret get in. It
// exits once every job succeeded.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>
#include <ergon/queue_actor.hpp>

#include <cstdlib>
#include <iostream>
#include <set>
#include <string>

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "queue_server.db";
  auto port = static_cast<uint16_t>(argc > 2 ? std::stoi(argv[2]) : 4781);
  int jobs = argc > 3 ? std::stoi(argv[3]) : 20;
  ergon::credentials creds;
  if (auto s = std::getenv("ERGON_SECRET"))
    creds.secret = s;

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  ergon::queue::register_types(cfg);
  caf::actor_system sys{cfg};
  auto q = ergon::spawn_queue(sys, path);
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }
  caf::scoped_actor self{sys};
  auto close = [&] {
    self->request(*q, caf::infinite, ergon::close_atom::value)
      .receive([](ergon::ok_atom) {}, [](caf::error&) {});
  };
  auto bound = ergon::publish(*q, port, "127.0.0.1", creds);
  if (!bound) {
    std::cerr << "cannot publish: " << bound.error() << '\n';
    close();
    return 1;
  }
  std::cout << "listening on 127.0.0.1:" << *bound
            << (creds.secret.empty() ? " (no secret: loopback only)" : " (secret required)")
            << std::endl;

  // Subscribe before submitting, so no completion is missed.
  self->request(*q, caf::infinite, ergon::subscribe_atom::value, caf::actor{self})
    .receive([](ergon::ok_atom) {}, [](caf::error&) {});
  std::set<ergon::job_id> waiting;
  for (int i = 0; i < jobs; ++i) {
    auto job = *ergon::job_builder("resize").payload("image-" + std::to_string(i)).build();
    self->request(*q, caf::infinite, ergon::submit_atom::value, std::move(job))
      .receive([&](const ergon::job_id& id) { waiting.insert(id); },
               [](caf::error& e) { std::cerr << "submit: " << ergon::to_status(e) << '\n'; });
  }
  std::cout << "submitted " << waiting.size() << " jobs; waiting for workers" << std::endl;
  while (!waiting.empty())
    self->receive([&](const ergon::event& e) {
      if (e.kind == ergon::event_kind::succeeded && waiting.erase(e.id) == 1)
        std::cout << "done " << e.id << " (" << waiting.size() << " left)" << std::endl;
    });
  close();
  std::cout << "all jobs succeeded" << std::endl;
  return 0;
}
