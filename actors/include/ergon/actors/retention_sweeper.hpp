// retention_sweeper: deletes finished jobs past their retention, drops
// expired results (options::retention, job::result_ttl_ms), deletes
// idempotency keys past their window (options::idempotency_window) and the
// records of workers that left before the longest retention. Every
// interval it runs a pass: for each status with a retention, steps of
// `batch` rows until none is due, then steps that drop results, then steps
// that delete keys, then workers, each until none is due. Each
// step is one db_writer request, answered before the next is sent, and the
// sweeper pauses between steps to keep to its share of the writer's time
// (retention_options::writer_share), so other writes barely notice it.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "ergon/actors/db_writer.hpp"
#include "ergon/actors/event_bus.hpp"
#include "ergon/clock.hpp"
#include "ergon/options.hpp"

namespace ergon::actors {

/// One pass of the sweeper, as a plain class: which step comes next given
/// the replies so far.
class retention_pass {
 public:
  /// A pass at `now_ms`: each status with a retention goes with cutoff
  /// now - retention.
  retention_pass(const retention_options& opts, int64_t now_ms);

  /// The next step; empty once the pass is done.
  std::optional<sweep_step> next() const;

  /// Records the reply to the step next() gave. A failed step ends the
  /// pass: the next pass tries again.
  void done(const sweep_reply& reply);

  int64_t deleted() const noexcept { return deleted_; }
  int64_t results_dropped() const noexcept { return dropped_; }
  int64_t keys_expired() const noexcept { return keys_expired_; }
  int64_t workers_deleted() const noexcept { return workers_deleted_; }

 private:
  std::vector<storage::sweep_finished_args> statuses_;
  size_t current_ = 0;  // index into statuses_; == size(): results, then keys
  bool results_done_ = false;
  bool keys_done_ = false;
  // Workers that left before this go; empty: some status is kept forever.
  std::optional<int64_t> workers_cutoff_;
  size_t batch_ = 500;
  bool finished_ = false;
  int64_t deleted_ = 0;
  int64_t dropped_ = 0;
  int64_t keys_expired_ = 0;
  int64_t workers_deleted_ = 0;
};

struct retention_sweeper_config {
  retention_options opts;
  std::shared_ptr<ergon::clock> clock;
  db_writer_actor writer;
  /// A pass that changed something is an event_kind::swept event.
  caf::actor events;
  std::shared_ptr<subscribers> subs;
};

/// Spawns the sweeper; its first pass starts at once. Stop it with an exit
/// message before the writer closes.
caf::actor spawn_retention_sweeper(caf::actor_system& sys, retention_sweeper_config cfg);

}  // namespace ergon::actors
