// worker: runs job code for the types it serves.
//
// A worker registers with the dispatcher and holds claimed jobs: the ones
// running, plus a window of `prefetch` weight units waiting for a thread, so
// a thread whose job returned starts the next one without a round trip.
// Whenever the weight it holds drops below min_capacity + prefetch it asks
// for the rest (Effectum's low-water mark). Job code runs on the worker's own
// threads, never on CAF's scheduler. Outcomes travel in the worker's next
// report with its request for more work (protocol.hpp); stop() gives back
// the claims that never started and waits until every outcome has committed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/typed_actor.hpp>

#include "ergon/actors/node_gate.hpp"
#include "ergon/actors/protocol.hpp"
#include "ergon/actors/reply.hpp"
#include "ergon/clock.hpp"
#include "ergon/job_context.hpp"

namespace ergon::actors {

/// Job code for one type; returns the result bytes (empty: none).
using runner = std::function<std::string(job_context&)>;

/// Counters a worker keeps current, readable from any thread.
struct worker_counters {
  std::atomic<int64_t> jobs_received{0};
  std::atomic<int64_t> batches_received{0};
  std::atomic<int64_t> requests_sent{0};
  std::atomic<int64_t> outcomes_committed{0};
  std::atomic<int64_t> outcomes_resent{0};
  std::atomic<int32_t> running_jobs{0};
  std::atomic<int32_t> running_weight{0};
  std::atomic<int64_t> middleware_errors{0};
  std::atomic<int32_t> max_capacity{0};
};

/// The most lines and bytes of text one attempt's log keeps.
struct log_bounds {
  int32_t lines = 100;
  int64_t bytes = 64 * 1024;
};

struct worker_config {
  std::string name;
  std::map<std::string, runner> runners;  ///< type -> code; the worker's types
  int32_t min_capacity = 1;
  int32_t max_capacity = 1;
  /// Weight units of claimed jobs held beyond max_capacity, waiting to start.
  int32_t prefetch = 0;
  /// Heartbeat every running attempt this often; 0: only manual heartbeats.
  int64_t auto_heartbeat_ms = 0;
  /// Hand progress reports to the writer at most this often (0: each one).
  int64_t progress_interval_ms = 1'000;
  /// What one attempt's log keeps (worker_options::log_lines, log_bytes).
  log_bounds logs;
  std::shared_ptr<ergon::clock> clock;
  caf::actor dispatcher;
  /// For a queue on another node: asked (rejoin_atom) for the dispatcher
  /// again after the connection drops. Empty for a local queue.
  caf::actor rejoin;
  std::shared_ptr<worker_counters> counters = std::make_shared<worker_counters>();
  /// Which nodes may reach the worker: its queue's.
  std::shared_ptr<node_gate> gate;
};

// -- local messages (job threads and the facade to the worker actor) ---------------------

/// A remote worker whose connection dropped asks its connection for the
/// dispatcher again; the answer comes once the queue is reachable.
using rejoin_atom = caf::atom_constant<caf::atom("ergrejoin")>;

/// The worker's job threads left outcomes (local only).
using outbox_atom = caf::atom_constant<caf::atom("outbox")>;

/// A heartbeat or checkpoint from a job thread.
struct heartbeat_call {
  int64_t token = 0;
  std::optional<std::string> checkpoint;
  reply_to<status> reply;
};

/// A page of a running attempt's dependency results, from a job thread.
struct results_call {
  int64_t token = 0;
  int64_t after = 0;
  reply_to<result<results_reply>> reply;
};

/// Stop taking jobs; the reply comes once every running job has finished.
struct stop_worker {
  reply_to<status> reply;
};

/// A job thread left a progress report on the attempt with this token.
using progress_atom = caf::atom_constant<caf::atom("progress")>;

/// Self-sent: the progress interval passed, hand waiting reports over.
using flush_progress_atom = caf::atom_constant<caf::atom("flushprog")>;
/// Time to send again the outcomes whose write failed for a passing cause
/// (with the timer's number: only the latest counts).
using resend_atom = caf::atom_constant<caf::atom("resend")>;

/// The hold of a dropped connection ended (with the timer's number: only
/// the latest counts): forget the attempts kept for a registration that did
/// not come.
using hold_atom = caf::atom_constant<caf::atom("hold")>;

/// Give up on running jobs (after a stop timed out): flag them cancelled and
/// stop the actor; their threads finish on their own.
using abandon_atom = caf::atom_constant<caf::atom("abandon")>;

using worker_actor = caf::typed_actor<
  caf::reacts_to<assign_jobs>,
  caf::reacts_to<cancel_attempt>,
  caf::reacts_to<preempt_attempt>,
  caf::reacts_to<resize_worker>,
  caf::reacts_to<outbox_atom>,
  caf::reacts_to<heartbeat_call>,
  caf::reacts_to<results_call>,
  caf::reacts_to<progress_atom, int64_t>,
  caf::reacts_to<flush_progress_atom>,
  caf::reacts_to<resend_atom, uint64_t>,
  caf::reacts_to<hold_atom, uint64_t>,
  caf::reacts_to<tick_atom>,
  caf::reacts_to<stop_worker>,
  caf::reacts_to<abandon_atom>>;

/// Spawns a worker; it registers with the dispatcher right away.
worker_actor spawn_worker(caf::actor_system& sys, worker_config cfg);

}  // namespace ergon::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::heartbeat_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::results_call)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ergon::actors::stop_worker)
