// A node that skips ergon's handshake, for the security tests: it talks to
// the queue at HOST:PORT with plain CAF and prints what each try got.
//
//   ergon-test-raw-peer HOST PORT submit
//       remote_actor to the queue, then a submit: "submit <code>"
//   ergon-test-raw-peer HOST PORT leaked LEAKPORT
//       also fetches the dispatcher's handle from an actor published on
//       LEAKPORT (an authenticated node leaking it), then asks the
//       dispatcher to register a worker ("register <code>") and sends it an
//       exit message. Prints "done" at the end.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <iostream>
#include <string>

#include "ergon/actors/protocol.hpp"
#include "ergon/job_builder.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"

namespace {

struct config : caf::actor_system_config {
  config() {
    load<caf::io::middleman>();
    ergon::queue::register_types(*this);
  }
};

constexpr auto patience = std::chrono::seconds(10);

std::string code_of(const caf::error& e) {
  return ergon::to_string(ergon::to_status(e).code());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " HOST PORT submit|leaked [LEAKPORT]\n";
    return 2;
  }
  std::string host = argv[1];
  auto port = static_cast<uint16_t>(std::stoi(argv[2]));
  std::string mode = argv[3];
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto q = sys.middleman().remote_actor<ergon::queue_actor>(host, port);
  if (!q) {
    std::cout << "connect " << sys.render(q.error()) << std::endl;
    return 1;
  }
  if (mode == "submit") {
    auto j = ergon::job_builder("job").payload("from a stranger").build();
    self->request(*q, patience, ergon::submit_atom::value, *j)
      .receive([](const ergon::job_id&) { std::cout << "submit ok" << std::endl; },
               [](caf::error& e) { std::cout << "submit " << code_of(e) << std::endl; });
    return 0;
  }
  auto leak_port = static_cast<uint16_t>(std::stoi(argv[4]));
  auto leak = sys.middleman().remote_actor(host, leak_port);
  if (!leak) {
    std::cout << "leak " << sys.render(leak.error()) << std::endl;
    return 1;
  }
  caf::actor dispatcher;
  self->request(*leak, patience, ergon::join_atom::value)
    .receive([&](caf::actor& d) { dispatcher = d; },
             [](caf::error& e) { std::cout << "leak " << to_string(e) << std::endl; });
  if (!dispatcher)
    return 1;
  ergon::actors::register_worker reg;
  reg.name = "stranger";
  reg.types = {"job"};
  reg.max_capacity = 100;
  reg.worker = caf::actor_cast<caf::actor>(self);
  self->request(dispatcher, patience, std::move(reg))
    .receive([](ergon::actors::worker_registered&) { std::cout << "register ok" << std::endl; },
             [](caf::error& e) { std::cout << "register " << code_of(e) << std::endl; });
  self->send_exit(dispatcher, caf::exit_reason::kill);
  std::cout << "done" << std::endl;
  return 0;
}
