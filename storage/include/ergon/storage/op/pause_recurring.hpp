// pause_recurring: pausing and resuming one recurring job
// (storage/src/pause_recurring.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/error.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"

namespace ergon::storage {

struct pause_recurring_args {
  std::string id;
  bool pause = true;  ///< false: resume
  /// How long a pause lasts, counted from the writer's now (so a short one
  /// can't end before it is stored); empty, or one past the clock's end:
  /// until resumed.
  std::optional<int64_t> for_ms;
};

struct pause_recurring_result {
  /// Whether the stored pause changed (resuming one that is not paused
  /// changes nothing, and is no error).
  bool changed = false;
  /// The stored pause's end (a timed pause only).
  std::optional<int64_t> until;
  /// The pending instance a pause until resumed cancelled, with what that
  /// did to the jobs waiting on it.
  std::optional<cancelled_job> cancelled;
  /// The pending instance moved to the first slot after a timed pause, or
  /// to the first slot after now by a resume.
  std::optional<key_change> moved;
  /// The instance a resume (or a timed pause, for a job that had none)
  /// made.
  std::optional<job_key> created;
};

/// Pauses the recurring job `id` (until `until`, or until resumed), or
/// resumes it. A pause until resumed cancels the pending instance and
/// makes none while it lasts; a timed one moves the instance to the first
/// slot at or after its end. A running instance finishes, and the next one
/// follows the pause, and so does a pending retry of one that ran. Slots
/// the pause covers are skipped, whatever catch_up says: a resume ends the
/// pause at now, and makes the instance for the first slot after now.
/// Errors: not_found, invalid_argument ("duration" not positive).
result<pause_recurring_result> pause_recurring(db& d, const pause_recurring_args& args,
                                               int64_t now_ms);

}  // namespace ergon::storage
