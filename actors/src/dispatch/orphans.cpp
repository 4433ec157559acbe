#include "orphans.hpp"

namespace ergon::actors {

void orphans::hold(const std::string& holder, storage::attempt_ref attempt, int64_t until) {
  ended(attempt.row);
  held_.emplace(attempt.row, orphan{holder, attempt.token, until, false});
  by_until_.emplace(until, attempt.row);
  by_holder_[holder].insert(attempt.row);
}

bool orphans::holds(int64_t row) const {
  return held_.count(row) == 1;
}

void orphans::forget(int64_t row, const orphan& o) {
  by_until_.erase({o.until, row});
  auto h = by_holder_.find(o.holder);
  if (h != by_holder_.end()) {
    h->second.erase(row);
    if (h->second.empty())
      by_holder_.erase(h);
  }
}

void orphans::ended(int64_t row) {
  auto i = held_.find(row);
  if (i == held_.end())
    return;
  forget(row, i->second);
  held_.erase(i);
}

bool orphans::request_cancel(int64_t row) {
  auto i = held_.find(row);
  if (i == held_.end())
    return false;
  i->second.cancel_requested = true;
  return true;
}

std::vector<storage::attempt_ref> orphans::due(int64_t now) {
  std::vector<storage::attempt_ref> out;
  while (!by_until_.empty() && by_until_.begin()->first <= now) {
    auto row = by_until_.begin()->second;
    out.push_back({row, held_.at(row).token});
    ended(row);
  }
  return out;
}

std::optional<int64_t> orphans::next_due() const {
  if (by_until_.empty())
    return std::nullopt;
  return by_until_.begin()->first;
}

orphans::adoption orphans::adopt(const std::string& holder,
                                 const std::vector<storage::attempt_ref>& listed) {
  adoption out;
  for (auto& a : listed) {
    auto i = held_.find(a.row);
    if (i == held_.end() || i->second.holder != holder || i->second.token != a.token) {
      out.stale.push_back(a);
      continue;
    }
    out.adopted.emplace_back(a, i->second.cancel_requested);
    ended(a.row);
  }
  if (auto h = by_holder_.find(holder); h != by_holder_.end()) {
    auto rows = h->second;  // ended() edits the set
    for (auto row : rows) {
      out.lost.push_back({row, held_.at(row).token});
      ended(row);
    }
  }
  return out;
}

}  // namespace ergon::actors
