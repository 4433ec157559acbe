// bulk_action: cancels, retries or deletes every job a filter matches
// (queue::cancel_jobs, retry_failed and purge_failed with a filter,
// delete_jobs). It works in steps of options::bulk.batch jobs, each one
// db_writer request answered before the next is sent, and pauses between
// steps to keep to its share of the writer's time (bulk_options::
// writer_share), as the retention sweeper does. Each step commits on its
// own: a bulk action that fails part way keeps the steps before. It takes
// only jobs below the highest row there was at its first step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "ergon/actors/db_writer.hpp"
#include "ergon/listing.hpp"
#include "ergon/options.hpp"

namespace ergon::actors {

/// Checks that `kind` may take `filter`, before any step: cancel takes
/// unfinished statuses (or none), retry failed (or none: it sets failed),
/// remove final ones (or none: each final status in turn). Errors:
/// invalid_argument naming the field.
status check_bulk(bulk_kind kind, const job_filter& filter);

/// One bulk action, as a plain class: which step comes next given the
/// replies so far, and what the steps did.
class bulk_pass {
 public:
  /// A pass over the jobs `filter` matches (check_bulk passed), `batch`
  /// jobs a step.
  bulk_pass(bulk_kind kind, job_filter filter, size_t batch);

  /// The next step; empty once the pass is done.
  std::optional<bulk_step> next() const;

  /// Records the reply to the step next() gave. A failed step ends the
  /// pass with its error, which then also says what the steps before did.
  void done(bulk_reply& reply);

  bulk_kind kind() const noexcept { return kind_; }
  /// Ok, or the error that ended the pass.
  const status& outcome() const noexcept { return outcome_; }
  const cancel_summary& cancelled() const noexcept { return cancelled_; }
  const retry_summary& retried() const noexcept { return retried_; }
  int64_t deleted() const noexcept { return deleted_; }
  int64_t steps() const noexcept { return steps_; }

 private:
  std::string done_so_far() const;

  bulk_kind kind_;
  std::vector<job_filter> filters_;  // remove: one per final status
  size_t current_ = 0;
  int64_t after_ = 0;
  int64_t before_ = 0;
  size_t batch_;
  status outcome_;
  cancel_summary cancelled_;
  retry_summary retried_;
  int64_t deleted_ = 0;
  int64_t steps_ = 0;
};

struct bulk_action_config {
  db_writer_actor writer;
  bulk_options opts;
  bulk_kind kind = bulk_kind::cancel;
  job_filter filter;
  /// True once the queue is closing: the action then stops before its
  /// next step, answering `closed`, so a close never waits for it.
  std::function<bool()> closing;
};

/// Spawns one bulk action. It starts on its first bulk_run_atom, whose
/// answer comes once the pass is done: a cancel_summary, a retry_summary
/// or the count of deleted jobs (int64_t), by kind, or the error that
/// ended it. It then quits.
caf::actor spawn_bulk_action(caf::actor_system& sys, bulk_action_config cfg);

using bulk_run_atom = caf::atom_constant<caf::atom("bulkrun")>;

/// Sent by a closing queue: the action stops at once, even in a pause,
/// and answers `closed` with what its steps did.
using bulk_stop_atom = caf::atom_constant<caf::atom("bulkstop")>;

}  // namespace ergon::actors
