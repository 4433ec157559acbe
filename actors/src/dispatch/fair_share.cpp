#include "ergon/actors/fair_share.hpp"
#include "ergon/storage/times.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ergon::actors {
namespace {

int64_t interval_ms(const aging_options& a) {
  return std::max<int64_t>(1, a.interval.count());
}

// Hands out `units` slots by largest remainder of `exact` over `floor`, among
// the indexes in `order`; ties go to fewer slots so far, then to the name.
void round_by_remainder(std::vector<int32_t>& alloc, const std::vector<double>& exact,
                        const std::vector<size_t>& candidates,
                        const std::vector<group_share>& groups, int64_t units) {
  std::vector<size_t> order = candidates;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double ra = exact[a] - std::floor(exact[a]);
    double rb = exact[b] - std::floor(exact[b]);
    if (ra != rb)
      return ra > rb;
    if (alloc[a] != alloc[b])
      return alloc[a] < alloc[b];
    return groups[a].name < groups[b].name;
  });
  for (size_t k = 0; k < order.size() && units > 0; ++k, --units)
    ++alloc[order[k]];
}

int32_t cap_of(const group_share& g) {
  return g.max_slots ? std::max(0, *g.max_slots) : std::numeric_limits<int32_t>::max();
}

}  // namespace

int32_t effective_priority(const std::optional<aging_options>& aging, int32_t base,
                           int64_t waited_ms) noexcept {
  if (!aging)
    return base;
  auto over = waited_ms - aging->grace_period.count();
  if (over < interval_ms(*aging))
    return base;
  int64_t steps = over / interval_ms(*aging);
  int64_t ceiling = std::max<int64_t>(base, aging->max_effective_priority);
  return static_cast<int32_t>(std::min<int64_t>(int64_t{base} + steps, ceiling));
}

std::optional<int64_t> max_wait_ms(const std::optional<aging_options>& aging,
                                   int32_t base) noexcept {
  if (!aging)
    return std::nullopt;
  // Aging stops at the ceiling: a threshold above it is never reached by
  // aging, so the bound is the time to the ceiling.
  int64_t ceiling = std::max(base, aging->max_effective_priority);
  int64_t target = std::min<int64_t>(aging->urgent_threshold.value_or(ceiling), ceiling);
  int64_t steps = target - base;
  if (steps <= 0)
    return 0;
  return storage::add_ms(std::max<int64_t>(0, aging->grace_period.count()),
                        storage::mul_ms(steps, interval_ms(*aging)));
}

std::vector<double> fair_shares(const std::vector<group_share>& groups, int32_t capacity) {
  std::vector<double> share(groups.size(), 0.0);
  if (groups.empty() || capacity <= 0)
    return share;
  // 1. Minimums, scaled down if they don't all fit.
  double wanted = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    share[i] = std::min(std::max(0, groups[i].min_slots), cap_of(groups[i]));
    wanted += share[i];
  }
  if (wanted >= capacity) {
    for (auto& x : share)
      x = x * capacity / wanted;
    return share;
  }
  // 2 and 3. The rest by weight among groups below their cap; what a cap
  // cuts off goes round again.
  double left = capacity - wanted;
  while (left > 1e-9) {
    double weights = 0;
    for (size_t i = 0; i < groups.size(); ++i)
      if (share[i] < cap_of(groups[i]))
        weights += std::max(1, groups[i].weight);
    if (weights == 0)
      break;  // every group is capped: the rest stays idle
    double spill = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      double cap = cap_of(groups[i]);
      if (share[i] >= cap)
        continue;
      share[i] += left * std::max(1, groups[i].weight) / weights;
      if (share[i] > cap) {
        spill += share[i] - cap;
        share[i] = cap;
      }
    }
    left = spill;
  }
  return share;
}

std::vector<int32_t> round_shares(const std::vector<group_share>& groups,
                                  const std::vector<double>& shares) {
  std::vector<int32_t> alloc(groups.size(), 0);
  double total = 0;
  int64_t given = 0;
  std::vector<size_t> open;
  for (size_t i = 0; i < groups.size(); ++i) {
    total += shares[i];
    alloc[i] = static_cast<int32_t>(std::floor(shares[i] + 1e-9));
    given += alloc[i];
    if (alloc[i] < cap_of(groups[i]))
      open.push_back(i);
  }
  round_by_remainder(alloc, shares, open, groups, std::llround(total) - given);
  return alloc;
}

std::vector<int32_t> allocate_slots(const std::vector<group_share>& groups, int32_t capacity) {
  return round_shares(groups, fair_shares(groups, capacity));
}

}  // namespace ergon::actors
