#include "idempotency_keys.hpp"

#include <cstring>
#include <unordered_map>

#include "in_batch.hpp"
#include "job_rows.hpp"

namespace ergon::storage::idempotency {
namespace {

// Both engines: an expired row counts as none, and a new record replaces it.
constexpr const char* select_live =
  "SELECT job, fingerprint FROM idempotency_keys WHERE key = ?1 AND expires_at > ?2";
constexpr const char* upsert =
  "INSERT INTO idempotency_keys (key, job, fingerprint, expires_at) VALUES (?1, ?2, ?3, ?4) "
  "ON CONFLICT (key) DO UPDATE SET job = excluded.job, fingerprint = excluded.fingerprint, "
  "expires_at = excluded.expires_at";

class fnv1a {
 public:
  void bytes(const void* p, size_t n) {
    auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= b[i];
      h_ *= 1099511628211ull;
    }
  }
  void add(int64_t v) { bytes(&v, sizeof v); }
  void add(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bytes(&bits, sizeof bits);
  }
  void add(const std::string& s) {
    add(static_cast<int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  template <class T>
  void add(const std::optional<T>& v) {
    add(int64_t{v.has_value()});
    if (v)
      add(*v);
  }
  int64_t value() const { return static_cast<int64_t>(h_); }

 private:
  uint64_t h_ = 14695981039346656037ull;
};

}  // namespace

int64_t fingerprint(const job& j) {
  fnv1a f;
  f.add(j.type);
  f.add(j.payload);
  f.add(j.name);
  f.add(j.group);
  f.add(int64_t{j.priority});
  f.add(int64_t{j.weight});
  f.add(j.run_at_ms);
  f.add(j.delay_ms);
  f.add(j.ttl_ms);
  f.add(int64_t{j.max_retries});
  f.add(j.backoff.initial_ms);
  f.add(j.backoff.multiplier);
  f.add(j.backoff.randomization);
  // Only when set: keys taken before these fields existed keep matching.
  if (j.backoff.kind != backoff_kind::exponential || j.backoff.max_ms != 0) {
    f.add(int64_t{static_cast<int64_t>(j.backoff.kind)});
    f.add(j.backoff.max_ms);
  }
  f.add(j.timeout_ms);
  f.add(j.heartbeat_increment_ms);
  f.add(j.unique_key);
  f.add(int64_t{static_cast<uint8_t>(j.on_duplicate)});
  f.add(j.unique_hold_ms);
  f.add(j.result_ttl_ms);
  f.add(int64_t{j.expected_io.has_value()});
  if (j.expected_io) {
    f.add(j.expected_io->read_bytes);
    f.add(j.expected_io->write_bytes);
  }
  // Likewise only when set.
  if (!j.depends_on.empty() || !j.depends_on_batch.empty()
      || j.on_dependency_failure != dependency_failure::cancel) {
    f.add(static_cast<int64_t>(j.depends_on.size()));
    for (auto& id : j.depends_on) {
      auto b = id.bytes();
      f.bytes(b.data(), b.size());
    }
    f.add(static_cast<int64_t>(j.depends_on_batch.size()));
    for (auto p : j.depends_on_batch)
      f.add(int64_t{p});
    f.add(int64_t{static_cast<uint8_t>(j.on_dependency_failure)});
  }
  // The same for a ttl from the first attempt, and for tags.
  if (j.ttl_from != ttl_start::run_at)
    f.add(int64_t{static_cast<uint8_t>(j.ttl_from)});
  if (j.raise_holder_priority)
    f.add(int64_t{0x52});  // marks the flag: no other field adds a lone constant here
  if (!j.tags.empty()) {
    f.add(static_cast<int64_t>(j.tags.size()));
    for (auto& [k, v] : j.tags) {
      f.add(k);
      f.add(v);
    }
  }
  return f.value();
}

result<sorted> sort_out(db& d, const std::vector<job>& jobs, int64_t now_ms) {
  sorted out;
  out.what.assign(jobs.size(), sorted::kind::fresh);
  out.known_id.resize(jobs.size());
  out.same_as.assign(jobs.size(), 0);
  out.fingerprints.assign(jobs.size(), 0);
  std::unordered_map<std::string, size_t> first;  // key -> its first job in the batch
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].idempotency_key)
      continue;
    auto& key = *jobs[i].idempotency_key;
    out.fingerprints[i] = fingerprint(jobs[i]);
    auto [at, inserted] = first.emplace(key, i);
    if (!inserted) {
      auto earlier = at->second;
      if (out.fingerprints[earlier] != out.fingerprints[i])
        return in_batch({error::invalid_argument,
                         "idempotency key '" + key + "' is also job " + std::to_string(earlier)
                           + "'s, which differs from it",
                         "idempotency_key"},
                        i, jobs.size());
      out.what[i] = sorted::kind::same_as;
      out.same_as[i] = earlier;
      continue;
    }
    auto s = d.prepare(select_live);
    if (!s)
      return s.error();
    auto& q = **s;
    q.bind_text(1, key);
    q.bind(2, now_ms);
    if (!q.step()) {
      if (!q.step_status())
        return q.step_status();
      continue;
    }
    auto id = rows::column_id(q, 0);
    auto stored = q.column_int(1);
    q.reset();
    if (stored != out.fingerprints[i])
      return in_batch({error::already_exists,
                       "idempotency key '" + key + "' was taken by job " + id.to_string()
                         + ", which differs from this one",
                       "idempotency_key"},
                      i, jobs.size());
    out.what[i] = sorted::kind::known;
    out.known_id[i] = id;
  }
  return out;
}

status record(db& d, const std::string& key, const job_id& id, int64_t fingerprint,
              int64_t expires_at_ms) {
  auto s = d.prepare(upsert);
  if (!s)
    return s.error();
  auto& q = **s;
  q.bind_text(1, key);
  rows::bind_id(q, 2, id);
  q.bind(3, fingerprint);
  q.bind(4, expires_at_ms);
  return d.run(q);
}

}  // namespace ergon::storage::idempotency
