// The arithmetic of fair scheduling: effective priority under aging, the
// worst-case wait it implies, and how capacity is split across groups.
// Pure functions, so they are unit-tested and benchmarked on their own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ergon/scheduling.hpp"

namespace ergon::actors {

/// A job's priority after waiting `waited_ms`: its base priority until the
/// grace period ends, then one step higher per interval, up to the ceiling
/// (never below its base). Without aging, the base priority.
int32_t effective_priority(const std::optional<aging_options>& aging, int32_t base,
                           int64_t waited_ms) noexcept;

/// How long a job of `base` priority waits at most before it reaches the
/// urgent threshold (or the ceiling, without one): grace + steps * interval;
/// 0 if it starts there. Empty without aging: no bound follows.
std::optional<int64_t> max_wait_ms(const std::optional<aging_options>& aging,
                                   int32_t base) noexcept;

/// One group competing for capacity.
struct group_share {
  std::string name;  ///< breaks ties, so results are deterministic
  int32_t weight = 1;
  int32_t min_slots = 0;
  std::optional<int32_t> max_slots;
};

/// Each group's exact share of `capacity` (only groups with work count):
///  1. its minimum (capped), all scaled down if they exceed capacity;
///  2. the rest by weight;
///  3. caps apply, and what a capped group cannot take is shared again among
///     the others by weight, until no group can take more.
/// Sums to capacity unless every group is capped.
std::vector<double> fair_shares(const std::vector<group_share>& groups, int32_t capacity);

/// Whole slots from exact shares: floors, then the leftover slots by largest
/// fractional part, ties going to the group with fewer slots, then by name.
std::vector<int32_t> round_shares(const std::vector<group_share>& groups,
                                  const std::vector<double>& shares);

/// round_shares(fair_shares(groups, capacity)): what `group_allocation_changed`
/// and metrics report.
std::vector<int32_t> allocate_slots(const std::vector<group_share>& groups, int32_t capacity);

}  // namespace ergon::actors
