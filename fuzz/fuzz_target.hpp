// What every fuzz target shares: a failed property aborts with a message (so
// libFuzzer saves the input), and seed inputs are written out on request.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ergon::fuzz {

/// Aborts with `what` unless `ok`: a broken property is a finding.
inline void require(bool ok, const std::string& what) {
  if (ok)
    return;
  std::fprintf(stderr, "fuzz property failed: %s\n", what.c_str());
  std::abort();
}

/// When ERGON_FUZZ_WRITE_SEEDS names a directory, writes `seeds` there as
/// seed-NN files and exits; the build calls each target this way so the seed
/// corpus is generated from valid messages rather than committed as binaries.
inline void write_seeds_if_asked(const std::vector<std::string>& seeds) {
  const char* dir = std::getenv("ERGON_FUZZ_WRITE_SEEDS");
  if (dir == nullptr)
    return;
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < seeds.size(); ++i) {
    auto name = std::to_string(i);
    name.insert(0, 3 - std::min<size_t>(3, name.size()), '0');
    std::ofstream out{std::filesystem::path{dir} / ("seed-" + name), std::ios::binary};
    out.write(seeds[i].data(), static_cast<std::streamsize>(seeds[i].size()));
  }
  std::exit(0);
}

}  // namespace ergon::fuzz
