#include "preemptions.hpp"

#include <algorithm>
#include <map>

namespace ergon::actors {

std::vector<preemptions::candidate> preemptions::choose(std::vector<candidate> candidates,
                                                        int32_t need, const room_of& room,
                                                        const may_lose& lose) {
  std::sort(candidates.begin(), candidates.end(), [](const candidate& a, const candidate& b) {
    if (a.priority != b.priority)
      return a.priority < b.priority;
    if (a.started_at != b.started_at)
      return a.started_at > b.started_at;
    return a.row < b.row;
  });
  std::map<uint64_t, std::vector<candidate>> by_worker;
  std::map<uint64_t, int32_t> freed;
  std::map<uint32_t, int32_t> taken;  // per group, over every worker
  for (auto& c : candidates) {
    if (!lose(c.group, taken[c.group] + c.weight))
      continue;
    taken[c.group] += c.weight;
    by_worker[c.worker].push_back(c);
    auto& f = freed[c.worker];
    f += c.weight;
    if (std::max(0, room(c.worker)) + f >= need)
      return by_worker[c.worker];
  }
  return {};
}

void preemptions::asked(int64_t victim, int64_t preemptor) {
  asks_[victim] = preemptor;
  ++preemptors_[preemptor].asks;
}

bool preemptions::asking_for(int64_t preemptor) const {
  auto p = preemptors_.find(preemptor);
  return p != preemptors_.end() && p->second.asks > 0;
}

void preemptions::attempt_ended(int64_t row, bool yielded, bool slot_free) {
  auto a = asks_.find(row);
  if (a == asks_.end())
    return;
  if (yielded)
    yielded_[row] = a->second;
  if (slot_free)
    slot_freed(row);
}

void preemptions::slot_freed(int64_t row) {
  auto a = asks_.find(row);
  if (a == asks_.end())
    return;
  if (auto p = preemptors_.find(a->second); p != preemptors_.end())
    --p->second.asks;
  asks_.erase(a);
}

bool preemptions::hold(const storage::job_key& key, bool& resumed) {
  auto y = yielded_.find(key.row);
  resumed = y != yielded_.end();
  if (!resumed)
    return false;
  auto preemptor = y->second;
  yielded_.erase(y);
  auto p = preemptors_.find(preemptor);
  if (p == preemptors_.end())
    return false;  // it ended already
  p->second.held.push_back(key);
  ++held_count_;
  return true;
}

void preemptions::started(int64_t preemptor, bool yes) {
  if (auto p = preemptors_.find(preemptor); p != preemptors_.end())
    p->second.started = yes;
}

std::vector<storage::job_key> preemptions::ended(int64_t row) {
  auto p = preemptors_.find(row);
  if (p == preemptors_.end())
    return {};
  auto held = std::move(p->second.held);
  held_count_ -= held.size();
  preemptors_.erase(p);
  return held;
}

std::vector<storage::job_key> preemptions::release_stale(
  const std::unordered_set<int64_t>& waiting) {
  std::vector<storage::job_key> out;
  for (auto p = preemptors_.begin(); p != preemptors_.end();) {
    auto& st = p->second;
    if (st.started || waiting.count(p->first) == 1 || st.asks > 0) {
      ++p;
      continue;
    }
    held_count_ -= st.held.size();
    out.insert(out.end(), st.held.begin(), st.held.end());
    p = preemptors_.erase(p);
  }
  return out;
}

}  // namespace ergon::actors
