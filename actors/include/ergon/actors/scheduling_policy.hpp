// scheduling_policy: the dispatcher's one dispatch policy. It holds the
// scheduling keys of pending jobs in memory and decides which job a worker
// gets next, combining priority aging, weighted fair shares across groups,
// pauses, rate limits and per-type caps. docs/scheduling.md explains the
// decisions; this class has no actors and no SQL.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ergon/event.hpp"
#include "ergon/actors/run_metrics.hpp"
#include "ergon/error.hpp"
#include "ergon/scheduling.hpp"

namespace ergon::actors {

/// What the policy keeps per pending job: 56 bytes.
struct pending_job {
  /// Flags: a yielded job made ready again goes ahead of its priority's
  /// other jobs; a job that declared I/O has it in the policy's I/O table.
  static constexpr uint32_t resumed = 1;
  static constexpr uint32_t declares_io = 2;

  int64_t row = 0;
  int64_t run_at = 0;
  int64_t ready_since = 0;  ///< aging clock start
  int64_t added_at = 0;     ///< submission time, which the job's id encodes
  int32_t priority = 0;
  int32_t weight = 1;
  uint32_t type = 0;
  uint32_t group = 0;
  uint32_t flags = 0;
};

/// A job chosen for a worker.
struct picked_job {
  pending_job job;
  int32_t effective_priority = 0;
  int64_t waited_ms = 0;  ///< aging wait (pauses excluded)
  bool beyond_share = false;  ///< started outside its group's share (lent or borrowed)
};

/// A group's allocation changed.
struct allocation_change {
  std::string group;
  int32_t before = 0;
  int32_t after = 0;
  allocation_reason reason = allocation_reason::rebalance;
};

/// Sets in `into` the fields that `c` sets.
void merge_settings(settings_change& into, const settings_change& c);

class scheduling_policy {
 public:
  explicit scheduling_policy(scheduling_options opts);

  // -- names ----------------------------------------------------------------------------

  uint32_t type_id(const std::string& name);
  uint32_t group_id(const std::string& name);
  const std::string& type_name(uint32_t id) const { return types_[id].name; }
  const std::string& group_name(uint32_t id) const { return groups_[id].name; }

  /// Records the I/O a pending job declared (job_info::expected_io), for
  /// the I/O budget; forget() drops it.
  void declare_io(int64_t row, const io_estimate& io) { io_[row] = io; }

  // -- pending jobs ----------------------------------------------------------------------

  /// Adds a pending job: ready if due at `now`, else waiting for its run_at.
  void add(const pending_job& e, int64_t now);
  /// Removes a pending job by its key (resumed or not); false if it is not
  /// here.
  bool remove(const pending_job& e);
  /// A job is no longer pending (cancelled, expired, or its claim
  /// committed): drops the pending copy of the I/O it declared.
  void forget(int64_t row) { io_.erase(row); }
  /// Moves jobs due at `now` from waiting to ready.
  void promote(int64_t now);
  size_t ready_count() const noexcept { return ready_count_; }

  // -- dispatching ------------------------------------------------------------------------

  /// The next job for a worker serving `types` with `room` weight units
  /// free, or nothing. The job leaves the index and counts as running.
  std::optional<picked_job> pick(const std::vector<uint32_t>& types, int32_t room, int64_t now);
  /// A picked job was not claimed after all (cancelled meanwhile, or the
  /// write failed): it no longer counts as running. `pending_again`: the
  /// caller adds it back (its declared I/O is kept for that).
  void unpick(const pending_job& e, bool pending_again);
  /// The attempt of job `row` ended (its slot and declared I/O are free).
  void finished(int64_t row, uint32_t group, uint32_t type, int32_t weight);
  /// Counts a job as running that was not picked through pick() (its pick
  /// was undone, but the claim committed anyway).
  void mark_running(const pending_job& e);

  // -- weight limits ------------------------------------------------------------------------

