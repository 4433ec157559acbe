// orphans: running attempts whose remote worker is away (issue 30). Internal
// to the dispatcher; no actors.
//
// After a restart the queue keeps the attempts that workers in other
// processes were running, rather than run them again: each waits, with its
// expiry held (storage::hold_attempts), for its holder to join again and
// list it. A holder that comes back adopts the attempts it lists under
// their tokens; those it no longer lists, and all attempts still waiting
// when their grace ends, are lost ("worker lost") and retried.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ergon/storage/records.hpp"

namespace ergon::actors {

class orphans {
 public:
  /// What a returning holder's list decided.
  struct adoption {
    /// Its attempts, in the order listed; each carries whether a cancel was
    /// requested while it waited.
    std::vector<std::pair<storage::attempt_ref, bool>> adopted;
    /// Listed, but not an attempt it holds here (ended, or another token).
    std::vector<storage::attempt_ref> stale;
    /// Its attempts it did not list: its code is gone.
    std::vector<storage::attempt_ref> lost;
  };

  /// Attempt (row, token) of `holder` waits until `until` (ms). Holding a
  /// row again replaces what was held for it.
  void hold(const std::string& holder, storage::attempt_ref attempt, int64_t until);
  /// Whether `row`'s attempt waits for its holder.
  bool holds(int64_t row) const;
  /// `row`'s attempt ended otherwise (an outcome, a cancel that won): it
  /// waits no more. Nothing if it was not held.
  void ended(int64_t row);
  /// A cancel was requested for `row`'s attempt: its holder is told when it
  /// adopts it. Returns whether it is held.
  bool request_cancel(int64_t row);
  /// The attempts whose grace ended by `now`, earliest first; they wait no
  /// more.
  std::vector<storage::attempt_ref> due(int64_t now);
  /// When the next grace ends, if any attempt waits.
  std::optional<int64_t> next_due() const;
  /// `holder` joined again and lists the attempts it still runs. An attempt
  /// is adopted only under its holder and its token.
  adoption adopt(const std::string& holder, const std::vector<storage::attempt_ref>& listed);
  size_t size() const noexcept { return held_.size(); }

 private:
  struct orphan {
    std::string holder;
    int64_t token = 0;
    int64_t until = 0;
    bool cancel_requested = false;
  };
  void forget(int64_t row, const orphan& o);

  std::unordered_map<int64_t, orphan> held_;  // by row
  std::set<std::pair<int64_t, int64_t>> by_until_;  // (until, row)
  std::unordered_map<std::string, std::set<int64_t>> by_holder_;  // holder -> rows
};

}  // namespace ergon::actors
