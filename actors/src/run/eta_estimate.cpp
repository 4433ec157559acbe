#include "ergon/actors/eta_estimate.hpp"

#include <cmath>

#include "ergon/job.hpp"

namespace ergon::actors {

std::optional<int64_t> eta_estimate::add(int64_t now_ms, int64_t done, int64_t total) {
  if (!samples_.empty() && (done < samples_.back().second || now_ms < samples_.back().first))
    samples_.clear();
  samples_.emplace_back(now_ms, done);
  while (samples_.size() > max_samples
         || (samples_.size() > 2 && samples_.front().first < now_ms - window_ms))
    samples_.pop_front();
  if (total <= 0)
    return std::nullopt;
  if (done >= total)
    return now_ms;
  auto [t0, d0] = samples_.front();
  double dt = static_cast<double>(now_ms - t0);
  double dd = static_cast<double>(done - d0);
  if (dt <= 0 || dd <= 0)
    return std::nullopt;
  double left_ms = std::ceil(static_cast<double>(total - done) * dt / dd);
  if (!(left_ms < static_cast<double>(never_ms - now_ms)))
    return never_ms;
  return now_ms + static_cast<int64_t>(left_ms);
}

}  // namespace ergon::actors