  /// The largest max_concurrency among registered workers, per type id;
  /// types not in `limits` have no worker. Pending jobs that no longer fit
  /// any worker are queued for take_too_heavy().
  void set_type_limits(const std::unordered_map<uint32_t, int32_t>& limits);

  /// Whether a job of `type` and `weight` fits no registered worker of its
  /// type (false when none is registered).
  bool too_heavy(uint32_t type, int32_t weight) const;
  bool too_heavy(const std::string& type, int32_t weight) const;
  /// The largest registered worker of `type`; 0 when none is.
  int32_t type_limit(uint32_t type) const;

  /// Pending jobs found too heavy since the last call: when they were added,
  /// or when their type's largest worker went away.
  std::vector<pending_job> take_too_heavy();

  // -- control ------------------------------------------------------------------------------

  /// Total worker capacity in weight units.
  void set_capacity(int32_t capacity);
  int32_t capacity() const noexcept { return capacity_; }
  void set_group_weight(const std::string& group, int32_t weight);
  void reset_group_weights();
  /// Pauses a group or type until `until` (or until resumed). A name the
  /// policy hasn't seen a job of is paused ahead: held aside, and taken by
  /// its first job. Error: invalid_argument naming "group" or "type" when
  /// max_paused_ahead names of that kind are paused ahead already.
  status pause_group(const std::string& group, std::optional<int64_t> until, int64_t now);
  void resume_group(const std::string& group, int64_t now);
  status pause_type(const std::string& type, std::optional<int64_t> until, int64_t now);
  void resume_type(const std::string& type, int64_t now);
  /// Holds a type's jobs back (`held`) or lets them start again, for its
  /// circuit breaker (type_breakers). Unlike a pause, aging goes on.
  void hold_type(const std::string& type, bool held);

  /// Pauses every job (queue::pause_queue): nothing starts, and aging
  /// stands still, until `until` or until resumed.
  void pause_queue(std::optional<int64_t> until, int64_t now);
  void resume_queue(int64_t now);
  bool queue_paused() const noexcept { return queue_pause_.paused; }

  /// A run-time change to a group's or a type's settings (validated by the
  /// caller): the fields set replace the current values.
  void change_group(const std::string& group, const settings_change& c);
  void change_type(const std::string& type, const settings_change& c);
  /// Back to what scheduling_options configured for the group or type
  /// (its weight only: the others stay as they are).
  void reset_group(const std::string& group);
  void reset_group_weight(const std::string& group);
  void reset_type(const std::string& type);

  /// Ends every pause, the queue's among them; returns how many there were.
  int64_t resume_all(int64_t now);

  /// Resumes pauses whose deadline passed.
  void expire_pauses(int64_t now);

  /// Recomputes allocations if group membership, weights, pauses or
  /// capacity changed since the last call, and returns what changed.
  std::vector<allocation_change> rebalance();

  /// Whether nothing but a worker's types and room can hold back a ready
  /// job: no pause (paused-ahead names included), group or type cap, rate
  /// limit or admission. Then, with nothing else ready, any due job a
  /// worker fits is the one pick() gives it (standing offers rely on this).
  bool ungated() const;

  /// The earliest time something becomes possible without an outside event:
  /// a waiting job's run_at, a pause deadline, a rate-limit token.
  std::optional<int64_t> next_wake(int64_t now) const;

  /// The effective priority, at `now`, of a pending job with these fields.
  int32_t effective_now(const std::string& type, const std::string& group, int32_t priority,
                        int64_t ready_since, int64_t now) const;

  /// Fills the scheduling parts of a metrics snapshot.
  void fill_metrics(metrics_snapshot& m, int64_t now) const;

  // -- preemption ---------------------------------------------------------------------------

  /// Ready jobs at or above the preemption threshold that could start now
  /// but for a free slot (not paused, capped, rate-limited or deferred), the
  /// head of each line, highest effective priority first. Empty without
  /// preemption.
  std::vector<picked_job> preemptors(int64_t now);
  /// Whether a running job of `group` and `weight` may be asked to yield:
  /// the group keeps at least its min_slots running without it.
  bool may_lose(uint32_t group, int32_t weight) const;

