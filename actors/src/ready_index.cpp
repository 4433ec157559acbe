#include "ready_index.hpp"

namespace ergon::actors {

void ready_index::add(const ready_entry& e, int64_t now) {
  if (e.run_at > now)
    waiting_.emplace(e.run_at, e);
  else
    insert_ready(e);
}

void ready_index::insert_ready(const ready_entry& e) {
  auto key = bucket_key{e.type, e.group, e.weight};
  auto i = buckets_.find(key);
  if (i == buckets_.end()) {
    i = buckets_.emplace(key, bucket{}).first;
    i->second.weight = e.weight;
    by_type_[e.type].push_back(&i->second);  // std::map nodes never move
  }
  if (i->second.jobs.insert(e).second)
    ++ready_count_;
}

bool ready_index::remove(const ready_entry& e) {
  auto i = buckets_.find(bucket_key{e.type, e.group, e.weight});
  if (i != buckets_.end() && i->second.jobs.erase(e) == 1) {
    --ready_count_;
    return true;
  }
  auto [first, last] = waiting_.equal_range(e.run_at);
  for (auto j = first; j != last; ++j) {
    if (j->second.row == e.row) {
      waiting_.erase(j);
      return true;
    }
  }
  return false;
}

void ready_index::promote(int64_t now) {
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    insert_ready(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
  }
}

std::optional<int64_t> ready_index::next_due() const {
  if (waiting_.empty())
    return std::nullopt;
  return waiting_.begin()->first;
}

std::optional<ready_entry> ready_index::pop_best(const std::vector<uint32_t>& types,
                                                 int32_t max_weight) {
  bucket* best = nullptr;
  dispatch_order before;
  for (auto t : types) {
    auto i = by_type_.find(t);
    if (i == by_type_.end())
      continue;
    for (auto* b : i->second) {
      if (b->jobs.empty() || b->weight > max_weight)
        continue;
      if (best == nullptr || before(*b->jobs.begin(), *best->jobs.begin()))
        best = b;
    }
  }
  if (best == nullptr)
    return std::nullopt;
  auto e = *best->jobs.begin();
  best->jobs.erase(best->jobs.begin());
  --ready_count_;
  return e;
}

}  // namespace ergon::actors
