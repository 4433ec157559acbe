// ergon-server: owns one database file and publishes its queue on a port, so
// clients and workers in other processes use it through ergon::connect.
//
//   ergon-server --db jobs.db [--bind 127.0.0.1] [--port 4780]
//                [--secret-file FILE [--worker-secret-file F] [--client-secret-file F]]
//                [--tls-cert F --tls-key F --tls-ca F]
//                [--http-port 4781 [--http-bind 127.0.0.1]
//                 [--http-cert F --http-key F [--http-ca F]] [--http-insecure-plaintext]]
//                [--standby [--standby-poll-ms 200]]
//   ergon-server --make-secret FILE
//
// Prints "ergon-server listening on <bind>:<port>" once it takes requests
// (with --port 0 the port is the one the system chose), then, with
// --http-port, "ergon-server http on <bind>:<port>" (metrics, dashboard).
// Exit status: 0 after SIGINT or SIGTERM, which close the queue like
// queue::close (running jobs get 30 s); 1 if it can't start (or its close
// failed); 3 once a client closed the queue (close_atom), so a supervisor
// sees it gone; 4 once a PostgreSQL queue closed by itself: another process
// took it over (its lease passed while this one was stopped or cut off), or
// whether a commit went through stayed unknown (docs/postgres.md). See
// docs/distribution.md for the secret and TLS, docs/postgres.md for leases.
//
// With --standby (PostgreSQL), it waits while another server owns the queue
// ("ergon-server standby for <db>") and takes it over when that one dies
// or its lease passes: then it prints the listening line (the port is the
// same at every takeover). When its queue closes by itself it prints
// "ergon-server stepping down: <why>" and stands by again, instead of
// exiting with status 4 (docs/distribution.md, "Standby servers").
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <CLI/CLI.hpp>

#include <ergon/queue.hpp>
#include <ergon/queue_actor.hpp>
#include <ergon/standby.hpp>

#include "config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <optional>
#include <chrono>
#include <cstring>
#include <iostream>
#include <pthread.h>
#include <cstdlib>
#include <thread>
#include <tuple>

namespace {

using signal_atom = caf::atom_constant<caf::atom("ergsignal")>;
using stopped_atom = caf::atom_constant<caf::atom("ergstop")>;

// Waits in another thread for SIGINT or SIGTERM, and tells `me`.
void forward_signals(sigset_t stop_signals, caf::actor me) {
  std::thread{[stop_signals, me] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    caf::send_as(me, me, signal_atom::value, sig);
  }}.detach();
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// --standby: owns the queue when it can, stands by otherwise, until a
// signal or a client's close.
int serve_standby(caf::actor_system& sys, const std::string& db, const ergon::options& opts,
                  std::chrono::milliseconds poll, sigset_t stop_signals) {
  caf::scoped_actor self{sys};
  auto me = caf::actor{self};
  auto bind = opts.listen->address;
  // Whole lines in one write each: this runs on the server's own thread.
  auto say = [](const std::string& line) { std::cout << line + "\n" << std::flush; };
  auto on_change = [me, bind, db, say](const ergon::role_change& c) {
    switch (c.role) {
      case ergon::server_role::owner:
        if (auto port = ergon::listening_port(c.queue))
          say("ergon-server listening on " + bind + ":" + std::to_string(*port));
        break;
      case ergon::server_role::standby:
        say("ergon-server stepping down: " + c.why.to_string());
        say("ergon-server standby for " + db);
        break;
      case ergon::server_role::stopped:
        caf::anon_send(me, stopped_atom::value);
        break;
    }
  };
  auto server = ergon::standby_server::start(sys, db, opts, ergon::standby_options{poll},
                                             on_change);
  if (!server) {
    std::cerr << "ergon-server: cannot stand by for " << db << ": " << server.error() << '\n';
    return 1;
  }
  if (server->role() == ergon::server_role::standby)
    say("ergon-server standby for " + db);
  if (auto port = server->http_port())
    say("ergon-server http on " + opts.http->address + ":" + std::to_string(*port));
  forward_signals(stop_signals, me);
  int rc = 0;
  self->receive(
    [&](signal_atom, int sig) {
      std::cout << "ergon-server: " << signal_name(sig) << ", closing" << std::endl;
      if (auto st = server->stop(); !st) {
        std::cerr << "ergon-server: close: " << st << '\n';
        rc = 1;
      }
    },
    [&](stopped_atom) {
      std::cerr << "ergon-server: a client closed the queue; exiting with status 3" << std::endl;
      rc = 3;
    });
  return rc;
}

// Writes a new secret to `path`, which must not exist yet, readable by its
// owner only.
int make_secret_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::cerr << "ergon-server: --make-secret " << path << ": " << std::strerror(errno) << '\n';
    return 1;
  }
  auto line = ergon::make_secret() + "\n";
  bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  written = ::close(fd) == 0 && written;
  if (!written) {
    std::cerr << "ergon-server: --make-secret " << path << ": " << std::strerror(errno) << '\n';
    return 1;
  }
  std::cout << "ergon-server: wrote a new secret to " << path << " (mode 0600)" << std::endl;
  return 0;
}

