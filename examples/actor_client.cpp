// The queue as an actor: an event-based client submits jobs and reacts to
// their completion, and no thread ever waits for a commit.
//
//   actor_client [database path]
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>
#include <ergon/queue_actor.hpp>

#include <iostream>
#include <string>

namespace {

struct client_state {
  int succeeded = 0;
  static inline const char* name = "client";
};

caf::behavior client(caf::stateful_actor<client_state>* self, ergon::queue_actor q,
                     int jobs) {
  auto fail = [self](const caf::error& e) {
    std::cerr << "queue error: " << ergon::to_status(e) << '\n';
    self->quit(e);
  };
  // Subscribe first, so no completion is missed.
  self->request(q, caf::infinite, ergon::subscribe_atom::value, caf::actor{self})
    .then(
      [=](ergon::ok_atom) {
        for (int i = 0; i < jobs; ++i) {
          auto job = *ergon::job_builder("greet").payload("job " + std::to_string(i)).build();
          self->request(q, caf::infinite, ergon::submit_atom::value, std::move(job))
            .then([](const ergon::job_id& id) { std::cout << "committed " << id << '\n'; },
                  fail);
        }
      },
      fail);
  return {
    [=](const ergon::event& e) {
      if (e.kind != ergon::event_kind::succeeded || ++self->state.succeeded < jobs)
        return;
      std::cout << jobs << " jobs succeeded\n";
      self->request(q, caf::infinite, ergon::close_atom::value)
        .then([=](ergon::ok_atom) { self->quit(); }, fail);
    },
  };
}

}  // namespace

int main(int argc, char** argv) {
  caf::actor_system_config cfg;
  ergon::queue::register_types(cfg);
  caf::actor_system sys{cfg};
  auto q = ergon::spawn_queue(sys, argc > 1 ? argv[1] : "actor_client.db");
  if (!q) {
    std::cerr << "cannot open the queue: " << q.error() << '\n';
    return 1;
  }
  ergon::worker_options opts;
  opts.runners["greet"] = [](ergon::job_context& ctx) {
    std::cout << "running " << ctx.payload() << '\n';
  };
  auto worker = ergon::start_worker(*q, std::move(opts));
  if (!worker) {
    std::cerr << "cannot start a worker: " << worker.error() << '\n';
    return 1;
  }
  sys.spawn(client, *q, 5);
  sys.await_all_actors_done();  // the client closes the queue when it is done
  return 0;
}
