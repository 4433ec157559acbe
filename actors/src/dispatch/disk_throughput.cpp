#include "disk_throughput.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "ergon/storage/times.hpp"

namespace ergon::actors {

std::optional<io_totals> read_diskstats(const std::string& diskstats,
                                        const std::string& sys_block) {
  std::ifstream in{diskstats};
  if (!in)
    return std::nullopt;
  io_totals t;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    int64_t major = 0, minor = 0;
    std::string name;
    int64_t reads = 0, reads_merged = 0, sectors_read = 0, ms_reading = 0;
    int64_t writes = 0, writes_merged = 0, sectors_written = 0;
    if (!(fields >> major >> minor >> name >> reads >> reads_merged >> sectors_read >> ms_reading
          >> writes >> writes_merged >> sectors_written))
      continue;
    struct stat st;
    if (name.find('/') != std::string::npos
        || ::stat((sys_block + "/" + name + "/device").c_str(), &st) != 0)
      continue;
    t.read_bytes += sectors_read * 512;
    t.write_bytes += sectors_written * 512;
  }
  return t;
}

disk_throughput::disk_throughput(io_budget_options opts) : opts_(std::move(opts)) {
  if (!opts_.read_totals)
    opts_.read_totals = [] { return read_diskstats(); };
}

void disk_throughput::sample(int64_t now) {
  if (now < next_at_)
    return;
  next_at_ = storage::add_ms(now, opts_.sample_interval.count());
  std::optional<io_totals> totals;
  try {
    totals = opts_.read_totals();
  } catch (...) {
    return;  // a reader that throws skips the sample, like one that reads nothing
  }
  if (!totals)
    return;
  if (last_ && now > last_at_ && totals->read_bytes >= last_->read_bytes
      && totals->write_bytes >= last_->write_bytes) {
    double seconds = static_cast<double>(now - last_at_) / 1e3;
    double r = static_cast<double>(totals->read_bytes - last_->read_bytes) / seconds;
    double w = static_cast<double>(totals->write_bytes - last_->write_bytes) / seconds;
    double a = opts_.smoothing;
    read_rate_ = rated_ ? a * r + (1 - a) * read_rate_ : r;
    write_rate_ = rated_ ? a * w + (1 - a) * write_rate_ : w;
    rated_ = true;
  }
  // Counters that went back (a device removed) start a new baseline.
  last_ = totals;
  last_at_ = now;
}

}  // namespace ergon::actors