// A TLS error ("certificate", "key", "ca_file") as the table that set it
// names it, so that the file's line is found.
ergon::status with_prefix(const std::string& prefix, const ergon::status& st) {
  if (st || st.field().empty())
    return st;
  return {st.code(), st.message(), prefix + st.field()};
}

// The network layer's settings for the queue's port: TLS, the peer
// timeout and the message limit. Errors name the field as the file does.
ergon::status network_config(caf::actor_system_config& cfg,
                             const ergon::server::server_settings& s) {
  cfg.load<caf::io::middleman>();
  if (auto st = ergon::set_peer_timeout(cfg, s.peer_timeout); !st)
    return {st.code(), "listen.peer_timeout: " + st.message(), "listen.peer_timeout"};
  if (auto st = ergon::set_max_message_size(cfg, s.max_message_bytes); !st)
    return {st.code(), "listen.max_message_bytes: " + st.message(), "listen.max_message_bytes"};
  if (!s.tls.certificate.empty())
    return with_prefix("listen.tls.", ergon::use_tls(cfg, s.tls));
  return {};
}

// --check-config: everything a start would check before it opens the
// queue, with nothing opened or bound.
ergon::status check_settings(const ergon::server::server_settings& s) {
  caf::actor_system_config cfg;
  if (auto st = network_config(cfg, s); !st)
    return st;
  if (s.opts.http && s.opts.http->tls) {
    caf::actor_system_config scratch;
    if (auto st = ergon::use_tls(scratch, *s.opts.http->tls); !st)
      return with_prefix("http.tls.", st);
  }
  return ergon::validate(s.opts);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ergon-server: a durable job queue on a port"};
  std::string db;
  std::string bind = "127.0.0.1";
  uint16_t port = 4780;
  auto db_option = app.add_option("--db", db, "the database file (created if missing)");
  std::string new_secret;
  app.add_option("--make-secret", new_secret,
                 "write a new secret (32 random bytes as 64 hex digits) to this file, which "
                 "must not exist, readable by its owner only; then exit")
    ->excludes(db_option);
  app.add_option("--bind", bind, "the address to listen on")->capture_default_str();
  app.add_option("--port", port, "the port to listen on; 0 picks a free one")->capture_default_str();
  std::string secret_file;
  app.add_option("--secret-file", secret_file,
                 "a file holding the shared secret (one line: 64+ hex digits, as --make-secret "
                 "writes); only nodes that prove it reach the queue")
    ->check(CLI::ExistingFile);
  std::string worker_secret_file;
  app.add_option("--worker-secret-file", worker_secret_file,
                 "a file holding a second secret, for workers: a node that proves it may only "
                 "register workers and run their jobs (needs --secret-file)")
    ->check(CLI::ExistingFile);
  std::string client_secret_file;
  app.add_option("--client-secret-file", client_secret_file,
                 "a file holding a third secret, for clients: a node or HTTP caller that proves "
                 "it may submit jobs and read (needs --secret-file)")
    ->check(CLI::ExistingFile);
  ergon::tls_options tls;
  std::string passphrase_file;
  auto cert = app.add_option("--tls-cert", tls.certificate, "this server's PEM certificate");
  auto key = app.add_option("--tls-key", tls.key, "its PEM private key");
  auto ca = app.add_option("--tls-ca", tls.ca_file, "the CAs a client certificate must chain to");
  app.add_option("--tls-passphrase-file", passphrase_file, "a file holding the key's passphrase")
    ->check(CLI::ExistingFile);
  app.add_option("--tls-peer-name", tls.peer_name,
                 "the name every client certificate must carry (DNS name or IP address); "
                 "unset: any certificate the CA signed");
  bool allow_open_files = false;
  app.add_flag("--allow-open-files", allow_open_files,
               "accept a secret, key or passphrase file that its group or others may read "
               "(with a warning); refused otherwise, as ssh does");
  int64_t handshake_timeout_ms = 10'000;
  app.add_option("--handshake-timeout-ms", handshake_timeout_ms,
                 "close a connection that has not passed its handshake (TLS and ergon's) "
                 "within this long")
    ->capture_default_str();
  size_t max_message_bytes = ergon::default_message_limit;
  app.add_option("--max-message-bytes", max_message_bytes,
                 "the largest message a connection may send; a larger one closes it")
    ->capture_default_str();
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
  app.add_option("--http-bind", http_bind,
                 "the address the HTTP endpoint listens on; beyond loopback it needs "
                 "--http-cert and --http-key, or --http-insecure-plaintext")
    ->capture_default_str();
  ergon::tls_options http_tls;
  auto http_cert = app.add_option("--http-cert", http_tls.certificate,
                                  "serve HTTPS only, with this PEM certificate");
  auto http_key = app.add_option("--http-key", http_tls.key, "the HTTPS certificate's PEM key");
  app.add_option("--http-ca", http_tls.ca_file,
                 "HTTPS clients must present a certificate that chains to these CAs")
    ->needs(http_cert);
  http_cert->needs(http_key);
  http_key->needs(http_cert);
  bool http_insecure = false;
  app.add_flag("--http-insecure-plaintext", http_insecure,
               "serve plain HTTP on an address beyond loopback: the secret and job data cross "
               "the network in clear text");
  int64_t remote_grace_ms = 30'000;
  app.add_option("--remote-grace-ms", remote_grace_ms,
                 "how long jobs that remote workers were running when this server stopped wait, "
                 "after a restart, for their workers to join again and go on; those that do "
                 "not come back retry then (worker lost). 0: retry them at open")
    ->capture_default_str();
  int64_t idempotency_window_ms = 86'400'000;
  app.add_option("--idempotency-window-ms", idempotency_window_ms,
                 "how long a job's idempotency key returns its id to a submit again "
                 "(job::idempotency_key), from its first submission")
    ->capture_default_str();
  // Defaults from options itself, not written twice.
  const ergon::options defaults;
  int64_t max_snoozes = defaults.max_snoozes;
  app.add_option("--max-snoozes", max_snoozes,
                 "how many times one job may snooze (job_context::snooze); a snooze past that "
                 "counts as a failure")
    ->capture_default_str();
  int64_t inbox_sweep_ms = defaults.inbox_sweep.count();
  app.add_option("--inbox-sweep-ms", inbox_sweep_ms,
                 "PostgreSQL: how often the owner looks in the inbox without a notification "
                 "(jobs enqueued by ergon::pg::submit or the SQL function submit)")
    ->capture_default_str();
  std::optional<int32_t> preempt_at;
  app.add_option("--preempt-at", preempt_at,
                 "preemption: a waiting job of at least this (effective) priority may ask "
                 "running jobs of lower priority to yield (docs/scheduling.md); off if unset");
  // PostgreSQL's times (docs/postgres.md), in ms.
  int64_t lease_time_ms = 10'000;
  int64_t commit_outcome_wait_ms = 30'000;
  for (auto [name, ms, help] :
       {std::tuple{"--lease-time-ms", &lease_time_ms,
                   "PostgreSQL: how long ownership lasts without a renewal; a server stopped or "
                   "cut off for longer is replaced, and exits with status 4 when it comes back"},
        std::tuple{"--commit-outcome-wait-ms", &commit_outcome_wait_ms,
                   "PostgreSQL: how long to try to learn whether a COMMIT whose answer was "
                   "lost committed, before the queue closes and the server exits with status "
                   "4"}})
    app.add_option(name, *ms, help)->capture_default_str();
  bool standby = false;
  app.add_flag("--standby", standby,
               "PostgreSQL: wait while another server owns the queue, take it over when that "
               "one dies or its lease passes, and stand by again (rather than exit 4) when "
               "this one's queue is taken over; run one per host, with the same options");
  int64_t standby_poll_ms = 200;
  app.add_option("--standby-poll-ms", standby_poll_ms,
                 "with --standby: how often to read the queue's lease while standing by")
    ->capture_default_str();
  std::string config_path;
  app.add_option("--config", config_path,
                 "a TOML configuration file with any of ergon::options (docs/operations.md, "
                 "\"ergon-server's configuration file\"); flags given override its keys");
  bool check_only = false;
  app.add_flag("--check-config", check_only,
               "check the configuration file and flags, and exit: 0 if they are valid, 1 "
               "naming the key and line that is not; opens no queue and binds no port");
  cert->needs(key, ca);
  key->needs(cert, ca);
  ca->needs(cert, key);
  CLI11_PARSE(app, argc, argv);
  if (!new_secret.empty())
    return make_secret_file(new_secret);

  // The file first, then the flags given, which override its keys.
  ergon::server::server_settings s;
  ergon::server::config_source source;
  if (!config_path.empty()) {
    auto read = ergon::server::read_config(config_path, s);
    if (!read) {
      std::cerr << "ergon-server: " << read.error().message() << '\n';
      return 1;
    }
    source = std::move(*read);
  }
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  auto& listen = *s.opts.listen;
  if (given("--db"))
    s.db = db;
  if (given("--bind"))
    listen.address = bind;
  if (given("--port"))
    listen.port = port;
  if (given("--secret-file"))
    s.secret_file = secret_file;
  if (given("--worker-secret-file"))
    s.worker_secret_file = worker_secret_file;
  if (given("--client-secret-file"))
    s.client_secret_file = client_secret_file;
  if (given("--tls-cert"))
    s.tls.certificate = tls.certificate;
  if (given("--tls-key"))
    s.tls.key = tls.key;
  if (given("--tls-ca"))
    s.tls.ca_file = tls.ca_file;
  if (given("--tls-passphrase-file"))
    s.passphrase_file = passphrase_file;
  if (given("--tls-peer-name"))
    s.tls.peer_name = tls.peer_name;
  if (given("--allow-open-files"))
    s.allow_open_files = allow_open_files;
  if (given("--handshake-timeout-ms"))
    listen.handshake_timeout = std::chrono::milliseconds{handshake_timeout_ms};
  if (given("--max-message-bytes"))
    s.max_message_bytes = max_message_bytes;
  if (given("--peer-timeout-ms"))
    s.peer_timeout = std::chrono::milliseconds{peer_timeout_ms};
  if (http_port) {
    if (!s.opts.http)
      s.opts.http = ergon::http_options{};
    s.opts.http->port = *http_port;
  }
  for (auto flag : {"--http-bind", "--http-cert", "--http-insecure-plaintext"})
    if (given(flag) && !s.opts.http) {
      std::cerr << "ergon-server: " << flag
                << ": serves nothing without --http-port or [http] in the configuration file\n";
      return 1;
    }
  if (given("--http-bind"))
    s.opts.http->address = http_bind;
  if (given("--http-cert")) {
    auto t = s.opts.http->tls.value_or(ergon::tls_options{});
    t.certificate = http_tls.certificate;
    t.key = http_tls.key;
    if (given("--http-ca"))
      t.ca_file = http_tls.ca_file;
    s.opts.http->tls = t;
  }
  if (given("--http-insecure-plaintext"))
    s.opts.http->insecure_plaintext = http_insecure;
  for (auto [flag, ms, into] :
       {std::tuple{"--remote-grace-ms", remote_grace_ms, &s.opts.remote_grace},
        std::tuple{"--idempotency-window-ms", idempotency_window_ms, &s.opts.idempotency_window},
        std::tuple{"--inbox-sweep-ms", inbox_sweep_ms, &s.opts.inbox_sweep},
        std::tuple{"--lease-time-ms", lease_time_ms, &s.opts.lease_time},
        std::tuple{"--commit-outcome-wait-ms", commit_outcome_wait_ms,
                   &s.opts.commit_outcome_wait}})
    if (given(flag))
      *into = std::chrono::milliseconds{ms};
  if (given("--max-snoozes"))
    s.opts.max_snoozes = max_snoozes;
  if (preempt_at)
    s.opts.scheduling.preemption = ergon::preemption_options{*preempt_at};
  if (given("--standby"))
    s.standby = standby;
  if (given("--standby-poll-ms"))
    s.standby_poll = std::chrono::milliseconds{standby_poll_ms};
  if (given("--standby-poll-ms") && !s.standby) {
    std::cerr << "ergon-server: --standby-poll-ms: needs --standby (or standby = true)\n";
    return 1;
  }
  // A value a flag gave is not the file's: errors about it name no line.
  for (auto [flag, field] :
       {std::pair{"--bind", "listen.address"}, std::pair{"--port", "listen.port"},
        std::pair{"--tls-cert", "listen.tls.certificate"}, std::pair{"--tls-key", "listen.tls.key"},
        std::pair{"--tls-ca", "listen.tls.ca_file"},
        std::pair{"--handshake-timeout-ms", "listen.handshake_timeout"},
        std::pair{"--max-message-bytes", "listen.max_message_bytes"},
        std::pair{"--peer-timeout-ms", "listen.peer_timeout"}, std::pair{"--http-port", "http.port"},
        std::pair{"--http-bind", "http.address"}, std::pair{"--http-cert", "http.tls.certificate"},
        std::pair{"--http-key", "http.tls.key"}, std::pair{"--http-ca", "http.tls.ca_file"},
        std::pair{"--remote-grace-ms", "remote_grace"},
        std::pair{"--idempotency-window-ms", "idempotency_window"},
        std::pair{"--inbox-sweep-ms", "inbox_sweep"}, std::pair{"--lease-time-ms", "lease_time"},
        std::pair{"--commit-outcome-wait-ms", "commit_outcome_wait"},
        std::pair{"--max-snoozes", "max_snoozes"},
        std::pair{"--preempt-at", "scheduling.preemption.threshold"}})
    if (given(flag))
      source.fields.erase(field);
  if (s.db.empty()) {
    std::cerr << "ergon-server: --db is required (or db in the configuration file)\n"
              << app.help();
    return 1;
  }
  auto access = s.allow_open_files ? ergon::file_access::any : ergon::file_access::owner_only;
  s.tls.key_access = access;
  if (s.opts.http && s.opts.http->tls)
    s.opts.http->tls->key_access = access;

  for (auto [file, slot] : {std::pair{&s.secret_file, &listen.creds.secret},
                            std::pair{&s.worker_secret_file, &listen.worker_secret},
                            std::pair{&s.client_secret_file, &listen.client_secret},
                            std::pair{&s.passphrase_file, &s.tls.passphrase}}) {
    if (file->empty())
      continue;
    auto text = ergon::read_secret_file(*file, access);
    if (!text) {
      std::cerr << "ergon-server: " << text.error() << '\n';
      return 1;
    }
    *slot = std::move(*text);
  }
  if (check_only) {
    if (auto st = check_settings(s); !st) {
      std::cerr << "ergon-server: " << source.explain(st) << '\n';
      return 1;
    }
    std::cout << "ergon-server: the configuration is valid" << std::endl;
    return 0;
  }

  // Every thread, CAF's included, inherits this mask: only sigwait below
  // sees SIGINT and SIGTERM.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  caf::actor_system_config cfg;
  if (auto st = network_config(cfg, s); !st) {
    std::cerr << "ergon-server: " << source.explain(st) << '\n';
    return 1;
  }
  ergon::queue::register_types(cfg);
  caf::actor_system sys{cfg};
  // Listening and HTTP are options of the open, so the secret guards both
  // from the first request.
  auto& opts = s.opts;
  if (auto st = ergon::validate(opts); !st) {
    std::cerr << "ergon-server: " << source.explain(st) << '\n';
    return 1;
  }
  auto& bind_address = listen.address;
  auto& db_path = s.db;
  if (s.standby)
    return serve_standby(sys, db_path, opts, s.standby_poll, stop_signals);
  auto q = ergon::spawn_queue(sys, db_path, opts);
  if (!q) {
    std::cerr << "ergon-server: cannot serve " << db_path << ": " << source.explain(q.error())
              << '\n';
    return 1;
  }
  std::cout << "ergon-server listening on " << bind_address << ":" << *ergon::listening_port(*q)
            << std::endl;
  if (opts.http)
    std::cout << "ergon-server http on " << opts.http->address << ":" << *ergon::http_port(*q)
              << std::endl;

  // Either a signal, or the queue closes by itself: a client sent close.
  caf::scoped_actor self{sys};
  self->monitor(*q);
  forward_signals(stop_signals, caf::actor{self});
  bool signalled = false;
  caf::error gone;
  self->receive(
    [&](signal_atom, int sig) {
      signalled = true;
      std::cout << "ergon-server: " << signal_name(sig) << ", closing" << std::endl;
    },
    [&](caf::down_msg& down) { gone = std::move(down.reason); });
  // The queue closed by itself: taken over, or a commit's fate unknown.
  if (!signalled && gone && gone.category() == ergon::error_category) {
    std::cerr << "ergon-server: " << ergon::to_status(gone) << "; exiting with status 4"
              << std::endl;
    return 4;
  }
  if (!signalled) {
    std::cerr << "ergon-server: a client closed the queue; exiting with status 3" << std::endl;
    return 3;
  }
  int rc = 0;
  self->request(*q, caf::infinite, ergon::close_atom::value)
    .receive([](ergon::ok_atom) {},
             [&](const caf::error& e) {
               std::cerr << "ergon-server: close: " << ergon::to_status(e) << '\n';
               rc = 1;
             });
  return rc;
}
