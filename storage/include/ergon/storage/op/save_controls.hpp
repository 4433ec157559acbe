// save_controls and read_controls: the run-time controls table
// (storage/src/save_controls.cpp).
#pragma once

#include <vector>

#include "ergon/error.hpp"
#include "ergon/scheduling.hpp"
#include "ergon/storage/db.hpp"

namespace ergon::storage {

struct save_controls_args {
  /// Each control as it stands now. One with nothing in force (not paused,
  /// no setting changed) is deleted.
  std::vector<control_info> controls;
  /// Before them: every stored pause ends (resume_all), every stored group
  /// weight goes (reset_group_weights).
  bool end_all_pauses = false;
  bool clear_group_weights = false;
};

/// Writes the controls, replacing the rows of the same scope and name.
status save_controls(db& d, const save_controls_args& args);

/// Every stored control, by scope and name (timed pauses whose end passed
/// included: the dispatcher ends them). Error: corrupt naming the row
/// whose values no run-time control could have set.
result<std::vector<control_info>> read_controls(db& d);

/// The controls in force at `now`: a timed pause whose end passed is over
/// (the dispatcher ends it on its next tick; a view may come first), and a
/// control with nothing left in force is dropped.
std::vector<control_info> in_force_at(std::vector<control_info> controls, int64_t now);

}  // namespace ergon::storage
