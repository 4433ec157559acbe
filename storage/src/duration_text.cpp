#include <cctype>
#include <charconv>

#include "ergon/storage/times.hpp"

namespace ergon::storage {
namespace {

status bad(const std::string& field, const std::string& why) {
  return {error::invalid_argument, field + ": " + why, field};
}

}  // namespace

result<std::chrono::milliseconds> parse_duration(const std::string& text,
                                                 const std::string& field) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (!text.empty() && text[0] == '-')
    return bad(field, "'" + text + "' is negative");
  if (digits == 0)
    return bad(field, "'" + text + "' is not a duration: give a number with ms, s, m, h or d");
  auto unit = text.substr(digits);
  if (unit.empty())
    return bad(field, "'" + text + "' has no unit: give " + text + "ms, " + text + "s, " + text
                        + "m, " + text + "h or " + text + "d");
  auto scale = unit_ms(unit);
  if (scale == 0)
    return bad(field, "'" + text + "' has an unknown unit '" + unit + "' (ms, s, m, h or d)");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, v);
  if (ec != std::errc{} || end != text.data() + digits
      || v > std::numeric_limits<int64_t>::max() / scale)
    return bad(field, "'" + text + "' is too long");
  return std::chrono::milliseconds{v * scale};
}

}  // namespace ergon::storage
