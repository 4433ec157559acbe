// queue_link: how ergonctl writes to a database. Nobody owns the file: it
// opens it here (and closes it when done). A running program owns it: it
// connects to the port the owner listens on, found in its lock file
// (find_owner). An owner that takes no connections is named in the error.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <optional>
#include <string>

#include <ergon/credentials.hpp>
#include <ergon/inspector.hpp>
#include <ergon/queue_actor.hpp>

namespace ergon::ctl {

/// What ergonctl needs to reach a database's owner.
struct reach_options {
  std::string db;
  credentials creds;  ///< for an owner that needs the secret
  bool tls = false;   ///< the actor system was configured with use_tls
};

class queue_link {
 public:
  /// The queue that takes writes for `o.db`. Errors: busy (owned by a
  /// process that takes no connections: its pid and host are named),
  /// unauthenticated (the owner needs a secret or TLS not given),
  /// unreachable, and whatever opening the file gives.
  static result<queue_link> for_writes(caf::actor_system& sys, const reach_options& o);

  /// The owner's queue, if a process owns `o.db` and listens; empty if
  /// nobody owns it or the owner takes no connections.
  static result<std::optional<queue_link>> owner(caf::actor_system& sys, const reach_options& o);
  /// The same for an owner already looked up (find_owner): a PostgreSQL
  /// lookup costs a connection.
  static result<std::optional<queue_link>> owner(caf::actor_system& sys, const reach_options& o,
                                                 const std::optional<owner_info>& found);

  queue_link(queue_link&&) noexcept = default;
  queue_link& operator=(queue_link&&) = delete;
  /// Closes the queue if it was opened here.
  ~queue_link();

  /// The answer to one request, or the error it got.
  template <class T, class... Ts>
  result<T> ask(Ts&&... xs) {
    result<T> out = status{error::internal, "no answer"};
    caf::scoped_actor self{*sys_};
    self->request(q_, caf::infinite, std::forward<Ts>(xs)...)
      .receive([&](T& value) { out = std::move(value); },
               [&](caf::error& e) { out = to_status(e); });
    return out;
  }

  /// "opened here" or "through the owner at HOST:PORT".
  const std::string& route() const noexcept { return route_; }

 private:
  queue_link(caf::actor_system& sys, queue_actor q, bool opened_here, std::string route)
      : sys_(&sys), q_(std::move(q)), opened_here_(opened_here), route_(std::move(route)) {}
  static result<queue_link> dial(caf::actor_system& sys, const reach_options& opts,
                                 const owner_info& o, const owner_info::listener& l);
  caf::actor_system* sys_;
  queue_actor q_;
  bool opened_here_;
  std::string route_;
};

}  // namespace ergon::ctl
