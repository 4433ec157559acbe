// Rows of recurring_jobs and the instances made from them, shared by the
// operations on recurring jobs and by on_job_final. Internal to storage/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"
#include "ergon/recurring.hpp"
#include "ergon/storage/db.hpp"
#include "ergon/storage/records.hpp"
#include "ergon/storage/schedule.hpp"

namespace ergon::storage::rows {

/// A recurring job as stored.
struct recurring_row {
  std::string id;
  std::string spec;
  std::string time_zone;
  catch_up mode = catch_up::once;
  int64_t since = 0;  ///< when the schedule last changed
  job templ;
  int64_t added_at = 0;
  int64_t updated_at = 0;
  std::optional<job_id> last_job;
  std::optional<int64_t> last_scheduled_at;
  std::optional<int64_t> last_finished_at;
  std::optional<job_status> last_status;
  std::optional<int64_t> max_executions;
  int64_t executions = 0;  ///< instances that ran
  /// Its own pause (queue::pause_recurring): since when, and until when
  /// (empty: until resumed). A pause that ended (its time passed, or a
  /// resume set it to then) stays stored: it holds nothing back, but a
  /// slot it covered still doesn't run (after_pause).
  std::optional<int64_t> paused_since;
  std::optional<int64_t> paused_until;

  /// Whether it has run max_executions instances: it makes no more.
  bool exhausted() const noexcept { return max_executions && executions >= *max_executions; }
  /// Paused until resumed: it makes no instance.
  bool held() const noexcept { return paused_since && !paused_until; }
  /// Whether its pause is in force at `now`.
  bool paused_at(int64_t now) const noexcept {
    return paused_since && (!paused_until || now < *paused_until);
  }
};

/// `n` moved past a pause of `r` with an end, in force or over: a slot it
/// covered doesn't run, even as a catch-up (the first slot at or after its
/// end does). Nothing if `n` is nothing, or if
/// the schedule has no slot left after the pause.
std::optional<next_slot> after_pause(const recurring_row& r, const schedule& s,
                                     std::optional<next_slot> n);

/// Moves the pending instance `inst` to the slot `to` (scheduled_at and
/// run_at both), with its deadline counted from there. Returns the keys
/// before and after.
result<key_change> move_instance(db& d, const recurring_row& r, const job_key& inst, int64_t to,
                                 int64_t now_ms);

/// The recurring job `id`, or nothing if there is none.
result<std::optional<recurring_row>> find_recurring(db& d, const std::string& id);

/// Recurring jobs whose id starts with `prefix`, by id.
result<std::vector<recurring_row>> recurring_with_prefix(db& d, const std::string& prefix);

/// Parses the row's schedule. A stored schedule parsed when it was added;
/// it can fail later only if the system's tz database lost its zone.
result<schedule> schedule_of(const recurring_row& r);

/// Inserts the instance of `r` due at `at`: the template with run_at,
/// scheduled_at and recurring_id set. Returns its key.
result<job_key> create_instance(db& d, const recurring_row& r, const next_slot& at,
                                int64_t now_ms);

/// Cancels the pending instance `k` with `why` as its message, and
/// settles what waits on it.
result<cancelled_job> cancel_instance(db& d, const job_key& k, const std::string& why,
                                      int64_t now_ms);

/// The unfinished instance of `id`, if any: its key, status and
/// scheduled_at.
struct instance_state {
  job_key key;
  job_status status = job_status::pending;
  int64_t scheduled_at = 0;
  bool started = false;  ///< an attempt ran: a pending one is a retry
};
result<std::optional<instance_state>> unfinished_instance(db& d, const std::string& id);

}  // namespace ergon::storage::rows
