#include "text.hpp"

#include <ergon/storage/times.hpp>

#include <date/date.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>

namespace ergon::ctl {
namespace {

status bad(const std::string& flag, const std::string& why) {
  return {error::invalid_argument, flag + ": " + why, flag};
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Digits as a non-negative int64; empty on overflow.
std::optional<int64_t> to_int(const std::string& digits) {
  int64_t v = 0;
  for (char c : digits) {
    if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10)
      return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

result<int64_t> parse_time(const std::string& text, const std::string& flag) {
  if (all_digits(text)) {
    if (auto v = to_int(text))
      return *v;
    return bad(flag, "'" + text + "' is past the range of ms since the epoch");
  }
  // date::parse trips -Wmaybe-uninitialized in g++ 12: the format is fixed
  // enough to match directly.
  static const std::regex iso{
    R"(^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?Z?)?$)"};
  std::smatch m;
  if (std::regex_match(text, m, iso)) {
    using namespace std::chrono;
    auto num = [&](size_t i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
    date::year_month_day day{date::year{num(1)}, date::month{static_cast<unsigned>(num(2))},
                             date::day{static_cast<unsigned>(num(3))}};
    if (!day.ok() || num(4) > 23 || num(5) > 59 || num(6) > 59)
      return bad(flag, "'" + text + "' is not a date and time of the calendar");
    auto frac = m[7].matched ? m[7].str() : std::string{};
    frac.resize(3, '0');
    auto ms = date::sys_days{day}.time_since_epoch() + hours{num(4)} + minutes{num(5)}
              + seconds{num(6)} + milliseconds{std::stoi(frac)};
    auto count = duration_cast<milliseconds>(ms).count();
    if (count < 0)
      return bad(flag, "'" + text + "' is before 1970");
    return count;
  }
  return bad(flag, "'" + text
                     + "' is not a time: give ms since the epoch or ISO 8601 in UTC, "
                       "like 2026-11-25T10:00:00Z");
}

result<std::chrono::milliseconds> parse_duration(const std::string& text,
                                                 const std::string& flag) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (!text.empty() && text[0] == '-')
    return bad(flag, "'" + text + "' is negative");
  if (digits == 0)
    return bad(flag, "'" + text + "' is not a duration: give a number with ms, s, m, h or d");
  auto unit = text.substr(digits);
  auto scale = unit.empty() ? 1 : storage::unit_ms(unit);
  if (scale == 0)
    return bad(flag, "'" + text + "' has an unknown unit '" + unit + "' (ms, s, m, h or d)");
  auto v = to_int(text.substr(0, digits));
  if (!v || *v > std::numeric_limits<int64_t>::max() / scale)
    return bad(flag, "'" + text + "' is too long");
  return std::chrono::milliseconds{*v * scale};
}

std::string format_time(int64_t ms) {
  using namespace std::chrono;
  return date::format("%F %TZ", date::sys_time<milliseconds>{milliseconds{ms}});
}

std::string format_span(int64_t ms) {
  auto two = [](int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  if (ms < 0)
    return "-" + format_span(-ms);
  if (ms < 1'000)
    return std::to_string(ms) + "ms";
  int64_t s = ms / 1'000;
  if (s < 60)
    return std::to_string(s) + "s";
  if (s < 3'600)
    return std::to_string(s / 60) + "m" + two(s % 60) + "s";
  if (s < 86'400)
    return std::to_string(s / 3'600) + "h" + two(s % 3'600 / 60) + "m";
  return std::to_string(s / 86'400) + "d" + two(s % 86'400 / 3'600) + "h";
}

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i)
    width[i] = header[i].size();
  for (auto& r : rows)
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) {
      s += cells[i];
      if (i + 1 < cells.size())
        s += std::string(width[i] - cells[i].size() + 2, ' ');
    }
    out << s << '\n';
  };
  line(header);
  for (auto& r : rows)
    line(r);
}

}  // namespace ergon::ctl
