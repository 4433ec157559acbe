#include "ergon/clock.hpp"

#include "ergon/actors/listener_set.hpp"
#include "ergon/storage/times.hpp"

namespace ergon {

struct manual_clock::listeners : actors::listener_set<> {};

int64_t system_clock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

int64_t manual_clock::now_ms() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return now_;
}

manual_clock::manual_clock(int64_t start_ms)
    : now_(start_ms), listeners_(std::make_unique<listeners>()) {}

manual_clock::~manual_clock() = default;

uint64_t manual_clock::subscribe(listener f) {
  return listeners_->add(std::move(f));
}

void manual_clock::unsubscribe(uint64_t handle) {
  listeners_->remove(handle);
}

void manual_clock::advance(std::chrono::milliseconds d) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    now_ = storage::add_ms(now_, d.count() > 0 ? d.count() : 0);
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
  listeners_->take_snapshot().each([](uint64_t, const listener& f, const bool&) { f(); });
}

std::shared_ptr<clock> default_clock() {
  static auto instance = std::make_shared<system_clock>();
  return instance;
}

}  // namespace ergon
