// control_table: the run-time controls in force (pauses of the queue, a
// group or a type, and settings of groups, types and workers changed while
// the queue runs), as the database keeps them. It applies each control call
// to the scheduling policy and says which rows to save and which events to
// send; it has no actors and no SQL. The dispatcher restores it from the controls table at
// open, so a control survives a reopen, a restart and a takeover.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ergon/actors/dispatcher_calls.hpp"
#include "ergon/actors/scheduling_policy.hpp"
#include "ergon/event.hpp"
#include "ergon/scheduling.hpp"

namespace ergon::actors {

class control_table {
 public:
  /// Restores `stored` into `policy`: pauses with their start and end (one
  /// whose end passed ends at the next expire), and settings.
  control_table(scheduling_policy& policy, std::vector<control_info> stored);

  /// What one call or expiry changed.
  struct applied {
    int64_t answer = 0;  ///< resume_all: pauses it ended
    /// The rows as they stand now, to save (one with nothing in force is
    /// deleted); empty: nothing to write.
    std::vector<control_info> changed;
    std::vector<event> events;  ///< control_changed, one per row changed
    /// Written before `changed`: every stored pause ends (resume_all), and
    /// every stored group weight goes (reset_group_weights).
    bool end_all_pauses = false;
    bool clear_group_weights = false;
  };

  /// Applies a control call. Resumes and resets save their row even when
  /// they change nothing in memory, so that repeating a call whose write
  /// failed fixes the database. Errors: invalid_argument naming "name" when
  /// max_controls rows are in force and the call would add one, or the
  /// policy's refusal (pausing ahead past max_paused_ahead). A refused call
  /// changes nothing.
  result<applied> apply(const scheduling_control& c, int64_t now);

  /// Ends the timed pauses whose end passed (the policy ends its own).
  applied expire(int64_t now);

  /// The concurrency set for workers named `name` (control_scope::worker);
  /// empty: their own.
  std::optional<int32_t> worker_concurrency(const std::string& name) const;

  /// Every control in force at `now`.
  std::vector<control_info> list(int64_t now) const;

  /// Changes since open (calls that changed a row, pauses that ended, and
  /// those counted from outside).
  int64_t changes() const noexcept { return changes_; }
  /// Counts `n` changes made elsewhere (a recurring job's pause, which its
  /// own row holds).
  void count(int64_t n) noexcept { changes_ += n; }

 private:
  using key = std::pair<control_scope, std::string>;

  /// The row for `k`, made if there is room.
  result<control_info*> row(const key& k, int64_t now);
  void changed(control_info& c, std::string what, int64_t now, applied& out);
  /// A call that changed nothing here still saves the row as it stands
  /// (deleted if there is none): if the write of the change it repeats
  /// failed, the database catches up.
  void unchanged(control_scope scope, const std::string& name, applied& out);
  result<applied> pause(const scheduling_control& c, control_scope scope, int64_t now);
  applied resume(control_scope scope, const std::string& name, int64_t now);
  result<applied> change(const scheduling_control& c, control_scope scope, int64_t now);
  applied reset(control_scope scope, const std::string& name, bool weight_only, int64_t now);
  applied resume_all(int64_t now);
  /// Ends the pauses of the rows `which` picks; `why` ends their events' text.
  void end_pauses(const std::function<bool(const control_info&)>& which, const char* why,
                  int64_t now, applied& out);

  scheduling_policy& policy_;
  std::map<key, control_info> rows_;
  int64_t changes_ = 0;
};

/// "the queue", "group \"a\"", "type \"b\"" or "worker \"c\"": how events
/// name a control.
std::string control_name(control_scope scope, const std::string& name);

}  // namespace ergon::actors
