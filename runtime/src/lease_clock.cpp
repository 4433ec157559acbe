#include "lease_clock.hpp"

#include <algorithm>

namespace ergon::runtime {

std::chrono::milliseconds lease_clock::margin() const noexcept {
  return std::min<std::chrono::milliseconds>(lease_time_ / 10, std::chrono::seconds(1));
}

lease_clock::time_point lease_clock::next_renewal(time_point now) const noexcept {
  auto due = confirmed_ + lease_time_ / 3;
  return due > now ? due : now + lease_time_ / 10;
}

}  // namespace ergon::runtime
