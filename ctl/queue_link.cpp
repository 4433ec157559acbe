#include "queue_link.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "ergon/queue.hpp"
#include "ergon/storage/pg_db.hpp"
#include "owner_address.hpp"

namespace ergon::ctl {
namespace {

std::string who(const owner_info& o) {
  return "pid " + std::to_string(o.pid) + " on host " + o.host;
}

}  // namespace

result<queue_link> queue_link::for_writes(caf::actor_system& sys, const reach_options& o) {
  auto found = find_owner(o.db);
  if (!found)
    return found.error();
  auto owned = owner(sys, o, *found);
  if (!owned)
    return owned.error();
  if (*owned)
    return std::move(**owned);
  if (*found)  // owned, but takes no connections
    return status{error::busy,
                  o.db + " is owned by " + who(**found)
                    + ", which takes no connections: writes need the owner to listen "
                      "(options::listen, or run the queue in ergon-server)"};
  // A tool that changes jobs never creates a database or a schema: a typo
  // would make an empty one.
  struct stat st {};
  if (!storage::names_postgres(o.db) && ::stat(o.db.c_str(), &st) != 0)
    return status{error::not_found,
                  o.db + ": " + std::strerror(errno) + " (ergonctl creates no database)"};
  if (auto seen = queue::inspect(o.db); !seen)
    return status{seen.error().code(),
                  seen.error().message() + " (ergonctl creates no database)"};
  auto q = spawn_queue(sys, o.db);
  if (!q) {
    if (q.error().code() == error::busy)  // an owner came meanwhile
      return for_writes(sys, o);
    return q.error();
  }
  return queue_link{sys, std::move(*q), true, "opened here"};
}

result<std::optional<queue_link>> queue_link::owner(caf::actor_system& sys,
                                                    const reach_options& o) {
  auto found = find_owner(o.db);
  if (!found)
    return found.error();
  return owner(sys, o, *found);
}

result<std::optional<queue_link>> queue_link::owner(caf::actor_system& sys,
                                                    const reach_options& o,
                                                    const std::optional<owner_info>& found) {
  if (!found || found->listeners.empty())
    return std::optional<queue_link>{};
  auto& l = found->listeners.front();
  if (l.needs_secret && o.creds.secret.empty())
    return status{error::unauthenticated,
                  "the owner of " + o.db + " (" + who(*found) + ") listens on port "
                    + std::to_string(l.port) + " and needs the shared secret: pass --secret-file"};
  if (l.needs_tls && !o.tls)
    return status{error::unauthenticated,
                  "the owner of " + o.db + " (" + who(*found) + ") listens on port "
                    + std::to_string(l.port)
                    + " with TLS only: pass --tls-cert, --tls-key and --tls-ca"};
  auto link = dial(sys, o, *found, l);
  if (!link)
    return link.error();
  return std::optional<queue_link>{std::move(*link)};
}

result<queue_link> queue_link::dial(caf::actor_system& sys, const reach_options& opts,
                                    const owner_info& o, const owner_info::listener& l) {
  auto host = runtime::owner_address(o, l);
  if (!host)
    return status{host.error().code(),
                  "the owner of " + opts.db + " (" + who(o) + "): " + host.error().message()};
  auto q = connect(sys, *host, l.port, opts.creds);
  if (!q)
    return status{q.error().code(), "the owner of " + opts.db + " (" + who(o)
                                      + "): " + q.error().message()};
  return queue_link{sys, std::move(*q), false,
                    "through the owner at " + *host + ":" + std::to_string(l.port)};
}

queue_link::~queue_link() {
  if (!opened_here_ || !q_)
    return;
  caf::scoped_actor self{*sys_};
  self->request(q_, caf::infinite, close_atom::value).receive([](ok_atom) {}, [](caf::error&) {});
}

}  // namespace ergon::ctl
