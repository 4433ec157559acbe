// ergon-server: owns one database file and publishes its queue on a port, so
// clients and workers in other processes use it through ergon::connect.
//
//   ergon-server --db jobs.db [--bind 127.0.0.1] [--port 4780]
//                [--secret-file FILE] [--tls-cert F --tls-key F --tls-ca F]
//                [--http-port 4781 [--http-bind 127.0.0.1]]
//
// Prints "ergon-server listening on <bind>:<port>" once it takes requests
// (with --port 0 the port is the one the system chose), then, with
// --http-port, "ergon-server http on <bind>:<port>" (metrics, dashboard). SIGINT or SIGTERM
// closes the queue like queue::close (running jobs get 30 s) and exits 0.
// See docs/distribution.md for the secret and TLS.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <CLI/CLI.hpp>

#include <ergon/queue.hpp>
#include <ergon/queue_actor.hpp>

#include <csignal>
#include <optional>
#include <chrono>
#include <iostream>
#include <pthread.h>
#include <cstdlib>

int main(int argc, char** argv) {
  CLI::App app{"ergon-server: a durable job queue on a port"};
  std::string db;
  std::string bind = "127.0.0.1";
  uint16_t port = 4780;
  app.add_option("--db", db, "the database file (created if missing)")->required();
  app.add_option("--bind", bind, "the address to listen on")->capture_default_str();
  app.add_option("--port", port, "the port to listen on; 0 picks a free one")->capture_default_str();
  std::string secret_file;
  app.add_option("--secret-file", secret_file,
                 "a file holding the shared secret (one line, at least 16 bytes); only nodes "
                 "that prove it reach the queue")
    ->check(CLI::ExistingFile);
  ergon::tls_options tls;
  std::string passphrase_file;
  auto cert = app.add_option("--tls-cert", tls.certificate, "this server's PEM certificate");
  auto key = app.add_option("--tls-key", tls.key, "its PEM private key");
  auto ca = app.add_option("--tls-ca", tls.ca_file, "the CAs a client certificate must chain to");
  app.add_option("--tls-passphrase-file", passphrase_file, "a file holding the key's passphrase")
    ->check(CLI::ExistingFile);
  int64_t peer_timeout_ms = 0;
  app.add_option("--peer-timeout-ms", peer_timeout_ms,
                 "drop a node silent for this long and retry its jobs at once (worker lost); "
                 "0: only when its connection closes. Give every node the same")
    ->capture_default_str();
  std::optional<uint16_t> http_port;
  std::string http_bind = "127.0.0.1";
  app.add_option("--http-port", http_port,
                 "serve Prometheus metrics, the JSON API and the dashboard on this port; 0 picks "
                 "a free one (docs/operations.md)");
  app.add_option("--http-bind", http_bind, "the address the HTTP endpoint listens on")
    ->capture_default_str()
    ->needs("--http-port");
  std::optional<int32_t> preempt_at;
  app.add_option("--preempt-at", preempt_at,
                 "preemption: a waiting job of at least this (effective) priority may ask "
                 "running jobs of lower priority to yield (docs/scheduling.md); off if unset");
  cert->needs(key, ca);
  key->needs(cert, ca);
  ca->needs(cert, key);
  CLI11_PARSE(app, argc, argv);

  ergon::credentials creds;
  for (auto [file, slot] : {std::pair{&secret_file, &creds.secret},
                            std::pair{&passphrase_file, &tls.passphrase}}) {
    if (file->empty())
      continue;
    auto text = ergon::read_secret_file(*file);
    if (!text) {
      std::cerr << "ergon-server: " << text.error() << '\n';
      return 1;
    }
    *slot = std::move(*text);
  }

  // Every thread, CAF's included, inherits this mask: only sigwait below
  // sees SIGINT and SIGTERM.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  if (auto st = ergon::set_peer_timeout(cfg, std::chrono::milliseconds{peer_timeout_ms}); !st) {
    std::cerr << "ergon-server: --peer-timeout-ms: " << st << '\n';
    return 1;
  }
  if (!tls.certificate.empty()) {
    if (auto st = ergon::use_tls(cfg, tls); !st) {
      std::cerr << "ergon-server: " << st << '\n';
      return 1;
    }
  }
  ergon::queue::register_types(cfg);
  caf::actor_system sys{cfg};
  // Listening and HTTP are options of the open, so the secret guards both
  // from the first request.
  ergon::options opts;
  opts.listen = ergon::listen_options{};
  opts.listen->address = bind;
  opts.listen->port = port;
  opts.listen->creds = creds;
  if (http_port)
    opts.http = ergon::http_options{http_bind, *http_port};
  if (preempt_at)
    opts.scheduling.preemption = ergon::preemption_options{*preempt_at};
  auto q = ergon::spawn_queue(sys, db, opts);
  if (!q) {
    std::cerr << "ergon-server: cannot serve " << db << ": " << q.error() << '\n';
    return 1;
  }
  std::cout << "ergon-server listening on " << bind << ":" << *ergon::listening_port(*q)
            << std::endl;
  if (http_port)
    std::cout << "ergon-server http on " << http_bind << ":" << *ergon::http_port(*q) << std::endl;

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "ergon-server: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", closing"
            << std::endl;
  caf::scoped_actor self{sys};
  int rc = 0;
  self->request(*q, caf::infinite, ergon::close_atom::value)
    .receive([](ergon::ok_atom) {},
             [&](const caf::error& e) {
               std::cerr << "ergon-server: close: " << ergon::to_status(e) << '\n';
               rc = 1;
             });
  return rc;
}
