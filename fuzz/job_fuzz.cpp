// Fuzzes job_builder, validate(job), validate(job_update) and the storage
// round trip of what they accept. The input is read front to back as a list
// of builder calls, then a job_update. Properties: an invalid job or update
// fails with invalid_argument naming one of the fields that break the
// documented limits (include/ergon/job.hpp); a valid job is inserted,
// read back unchanged, updated and claimed, all without undefined behaviour.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ergon/job_builder.hpp"
#include "ergon/storage/sqlite_db.hpp"
#include "ergon/storage/op/claim_jobs.hpp"
#include "ergon/storage/op/insert_jobs.hpp"
#include "ergon/storage/op/read_jobs.hpp"
#include "ergon/storage/op/savepoint.hpp"
#include "ergon/storage/op/update_pending.hpp"
#include "ergon/storage/schema.hpp"
#include "fuzz_target.hpp"

namespace {

using namespace ergon;
using ergon::fuzz::require;
using std::chrono::milliseconds;

constexpr int64_t t0 = 1'700'000'000'000;
// How far past t0 a claim may happen: ten thousand years.
constexpr int64_t clock_horizon_ms = int64_t{10'000} * 365 * 24 * 3'600'000;
constexpr int64_t i64_max = std::numeric_limits<int64_t>::max();
constexpr int64_t i64_min = std::numeric_limits<int64_t>::min();
constexpr int32_t i32_max = std::numeric_limits<int32_t>::max();
constexpr int32_t i32_min = std::numeric_limits<int32_t>::min();

// Values at and around every limit, so the fuzzer reaches them by index.
constexpr int64_t edge_i64[] = {0, 1, -1, i64_max, i64_min, i64_max - 1, i64_min + 1,
                                1'000, 300'000, int64_t{1} << 53, -(int64_t{1} << 53),
                                i32_max, i32_min, int64_t{100} * 365 * 24 * 3'600'000};
constexpr int32_t edge_i32[] = {0, 1, -1, i32_max, i32_min, max_weight, max_weight + 1,
                                max_retries_limit, max_retries_limit + 1};
constexpr double edge_f64[] = {0.0, -0.0, 1.0, 0.999999, 2.0, 10.0, 10.000001, 1000.0,
                               1000.001, -1.0, std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::denorm_min()};
constexpr size_t edge_sizes[] = {0, 1, 255, 256, 257, 4'096, 4'097};

// Reads the input front to back; past the end every value is zero.
class input_reader {
 public:
  input_reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool done() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  template <class T>
  T raw() {
    T v{};
    size_t n = std::min(sizeof(T), size_ - std::min(pos_, size_));
    std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }

  // A tag byte picks an edge value (even tags) or reads a raw one (odd).
  template <class T, size_t N>
  T pick(const T (&edges)[N]) {
    uint8_t tag = byte();
    return tag % 2 == 0 ? edges[(tag / 2) % N] : raw<T>();
  }
  int64_t i64() { return pick(edge_i64); }
  int32_t i32() { return pick(edge_i32); }
  double f64() { return pick(edge_f64); }

  size_t length(size_t max) {
    uint8_t tag = byte();
    return tag % 2 == 0 ? edge_sizes[(tag / 2) % std::size(edge_sizes)]
                        : raw<uint16_t>() % (max + 1);
  }
  std::string text(size_t max) {
    auto n = length(max);
    return std::string(n, static_cast<char>('a' + byte() % 26));
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Builder calls, by the input byte that selects them; `end` (and any value
// past it) ends the calls.
enum class call : uint8_t { payload, name, group, priority, weight, run_at, delay, ttl,
                            max_retries, backoff, timeout, heartbeat_increment,
                            backoff_policy, end };

// The same encoding, written: builds the seed inputs.
class input_writer {
 public:
  input_writer& op(call c) { return put(static_cast<uint8_t>(c)); }
  input_writer& edge(size_t index) { return put(static_cast<uint8_t>(index * 2)); }
  // A value read with raw<T>().
  template <class T>
  input_writer& raw(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  // A value read with a tag byte: i64(), i32(), f64().
  template <class T>
  input_writer& value(T v) {
    return put(1).raw(v);
  }
  input_writer& text(uint16_t n, char c) {
    put(1);
    bytes_.append(reinterpret_cast<const char*>(&n), sizeof n);
    return put(static_cast<uint8_t>(c - 'a'));
  }
  std::string done() const { return bytes_; }

 private:
  input_writer& put(uint8_t b) {
    bytes_ += static_cast<char>(b);
    return *this;
  }
  std::string bytes_;
};


// UTF-8 decoded by code point: each one must be in range, written in its
// shortest form, not a surrogate, and not a control character.
bool text_ok(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size())
      return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2)
        return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t shortest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < shortest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp < 0x20
        || (cp >= 0x7F && cp <= 0x9F))
      return false;
    i += n;
  }
  return true;
}

bool label_ok(const std::string& s) {
  return !s.empty() && s.size() <= max_type_bytes && text_ok(s);
}

bool in_range(double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

// The fields of `j` outside the limits documented in job.hpp, written
// independently of validate.cpp so that each checks the other.
std::set<std::string> bad_fields(const job& j, size_t max_payload) {
  std::set<std::string> bad;
  auto flag = [&](bool is_bad, const char* field) {
    if (is_bad)
      bad.insert(field);
  };
  flag(!label_ok(j.type), "type");
  flag(j.name && !label_ok(*j.name), "name");
  flag(j.group && !label_ok(*j.group), "group");
  flag(j.weight < 1 || j.weight > max_weight, "weight");
  flag(j.run_at_ms && *j.run_at_ms < 0, "run_at");
  flag(j.delay_ms < 0 || (j.run_at_ms && j.delay_ms != 0), "delay");
  flag(j.ttl_ms && *j.ttl_ms <= 0, "ttl");
  flag(j.max_retries < 0 || j.max_retries > max_retries_limit, "max_retries");
  flag(j.backoff.initial_ms < 0, "backoff.initial");
  flag(!in_range(j.backoff.multiplier, 1.0, 1000.0), "backoff.multiplier");
  flag(!in_range(j.backoff.randomization, 0.0, 10.0), "backoff.randomization");
  flag(static_cast<uint8_t>(j.backoff.kind) > 2, "backoff.kind");
  flag(j.backoff.max_ms < 0, "backoff.max");
  flag(j.timeout_ms <= 0, "timeout");
  flag(j.heartbeat_increment_ms <= 0, "heartbeat_increment");
  flag(max_payload != 0 && j.payload.size() > max_payload, "payload");
  return bad;
}

std::set<std::string> bad_fields(const job_update& u, size_t max_payload) {
  std::set<std::string> bad;
  if (!u.priority && !u.weight && !u.run_at_ms && !u.payload && !u.max_retries
      && !u.timeout_ms)
    bad.insert("update");
  if (u.weight && (*u.weight < 1 || *u.weight > max_weight))
    bad.insert("weight");
  if (u.run_at_ms && *u.run_at_ms < 0)
    bad.insert("run_at");
  if (u.max_retries && (*u.max_retries < 0 || *u.max_retries > max_retries_limit))
    bad.insert("max_retries");
  if (u.timeout_ms && *u.timeout_ms <= 0)
    bad.insert("timeout");
  if (u.payload && max_payload != 0 && u.payload->size() > max_payload)
    bad.insert("payload");
  if (u.keep_checkpoint && !u.payload)
    bad.insert("keep_checkpoint");
  return bad;
}

// The first name in `fields`, for messages ("" if there is none).
std::string first(const std::set<std::string>& fields) {
  return fields.empty() ? std::string{} : *fields.begin();
}

// A failure must be invalid_argument naming one of the bad fields.
void require_rejected(const status& st, const std::set<std::string>& bad,
                      const char* what) {
  require(!bad.empty(), std::string{what} + " rejected valid input: " + st.to_string());
  require(st.code() == error::invalid_argument,
          std::string{what} + " failed with a code other than invalid_argument: "
            + st.to_string());
  require(bad.count(st.field()) == 1,
          std::string{what} + " named field '" + st.field() + "', not a bad one: "
            + st.to_string());
  require(st.message().find("'" + st.field() + "'") != std::string::npos,
          std::string{what} + "'s message does not name the field: " + st.to_string());
}

// Applies builder calls from `in` to both the builder and `want`.
void read_builder_calls(input_reader& in, job_builder& b, job& want) {
  for (int calls = 0; calls < 24 && !in.done(); ++calls) {
    switch (static_cast<call>(in.byte() % (static_cast<int>(call::end) + 1))) {
      case call::payload: want.payload = in.text(8'192); b.payload(want.payload); break;
      case call::name: want.name = in.text(300); b.name(*want.name); break;
      case call::group: want.group = in.text(300); b.group(*want.group); break;
      case call::priority: want.priority = in.i32(); b.priority(want.priority); break;
      case call::weight: want.weight = in.i32(); b.weight(want.weight); break;
      case call::run_at: want.run_at_ms = in.i64(); b.run_at(*want.run_at_ms); break;
      case call::delay: want.delay_ms = in.i64(); b.delay(milliseconds{want.delay_ms}); break;
      case call::ttl: want.ttl_ms = in.i64(); b.ttl(milliseconds{*want.ttl_ms}); break;
      case call::max_retries: want.max_retries = in.i32(); b.max_retries(want.max_retries); break;
      case call::backoff:
        want.backoff = {in.i64(), in.f64(), in.f64()};
        b.backoff(milliseconds{want.backoff.initial_ms}, want.backoff.multiplier,
                  want.backoff.randomization);
        break;
      case call::timeout: want.timeout_ms = in.i64(); b.timeout(milliseconds{want.timeout_ms}); break;
      case call::backoff_policy:
        want.backoff = {in.i64(), in.f64(), in.f64(), static_cast<backoff_kind>(in.byte() % 4),
                        in.i64()};
        b.backoff(want.backoff);
        break;
      case call::heartbeat_increment:
        want.heartbeat_increment_ms = in.i64();
        b.heartbeat_increment(milliseconds{want.heartbeat_increment_ms});
        break;
      default: return;  // ends the builder calls; the update follows
    }
  }
}

job_update read_update(input_reader& in) {
  job_update u;
  uint8_t which = in.byte();
  if (which & 1) u.priority = in.i32();
  if (which & 2) u.weight = in.i32();
  if (which & 4) u.run_at_ms = in.i64();
  if (which & 8) u.payload = in.text(8'192);
  if (which & 16) u.max_retries = in.i32();
  if (which & 32) u.timeout_ms = in.i64();
  u.keep_checkpoint = (which & 64) != 0;
  return u;
}

bool same_fields(const job& a, const job& b) {
  return a.type == b.type && a.payload == b.payload && a.name == b.name
         && a.group == b.group && a.priority == b.priority && a.weight == b.weight
         && a.run_at_ms == b.run_at_ms && a.delay_ms == b.delay_ms && a.ttl_ms == b.ttl_ms
         && a.max_retries == b.max_retries && a.backoff.initial_ms == b.backoff.initial_ms
         && a.backoff.multiplier == b.backoff.multiplier
         && a.backoff.randomization == b.backoff.randomization
         && a.backoff.kind == b.backoff.kind && a.backoff.max_ms == b.backoff.max_ms
         && a.timeout_ms == b.timeout_ms
         && a.heartbeat_increment_ms == b.heartbeat_increment_ms;
}

storage::db& database() {
  static std::unique_ptr<storage::db> d = [] {
    auto opened = storage::sqlite_db::open(":memory:", storage::sqlite_options{});
    require(opened.has_value(), "open: " + opened.error().to_string());
    auto st = storage::migrate(**opened);
    require(st.ok(), "migrate: " + st.to_string());
    return std::move(*opened);
  }();
  return *d;
}

// a + b, or nothing if that overflows int64.
std::optional<int64_t> checked_sum(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    return std::nullopt;
  return sum;
}

job_info read_back(storage::db& d, const job_id& id) {
  auto info = storage::read_job(d, id);
  require(info.has_value(), "read_job: " + info.error().to_string());
  return std::move(*info);
}

// Inserts `j`, checks it reads back as submitted, then updates and claims it.
// Everything is rolled back at the end so the database stays small.
void round_trip(const job& j, const job_update& u, size_t max_payload, int64_t now) {
  auto& d = database();
  storage::savepoint sp{d};
  require(sp.begin_status().ok(), "savepoint: " + sp.begin_status().to_string());
  auto keys = storage::insert_jobs(d, {{j}, max_payload, 7}, now);
  auto bad = bad_fields(j, max_payload);
  // Where now + delay or run_at + ttl overflows, rejecting the field is fine,
  // and an accepted job is only checked for the absence of UB.
  auto run_at = j.run_at_ms ? j.run_at_ms : checked_sum(now, j.delay_ms);
  auto deadline = run_at && j.ttl_ms ? checked_sum(*run_at, *j.ttl_ms) : std::nullopt;
  // job.hpp: a deadline at never_ms is no deadline (found by this target).
  bool no_deadline = deadline == never_ms;
  if (!keys) {
    auto rejectable = bad;
    if (!run_at)
      rejectable.insert("delay");
    if (j.ttl_ms && !deadline)
      rejectable.insert({"run_at", "delay", "ttl"});
    require_rejected(keys.error(), rejectable, "insert_jobs");
    return;
  }
  require(bad.empty(), "insert_jobs accepted bad fields, first: " + first(bad));
  auto info = read_back(d, keys->added.front().id);
  require(info.type == j.type && info.payload == j.payload && info.name == j.name
            && info.group == j.group && info.priority == j.priority
            && info.weight == j.weight && info.max_retries == j.max_retries
            && info.backoff.initial_ms == j.backoff.initial_ms
            && info.backoff.multiplier == j.backoff.multiplier
            && info.backoff.randomization == j.backoff.randomization
            && info.backoff.kind == j.backoff.kind && info.backoff.max_ms == j.backoff.max_ms
            && info.timeout_ms == j.timeout_ms
            && info.heartbeat_increment_ms == j.heartbeat_increment_ms
            && info.status == job_status::pending && info.tries == 0
            && info.added_at_ms == now,
          "the stored job differs from the submitted one");
  if (run_at)
    require(info.run_at_ms == *run_at, "stored run_at is not run_at or now + delay");
  if (deadline)
    require(no_deadline ? !info.deadline_ms : info.deadline_ms == deadline,
            "stored deadline " + std::to_string(info.deadline_ms.value_or(-1))
              + " is not run_at + ttl = " + std::to_string(*deadline));
  if (!j.ttl_ms)
    require(!info.deadline_ms, "a job without ttl got a deadline");

  auto changed = storage::update_pending(d, {info.id, u, max_payload}, now + 1);
  auto bad_update = bad_fields(u, max_payload);
  auto after_deadline = u.run_at_ms && info.deadline_ms && *u.run_at_ms > *info.deadline_ms;
  if (after_deadline)
    bad_update.insert("run_at");
  if (!changed) {
    require_rejected(changed.error(), bad_update, "update_pending");
  } else {
    require(bad_update.empty(), "update_pending accepted bad fields, first: "
                                  + first(bad_update));
    auto updated = read_back(d, info.id);
    require(updated.priority == u.priority.value_or(info.priority)
              && updated.weight == u.weight.value_or(info.weight)
              && updated.run_at_ms == u.run_at_ms.value_or(info.run_at_ms)
              && updated.payload == u.payload.value_or(info.payload)
              && updated.max_retries == u.max_retries.value_or(info.max_retries)
              && updated.timeout_ms == u.timeout_ms.value_or(info.timeout_ms),
            "the updated job differs from the update");
    info = updated;
  }

  // Claim when due, if a real clock can get there; the attempt must expire
  // after it starts.
  if (info.run_at_ms > now + clock_horizon_ms)
    return;
  int64_t start = std::max(now + 2, info.run_at_ms);
  auto claimed = storage::claim_jobs(d, {{{keys->added.front().row, 1}}}, start);
  require(claimed.has_value(), "claim_jobs: " + claimed.error().to_string());
  if (info.deadline_ms && *info.deadline_ms < start) {
    require(claimed->claimed.empty(), "claimed a job past its deadline");
    return;
  }
  require(claimed->claimed.size() == 1, "a due job was not claimed");
  auto& c = claimed->claimed.front();
  require(c.expires_at > start, "the attempt expires at " + std::to_string(c.expires_at)
                                  + ", not after its start " + std::to_string(start));
  if (auto want = checked_sum(start, info.timeout_ms))
    require(c.expires_at == *want, "expires_at is not start + timeout");
}

std::vector<std::string> seeds() {
  // Each starts with now (raw), the payload limit (edge 0: none) and the type.
  auto minimal = input_writer{}.raw<uint32_t>(0).edge(0).text(5, 'j').done();
  auto typical = input_writer{}
                   .raw<uint32_t>(1'000).edge(0).text(10, 's')
                   .op(call::payload).text(100, 'p')
                   .op(call::priority).value<int32_t>(10)
                   .op(call::max_retries).value<int32_t>(5)
                   .op(call::timeout).value<int64_t>(30'000)
                   .op(call::group).text(6, 't')
                   .op(call::end)
                   .raw<uint8_t>(1 | 4 | 8).value<int32_t>(3).value<int64_t>(t0)
                   .text(20, 'q')
                   .done();
  auto extreme = input_writer{}
                   .raw<uint32_t>(0).edge(0).text(1, 'x')
                   .op(call::delay).edge(3)   // milliseconds::max()
                   .op(call::ttl).edge(3)
                   .op(call::timeout).edge(3)
                   .op(call::end)
                   .raw<uint8_t>(4 | 32).edge(3).edge(3)
                   .done();
  auto limits = input_writer{}
                  .raw<uint32_t>(0).value<uint16_t>(64).text(256, 'l')
                  .op(call::payload).text(65, 'p')
                  .op(call::weight).edge(5)
                  .op(call::backoff).edge(0).edge(7).edge(5)
                  .op(call::run_at).edge(0)
                  .op(call::delay).edge(2)
                  .done();
  return {minimal, typical, extreme, limits};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ergon::fuzz::write_seeds_if_asked(seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  input_reader in{data, size};
  int64_t now = t0 + in.raw<uint32_t>();
  size_t max_payload = in.length(8'192);
  job want;
  want.type = in.text(300);
  job_builder b{want.type};
  read_builder_calls(in, b, want);
  job_update u = read_update(in);

  auto built = b.build();
  auto bad = bad_fields(want, 0);
  if (!built) {
    require_rejected(built.error(), bad, "build");
  } else {
    require(bad.empty(), "build accepted bad fields, first: " + first(bad));
    require(same_fields(*built, want), "build changed a field");
    require(validate(*built).ok(), "validate rejects what build accepted");
  }

  auto checked = validate(u, max_payload);
  auto bad_update = bad_fields(u, max_payload);
  if (!checked)
    require_rejected(checked, bad_update, "validate(job_update)");
  else
    require(bad_update.empty(), "validate(job_update) accepted bad fields, first: "
                                  + first(bad_update));

  if (built)
    round_trip(*built, u, max_payload, now);
  return 0;
}
