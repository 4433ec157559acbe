// attempt_table: the dispatcher's running attempts, their expiry times, and
// retries parked until their failed attempt's code returns. Internal to the
// dispatcher; no actors.
//
// A worker's slot is freed when an attempt's code returns, which may come
// before or after the commit that ends the attempt. Each operation returns
// the attempt whose slot it frees, if any, so the caller frees it exactly
// once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ergon/storage/records.hpp"

namespace ergon::actors {

class attempt_table {
 public:
  /// A claimed attempt, from its claim's commit until it ends.
  struct attempt {
    uint64_t worker = 0;  ///< the worker registry's id
    int64_t token = 0;
    int64_t expires_at = 0;
    job_id id;
    uint32_t type = 0;   ///< scheduling_policy's type id
    uint32_t group = 0;  ///< scheduling_policy's group id
    int32_t weight = 1;
    bool code_returned = false;  ///< its slot was already freed
    std::string recurring_id;    ///< for events; empty for a plain job
    int32_t priority = 0;        ///< effective priority when it started (preemption)
    int64_t started_at = 0;
  };

  /// Records attempt `a` of `row` (its claim committed) and when it expires.
  /// Replaces an attempt of `row` still here.
  void claimed(int64_t row, const attempt& a);

  /// The attempt of `row`, if one runs.
  const attempt* find(int64_t row) const;

  /// Every running attempt, by row.
  const std::unordered_map<int64_t, attempt>& running() const noexcept { return running_; }

  /// The code of attempt (row, token) returned. Returns the attempt if its
  /// slot is free now; nothing if its code had already returned or `token`
  /// is not the running attempt's.
  std::optional<attempt> code_returned(int64_t row, int64_t token);

  /// How ending an attempt leaves its job.
  struct end_effect {
    std::optional<attempt> freed;  ///< the attempt, if its slot is free now
    bool ready = false;  ///< the job was retried and may run; false while parked
  };

  /// The attempt of `end.row` ended. A retry after a failure (or a yield)
  /// that the code reported itself is parked while that code may still run on a
  /// registered worker (`worker_registered`), so that two attempts of one
  /// job never run at once: see unpark() and worker_gone(). An expired
  /// attempt's retry is never parked: its code may never return, and its
  /// late result is fenced.
  end_effect ended(const storage::attempt_end& end, bool worker_registered);

  /// A claim whose code never started was given back. Returns the attempt
  /// if its slot is free now; nothing if `token` is not the running
  /// attempt's (it expired meanwhile).
  std::optional<attempt> released(int64_t row, int64_t token);

  /// A heartbeat or expiry check moved the expiry of attempt (row, token) to
  /// `expires_at`. Returns the attempt, or nothing if it no longer runs.
  const attempt* extended(int64_t row, int64_t token, int64_t expires_at);

  /// The attempt of `row` runs on `worker` from now on (it joined again and
  /// took it back). Nothing if none runs.
  void move_to(int64_t row, uint64_t worker);

  /// The attempts `worker` runs (claimed and not ended).
  std::vector<storage::attempt_ref> running_on(uint64_t worker) const;

  /// Checks attempt (row, token) again at `at` (its expiry did not commit).
  void recheck_at(int64_t at, int64_t row, int64_t token);

  /// Takes the attempts whose expiry passed at `now`. Skips attempts that
  /// ended, were claimed again, or whose expiry a heartbeat moved.
  std::vector<storage::attempt_ref> due(int64_t now);

  /// The earliest expiry to check, if any.
  std::optional<int64_t> next_expiry() const;

  // -- parked retries --------------------------------------------------------------

  /// The code of attempt (row, token) returned: its parked retry, if any,
  /// leaves the table and may run with the returned key.
  std::optional<storage::job_key> unpark(int64_t row, int64_t token);

  /// A worker is gone and runs no more code: its parked retries may run.
  std::vector<storage::job_key> worker_gone(uint64_t worker);

  /// The parked retries of `worker`, whose code may run on where it went:
  /// they move to worker `to`. Returns their failed attempts.
  std::vector<storage::attempt_ref> move_parked(uint64_t worker, uint64_t to);

  /// The parked retry of `row` waits for worker `to`'s code now.
  void move_parked_row(int64_t row, uint64_t to);

  /// `row`'s parked retry leaves the table, whoever's code it waits for.
  std::optional<storage::job_key> release_parked(int64_t row);

  /// The pending job of a parked retry was updated. Returns false if `after`
  /// is not parked (the caller moves it in the index instead).
  bool update_parked(const storage::job_key& after);

  /// The pending job of `row` was cancelled or passed its deadline.
  void drop_parked(int64_t row);

 private:
  // A retry whose failed attempt's code may still run on `worker`.
  struct parked_retry {
    uint64_t worker = 0;
    int64_t token = 0;
    storage::job_key key;
  };

  std::unordered_map<int64_t, attempt> running_;  // by row
  std::unordered_map<int64_t, parked_retry> parked_;  // by row
  // Expiry checks: at -> (row, token). Entries go stale when an attempt ends
  // or is extended; due() skips those.
  std::multimap<int64_t, std::pair<int64_t, int64_t>> expiries_;
};

}  // namespace ergon::actors
