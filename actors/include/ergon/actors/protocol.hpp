// The worker protocol: messages between workers and the queue's dispatcher
// and db_writer. All of them are serializable and registered under the same
// names on every node, so a worker in another process speaks exactly this.
//
//   worker ──register_worker──► dispatcher ──worker_registered──► worker
//   worker ──worker_report────► dispatcher ──(worker_batch)──► db_writer
//                               db_writer  ──assign_jobs────────► worker
//   worker ──heartbeat_request► db_writer  ──heartbeat_reply──────► worker
//                               dispatcher ──cancel_attempt─────► worker
//                               dispatcher ──preempt_attempt────► worker
//                               dispatcher ──resize_worker──────► worker
//   worker ──progress_batch───► db_writer
//
// A report carries everything a worker has to say since its last one: the
// outcomes of its attempts, which attempts' code returned, claims it gives
// back, and how much room it has. The dispatcher adds the jobs it picks for
// that room, and the writer commits outcomes and claims in one transaction
// and answers with one assign_jobs. A worker has one report in flight at a
// time, so what happens meanwhile joins the next one: under load, per-job
// costs are paid per batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "ergon/actors/protocol_records.hpp"
#include "ergon/wire.hpp"

namespace ergon::actors {

/// Self-sent timer wake-up (dispatcher and worker).
using tick_atom = caf::atom_constant<caf::atom("tick")>;

/// A worker announces itself and the job types it runs. A remote worker
/// that joins again after its connection dropped lists the attempts it
/// kept, so that a queue that kept them for it (options::remote_grace)
/// gives them back rather than run them again.
struct register_worker {
  std::string name;
  std::string host;  ///< its host name
  int64_t pid = 0;   ///< its process id
  std::vector<std::string> types;
  int32_t max_capacity = 0;  ///< most weight running at once
  int32_t prefetch = 0;      ///< weight it holds claimed beyond that
  caf::actor worker;
  /// Attempts it runs, or holds claimed, or gives back.
  std::vector<storage::attempt_ref> held{};
  /// Attempts whose code returned, with an outcome not yet acknowledged.
  std::vector<storage::attempt_ref> returned{};
};

/// Most attempts a registration may list (held and returned together), per
/// unit of max_capacity + prefetch.
inline constexpr size_t listed_per_unit = 4;

/// Whether a registration, perhaps from another node, keeps worker_options'
/// rules: a name and host of up to max_type_bytes (check_label_size), a
/// pid not negative, job types of 1 to max_type_bytes bytes, at least one, max_capacity
/// 1 to max_weight, prefetch 0 to max_weight, and a worker handle; at most
/// listed_per_unit × (max_capacity + prefetch) attempts listed, each row
/// positive, each token not negative, and no row twice. Error:
/// invalid_argument naming "name", "host", "pid", "types", "max_capacity",
/// "prefetch", "worker", "held" or "returned".
status validate(const register_worker& r);

/// The part of the writer a worker, perhaps on another node, may reach:
/// progress to store, and heartbeats answered after their commit.
using worker_writer_actor =
  caf::typed_actor<caf::reacts_to<progress_batch>,
                   caf::replies_to<heartbeat_request>::with<heartbeat_reply>,
                   caf::replies_to<results_request>::with<results_reply>>;

/// The dispatcher's answer: the worker's id, and where to report outcomes.
struct worker_registered {
  uint64_t worker_id = 0;
  worker_writer_actor writer;
  /// Listed attempts the queue did not give back (they ended, or run
  /// elsewhere now): their code should stop, and their outcomes are fenced.
  std::vector<storage::attempt_ref> stale{};
  /// How long (ms) the queue keeps a remote worker's attempts for it after
  /// a restart (options::remote_grace); 0: it does not. The worker keeps
  /// running them that long when its connection drops.
  int64_t hold_ms = 0;
  /// The concurrency a run-time control sets for its name (queue::set_worker);
  /// 0: its own.
  int32_t max_capacity = 0;
};

using unregistered_atom = caf::atom_constant<caf::atom("unreg")>;

// -- inspection (serialization) -----------------------------------------------------

}  // namespace ergon::actors

namespace ergon::storage {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attempt_ref& x) {
  return f(caf::meta::type_name("ergon::attempt_ref"), x.row, x.token);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attempt_report& x) {
  return f(caf::meta::type_name("ergon::attempt_report"), x.row, x.token, x.kind, x.text,
           x.after_ms, x.children);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_report& x) {
  auto eta = wire::optional(x.eta);
  return f(caf::meta::type_name("ergon::progress_report"), x.row, x.token, x.done, x.total,
           x.message, x.at, eta);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attempt_logs& x) {
  return f(caf::meta::type_name("ergon::attempt_logs"), x.row, x.token, x.lines, x.dropped);
}

}  // namespace ergon::storage

namespace ergon::actors {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_status& x) {
  return f(caf::meta::type_name("ergon::wire_status"), x.code, x.message, x.field);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, register_worker& x) {
  return f(caf::meta::type_name("ergon::register_worker"), x.name, x.host, x.pid, x.types,
           x.max_capacity, x.prefetch, x.worker, x.held, x.returned);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_registered& x) {
  return f(caf::meta::type_name("ergon::worker_registered"), x.worker_id, x.writer, x.stale,
           x.hold_ms, x.max_capacity);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  return f(caf::meta::type_name("ergon::worker_report"), x.worker_id, x.capacity,
           x.received_weight, x.max_capacity, x.outcomes, x.returned, x.released);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unregister_worker& x) {
  return f(caf::meta::type_name("ergon::unregister_worker"), x.worker_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_assignment& x) {
  return f(caf::meta::type_name("ergon::job_assignment"), x.row, x.id, x.type, x.group,
           x.payload, x.try_number, x.token, x.weight);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, assign_jobs& x) {
  return f(caf::meta::type_name("ergon::assign_jobs"), x.jobs, x.acks, x.answers_report);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preempt_attempt& x) {
  return f(caf::meta::type_name("ergon::preempt_attempt"), x.row, x.token);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_attempt& x) {
  return f(caf::meta::type_name("ergon::cancel_attempt"), x.row, x.token, x.reason,
           x.requested);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resize_worker& x) {
  return f(caf::meta::type_name("ergon::resize_worker"), x.max_capacity);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_batch& x) {
  return f(caf::meta::type_name("ergon::progress_batch"), x.reports, x.logs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_request& x) {
  return f(caf::meta::type_name("ergon::heartbeat_request"), x.row, x.token,
           x.has_checkpoint, x.checkpoint);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_reply& x) {
  return f(caf::meta::type_name("ergon::heartbeat_reply"), x.status, x.expires_at);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, results_request& x) {
  return f(caf::meta::type_name("ergon::results_request"), x.row, x.token, x.after);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, results_reply& x) {
  return f(caf::meta::type_name("ergon::results_reply"), x.status, x.results, x.next_after);
}

/// Registers every protocol message with `cfg` under its "ergon::" name. Call
/// it on every node (queue process and remote workers).
void register_protocol(caf::actor_system_config& cfg);

}  // namespace ergon::actors
