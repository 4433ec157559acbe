// disk_throughput: the I/O budget's sampler. Every sample_interval (on the
// queue's clock) it reads the disks' cumulative byte counts and smooths the
// rate since the last sample (EWMA). Internal to the dispatcher, which calls
// sample() from its timer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ergon/scheduling.hpp"

namespace ergon::actors {

/// Bytes read and written by the whole disks listed in `diskstats` (the
/// /proc/diskstats format, 512-byte sectors), where a whole disk is a name
/// with a `device` entry under `sys_block` (partitions, loop, RAM and
/// device-mapper devices are not counted: they repeat a disk's I/O or do
/// none). Nothing if the file can't be read.
std::optional<io_totals> read_diskstats(const std::string& diskstats = "/proc/diskstats",
                                        const std::string& sys_block = "/sys/block");

class disk_throughput {
 public:
  /// `opts.read_totals` empty: read_diskstats().
  explicit disk_throughput(io_budget_options opts);

  /// Takes a sample if `now` is at or past next_sample_at().
  void sample(int64_t now);
  int64_t next_sample_at() const noexcept { return next_at_; }

  /// Smoothed bytes per second; 0 until two samples were taken.
  double read_rate() const noexcept { return read_rate_; }
  double write_rate() const noexcept { return write_rate_; }

 private:
  io_budget_options opts_;
  std::optional<io_totals> last_;
  int64_t last_at_ = 0;
  int64_t next_at_ = 0;
  bool rated_ = false;
  double read_rate_ = 0;
  double write_rate_ = 0;
};

}  // namespace ergon::actors