  // -- admission ------------------------------------------------------------------------------

  /// The combined pressure for the next picks; clears deferring().
  void set_pressure(double pressure);
  /// The disk's smoothed throughput, for the I/O budget.
  void set_io_rates(double read_bytes_per_second, double write_bytes_per_second);
  /// Whether a pick since set_pressure passed over a job that admission
  /// deferred (the dispatcher then checks again on a timer).
  bool deferring() const noexcept { return deferring_; }

  /// Records a job's queue wait for the histogram.
  void record_wait(int64_t wait_ms);

 private:
  struct bucket_order {
    bool by_aging = false;
    bool operator()(const pending_job& a, const pending_job& b) const noexcept {
      bool ra = (a.flags & pending_job::resumed) != 0;
      bool rb = (b.flags & pending_job::resumed) != 0;
      if (ra != rb)
        return ra;
      auto ka = by_aging ? a.ready_since : a.run_at;
      auto kb = by_aging ? b.ready_since : b.run_at;
      if (ka != kb)
        return ka < kb;
      return a.row < b.row;
    }
  };

  struct bucket {
    uint32_t type = 0;
    int32_t priority = 0;
    int32_t weight = 1;
    std::set<pending_job, bucket_order> jobs;
  };

  struct pause_state {
    bool paused = false;
    std::optional<int64_t> until;
    int64_t since = 0;
    std::vector<std::pair<int64_t, int64_t>> past;  // finished pauses
    /// Time paused between `from` and `now`.
    int64_t frozen(int64_t from, int64_t now) const;
    void start(std::optional<int64_t> deadline, int64_t now);
    void stop(int64_t now);
  };

  struct token_bucket {
    rate_limit limit;
    double tokens = 0;
    int64_t last = -1;
    void refill(int64_t now);
    /// A new limit; the tokens held stay, up to its burst.
    void change(const rate_limit& to);
    /// When the next token arrives, if none is available now.
    int64_t next_token(int64_t now) const;
  };

  struct group_state {
    std::string name;
    int32_t weight = 1;
    int32_t min_slots = 0;
    std::optional<int32_t> cap;
    std::map<std::tuple<uint32_t, int32_t, int32_t>, bucket> buckets;  // type, priority, weight
    std::unordered_map<uint32_t, std::vector<bucket*>> by_type;
    int64_t ready = 0;
    int32_t running = 0;
    double share = 0;   // exact fair share of capacity; picks follow it
    int32_t whole = 0;  // floor(share)
    double frac = 0;    // share - whole: it may take turns at one more slot
    double pass = 0;    // its next turn; each start within its share adds 1/share
    int32_t alloc = 0;  // share rounded to whole slots, as reported
    bool active = false;  // had ready or running jobs at the last rebalance
    pause_state pause;
    std::optional<token_bucket> rate;
  };

  struct type_state {
    std::string name;
    std::optional<int32_t> limit;  // largest registered worker; empty: none
    int32_t running = 0;
    std::optional<int32_t> cap;
    pause_state pause;
    std::optional<token_bucket> rate;
    bool held = false;  // by its circuit breaker
  };

  struct candidate {
    bucket* from = nullptr;
    int32_t effective = 0;
    int64_t waited = 0;
  };

  bool better(const candidate& a, const candidate& b) const;

