// type_breakers: a circuit breaker per job type (scheduling_options::
// breakers, docs/workflows.md). Counts the failed attempts of each type
// with a breaker within its window; enough of them open it for its
// cool-down, then one trial job may start (half-open), and that trial's
// end closes it or opens it again. Internal to the dispatcher; no actors:
// the dispatcher tells it what ended and was picked, and holds a type's
// jobs back while may_start() is false.
#pragma once

#include <cstdint>
#include <deque>
#include <set>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ergon/error.hpp"
#include "ergon/job_info.hpp"
#include "ergon/scheduling.hpp"

namespace ergon::actors {

class type_breakers {
 public:
  /// A breaker that changed state, for events.
  struct change {
    std::string type;
    breaker_state from = breaker_state::closed;
    breaker_state to = breaker_state::closed;
    std::string why;
    std::optional<int64_t> until;  ///< opened: when its trial may start
  };

  explicit type_breakers(const std::map<std::string, breaker_options>& options = {});

  /// Whether any type has a breaker.
  bool any() const noexcept { return !breakers_.empty(); }

  /// Whether a job of `type` may start now: it has no breaker, or its
  /// breaker is closed, or half-open with no trial running.
  bool may_start(const std::string& type) const;

  /// An attempt of `type` (job `row`) ended with `outcome` at `now`.
  std::optional<change> ended(const std::string& type, int64_t row, attempt_outcome outcome,
                              int64_t now);

  /// A worker reported a failure of job `row` at `now`, not committed yet:
  /// while closed, it counts toward opening until its end arrives
  /// (ended()), so no job of the type is claimed alongside the commit that
  /// opens it. Failures older than the window no longer count.
  void reported_failure(const std::string& type, int64_t row, int64_t now);

  /// A job of `type` was picked to start: while half-open, it is the trial.
  void picked(const std::string& type, int64_t row);

  /// The trial `row` will not run (its claim missed): another may.
  void trial_lost(const std::string& type, int64_t row);

  /// Breakers whose cool-down ended by `now`: half-open now.
  std::vector<change> tick(int64_t now);

  /// The earliest end of a cool-down.
  std::optional<int64_t> next_wake() const;

  /// Closes the breaker of `type` (an operator's reset), forgetting its
  /// failures. Error: not_found if `type` has no breaker. Nothing if it was
  /// closed already.
  result<std::optional<change>> reset(const std::string& type);

  /// Every breaker, by type.
  std::vector<breaker_info> snapshot() const;

 private:
  struct breaker {
    breaker_options opts;
    breaker_state state = breaker_state::closed;
    std::deque<int64_t> failures;  // times within the window (closed)
    std::set<int64_t> reported;    // failures reported, not yet ended (closed)
    int32_t failures_when_opened = 0;
    std::optional<int64_t> open_until;
    std::optional<int64_t> trial;  // the trial's row (half-open)
    int64_t trips = 0;
  };

  change open(const std::string& type, breaker& b, int64_t now, std::string why);
  static void forget_old(breaker& b, int64_t now);

  std::map<std::string, breaker> breakers_;
};

}  // namespace ergon::actors
