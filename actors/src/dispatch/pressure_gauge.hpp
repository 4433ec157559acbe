// pressure_gauge: reads the admission pressure sources and combines them by
// maximum. A source that throws or returns NaN is skipped for that reading,
// counted, and logged to stderr the first time. Internal to the dispatcher.
#pragma once

#include <cstdint>
#include <vector>

#include "ergon/scheduling.hpp"

namespace ergon::actors {

class pressure_gauge {
 public:
  explicit pressure_gauge(std::vector<pressure_source> sources);

  /// Reads every source; returns the maximum of the good readings, each
  /// clamped to [0, 1] (0 with none).
  double read();

  /// Each source's last good reading.
  const std::vector<pressure_reading>& readings() const noexcept { return readings_; }
  int64_t errors() const noexcept { return errors_; }

 private:
  std::vector<pressure_source> sources_;
  std::vector<pressure_reading> readings_;
  std::vector<bool> logged_;
  int64_t errors_ = 0;
};

}  // namespace ergon::actors
