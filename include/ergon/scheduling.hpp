// Fair scheduling: priority aging and weighted fair shares across groups,
// as one dispatch policy. See docs/scheduling.md for how they interact.
//
//   ergon::options opts;
//   ergon::aging_options aging;
//   aging.grace_period = std::chrono::minutes(5);
//   aging.interval = std::chrono::minutes(1);
//   aging.max_effective_priority = 10;
//   aging.urgent_threshold = 10;        // aged this far, a job may borrow a slot
//   opts.scheduling.aging = aging;
//   opts.scheduling.groups["s3://prod"].weight = 3;
//   opts.scheduling.groups["s3://b2-backup"].weight = 1;
//   opts.scheduling.groups["s3://b2-backup"].min_slots = 2;
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ergon/job_info.hpp"

namespace ergon {

/// Priority aging: after `grace_period` of waiting, a job's effective
/// priority rises one step per `interval`, up to `max_effective_priority`.
/// The stored priority never changes; aging is computed at dispatch time.
struct aging_options {
  std::chrono::milliseconds grace_period{300'000};
  std::chrono::milliseconds interval{60'000};
  /// Aging stops here. A job whose own priority is higher keeps it.
  int32_t max_effective_priority = 10;
  /// A job whose effective priority reaches this may run even if its group
  /// already has its full share of slots. Empty: no such bypass.
  std::optional<int32_t> urgent_threshold;
};

/// Per-group settings. A job's group is its `group` field; jobs without one
/// form the group "".
struct group_options {
  /// Share of capacity relative to other groups; empty: the default weight.
  std::optional<int32_t> weight;
  /// Slots the group gets before weights are applied (if it has work).
  int32_t min_slots = 0;
  /// Most slots the group may use at once; empty: no cap.
  std::optional<int32_t> max_running;
};

/// A token bucket: `per_second` tokens per second, holding at most `burst`.
/// Starting a job takes one token.
struct rate_limit {
  double per_second = 1.0;
  int32_t burst = 1;
};

/// Preemption: when no worker has room for a ready job whose effective
/// priority (after aging) is at or above `threshold`, the dispatcher asks
/// running jobs of lower effective priority to yield their slots
/// (job_context::preempted), the lowest first and only as many as the
/// waiting job needs. It never asks a job of a group running at or below
/// its min_slots. Code that ignores the request keeps its slot. See
/// docs/scheduling.md.
struct preemption_options {
  int32_t threshold = 10;
};

/// A named measure of load for admission: `read` returns 0.0 (idle) to 1.0
/// (saturated). It is called on the dispatcher's thread before each
/// dispatch and on admission_options::recheck_interval while work is
/// deferred, so it must be cheap (read a value kept current elsewhere).
/// Values outside [0, 1] are clamped. A reading that throws or is NaN is
/// skipped, counted in metrics_snapshot::pressure_errors and logged once.
/// It is called until the queue closes: what it refers to must live as long.
struct pressure_source {
  std::string name;
  std::function<double()> read;
};

/// One step of a throttle policy: while the pressure is above `above` (0 to
/// below 1), only jobs whose effective priority is at least `min_priority`
/// start; with no min_priority, nothing new starts.
struct throttle_step {
  double above = 1.0;
  std::optional<int32_t> min_priority;
};

/// Maps pressure and a job's effective priority to admit or defer. The
/// highest step whose `above` the pressure exceeds decides; below every
/// step, everything is admitted. The default: above 0.8 only jobs above the
/// default priority (>= 1) start, above 0.95 nothing new starts.
struct throttle_policy {
  std::vector<throttle_step> steps{{0.8, 1}, {0.95, std::nullopt}};

  /// Whether a job of effective priority `priority` may start at `pressure`.
  bool admits(double pressure, int32_t priority) const noexcept;
};

/// Cumulative bytes the machine's disks have read and written since boot.
struct io_totals {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
};

/// The I/O budget (taskmill's rule): the disk's throughput is sampled every
/// `sample_interval` and smoothed (EWMA with weight `smoothing` for the
/// newest sample). A job that declared I/O (job::expected_io) is deferred
/// while the declared I/O of running jobs plus its own would pass `share`
/// of what the disk moves in `window`, for reads or for writes. A kind of
/// I/O that no running job declared admits any amount, so a job larger than
/// the window still runs, alone.
struct io_budget_options {
  std::chrono::milliseconds window{2'000};
  double share = 0.8;
  std::chrono::milliseconds sample_interval{1'000};
  double smoothing = 0.3;
  /// The disks' totals; empty: the whole disks in /proc/diskstats. Called
  /// on the dispatcher's thread once per sample_interval, until the queue
  /// closes. Returning nothing (or throwing) skips the sample.
  std::function<std::optional<io_totals>()> read_totals;
};

/// Admission under pressure: whether ready work may start now. Deferred
/// jobs keep their place in the queue; pressure is read again before each
/// dispatch and every `recheck_interval` (on the queue's clock) while work
/// is deferred. See docs/scheduling.md.
struct admission_options {
  /// Combined by maximum. None: only the I/O budget applies.
  std::vector<pressure_source> sources;
  throttle_policy throttle;
  std::optional<io_budget_options> io_budget;
  std::chrono::milliseconds recheck_interval{1'000};
};

/// A circuit breaker for one job type (scheduling_options::breakers,
/// docs/workflows.md): after `failures` failed attempts of the type within
/// `window`, the type's dispatch stops for `cool_down` (open); then one
/// trial job runs (half-open). Its success closes the breaker, its failure
/// opens it again. Failures are attempts that ended failed, failed for
/// good or expired; a cancel, a yield, a snooze or a lost worker is no
/// verdict.
struct breaker_options {
  int32_t failures = 5;  ///< 1 to 1,000,000
  std::chrono::milliseconds window{60'000};     ///< > 0
  std::chrono::milliseconds cool_down{30'000};  ///< > 0
};

/// Where a breaker stands.
enum class breaker_state : uint8_t {
  closed = 0,     ///< jobs of its type run as usual
  open = 1,       ///< none starts until the cool-down ends
  half_open = 2,  ///< one trial job may start; its end decides
};

/// Returns "closed", "open" or "half_open".
const char* to_string(breaker_state s) noexcept;
std::ostream& operator<<(std::ostream& out, breaker_state s);

/// One breaker in a metrics snapshot.
struct breaker_info {
  std::string type;
  breaker_state state = breaker_state::closed;
  /// Failures counted within the window now (closed), or that opened it.
  int32_t recent_failures = 0;
  /// While open: when the trial may start.
  std::optional<int64_t> open_until_ms;
  /// Times it opened since the queue opened (a failed trial counts).
  int64_t trips = 0;
};

/// How the dispatcher shares capacity. Everything is opt-in: with the
/// defaults, jobs run in priority order and groups share capacity equally.
struct scheduling_options {
  std::optional<aging_options> aging;
  /// Weight of groups not listed in `groups`.
  int32_t default_group_weight = 1;
  std::map<std::string, group_options> groups;
  std::map<std::string, rate_limit> group_rate_limits;
  std::map<std::string, rate_limit> type_rate_limits;
  /// Most weight units of a job type running at once.
  std::map<std::string, int32_t> type_max_running;
  /// Off by default.
  std::optional<preemption_options> preemption;
  /// Off by default.
  std::optional<admission_options> admission;
  /// Circuit breakers per job type; types not listed have none.
  std::map<std::string, breaker_options> breakers;
};

/// One group in a metrics snapshot.
struct group_metrics {
  std::string group;
  int32_t weight = 0;
  /// Its exact share of capacity, in slots. Dispatch follows this: a
  /// fraction of a slot is served as turns at one more slot over time.
  double share = 0;
  /// The share rounded to whole slots (what allocation events report).
  int32_t allocated_slots = 0;
  int32_t running_slots = 0;
  /// running_slots / allocated_slots (0 when nothing is allocated).
  double utilization = 0;
  int64_t ready_jobs = 0;
  bool paused = false;
};

/// A pause in force (queue::pause_group, queue::pause_type), in a metrics
/// snapshot.
struct pause_info {
  bool group = true;  ///< false: a job type
  std::string name;
  int64_t since_ms = 0;             ///< on the queue's clock
  std::optional<int64_t> until_ms;  ///< empty: until resumed
};

/// How many names of each kind (groups, types) with no jobs yet may be
/// paused ahead at once. Names with jobs may all be paused.
inline constexpr size_t max_paused_ahead = 1'000;

/// What a run-time control applies to (queue::controls).
enum class control_scope : uint8_t {
  queue = 0,  ///< every job (queue::pause_queue)
  group = 1,
  type = 2,
  /// every worker of one name (worker_options::name): its concurrency
  /// (queue::set_worker)
  worker = 3,
};

/// Returns "queue", "group", "type" or "worker".
const char* to_string(control_scope s) noexcept;

/// A change to a group's, a job type's or a worker's settings while the
/// queue runs (queue::set_group, queue::set_type, queue::set_worker). A field that is set replaces the
/// value scheduling_options configured, from now on; it is kept in the
/// database, so it survives a reopen, a restart and a takeover by a
/// standby, until queue::reset_group or reset_type. A field left empty
/// keeps the current value.
struct settings_change {
  /// The group's share of capacity, 1 to 1,000,000. Groups only.
  std::optional<int32_t> weight;
  /// Slots the group gets before weights apply, 0 to 1,000,000. Groups only.
  std::optional<int32_t> min_slots;
  /// Most weight units running at once, 1 to 1,000,000; 0 removes the cap.
  /// For a worker: its max_concurrency, 1 to max_weight (0 is refused).
  std::optional<int32_t> max_running;
  /// Starts per second (finite, 0 to 1,000,000) and burst (1 to
  /// 1,000,000); per_second 0 removes the limit.
  std::optional<rate_limit> rate;
};

/// The fields a change sets, as "weight 3, max_running none, rate 5/s
/// burst 2" (none: the cap or limit is removed); empty if none is set.
std::string to_string(const settings_change& c);

/// A run-time control in force (queue::controls), as the database keeps
/// it: a pause, settings changed at run time, or both. A timed pause whose
/// end passed is no longer listed.
struct control_info {
  control_scope scope = control_scope::group;
  std::string name;  ///< empty for the queue
  bool paused = false;
  int64_t paused_since_ms = 0;             ///< on the queue's clock
  std::optional<int64_t> paused_until_ms;  ///< empty: until resumed
  /// Only the fields changed at run time (and not reset since).
  settings_change settings;
  int64_t changed_at_ms = 0;  ///< the latest change, on the queue's clock

  /// Whether anything is in force: a pause or a changed setting.
  bool in_force() const noexcept {
    return paused || settings.weight || settings.min_slots || settings.max_running
           || settings.rate;
  }
};

/// How many controls (control_info rows: names paused or with settings
/// changed at run time) may be in force at once.
inline constexpr size_t max_controls = 10'000;

/// A histogram: how many values were <= each bound, plus how many were
/// above the last (one more count than bounds), their number and sum.
struct histogram {
  std::vector<int64_t> bounds;
  std::vector<int64_t> counts;
  int64_t total = 0;
  int64_t sum = 0;
};

/// The last good reading of one pressure source.
struct pressure_reading {
  std::string source;
  double value = 0;
};

/// A snapshot of scheduling metrics (`queue::metrics`).
struct metrics_snapshot {
  /// Queue wait (from a job becoming due to its start) histogram: counts of
  /// waits <= each bound, plus the count above the last bound.
  std::vector<int64_t> queue_wait_bounds_ms;
  std::vector<int64_t> queue_wait_counts;  ///< one more entry than bounds
  int64_t queue_wait_total = 0;
  int64_t queue_wait_sum_ms = 0;
  /// Ready jobs by effective priority (after aging).
  std::map<int32_t, int64_t> effective_priorities;
  /// Jobs started with an effective priority raised by aging.
  int64_t aging_promotions = 0;
  /// Slots given to a group beyond its allocation because others could not
  /// use them (work conservation), counted in weight units.
  int64_t excess_slots_redistributed = 0;
  /// Total worker capacity known to the dispatcher, in weight units.
  int32_t capacity = 0;
  std::vector<group_metrics> groups;
  /// Every pause in force, groups first, with names paused ahead (no jobs
  /// yet) among them.
  std::vector<pause_info> pauses;
  /// Every configured circuit breaker, by type.
  std::vector<breaker_info> breakers;
  /// Every run-time control in force (queue::controls).
  std::vector<control_info> controls;
  /// Run-time control changes since the queue opened (each also sent as a
  /// control_changed event); a timed pause that ends by itself counts.
  int64_t control_changes = 0;
  /// Pending jobs heavier than every registered worker of their type can
  /// take (job_info::too_heavy).
  int64_t too_heavy_jobs = 0;
  /// Exceptions thrown by subscriber callbacks (event_kind::subscriber_failed).
  int64_t subscriber_errors = 0;
  /// Messages the actors that face the network dropped or answered
  /// `unauthenticated`: from a node without a connection that proved the
  /// queue's credentials, or without a sender (publish).
  int64_t refused_messages = 0;
  /// Requests answered `forbidden`: from a peer that authenticated with a
  /// role that may not make them (a worker's secret purging, say), on the
  /// actor port or the HTTP endpoint. Each also logged to stderr (the
  /// first, then one in a thousand).
  int64_t forbidden_messages = 0;
  /// Handshakes that failed: a wrong secret, none, or a TLS handshake (no
  /// certificate, or one the CA file does not vouch for).
  int64_t failed_handshakes = 0;
  /// Connections closed for breaking the transport's rules: bytes that are
  /// not ergon's handshake, a handshake that took too long or was crowded
  /// out, a message over the size limit, a routed or anonymous message
  /// (docs/distribution.md). Each is also logged to stderr.
  int64_t refused_connections = 0;
  /// Worker protocol messages rejected as malformed or out of range (a
  /// registration that breaks worker_options' rules, a report of more room
  /// than the worker has), each also logged to stderr.
  int64_t rejected_messages = 0;
  /// queue::wait calls (and wait_atom requests) waiting for a job to
  /// finish. A requester that dies or disconnects has its waits dropped.
  int64_t waits = 0;
  /// Job counts per status, overall and per type.
  status_counts by_status;
  std::map<std::string, status_counts> by_type;
  /// Pending and running jobs per group; jobs without a group under "".
  std::map<std::string, status_counts> by_group;
  /// How long the longest-waiting ready job has been due, in ms (from its
  /// run_at; with aging, from when it first became due); 0 with none ready.
  /// Due jobs that wait behind a pause or a rate limit count.
  int64_t oldest_ready_ms = 0;
  /// Run time in ms of the attempts that ended since the queue opened, per
  /// job type (on the queue's clock, from claim to end).
  std::map<std::string, histogram> run_ms_by_type;
  /// Attempts that ended since the queue opened, indexed by
  /// attempt_outcome (succeeded, failed, expired, ...; `running` stays 0).
  std::vector<int64_t> attempts_by_outcome;
  /// The writer since the queue opened: requests per transaction, and how
  /// long each COMMIT took in microseconds (real time: the disk's sync).
  histogram writer_batch_requests;
  histogram commit_us;
  /// Workers registered now: in this process, and on other nodes.
  int32_t local_workers = 0;
  int32_t remote_workers = 0;
  /// Attempts of workers in other processes that were running when the
  /// queue's last owner died, kept running now for those workers to join
  /// again and take them back (options::remote_grace).
  int64_t orphaned_attempts = 0;
  /// Preemption since the queue opened: running attempts asked to yield,
  /// attempts that yielded, and yielded jobs made ready again (resumed).
  /// `preempted_waiting` yielded jobs wait now for their preemptor to end.
  int64_t preemptions = 0;
  int64_t yields = 0;
  int64_t resumptions = 0;
  int64_t preempted_waiting = 0;
  /// Admission: the combined pressure at the last dispatch (0 without
  /// sources), each source's last good reading, readings that threw or were
  /// NaN, and picks that passed over a job because admission deferred it
  /// (by the throttle, or by the I/O budget), once per pick.
  double pressure = 0;
  std::vector<pressure_reading> pressure_by_source;
  int64_t pressure_errors = 0;
  int64_t deferred_by_pressure = 0;
  int64_t deferred_by_io = 0;
  /// The I/O budget: the disk's smoothed throughput in bytes per second,
  /// and the I/O running jobs declared, in bytes.
  double io_read_bytes_per_second = 0;
  double io_write_bytes_per_second = 0;
  int64_t io_running_read_bytes = 0;
  int64_t io_running_write_bytes = 0;
};

}  // namespace ergon
