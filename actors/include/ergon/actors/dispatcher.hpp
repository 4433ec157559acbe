// dispatcher: decides which job runs next and on which worker.
//
// It keeps the scheduling keys of pending jobs in memory (scheduling_policy),
// loaded at open and kept current by the writer's commit feeds, and a list of
// workers waiting for work. When a worker has room it picks the best jobs
// that fit, has db_writer claim them (try + 1, attempt token), and hands them
// out only after that claim has committed. It also watches running attempts'
// expiry and pending jobs' deadlines, on timers driven by the queue's clock.
#pragma once

#include <memory>
#include <vector>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "ergon/actors/db_writer.hpp"
#include "ergon/actors/dispatcher_calls.hpp"
#include "ergon/actors/event_bus.hpp"
#include "ergon/actors/final_watch.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/actors/reply.hpp"
#include "ergon/clock.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::actors {

/// Stop handing out jobs (the queue is closing).
using drain_atom = caf::atom_constant<caf::atom("drain")>;

using dispatcher_actor = caf::typed_actor<
  caf::replies_to<register_worker>::with<worker_registered>,
  caf::reacts_to<worker_report>,
  caf::replies_to<unregister_worker>::with<unregistered_atom>,
  caf::reacts_to<feed_ready_atom>,
  caf::reacts_to<tick_atom>,
  caf::reacts_to<drain_atom>,
  caf::reacts_to<scheduling_control>,
  caf::reacts_to<metrics_request>,
  caf::reacts_to<controls_request>,
  caf::reacts_to<workers_request>,
  caf::reacts_to<pending_view_request>>;

struct dispatcher_config {
  std::shared_ptr<ergon::clock> clock;
  db_writer_actor writer;
  std::shared_ptr<feed_channel> feeds;  ///< the writer's commit feeds
  caf::actor events;  ///< event bus; may be empty
  uint32_t id_tag = 0;  ///< the database's id tag, to name jobs in events
  std::shared_ptr<subscribers> subs;
  /// Pending jobs found at open.
  std::vector<storage::job_key> pending;
  /// Remote workers' attempts found running at open, kept for their
  /// workers to take back.
  held_attempts held;
  /// options::remote_grace, which remote workers learn at registration.
  int64_t remote_grace_ms = 0;
  scheduling_options scheduling;
  /// The run-time controls stored in the database, found at open.
  std::vector<control_info> controls;
  /// The id of the first worker to register (dispatch_core::config).
  int64_t first_worker_id = 1;
  /// Which nodes may reach the dispatcher (remote workers do).
  std::shared_ptr<node_gate> gate;
  /// Told of every job a commit finished (queue::wait).
  std::shared_ptr<final_watch> watch = std::make_shared<final_watch>();
};

/// Spawns the dispatcher. The caller must then send the writer
/// `listen_to{dispatcher}` before any write it wants the dispatcher to see.
dispatcher_actor spawn_dispatcher(caf::actor_system& sys, dispatcher_config cfg);

}  // namespace ergon::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::scheduling_control)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::metrics_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::controls_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::workers_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::pending_view_request)
