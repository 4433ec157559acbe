#include "worker_registry.hpp"

#include <algorithm>
#include <cstdint>

namespace ergon::actors {

uint64_t worker_registry::add(std::vector<uint32_t> types,
                              int32_t max_capacity, int32_t prefetch) {
  auto id = next_id_++;
  auto& w = workers_[id];
  w.types = std::move(types);
  w.max_capacity = max_capacity;
  w.prefetch = prefetch;
  return id;
}

bool worker_registry::resize(uint64_t id, int32_t max_capacity) {
  auto w = workers_.find(id);
  if (w == workers_.end())
    return false;
  w->second.max_capacity = max_capacity;
  return true;
}

void worker_registry::shrink_room(uint64_t id, int32_t max_capacity) {
  auto w = workers_.find(id);
  if (w != workers_.end() && max_capacity < w->second.max_capacity)
    w->second.capacity = std::min(w->second.capacity, max_capacity + w->second.prefetch);
}

const worker_registry::worker* worker_registry::find(uint64_t id) const {
  auto w = workers_.find(id);
  return w == workers_.end() ? nullptr : &w->second;
}

status worker_registry::check_credit(uint64_t id, int32_t capacity, int64_t received) const {
  auto w = workers_.find(id);
  if (w == workers_.end())
    return {};
  auto room = int64_t{w->second.max_capacity} + w->second.prefetch;
  if (capacity < 0 || capacity > room)
    return invalid_field("capacity", "must be between 0 and " + std::to_string(room)
                                       + " (max_capacity + prefetch), got "
                                       + std::to_string(capacity));
  if (received < 0 || received > w->second.sent)
    return invalid_field("received_weight", "must be between 0 and the "
                                              + std::to_string(w->second.sent)
                                              + " units sent, got " + std::to_string(received));
  return {};
}

bool worker_registry::credit(uint64_t id, int32_t capacity, int64_t received) {
  auto w = workers_.find(id);
  if (w == workers_.end())
    return false;
  w->second.capacity = capacity;
  w->second.received = received;
  return true;
}

std::vector<int64_t> worker_registry::claim(uint64_t id, const picker& pick) {
  std::vector<int64_t> rows;
  auto i = workers_.find(id);
  if (i == workers_.end() || !i->second.may_claim())
    return rows;
  auto& w = i->second;
  std::vector<picked_job> picks;
  for (int32_t room = w.wanted(); room > 0;) {
    auto p = pick(w.types, std::min(room, w.max_capacity));
    if (!p)
      break;
    room -= p->job.weight;
    picks.push_back(*p);
  }
  for (auto& p : picks) {
    rows.push_back(p.job.row);
    // Counted as sent now: the writer hands claimed jobs to the worker
    // itself, possibly before the claim's feed arrives.
    w.sent += p.job.weight;
  }
  if (!picks.empty())
    w.claims.push_back(std::move(picks));
  return rows;
}

std::deque<std::vector<picked_job>>::iterator worker_registry::claim_of(worker& w, int64_t row) {
  return std::find_if(w.claims.begin(), w.claims.end(), [&](const std::vector<picked_job>& c) {
    return std::any_of(c.begin(), c.end(), [&](const picked_job& p) { return p.job.row == row; });
  });
}

void worker_registry::returned_before_claim(uint64_t id, int64_t row, int64_t token) {
  auto w = workers_.find(id);
  if (w != workers_.end()
      && (w->second.offered > 0 || claim_of(w->second, row) != w->second.claims.end()))
    w->second.returned_early.emplace(row, token);
}

worker_registry::committed_claim worker_registry::claim_committed(
    uint64_t id, int64_t row, const std::vector<int64_t>& missed) {
  committed_claim out;
  auto i = workers_.find(id);
  if (i == workers_.end())
    return out;
  auto& w = i->second;
  auto claim = claim_of(w, row);
  if (claim == w.claims.end())
    return out;
  for (auto& p : *claim)
    out.picked.emplace(p.job.row, p);
  // Missed jobs never reached the worker.
  for (auto m : missed)
    if (auto p = out.picked.find(m); p != out.picked.end()) {
      out.missed.push_back(p->second.job);
      w.sent -= p->second.job.weight;
    }
  // Returns reported for this claim all arrived before its feed; those of
  // a later claim wait for theirs.
  for (auto r = w.returned_early.begin(); r != w.returned_early.end();)
    if (out.picked.count(r->first) == 1) {
      out.returned_early.insert(*r);
      r = w.returned_early.erase(r);
    } else {
      ++r;
    }
  out.left = end_claim(i, claim);
  if (!out.left)
    wait_for_jobs(id);
  return out;
}

worker_registry::failed_claim worker_registry::claim_failed(uint64_t id, int64_t row) {
  failed_claim out;
  auto i = workers_.find(id);
  if (i == workers_.end())
    return out;
  auto claim = claim_of(i->second, row);
  if (claim == i->second.claims.end())
    return out;
  for (auto& p : *claim)
    i->second.sent -= p.job.weight;
  out.picks = *claim;
  out.left = end_claim(i, claim);
  if (!out.left)
    waiting_.push_back(id);
  return out;
}

bool worker_registry::end_claim(std::unordered_map<uint64_t, worker>::iterator i,
                                std::deque<std::vector<picked_job>>::iterator claim) {
  i->second.claims.erase(claim);
  return gone_if_left(i);
}

// Returns kept while an offer was out that belong to none of the worker's
// claims: of attempts that ended already, or of none at all.
void worker_registry::drop_stale_returns(worker& w) {
  for (auto r = w.returned_early.begin(); r != w.returned_early.end();)
    if (claim_of(w, r->first) == w.claims.end())
      r = w.returned_early.erase(r);
    else
      ++r;
}

bool worker_registry::gone_if_left(std::unordered_map<uint64_t, worker>::iterator i) {
  if (!i->second.leaving || i->second.claiming())
    return false;
  workers_.erase(i);
  return true;
}

std::optional<uint64_t> worker_registry::offer() {
  while (!waiting_.empty()) {
    auto w = workers_.find(waiting_.front());
    if (w == workers_.end() || !w->second.may_claim()) {
      waiting_.pop_front();  // stale: pop_waiting() would skip it too
      continue;
    }
    if (w->second.claiming())
      return std::nullopt;
    waiting_.pop_front();
    w->second.offered = std::min(w->second.wanted(), w->second.max_capacity);
    w->second.sent += w->second.offered;
    return w->first;
  }
  return std::nullopt;
}

worker_registry::committed_claim worker_registry::offer_taken(
    uint64_t id, int64_t row, int32_t weight, const std::optional<picked_job>& pick) {
  committed_claim out;
  auto i = workers_.find(id);
  if (i == workers_.end() || i->second.offered == 0)
    return out;
  auto& w = i->second;
  w.sent -= w.offered - weight;
  w.offered = 0;
  if (pick)
    out.picked.emplace(row, *pick);
  auto r = w.returned_early.lower_bound({row, INT64_MIN});
  while (r != w.returned_early.end() && r->first == row) {
    out.returned_early.insert(*r);
    r = w.returned_early.erase(r);
  }
  drop_stale_returns(w);
  out.left = gone_if_left(i);
  if (!out.left)
    wait_for_jobs(id);
  return out;
}

bool worker_registry::offer_ended(uint64_t id) {
  auto i = workers_.find(id);
  if (i == workers_.end() || i->second.offered == 0)
    return false;
  auto& w = i->second;
  w.sent -= w.offered;
  w.offered = 0;
  drop_stale_returns(w);
  if (gone_if_left(i))
    return true;
  wait_for_jobs(id);
  return false;
}

worker_registry::leave_result worker_registry::leave(uint64_t id) {
  auto w = workers_.find(id);
  if (w == workers_.end())
    return leave_result::unknown;
  w->second.capacity = 0;
  if (!w->second.claiming()) {
    workers_.erase(w);
    return leave_result::left;
  }
  w->second.leaving = true;
  return leave_result::after_claim;
}

std::optional<worker_registry::removed> worker_registry::remove(uint64_t id) {
  auto w = workers_.find(id);
  if (w == workers_.end())
    return std::nullopt;
  removed out;
  out.claims = w->second.at_writer();
  for (auto& c : w->second.claims)
    out.picks.insert(out.picks.end(), c.begin(), c.end());
  workers_.erase(w);
  return out;
}

std::optional<uint64_t> worker_registry::pop_waiting() {
  if (waiting_.empty())
    return std::nullopt;
  auto id = waiting_.front();
  waiting_.pop_front();
  auto w = workers_.find(id);
  if (w == workers_.end() || !w->second.may_claim())
    return std::nullopt;
  return id;
}

void worker_registry::wait_for_jobs(uint64_t id) {
  auto w = workers_.find(id);
  if (w != workers_.end() && w->second.may_claim())
    waiting_.push_back(id);
}

worker_registry::total_capacity worker_registry::capacity() const {
  total_capacity out;
  for (auto& [id, w] : workers_)
    if (!w.leaving) {
      out.weight += w.max_capacity + w.prefetch;
      for (auto t : w.types)
        out.largest_by_type[t] = std::max(out.largest_by_type[t], w.max_capacity);
    }
  return out;
}

}  // namespace ergon::actors
