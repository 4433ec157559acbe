// listener_set: callbacks that can be removed while they may be running.
// Internal; event subscribers and manual_clock listeners share it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace ergon::actors {

template <class... Args>
class listener_set {
 public:
  using callback = std::function<void(Args...)>;

 private:
  struct entry {
    std::recursive_mutex running;  // held while the callback runs
    bool active = true;
    callback f;
  };

 public:

  uint64_t add(callback f) {
    auto e = std::make_shared<entry>();
    e->f = std::move(f);
    std::lock_guard<std::mutex> guard{mtx_};
    auto handle = next_++;
    entries_.emplace(handle, std::move(e));
    count_.store(entries_.size(), std::memory_order_release);
    return handle;
  }

  /// After remove returns, the callback is not running and is never called
  /// again, so its captures may be destroyed. A callback may remove itself
  /// (the lock is recursive); removing it again from another thread then
  /// still waits for that call to return. Unknown handles are ignored.
  void remove(uint64_t handle) {
    std::shared_ptr<entry> e;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      for (auto i = removed_.begin(); i != removed_.end();)
        i = i->second.expired() ? removed_.erase(i) : std::next(i);
      auto i = entries_.find(handle);
      if (i != entries_.end()) {
        e = std::move(i->second);
        entries_.erase(i);
        removed_.emplace(handle, e);  // alive only while a call holds it
        count_.store(entries_.size(), std::memory_order_release);
      } else if (auto gone = removed_.find(handle); gone != removed_.end()) {
        e = gone->second.lock();
      }
    }
    if (!e)
      return;
    std::lock_guard<std::recursive_mutex> running{e->running};
    e->active = false;
  }

  bool empty() const noexcept { return count_.load(std::memory_order_acquire) == 0; }

  /// The registered callbacks, in the order they were added.
  class snapshot {
   public:
    /// Calls `visit(handle, f, active)` for each callback still registered,
    /// while no other thread can remove it. `active` turns false if `f`
    /// removes itself: check it before each further call. Not under the
    /// registry lock, so a callback may add or remove callbacks.
    template <class Visit>
    void each(Visit&& visit) const {
      for (auto& [handle, e] : entries_) {
        std::lock_guard<std::recursive_mutex> running{e->running};
        if (e->active)
          visit(handle, e->f, e->active);
      }
    }

   private:
    friend class listener_set;
    std::vector<std::pair<uint64_t, std::shared_ptr<entry>>> entries_;
  };

  snapshot take_snapshot() const {
    snapshot s;
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : entries_)
      s.entries_.emplace_back(kv.first, kv.second);
    return s;
  }

 private:
  mutable std::mutex mtx_;
  uint64_t next_ = 1;
  std::map<uint64_t, std::shared_ptr<entry>> entries_;
  // Removed entries that a delivery in progress may still be calling.
  std::map<uint64_t, std::weak_ptr<entry>> removed_;
  std::atomic<size_t> count_{0};
};

}  // namespace ergon::actors
