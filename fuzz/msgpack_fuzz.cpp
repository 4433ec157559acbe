// Fuzzes ergon::unpack<T> (include/ergon/msgpack.hpp) on arbitrary
// bytes. The first input byte picks T, the rest is the payload. Properties:
// unpack never throws or crashes; it fails with invalid_argument naming
// "payload"; a value it accepts packs and unpacks back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ergon/msgpack.hpp"
#include "fuzz_target.hpp"

namespace {

// A typical payload struct: every field kind a job payload tends to have.
struct email {
  std::string to;
  int64_t attempt = 0;
  std::vector<int32_t> codes;
  std::map<std::string, std::string> headers;
  std::optional<std::string> reply_to;
  bool urgent = false;
  double score = 0;
  MSGPACK_DEFINE(to, attempt, codes, headers, reply_to, urgent, score);
};

// Nested structs, as arrays and as maps keyed by field name.
struct batch {
  int32_t version = 1;
  std::vector<email> items;
  std::optional<email> first;
  MSGPACK_DEFINE(version, items, first);
};

struct settings {
  std::string name;
  std::vector<std::string> tags;
  std::map<std::string, int64_t> limits;
  std::optional<int32_t> retries;
  MSGPACK_DEFINE_MAP(name, tags, limits, retries);
};

using pair_tuple = std::tuple<int32_t, std::string>;

template <class T>
void check(std::string_view bytes) {
  ergon::result<T> value = ergon::unpack<T>(bytes);
  if (!value) {
    auto st = value.error();
    ergon::fuzz::require(st.code() == ergon::error::invalid_argument
                           && st.field() == "payload",
                         "unpack failed without naming payload: " + st.to_string());
    return;
  }
  auto packed = ergon::pack(*value);
  auto again = ergon::unpack<T>(packed);
  ergon::fuzz::require(again.has_value(), "a packed value does not unpack: "
                                            + again.error().to_string());
  ergon::fuzz::require(ergon::pack(*again) == packed, "pack/unpack is not stable");
}

template <class T>
std::string seed(uint8_t selector, const T& value) {
  return static_cast<char>(selector) + ergon::pack(value);
}

email sample_email() {
  return {"a@example.org", 2, {250, 421}, {{"X-Id", "7"}}, "b@example.org", true, 0.5};
}

std::vector<std::string> seeds() {
  auto e = sample_email();
  return {seed(0, e),
          seed(0, email{}),
          seed(1, batch{2, {e, e}, e}),
          seed(2, settings{"s", {"a", "b"}, {{"max", 10}}, 3}),
          seed(2, settings{}),
          seed(3, std::string{"text"}),
          seed(4, int32_t{-5}),
          seed(5, 1.5),
          seed(6, std::vector<std::string>{"x", "yz"}),
          seed(7, std::map<std::string, int64_t>{{"k", 1}}),
          seed(8, pair_tuple{1, "one"}),
          seed(9, std::optional<int64_t>{42}),
          seed(10, std::vector<char>{'b', 'i', 'n'}),
          // Found by this target: an array header declaring 2^27 elements made
          // unpack allocate 4 GiB before reading any of them.
          std::string{"\x05\xdd\x08\x00\x00\x00\xa1\xd2", 8},
          // UINT64_MAX read as a double is 2^64, which msgpack's pack_double
          // converts to uint64_t out of range (see ubsan.supp).
          std::string{"\x05\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 10}};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ergon::fuzz::write_seeds_if_asked(seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view bytes{reinterpret_cast<const char*>(data) + 1, size - 1};
  switch (data[0] % 11) {
    case 0: check<email>(bytes); break;
    case 1: check<batch>(bytes); break;
    case 2: check<settings>(bytes); break;
    case 3: check<std::string>(bytes); break;
    case 4: check<int32_t>(bytes); break;
    case 5: check<double>(bytes); break;
    case 6: check<std::vector<std::string>>(bytes); break;
    case 7: check<std::map<std::string, int64_t>>(bytes); break;
    case 8: check<pair_tuple>(bytes); break;
    case 9: check<std::optional<int64_t>>(bytes); break;
    default: check<std::vector<char>>(bytes); break;
  }
  return 0;
}
