// inbox_drain: takes in the jobs that PostgreSQL transactions enqueued
// (include/ergon/pg.hpp). A thread LISTENs on a session of its own; each
// notification (sent at an enqueuer's commit), and each (re)connection of
// that session, asks for a drain. A sweep on the queue's clock drains too,
// in case a notification was missed, and forgets entries taken in longer
// ago than options::idempotency_window. Each drain is one db_writer
// request, answered before the next is sent; a drain that took a full
// batch is followed by another at once.
#pragma once

#include <chrono>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "ergon/actors/db_writer.hpp"
#include "ergon/actors/event_bus.hpp"
#include "ergon/clock.hpp"
#include "ergon/storage/pg_db.hpp"

namespace ergon::actors {

struct inbox_drain_config {
  std::shared_ptr<ergon::clock> clock;
  db_writer_actor writer;
  /// The queue's database; the listening session is opened with it.
  storage::pg_options pg;
  /// How often the sweep drains, on `clock`.
  std::chrono::milliseconds sweep_every{1'000};
  /// Most entries in one writer request.
  size_t batch = 500;
  /// Refused entries are event_kind::inbox_refused events.
  caf::actor events;
  std::shared_ptr<subscribers> subs;
};

/// The inbox's drain: an actor, and a thread that listens. Its first
/// drain starts at once, so make it after the writer has its listener.
/// Destroy it before the writer closes: that stops both, and joins the
/// thread on the destroying thread (not an actor's), which waits for a
/// connect under way for up to 2 s.
class inbox_drain {
 public:
  inbox_drain(caf::actor_system& sys, inbox_drain_config cfg);
  ~inbox_drain();
  inbox_drain(const inbox_drain&) = delete;
  inbox_drain& operator=(const inbox_drain&) = delete;

 private:
  class listener;
  caf::actor actor_;
  std::unique_ptr<listener> listener_;
};

}  // namespace ergon::actors
