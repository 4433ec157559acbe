#include "ergon/clock.hpp"

#include <vector>

namespace ergon {

int64_t system_clock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

int64_t manual_clock::now_ms() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return now_;
}

uint64_t manual_clock::subscribe(listener f) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto handle = next_handle_++;
  listeners_.emplace(handle, std::move(f));
  return handle;
}

void manual_clock::unsubscribe(uint64_t handle) {
  std::lock_guard<std::mutex> guard{mtx_};
  listeners_.erase(handle);
}

void manual_clock::advance(std::chrono::milliseconds d) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    now_ += d.count() > 0 ? d.count() : 0;
  }
  notify();
}

void manual_clock::set(int64_t ms) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    now_ = ms;
  }
  notify();
}

void manual_clock::notify() {
  // Copy first: a listener may unsubscribe while we iterate.
  std::vector<listener> fs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : listeners_)
      fs.push_back(kv.second);
  }
  for (auto& f : fs)
    f();
}

std::shared_ptr<clock> default_clock() {
  static auto instance = std::make_shared<system_clock>();
  return instance;
}

}  // namespace ergon
