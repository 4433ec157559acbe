// recurring: jobs that run on a schedule.
//
//   ergon::recurring_job r;
//   r.id = "nightly-report";
//   r.schedule = "30 2 * * *";              // or "every 15m"
//   r.time_zone = "Europe/Berlin";
//   r.job = *ergon::job_builder("report").payload("{}").build();
//   auto first = q.add_recurring(r);         // result<job_id>
//
// A recurring job is a schedule plus a job template. It always has exactly
// one unfinished instance, an ordinary job with `job_info::recurring_id`
// set: when an instance ends, however it ends (succeeded, failed for good,
// cancelled, expired), the transaction that ends it also creates the next
// one. A crash at any point loses no instance and runs none twice. See
// docs/recurring.md for the schedule syntax and DST rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/job.hpp"
#include "ergon/job_id.hpp"
#include "ergon/job_info.hpp"

namespace ergon {

/// Which instances a recurring job runs after it fell behind (the process
/// was down, or an instance ran past later slots).
enum class catch_up : uint8_t {
  /// Run one catch-up instance at once for all the missed slots, then
  /// continue on schedule.
  once = 0,
  /// Run nothing for missed slots: continue at the next slot after now.
  skip = 1,
};

const char* to_string(catch_up c) noexcept;

/// A recurring job to add or update.
struct recurring_job {
  /// Its name, 1 to 256 bytes; the key for update, delete and info.
  std::string id;
  /// A cron spec (5 fields, or 6 with seconds first; lists, ranges, steps,
  /// month and day names, @yearly @monthly @weekly @daily @hourly) or
  /// "every <duration>" ("every 90s", "every 1h30m", units ms s m h d).
  std::string schedule;
  /// IANA zone the cron spec is read in ("America/New_York"). Empty: UTC.
  /// Must be empty for `every`.
  std::string time_zone;
  /// The template each instance is made from. run_at and delay must be
  /// unset (the schedule decides), and unique_key too (a recurring job has
  /// one unfinished instance anyway). ttl counts from each instance's time.
  ergon::job job;
  /// What to do about missed slots.
  ergon::catch_up catch_up = ergon::catch_up::once;
  /// On add: the first instance runs now rather than at the first slot.
  /// Ignored by update.
  bool run_now = false;
  /// If set, 1 or more: the recurring job stops by itself once this many
  /// of its instances have run (taskmill's max_executions). An instance
  /// counts when it ends after it started, however it ended; one cancelled
  /// or expired before it started does not. Once the count is reached no
  /// further instance is made; the recurring job stays, to be read,
  /// deleted, or updated: with a higher limit (or none) its schedule starts
  /// again, otherwise the update is kept and the call returns a nil job_id
  /// (no instance).
  std::optional<int64_t> max_executions;
};

/// Checks `r`'s id, schedule, time zone and template. Errors:
/// invalid_argument naming the field ("id", "schedule", "time_zone", or the
/// template's field as validate(job) names it, prefixed "job.").
status validate(const recurring_job& r, size_t max_payload_bytes = 0);

/// A recurring job as stored, with its latest and next instance.
struct recurring_info {
  std::string id;
  std::string schedule;
  std::string time_zone;  ///< empty: UTC
  ergon::catch_up catch_up = ergon::catch_up::once;
  ergon::job job;  ///< the template
  int64_t added_at_ms = 0;
  int64_t updated_at_ms = 0;
  /// The instance that ended last, its time on the schedule, when it ended
  /// and how. Empty before the first one ends.
  std::optional<job_id> last_job;
  std::optional<int64_t> last_scheduled_at_ms;
  std::optional<int64_t> last_finished_at_ms;
  std::optional<job_status> last_status;
  /// The unfinished instance: its id, status (pending or running), time on
  /// the schedule and run_at. Empty if the schedule has no time left before
  /// the year 10000, or if the tz database lost the schedule's zone when the
  /// last instance ended (the next open, or an update, makes one).
  std::optional<job_id> next_job;
  std::optional<job_status> next_status;
  std::optional<int64_t> next_scheduled_at_ms;
  std::optional<int64_t> next_run_at_ms;
  /// Instances that ran (see recurring_job::max_executions), and the
  /// limit, if any. With executions at the limit there is no next instance.
  int64_t executions = 0;
  std::optional<int64_t> max_executions;
  /// Its own pause (queue::pause_recurring), if one is in force: since
  /// when, and until when (empty: until resumed). A timed pause whose end
  /// passed is not shown.
  std::optional<int64_t> paused_since_ms;
  std::optional<int64_t> paused_until_ms;
};

}  // namespace ergon
