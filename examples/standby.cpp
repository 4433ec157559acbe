// Two servers for one PostgreSQL queue: the first owns it, the second
// stands by and takes it over when the first goes, with the jobs it held.
// In production each runs on its own host (ergon-server --standby does
// this); here both run in one process, each in an actor system of its own.
//
//   standby "postgresql://app@db.example.com/app?schema=jobs"
//
// See docs/distribution.md, "Standby servers".
#include <ergon/job_builder.hpp>
#include <ergon/queue.hpp>
#include <ergon/standby.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>

using namespace std::chrono_literals;

namespace {

struct config : caf::actor_system_config {
  config() { ergon::queue::register_types(*this); }
};

// A server's role changes, printed, and the owned queue kept for main.
struct roles {
  explicit roles(std::string n) : name(std::move(n)) {}
  std::string name;
  std::mutex mtx;
  std::condition_variable changed;
  ergon::queue_actor owned;

  std::function<void(const ergon::role_change&)> report() {
    return [this](const ergon::role_change& c) {
      std::cout << name << ": " << ergon::to_string(c.role);
      if (!c.why.ok())
        std::cout << " (" << c.why << ")";
      std::cout << std::endl;
      std::lock_guard<std::mutex> lock(mtx);
      owned = c.queue;
      changed.notify_all();
    };
  }

  ergon::queue_actor wait_until_owner() {
    std::unique_lock<std::mutex> lock(mtx);
    changed.wait_for(lock, 30s, [this] { return static_cast<bool>(owned); });
    return owned;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string uri = argc > 1 ? argv[1] : "postgresql:///postgres?schema=ergon_standby";
  ergon::options opts;
  opts.lease_time = 5s;  // a stopped or cut-off owner is replaced after this
  opts.http = ergon::http_options{};  // /healthz tells owner from standby

  config cfg_a, cfg_b;
  caf::actor_system sys_a{cfg_a}, sys_b{cfg_b};
  roles a{"server a"};
  roles b{"server b"};
  auto first = ergon::standby_server::start(sys_a, uri, opts, {}, a.report());
  if (!first) {
    std::cerr << "cannot start server a: " << first.error() << '\n';
    return 1;
  }
  auto q = a.wait_until_owner();
  auto second = ergon::standby_server::start(sys_b, uri, opts, {}, b.report());
  if (!q || !second) {
    std::cerr << "cannot start server b\n";
    return 1;
  }
  std::cout << "server b stands by: " << ergon::to_string(second->role())
            << "; its /healthz is on port " << *second->http_port() << '\n';

  // A job submitted to the owner.
  ergon::job_id id;
  caf::scoped_actor self{sys_a};
  self->request(q, caf::infinite, ergon::submit_atom::value,
                *ergon::job_builder("report").payload("monthly").build())
    .receive([&](ergon::job_id& got) { id = got; },
             [](caf::error& e) { std::cerr << "submit: " << ergon::to_status(e) << '\n'; });

  // The owner goes (here it stops; a SIGKILL or a lost host works too).
  first->stop();
  auto taken = b.wait_until_owner();
  if (!taken) {
    std::cerr << "server b did not take over\n";
    return 1;
  }
  caf::scoped_actor other{sys_b};
  bool found = false;
  other->request(taken, caf::infinite, ergon::job_info_atom::value, id)
    .receive(
      [&](ergon::job_info& info) {
        found = true;
        std::cout << "server b has job " << id << ": " << info.status << '\n';
      },
      [](caf::error& e) { std::cerr << "job_info: " << ergon::to_status(e) << '\n'; });
  return found && second->stop().ok() ? 0 : 1;
}