  // pick's steps (scheduling_policy.cpp says how they rank). Each looks at
  // the ready jobs of `types` that fit `room` units; only take moves a job
  // (the others refill rate buckets and note deferrals as they look).
  struct pick_request {
    const std::vector<uint32_t>& types;
    int32_t room;
    int64_t now;
  };
  struct option {
    uint32_t group = 0;
    candidate c;
  };
  struct choice {
    std::optional<option> below;   ///< step 1
    std::optional<option> turn;    ///< step 2
    std::optional<option> urgent;  ///< steps 3 and 4
  };
  std::optional<option> below_share(const pick_request& q);
  std::optional<option> next_turn(const pick_request& q);
  std::optional<option> urgent_loan(const pick_request& q, const choice& so_far);
  void preemptor_first(const pick_request& q, choice& c);
  std::optional<option> any_that_fits(const pick_request& q);
  picked_job take(const option& chosen, bool beyond_share, bool its_turn);
  /// Admission: whether `head` may start now at `effective` priority.
  bool admitted(const pending_job& head, int32_t effective);
  bool io_fits(const io_estimate& io) const;
  void start_io(const pending_job& e);
  bool end_io(int64_t row, io_estimate* io);
  bool preempting() const noexcept;
  std::optional<candidate> best_in(group_state& g, const std::vector<uint32_t>& types,
                                   int32_t room, int64_t now);
  void insert_ready(const pending_job& e);
  void mark_dirty(allocation_reason why);
  /// Puts a group in or out of short_groups_ and turns_ after it changed.
  void refresh_queues(uint32_t gid);
  bool type_open(type_state& t, int32_t weight, int64_t now);
  /// What options::scheduling gives the group: its weight, or the default.
  int32_t configured_weight(const std::string& group) const;
  /// A run-time rate on a bucket: a new limit, a changed one, or none (0).
  static void set_rate(std::optional<token_bucket>& bucket, const rate_limit& r);
  /// Time the job has aged: since `ready_since`, minus pauses of the queue,
  /// its group and its type.
  int64_t aged_ms(const group_state& g, const type_state& t, int64_t ready_since,
                  int64_t now) const;

  scheduling_options opts_;
  bucket_order order_;
  std::vector<group_state> groups_;
  std::unordered_map<std::string, uint32_t> group_ids_;
  std::vector<type_state> types_;
  std::unordered_map<std::string, uint32_t> type_ids_;
  // Pauses of names with no jobs yet: bounded, and dropped on resume, so a
  // caller pausing names ahead can't grow the interned groups and types.
  std::map<std::string, pause_state> groups_ahead_;
  std::map<std::string, pause_state> types_ahead_;
  pause_state queue_pause_;
  // Run-time settings of names with no jobs yet: taken by their first job,
  // so setting names can't grow the interned groups and types (the
  // control table bounds them).
  std::map<std::string, settings_change> group_settings_ahead_;
  std::map<std::string, settings_change> type_settings_ahead_;
  std::set<uint32_t> ready_groups_;  // groups with ready jobs
  // Groups with ready jobs running below their whole slots. Under saturation
  // these are the few groups whose jobs just finished, so a pick looks at
  // them instead of every group.
  std::set<uint32_t> short_groups_;
  // Groups with ready jobs holding exactly their whole slots and a fraction
  // of one more, by their next turn.
  std::set<std::pair<double, uint32_t>> turns_;
  double turn_clock_ = 0;  // pass of the latest turn taken
  std::multimap<int64_t, pending_job> waiting_;
  std::vector<pending_job> too_heavy_;
  size_t ready_count_ = 0;
  int32_t capacity_ = 0;
  bool dirty_ = false;
  allocation_reason dirty_reason_ = allocation_reason::rebalance;
  // metrics
  histogram_counter wait_{{1, 5, 10, 50, 100, 500, 1'000, 5'000, 10'000, 60'000}};
  int64_t promotions_ = 0;
  int64_t excess_ = 0;
  // preemption: ready jobs whose base priority is at or above the threshold
  int64_t high_ready_ = 0;
  // admission
  double pressure_ = 0;
  bool deferring_ = false;
  bool deferred_pressure_now_ = false;  // within one pick
  bool deferred_io_now_ = false;
  int64_t deferred_by_pressure_ = 0;
  int64_t deferred_by_io_ = 0;
  // Declared I/O of pending jobs, and of running ones with their total.
  std::unordered_map<int64_t, io_estimate> io_;
  std::unordered_map<int64_t, io_estimate> running_io_by_row_;
  io_estimate running_io_;
  double io_read_rate_ = 0;
  double io_write_rate_ = 0;
};

}  // namespace ergon::actors
