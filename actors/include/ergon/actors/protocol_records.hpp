// protocol_records: the worker protocol's records that carry no actor
// handle, so that code with no actors (the dispatcher's core, the worker's
// parts) can use them. protocol.hpp adds the handles, atoms and
// serialization, and describes the protocol.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_id.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::actors {

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

/// What a worker reports to the dispatcher (see the top of this file). The
/// worker has `capacity` free weight units, having received
/// `received_weight` units in all assign_jobs so far. The dispatcher subtracts
/// what it sent but the worker had not yet received (credit-based flow
/// control), so a worker may update its room at any time without ever being
/// given more than it has room for. Each report's room replaces the last.
struct worker_report {
  uint64_t worker_id = 0;
  int32_t capacity = 0;
  int64_t received_weight = 0;
  /// Its max_capacity now (1 to max_weight; 0: unchanged): a
  /// resize_worker changes it, and the dispatcher takes it from here, in
  /// order with the room.
  int32_t max_capacity = 0;
  /// How attempts ended, in the order the job code reported them.
  std::vector<storage::attempt_report> outcomes;
  /// Attempts whose code returned (or never started): their weight is free,
  /// even before their outcomes commit, so fair shares follow the code that
  /// actually runs.
  std::vector<storage::attempt_ref> returned;
  /// Claimed attempts whose code never started (the worker is stopping):
  /// back to pending without spending a try.
  std::vector<storage::attempt_ref> released;
};

/// The worker stops taking jobs. The dispatcher answers with
/// `unregistered_atom` once no claim for the worker is in flight; jobs
/// claimed for it before that arrive first, and the worker must run them.
struct unregister_worker {
  uint64_t worker_id = 0;
};

/// One claimed attempt: everything needed to run it. The claim is committed
/// before this is sent. The wire form of storage::claimed_job (made by the
/// writer's assignment_of): only what a worker on another node needs, with
/// the id as 16 bytes.
struct job_assignment {
  int64_t row = 0;
  std::string id;  ///< 16 bytes, see id_from_wire
  std::string type;
  std::string group;
  std::string payload;  ///< the checkpoint if any, else the payload
  int32_t try_number = 0;
  int64_t token = 0;
  int32_t weight = 1;
};

/// The writer's answer to a worker after a commit: the jobs claimed for it,
/// and, if it answers a report, one status per outcome of that report.
struct assign_jobs {
  std::vector<job_assignment> jobs;
  std::vector<wire_status> acks;
  bool answers_report = false;
};

/// The attempt expired (or the queue is closing): flag its context cancelled.
/// `requested`: queue::cancel asked the job to stop; code that then returns
/// reports report_kind::stopped, and a claim that never started is
/// reported so without running.
struct cancel_attempt {
  int64_t row = 0;
  int64_t token = 0;
  std::string reason;
  bool requested = false;
};

/// The dispatcher wants the attempt's slot for waiting work of higher
/// priority (preemption): running code sees job_context::preempted(), and a
/// claim that has not started is given back unstarted.
struct preempt_attempt {
  int64_t row = 0;
  int64_t token = 0;
};

/// The dispatcher's run-time control for the worker's name changed
/// (queue::set_worker): `max_capacity` units from now on, 1 to max_weight;
/// 0: its own again (worker_options::max_concurrency). Its next report
/// tells the dispatcher.
struct resize_worker {
  int32_t max_capacity = 0;
};

/// Progress reports and log lines of a worker's attempts, throttled by the
/// worker. Not answered: the writer stores them in its next transaction.
struct progress_batch {
  std::vector<storage::progress_report> reports;
  std::vector<storage::attempt_logs> logs;
};

/// Heartbeat (no checkpoint) or checkpoint of a running attempt.
struct heartbeat_request {
  int64_t row = 0;
  int64_t token = 0;
  bool has_checkpoint = false;
  std::string checkpoint;
};

struct heartbeat_reply {
  wire_status status;
  int64_t expires_at = 0;
};

/// A page of how a running attempt's dependencies ended
/// (job_context::dependency_results).
struct results_request {
  int64_t row = 0;
  int64_t token = 0;
  int64_t after = 0;  ///< the previous page's next_after; 0: the first page
};

struct results_reply {
  wire_status status;
  std::vector<dependency_result> results;
  int64_t next_after = 0;  ///< 0: the last page
};

}  // namespace ergon::actors
