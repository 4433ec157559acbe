#include "ergon/storage/op/add_finished_counts.hpp"

namespace ergon::storage {
namespace {

constexpr const char* upsert_count =
  "INSERT INTO finished_counts (type, status, count) VALUES (?1, ?2, ?3) "
  "ON CONFLICT (type, status) DO UPDATE SET count = finished_counts.count + excluded.count";

bool is_finished(size_t status) {
  return is_final(static_cast<job_status>(status));
}

}  // namespace

status add_finished_counts(db& d, const count_delta& delta) {
  for (auto& [type, changes] : delta.by_type()) {
    for (size_t i = 0; i < changes.size(); ++i) {
      if (changes[i] == 0 || !is_finished(i))
        continue;
      auto prepared = d.prepare(upsert_count);
      if (!prepared)
        return prepared.error();
      auto& s = **prepared;
      s.bind_text(1, type);
      s.bind(2, static_cast<int64_t>(i));  // the frozen job_status value
      s.bind(3, changes[i]);
      if (auto st = d.send(s); !st)
        return st;
    }
  }
  return {};
}

}  // namespace ergon::storage
