// Shared pieces of the benchmark programs: timing, percentiles, RSS, output.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <libpq-fe.h>
#include <sys/resource.h>
#include <unistd.h>

namespace ergon::bench {

using steady = std::chrono::steady_clock;

inline double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

/// Peak resident set size of this process in MiB (VmHWM).
inline double peak_rss_mb() {
  std::ifstream status{"/proc/self/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

/// CPU time and context switches of this whole process (every thread) over
/// a measured span, per job. Steadier than wall-clock rates on a shared
/// machine: a slow neighbour stretches the run but not the work per job.
class cpu_meter {
 public:
  cpu_meter() { ::getrusage(RUSAGE_SELF, &start_); }

  /// "user_us=... sys_us=... csw=..." per job since construction.
  std::string per_job(double jobs) const {
    rusage now{};
    ::getrusage(RUSAGE_SELF, &now);
    auto us = [](const timeval& a, const timeval& b) {
      return static_cast<double>(b.tv_sec - a.tv_sec) * 1e6 + static_cast<double>(b.tv_usec - a.tv_usec);
    };
    auto csw = static_cast<double>((now.ru_nvcsw - start_.ru_nvcsw) + (now.ru_nivcsw - start_.ru_nivcsw));
    char buf[128];
    std::snprintf(buf, sizeof buf, "user_us=%.2f sys_us=%.2f csw=%.3f",
                  us(start_.ru_utime, now.ru_utime) / jobs, us(start_.ru_stime, now.ru_stime) / jobs,
                  csw / jobs);
    return buf;
  }

 private:
  rusage start_{};
};

/// The p-th percentile (0..100) of `samples`, which it sorts.
inline double percentile(std::vector<double>& samples, double p) {
  if (samples.empty())
    return 0;
  std::sort(samples.begin(), samples.end());
  auto idx = static_cast<size_t>(p / 100.0 * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(idx, samples.size() - 1)];
}

/// One result line: printed as text, or as a JSON object with --json.
struct line {
  std::string workload;
  double jobs_per_s = 0;
  double p50_ms = -1;
  double p99_ms = -1;
  double rss_mb = 0;
  std::string extra;  // free-form "key=value ..." (no quotes)

  void print(bool json) const {
    if (json) {
      std::printf("{\"system\":\"ergon\",\"workload\":\"%s\",\"jobs_per_s\":%.0f", workload.c_str(),
                  jobs_per_s);
      if (p50_ms >= 0)
        std::printf(",\"p50_ms\":%.3f,\"p99_ms\":%.3f", p50_ms, p99_ms);
      std::printf(",\"rss_mb\":%.1f", rss_mb);
      if (!extra.empty())
        std::printf(",\"extra\":\"%s\"", extra.c_str());
      std::printf("}\n");
    } else {
      std::printf("ergon %s jobs_per_s=%.0f", workload.c_str(), jobs_per_s);
      if (p50_ms >= 0)
        std::printf(" p50_ms=%.3f p99_ms=%.3f", p50_ms, p99_ms);
      std::printf(" rss_mb=%.1f%s%s\n", rss_mb, extra.empty() ? "" : " ", extra.c_str());
    }
    std::fflush(stdout);
  }
};

/// The PostgreSQL server and database the benchmarks run on (--db
/// postgresql://...); empty: SQLite files.
inline std::string& postgres_base() {
  static std::string uri;
  return uri;
}

/// A fresh directory for one run's database, removed afterwards.
class temp_dir {
 public:
  explicit temp_dir(const std::string& tag) : tag_(tag) {
    path_ = std::filesystem::temp_directory_path()
            / ("ergon-bench-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

  /// Where the run's queue lives: the file `name` here, or on PostgreSQL a
  /// fresh schema named after the run.
  std::string location(const std::string& name) const {
    const auto& base = postgres_base();
    if (base.empty())
      return file(name);
    std::string schema = "bench_";
    for (char c : tag_)
      schema += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
    PGconn* c = PQconnectdb(base.c_str());
    PGresult* r = PQexec(c, ("DROP SCHEMA IF EXISTS " + schema + " CASCADE").c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
      std::fprintf(stderr, "dropping %s: %s", schema.c_str(), PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return base + (base.find('?') == std::string::npos ? "?" : "&") + "schema=" + schema;
  }

 private:
  std::string tag_;
  std::filesystem::path path_;
};

/// A payload of about 100 bytes, as benchmarks.md specifies.
inline std::string payload_100() {
  return std::string(100, 'x');
}

}  // namespace ergon::bench
