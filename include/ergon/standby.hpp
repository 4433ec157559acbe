// Standby servers: several processes, on one or many hosts, serve one
// PostgreSQL queue. One owns it (its lease); the others wait as standbys,
// and one of them takes the queue over when the owner dies, is stopped or
// is cut off from PostgreSQL (docs/distribution.md, "Standby servers").
//
//   ergon::options opts;
//   opts.listen = ergon::listen_options{};  // the same port on every host
//   opts.listen->port = 4780;
//   auto s = ergon::standby_server::start(sys, "postgresql://ergon@db/jobs", opts, {},
//                                         [](const ergon::role_change& c) { ... });
//   ...
//   s->stop();
//
// A takeover runs the queue's recovery, in which the jobs that remote
// workers were running wait for them (options::remote_grace), so they go
// on without running again. A SQLite queue can have no standby: its file
// lives on one machine's disk.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "ergon/error.hpp"
#include "ergon/options.hpp"
#include "ergon/queue_actor.hpp"

namespace ergon {

/// What a standby server is for its queue now.
enum class server_role : uint8_t {
  /// Waits for the owner's lease to pass or its session to end.
  standby = 0,
  /// Owns the queue and serves it.
  owner = 1,
  /// A client closed the queue (close_atom), or stop() was called: the
  /// server waits no more.
  stopped = 2,
};

/// "standby", "owner" or "stopped".
const char* to_string(server_role r) noexcept;

/// How a standby server waits.
struct standby_options {
  /// How often a standby reads the queue's lease (one small query that
  /// takes no lock). Between 10 ms and 60 s (invalid_argument "poll").
  /// A SIGKILLed owner's session ends at once, so a standby takes over
  /// within about one poll plus the queue's recovery.
  std::chrono::milliseconds poll{200};
};

/// A change of a standby server's role, as it reports it.
struct role_change {
  server_role role = server_role::standby;
  /// Why: ok after a takeover; why the queue closed by itself when the
  /// server steps down to standby (busy naming the new owner, or
  /// busy naming the lapse when its lease lapsed); closed when it stopped.
  status why;
  /// The queue, while the role is owner.
  queue_actor queue;
};

/// A server that owns a PostgreSQL queue or stands by to take it over.
/// Thread-safe. Movable; a moved-from one answers `closed` and role()
/// stopped.
class standby_server {
 public:
  /// Starts waiting for the queue at `location` (a postgresql:// URI) in
  /// `sys`, and takes it over, opened with `opts` (spawn_queue), once its
  /// lease can be taken: at once if it has no owner. The lease is read once
  /// before start returns, so the standby's pages name the owner from the
  /// start; the takeover itself happens on the server's thread. opts.http is served in
  /// both roles on one port: while standing by, /healthz answers 503 with
  /// role "standby" and the owner, /livez 200, /metrics the role families
  /// (ergon_role, ergon_lease_epoch, ergon_takeovers_total,
  /// ergon_step_downs_total), and other pages 503. A port of 0 is chosen
  /// once and kept across roles, for opts.listen too.
  ///
  /// When the owned queue closes by itself (another server took it over,
  /// its lease lapsed, or a commit's fate stayed unknown), the server steps
  /// down and stands by again: it never exits for that. `on_change` is
  /// called on the server's own thread at each change; what it throws is
  /// ignored. It must not call stop().
  ///
  /// Errors: invalid_argument (a SQLite location, naming "location"; the
  /// options as queue::open checks them; a poll out of range; listening
  /// without caf::io::middleman loaded), io_error (a port in opts.listen or
  /// opts.http that can't be bound now, naming it), unauthenticated (the
  /// server refused the credentials). An unreachable PostgreSQL is no
  /// error: the standby waits for it.
  static result<standby_server> start(caf::actor_system& sys, const std::string& location,
                                      options opts, standby_options standby = {},
                                      std::function<void(const role_change&)> on_change = {});

  standby_server(standby_server&&) noexcept;
  standby_server& operator=(standby_server&&) noexcept;
  /// stop().
  ~standby_server();

  server_role role() const;

  /// The queue while this server owns it; an invalid handle otherwise.
  queue_actor queue() const;

  /// The HTTP endpoint's port (options::http), in either role. Errors:
  /// invalid_argument if it has none.
  result<uint16_t> http_port() const;

  /// How often this server took the queue over, and stepped down.
  int64_t takeovers() const;
  int64_t step_downs() const;

  /// Stops waiting, or closes the owned queue as close_atom does (its
  /// running jobs get 30 s) and gives its lease up; then reports stopped.
  /// Errors: the close's.
  status stop();

  class impl;

 private:
  explicit standby_server(std::shared_ptr<impl> p) noexcept;
  std::shared_ptr<impl> impl_;
};

}  // namespace ergon
