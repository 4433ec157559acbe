#include "ergon/actors/final_watch.hpp"

#include <algorithm>

namespace ergon::actors {

uint64_t final_watch::add(int64_t row, callback f) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto handle = next_++;
  by_row_[row].push_back({handle, std::move(f)});
  row_of_.emplace(handle, row);
  count_.store(row_of_.size(), std::memory_order_release);
  return handle;
}

void final_watch::remove(uint64_t handle) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = row_of_.find(handle);
  if (i == row_of_.end())
    return;
  auto& waiters = by_row_[i->second];
  waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                               [&](const waiter& w) { return w.handle == handle; }),
                waiters.end());
  if (waiters.empty())
    by_row_.erase(i->second);
  row_of_.erase(i);
  count_.store(row_of_.size(), std::memory_order_release);
}

void final_watch::finished(int64_t row) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = by_row_.find(row);
  if (i == by_row_.end())
    return;
  auto waiters = std::move(i->second);
  by_row_.erase(i);
  for (auto& w : waiters) {
    row_of_.erase(w.handle);
    w.f();
  }
  count_.store(row_of_.size(), std::memory_order_release);
}

}  // namespace ergon::actors
