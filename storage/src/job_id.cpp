#include "ergon/job_id.hpp"

#include <cstring>

#include "ergon/storage/job_ids.hpp"

namespace ergon {
namespace {

constexpr char hex_digits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_dash_position(size_t i) {
  return i == 8 || i == 13 || i == 18 || i == 23;
}

}  // namespace

result<job_id> job_id::parse(const std::string& text) {
  if (text.size() != 36)
    return invalid_field("id", "expected 36 characters in the form "
                               "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, got '" + text + "'");
  bytes_type bytes{};
  size_t nibble = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (is_dash_position(i)) {
      if (text[i] != '-')
        return invalid_field("id", "expected '-' at position " + std::to_string(i)
                                     + " of '" + text + "'");
      continue;
    }
    int v = hex_value(text[i]);
    if (v < 0)
      return invalid_field("id", "'" + text + "' is not hexadecimal at position "
                                   + std::to_string(i));
    bytes[nibble / 2] = static_cast<uint8_t>(bytes[nibble / 2] | (v << ((nibble % 2) ? 0 : 4)));
    ++nibble;
  }
  return job_id{bytes};
}

std::string job_id::to_string() const {
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out.push_back('-');
    out.push_back(hex_digits[bytes_[i] >> 4]);
    out.push_back(hex_digits[bytes_[i] & 0x0f]);
  }
  return out;
}

bool job_id::is_nil() const noexcept {
  for (auto b : bytes_)
    if (b != 0)
      return false;
  return true;
}

int64_t job_id::timestamp_ms() const noexcept {
  int64_t ms = 0;
  for (size_t i = 0; i < 6; ++i)
    ms = (ms << 8) | bytes_[i];
  return ms;
}

namespace storage {

job_id make_job_id(int64_t now_ms, uint32_t tag, int64_t row) noexcept {
  auto ms = static_cast<uint64_t>(now_ms < 0 ? 0 : now_ms);
  uint64_t rand_a = (tag >> 18) & 0xfff;
  uint64_t rand_b = (uint64_t{tag & 0x3ffff} << 44) | static_cast<uint64_t>(row & max_row_id);
  job_id::bytes_type b{};
  for (int i = 0; i < 6; ++i)
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(ms >> (8 * (5 - i)));
  b[6] = static_cast<uint8_t>(0x70 | (rand_a >> 8));
  b[7] = static_cast<uint8_t>(rand_a);
  b[8] = static_cast<uint8_t>(0x80 | ((rand_b >> 56) & 0x3f));
  for (int i = 9; i < 16; ++i)
    b[static_cast<size_t>(i)] = static_cast<uint8_t>(rand_b >> (8 * (15 - i)));
  return job_id{b};
}

std::optional<int64_t> row_of(const job_id& id) noexcept {
  const auto& b = id.bytes();
  if ((b[6] >> 4) != 7 || (b[8] >> 6) != 2)
    return std::nullopt;
  uint64_t rand_b = b[8] & 0x3f;
  for (size_t i = 9; i < 16; ++i)
    rand_b = (rand_b << 8) | b[i];
  auto row = static_cast<int64_t>(rand_b & static_cast<uint64_t>(max_row_id));
  if (row < 1)
    return std::nullopt;
  return row;
}

}  // namespace storage
}  // namespace ergon

size_t std::hash<ergon::job_id>::operator()(const ergon::job_id& id) const noexcept {
  // The low 8 bytes hold the row id, distinct for every job of a database.
  uint64_t h;
  std::memcpy(&h, id.bytes().data() + 8, sizeof(h));
  return static_cast<size_t>(h);
}
