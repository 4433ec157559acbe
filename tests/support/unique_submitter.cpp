// Test helper for the unique-key tests: a process that submits jobs with
// one unique key to a queue at host:port.
//
//   ergon-test-unique-submitter HOST PORT KEY skip|replace|reject N
//       Connects and prints "ready", waits until stdin closes (so that
//       several of these submit at once), then submits N jobs of type "u"
//       with KEY and the policy, printing "id <job id>" or "error <code>"
//       for each, and "done".
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

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

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6)
    return 2;
  std::string policy_name = argv[4];
  auto policy = policy_name == "skip"      ? ergon::unique_policy::skip
                : policy_name == "replace" ? ergon::unique_policy::replace
                                           : ergon::unique_policy::reject;
  config cfg;
  caf::actor_system sys{cfg};
  auto q = ergon::connect(sys, argv[1], static_cast<uint16_t>(std::stoi(argv[2])));
  if (!q) {
    say("error " + q.error().to_string());
    return 1;
  }
  say("ready");
  for (char c; ::read(STDIN_FILENO, &c, 1) > 0;) {
  }
  caf::scoped_actor self{sys};
  for (int i = 0, n = std::stoi(argv[5]); i < n; ++i) {
    auto j = ergon::job_builder("u")
               .payload(std::to_string(::getpid()) + ":" + std::to_string(i))
               .unique_key(argv[3], policy)
               .build();
    self->request(*q, caf::infinite, ergon::submit_atom::value, *j)
      .receive([](const ergon::job_id& id) { say("id " + id.to_string()); },
               [](const caf::error& e) { say(std::string{"error "} + to_string(ergon::to_status(e).code())); });
  }
  say("done");
}
