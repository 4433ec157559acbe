// The worker protocol: messages between workers and the queue's dispatcher
// and db_writer. All of them are serializable and registered under the same
// names on every node, so a worker in another process speaks exactly this.
//
//   worker ──register_worker──► dispatcher ──worker_registered──► worker
//   worker ──request_jobs─────► dispatcher ──assign_jobs────────► worker
//   worker ──report_outcomes──► db_writer  ──outcome_replies────► worker
//   worker ──extend_attempt───► db_writer  ──extend_reply───────► worker
//                               dispatcher ──cancel_attempt─────► worker
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"

namespace ergon::actors {

/// Self-sent timer wake-up (dispatcher and worker).
using tick_atom = caf::atom_constant<caf::atom("tick")>;
/// Self-sent: send the outcomes collected so far in one request.
using flush_atom = caf::flush_atom;

/// A status on the wire.
struct wire_status {
  uint8_t code = 0;
  std::string message;
  std::string field;
};
wire_status to_wire(const status& st);
status from_wire(const wire_status& w);

/// 16 id bytes on the wire.
std::string to_wire(const job_id& id);
job_id id_from_wire(const std::string& bytes);

/// A worker announces itself and the job types it runs.
struct register_worker {
  std::string name;
  std::vector<std::string> types;
  int32_t max_capacity = 0;
  caf::actor worker;
};

/// The dispatcher's answer: the worker's id, and where to report outcomes.
struct worker_registered {
  uint64_t worker_id = 0;
  caf::actor writer;
};

/// The worker has `capacity` free weight units, having received
/// `received_weight` units in all assign_jobs so far. The dispatcher subtracts
/// what it sent but the worker had not yet received (credit-based flow
/// control), so a worker may update its request at any time without ever
/// being given more than it has room for. Each request replaces the last.
struct request_jobs {
  uint64_t worker_id = 0;
  int32_t capacity = 0;
  int64_t received_weight = 0;
  /// Attempts whose code returned since the last request, as (row, token)
  /// pairs: the dispatcher stops counting them as running before their
  /// outcomes commit, so fair shares follow the code that actually runs.
  std::vector<int64_t> returned_rows;
  std::vector<int64_t> returned_tokens;
};

/// The worker stops taking jobs. The dispatcher answers with
/// `unregistered_atom` once no claim for the worker is in flight; jobs
/// claimed for it before that arrive first, and the worker must run them.
struct unregister_worker {
  uint64_t worker_id = 0;
};

using unregistered_atom = caf::atom_constant<caf::atom("unreg")>;

/// One claimed attempt: everything needed to run it. The claim is committed
/// before this is sent.
struct job_assignment {
  int64_t row = 0;
  std::string id;  ///< 16 bytes, see id_from_wire
  std::string type;
  std::string group;
  std::string payload;  ///< the checkpoint if any, else the payload
  int32_t try_number = 0;
  int64_t token = 0;
  int64_t expires_at = 0;
  int64_t heartbeat_increment_ms = 0;
  int32_t weight = 1;
  int32_t priority = 0;
};

struct assign_jobs {
  std::vector<job_assignment> jobs;
};

/// The attempt expired (or the queue is closing): flag its context cancelled.
struct cancel_attempt {
  int64_t row = 0;
  int64_t token = 0;
  std::string reason;
};

/// How one attempt ended, as the worker reports it.
struct outcome_report {
  int64_t row = 0;
  int64_t token = 0;
  bool succeeded = true;
  std::string text;  ///< result bytes on success, failure message otherwise
};

/// Several outcomes in one write; answered with one status per report, in
/// order, after the commit.
struct report_outcomes {
  std::vector<outcome_report> reports;
};

struct outcome_replies {
  std::vector<wire_status> statuses;
};

/// Heartbeat (no checkpoint) or checkpoint of a running attempt.
struct extend_attempt {
  int64_t row = 0;
  int64_t token = 0;
  bool has_checkpoint = false;
  std::string checkpoint;
};

struct extend_reply {
  wire_status status;
  int64_t expires_at = 0;
};

// -- inspection (serialization) -----------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_status& x) {
  return f(caf::meta::type_name("ergon::wire_status"), x.code, x.message, x.field);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, register_worker& x) {
  return f(caf::meta::type_name("ergon::register_worker"), x.name, x.types,
           x.max_capacity, x.worker);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_registered& x) {
  return f(caf::meta::type_name("ergon::worker_registered"), x.worker_id, x.writer);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_jobs& x) {
  return f(caf::meta::type_name("ergon::request_jobs"), x.worker_id, x.capacity,
           x.received_weight, x.returned_rows, x.returned_tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unregister_worker& x) {
  return f(caf::meta::type_name("ergon::unregister_worker"), x.worker_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_assignment& x) {
  return f(caf::meta::type_name("ergon::job_assignment"), x.row, x.id, x.type, x.group,
           x.payload, x.try_number, x.token, x.expires_at, x.heartbeat_increment_ms,
           x.weight, x.priority);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, assign_jobs& x) {
  return f(caf::meta::type_name("ergon::assign_jobs"), x.jobs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_attempt& x) {
  return f(caf::meta::type_name("ergon::cancel_attempt"), x.row, x.token, x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, outcome_report& x) {
  return f(caf::meta::type_name("ergon::outcome_report"), x.row, x.token, x.succeeded,
           x.text);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, report_outcomes& x) {
  return f(caf::meta::type_name("ergon::report_outcomes"), x.reports);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, outcome_replies& x) {
  return f(caf::meta::type_name("ergon::outcome_replies"), x.statuses);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, extend_attempt& x) {
  return f(caf::meta::type_name("ergon::extend_attempt"), x.row, x.token,
           x.has_checkpoint, x.checkpoint);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, extend_reply& x) {
  return f(caf::meta::type_name("ergon::extend_reply"), x.status, x.expires_at);
}

/// Registers every protocol message with `cfg` under its "ergon::" name. Call
/// it on every node (queue process and remote workers).
void register_protocol(caf::actor_system_config& cfg);

}  // namespace ergon::actors
