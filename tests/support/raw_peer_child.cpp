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
//   ergon-test-raw-peer HOST PORT malformed
//       asks the queue for its dispatcher and sends it out-of-range worker
//       protocol messages: registrations ("register <code> <field>" each),
//       then, registered as a worker of type "job", two reports claiming
//       room it can't have and an unregistration from another actor
//       ("unregister <code> <field>"). Prints "sent" once the dispatcher
//       has handled them all, then waits for stdin to close.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

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

std::string code_and_field(const caf::error& e) {
  auto st = ergon::to_status(e);
  return std::string{ergon::to_string(st.code())} + " " + st.field();
}

int send_malformed(caf::scoped_actor& self, const ergon::queue_actor& q) {
  using namespace ergon::actors;
  caf::actor dispatcher;
  self->request(q, patience, ergon::join_atom::value)
    .receive([&](caf::actor& d) { dispatcher = d; },
             [](caf::error& e) { std::cout << "join " << code_of(e) << std::endl; });
  if (!dispatcher)
    return 1;
  register_worker good;
  good.name = "malformed";
  good.types = {"job"};
  good.max_capacity = 1;
  good.worker = caf::actor_cast<caf::actor>(self);
  std::vector<register_worker> bad(5, good);
  bad[0].types.clear();
  bad[1].types = {std::string(300, 't')};
  bad[2].max_capacity = 0;
  bad[3].prefetch = -1;
  bad[4].worker = caf::actor{};
  for (auto& reg : bad)
    self->request(dispatcher, patience, reg)
      .receive([](worker_registered&) { std::cout << "register ok" << std::endl; },
               [](caf::error& e) { std::cout << "register " << code_and_field(e) << std::endl; });
  uint64_t id = 0;
  self->request(dispatcher, patience, good)
    .receive([&](worker_registered& r) { id = r.worker_id; },
             [](caf::error& e) { std::cout << "register " << code_of(e) << std::endl; });
  if (id == 0)
    return 1;
  self->send(dispatcher, worker_report{id, 1'000'000, 0, {}, {}, {}});
  self->send(dispatcher, worker_report{id, 1, 5, {}, {}, {}});
  caf::scoped_actor other{self->home_system()};
  other->request(dispatcher, patience, unregister_worker{id})
    .receive([](unregistered_atom) { std::cout << "unregister ok" << std::endl; },
             [](caf::error& e) { std::cout << "unregister " << code_and_field(e) << std::endl; });
  // Answered after the reports before it: they have all been handled.
  self->request(dispatcher, patience, unregister_worker{id})
    .receive([](unregistered_atom) { std::cout << "sent" << std::endl; },
             [](caf::error& e) { std::cout << "own unregister " << code_of(e) << std::endl; });
  std::string line;
  std::getline(std::cin, line);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0] << " HOST PORT submit|leaked [LEAKPORT]|malformed\n";
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
  if (mode == "malformed")
    return send_malformed(self, *q);
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
