#include "attempt_table.hpp"

namespace ergon::actors {

void attempt_table::claimed(int64_t row, const attempt& a) {
  running_[row] = a;
  expiries_.emplace(a.expires_at, std::make_pair(row, a.token));
}

const attempt_table::attempt* attempt_table::find(int64_t row) const {
  auto r = running_.find(row);
  return r == running_.end() ? nullptr : &r->second;
}

std::optional<attempt_table::attempt> attempt_table::code_returned(int64_t row, int64_t token) {
  auto r = running_.find(row);
  if (r == running_.end() || r->second.token != token || r->second.code_returned)
    return std::nullopt;
  r->second.code_returned = true;
  return r->second;
}

attempt_table::end_effect attempt_table::ended(const storage::attempt_end& end,
                                               bool worker_registered) {
  end_effect effect;
  std::optional<parked_retry> park;
  if (auto r = running_.find(end.row); r != running_.end()) {
    // The code reported the failure itself and may still run.
    bool reported = end.outcome == attempt_outcome::failed
                    || end.outcome == attempt_outcome::yielded
                    || end.outcome == attempt_outcome::snoozed
                    || end.outcome == attempt_outcome::spawned;
    if (!r->second.code_returned && reported && worker_registered)
      park = parked_retry{r->second.worker, r->second.token, end.key};
    if (!r->second.code_returned)
      effect.freed = r->second;
    running_.erase(r);
  }
  if (end.status == job_status::pending && park)
    parked_[end.row] = std::move(*park);
  else
    effect.ready = end.status == job_status::pending;
  return effect;
}

std::optional<attempt_table::attempt> attempt_table::released(int64_t row, int64_t token) {
  auto r = running_.find(row);
  if (r == running_.end() || r->second.token != token)
    return std::nullopt;
  std::optional<attempt> freed;
  if (!r->second.code_returned)
    freed = r->second;
  running_.erase(r);
  return freed;
}

const attempt_table::attempt* attempt_table::extended(int64_t row, int64_t token,
                                                      int64_t expires_at) {
  auto r = running_.find(row);
  if (r == running_.end() || r->second.token != token)
    return nullptr;
  r->second.expires_at = expires_at;
  expiries_.emplace(expires_at, std::make_pair(row, token));
  return &r->second;
}

void attempt_table::move_to(int64_t row, uint64_t worker) {
  if (auto r = running_.find(row); r != running_.end())
    r->second.worker = worker;
}

void attempt_table::recheck_at(int64_t at, int64_t row, int64_t token) {
  expiries_.emplace(at, std::make_pair(row, token));
}

std::vector<storage::attempt_ref> attempt_table::due(int64_t now) {
  std::vector<storage::attempt_ref> out;
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    auto [row, token] = expiries_.begin()->second;
    expiries_.erase(expiries_.begin());
    auto r = running_.find(row);
    if (r == running_.end() || r->second.token != token || r->second.expires_at > now)
      continue;
    out.push_back({row, token});
  }
  return out;
}

std::optional<int64_t> attempt_table::next_expiry() const {
  if (expiries_.empty())
    return std::nullopt;
  return expiries_.begin()->first;
}

std::optional<storage::job_key> attempt_table::unpark(int64_t row, int64_t token) {
  auto p = parked_.find(row);
  if (p == parked_.end() || p->second.token != token)
    return std::nullopt;
  auto key = std::move(p->second.key);
  parked_.erase(p);
  return key;
}

std::vector<storage::attempt_ref> attempt_table::running_on(uint64_t worker) const {
  std::vector<storage::attempt_ref> out;
  for (auto& [row, a] : running_)
    if (a.worker == worker)
      out.push_back({row, a.token});
  return out;
}

std::vector<storage::job_key> attempt_table::worker_gone(uint64_t worker) {
  std::vector<storage::job_key> ready;
  for (auto p = parked_.begin(); p != parked_.end();) {
    if (p->second.worker == worker) {
      ready.push_back(std::move(p->second.key));
      p = parked_.erase(p);
    } else {
      ++p;
    }
  }
  return ready;
}

std::vector<storage::attempt_ref> attempt_table::move_parked(uint64_t worker, uint64_t to) {
  std::vector<storage::attempt_ref> moved;
  for (auto& [row, p] : parked_)
    if (p.worker == worker) {
      p.worker = to;
      moved.push_back({row, p.token});
    }
  return moved;
}

void attempt_table::move_parked_row(int64_t row, uint64_t to) {
  if (auto p = parked_.find(row); p != parked_.end())
    p->second.worker = to;
}

std::optional<storage::job_key> attempt_table::release_parked(int64_t row) {
  auto p = parked_.find(row);
  if (p == parked_.end())
    return std::nullopt;
  auto key = std::move(p->second.key);
  parked_.erase(p);
  return key;
}

bool attempt_table::update_parked(const storage::job_key& after) {
  auto p = parked_.find(after.row);
  if (p == parked_.end())
    return false;
  p->second.key = after;
  return true;
}

void attempt_table::drop_parked(int64_t row) {
  parked_.erase(row);
}

}  // namespace ergon::actors
