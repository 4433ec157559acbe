#include "preemptions.hpp"

#include <algorithm>
#include <iterator>
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

void preemptions::asked(const candidate& victim, int64_t preemptor) {
  asks_[victim.row] = {preemptor, victim};
  losing_[victim.group] += victim.weight;
  ++preemptors_[preemptor].asks;
}

bool preemptions::asking_for(int64_t preemptor) const {
  auto p = preemptors_.find(preemptor);
  return p != preemptors_.end() && p->second.asks > 0;
}

int32_t preemptions::losing(uint32_t group) const {
  auto l = losing_.find(group);
  return l == losing_.end() ? 0 : l->second;
}

void preemptions::attempt_ended(int64_t row, int64_t token, bool yielded, bool slot_free) {
  if (auto r = answered_.find(row); r != answered_.end() && r->second.token == token) {
    if (yielded)
      yielded_[row] = r->second.preemptor;
    answered_.erase(r);
    return;
  }
  auto a = asks_.find(row);
  if (a == asks_.end() || a->second.victim.token != token)
    return;
  if (yielded)
    yielded_[row] = a->second.preemptor;
  a->second.ended = true;
  if (slot_free)
    slot_freed(row, token);
}

void preemptions::slot_freed(int64_t row, std::optional<int64_t> token) {
  auto a = asks_.find(row);
  if (a == asks_.end() || (token && a->second.victim.token != *token))
    return;
  if (auto p = preemptors_.find(a->second.preemptor); p != preemptors_.end())
    --p->second.asks;
  if (auto l = losing_.find(a->second.victim.group);
      l != losing_.end() && (l->second -= a->second.victim.weight) <= 0)
    losing_.erase(l);
  if (!a->second.ended)
    answered_[row] = {a->second.preemptor, a->second.victim.token};
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
  p->second.held[key.row] = key;
  held_by_[key.row] = preemptor;
  return true;
}

void preemptions::started(int64_t preemptor, bool yes) {
  if (auto p = preemptors_.find(preemptor); p != preemptors_.end())
    p->second.started = yes;
}

std::vector<storage::job_key> preemptions::release(
  std::unordered_map<int64_t, preemptor_state>::iterator p) {
  std::vector<storage::job_key> out;
  for (auto& [row, key] : p->second.held) {
    held_by_.erase(row);
    out.push_back(std::move(key));
  }
  preemptors_.erase(p);
  return out;
}

std::vector<storage::job_key> preemptions::ended(int64_t row) {
  auto p = preemptors_.find(row);
  if (p == preemptors_.end())
    return {};
  return release(p);
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
    auto next = std::next(p);
    auto keys = release(p);
    out.insert(out.end(), std::make_move_iterator(keys.begin()),
               std::make_move_iterator(keys.end()));
    p = next;
  }
  return out;
}

void preemptions::forget(int64_t row) {
  slot_freed(row, std::nullopt);
  answered_.erase(row);
  yielded_.erase(row);
  if (auto h = held_by_.find(row); h != held_by_.end()) {
    if (auto p = preemptors_.find(h->second); p != preemptors_.end())
      p->second.held.erase(row);
    held_by_.erase(h);
  }
}

bool preemptions::update_held(const storage::job_key& after) {
  auto h = held_by_.find(after.row);
  if (h == held_by_.end())
    return false;
  preemptors_.at(h->second).held[after.row] = after;
  return true;
}

}  // namespace ergon::actors
