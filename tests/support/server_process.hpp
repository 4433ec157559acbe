// ergon-server in a child process on a free port of 127.0.0.1, and a client
// actor system that talks to it. Shared by the server and remote-worker
// tests; ERGON_SERVER names the binary.
#pragma once

#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <sys/wait.h>

#include <string>
#include <vector>

#include "ergon/credentials.hpp"
#include "ergon/queue.hpp"
#include "ergon/queue_actor.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

namespace ergon::test {

// With a certificate in `tls`, every connection is mutual TLS.
struct network_config : caf::actor_system_config {
  explicit network_config(const tls_options& tls = {}) {
    load<caf::io::middleman>();
    if (!tls.certificate.empty()) {
      auto st = use_tls(*this, tls);
      BOOST_REQUIRE_MESSAGE(st.ok(), st.to_string());
    }
    queue::register_types(*this);
  }
};

// Reads "ergon-server listening on <bind>:<port>" and returns the port.
inline uint16_t read_listening_port(child_process& proc) {
  auto line = proc.read_line();
  auto colon = line.rfind(':');
  BOOST_REQUIRE_MESSAGE(line.rfind("ergon-server listening on ", 0) == 0
                          && colon != std::string::npos,
                        line);
  return static_cast<uint16_t>(std::stoi(line.substr(colon + 1)));
}

// A server on `port` of 127.0.0.1 (0: a free one) for the file q.db in `dir`.
struct server_process {
  std::string db;
  child_process proc;
  uint16_t port = 0;

  explicit server_process(std::string db_path, uint16_t at = 0,
                          std::vector<std::string> extra = {})
      : db(std::move(db_path)), proc(args(db, at, std::move(extra))) {
    port = read_listening_port(proc);
  }

  static std::vector<std::string> args(const std::string& db, uint16_t at,
                                       std::vector<std::string> extra) {
    std::vector<std::string> out{ERGON_SERVER, "--db", db, "--port", std::to_string(at)};
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  }

  // Stops it with `sig`; true if it exited 0 (otherwise it says how it ended).
  bool stop(int sig) {
    proc.signal(sig);
    int st = proc.wait();
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
      return true;
    BOOST_TEST_MESSAGE("ergon-server " << (WIFEXITED(st) ? "exited with status " : "died of signal ")
                                       << (WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st)));
    return false;
  }
};

struct client {
  network_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  client() = default;
  explicit client(const tls_options& tls) : cfg(tls) {}

  template <class T, class... Ts>
  result<T> ask(const queue_actor& q, Ts&&... xs) {
    result<T> out = status{error::internal, "no answer"};
    self->request(q, caf::infinite, std::forward<Ts>(xs)...)
      .receive([&](T& value) { out = std::move(value); },
               [&](caf::error& e) { out = to_status(e); });
    return out;
  }
};

}  // namespace ergon::test
