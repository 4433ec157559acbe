#include "text.hpp"

#include <ergon/storage/times.hpp>

#include <date/date.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
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
  // "YYYY-MM-DD", then optionally "THH:MM:SS" (or a space), ".fff" and "Z".
  // Read by hand: date::parse and std::regex both trip g++ 12's
  // -Wmaybe-uninitialized.
  auto field = [&](size_t pos, size_t n, int& out) {
    if (pos + n > text.size())
      return false;
    out = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i])))
        return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0;
  size_t end = 10;
  bool ok = field(0, 4, y) && text[4] == '-' && field(5, 2, mo) && text[7] == '-' && field(8, 2, d);
  if (ok && text.size() > 10) {
    ok = (text[10] == 'T' || text[10] == ' ') && field(11, 2, h) && text[13] == ':'
         && field(14, 2, mi) && text[16] == ':' && field(17, 2, sec);
    end = 19;
    if (ok && end < text.size() && text[end] == '.') {
      size_t n = 0;
      while (end + 1 + n < text.size() && n < 3
             && std::isdigit(static_cast<unsigned char>(text[end + 1 + n])))
        ++n;
      int frac = 0;
      ok = n > 0 && field(end + 1, n, frac);
      for (size_t k = n; k < 3; ++k)
        frac *= 10;
      ms = frac;
      end += 1 + n;
    }
    if (ok && end < text.size() && text[end] == 'Z')
      ++end;
    ok = ok && end == text.size();
  }
  if (ok) {
    using namespace std::chrono;
    date::year_month_day day{date::year{y}, date::month{static_cast<unsigned>(mo)},
                             date::day{static_cast<unsigned>(d)}};
    if (!day.ok() || h > 23 || mi > 59 || sec > 59)
      return bad(flag, "'" + text + "' is not a date and time of the calendar");
    auto t = date::sys_days{day}.time_since_epoch() + hours{h} + minutes{mi} + seconds{sec}
             + milliseconds{ms};
    auto count = duration_cast<milliseconds>(t).count();
    if (count < 0)
      return bad(flag, "'" + text + "' is before 1970");
    return count;
  }
  return bad(flag, "'" + text
                     + "' is not a time: give ms since the epoch or ISO 8601 in UTC, "
                       "like 2026-11-25T10:00:00Z");
}

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char b) {
    static const char* hex = "0123456789abcdef";
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 15];
  };
  for (size_t i = 0; i < text.size();) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f)
        escape(b);
      else
        out += static_cast<char>(b);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation
    // bytes; overlong forms, surrogates and C1 controls are escaped.
    size_t n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size();
    uint32_t cp = n == 2 ? b & 0x1f : n == 3 ? b & 0x0f : b & 0x07;
    for (size_t k = 1; ok && k < n; ++k) {
      auto c = static_cast<unsigned char>(text[i + k]);
      ok = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    ok = ok && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff))
         && !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp <= 0x9f);
    if (!ok) {
      escape(b);
      ++i;
      continue;
    }
    out.append(text, i, n);
    i += n;
  }
  return out;
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
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

std::string worker_text(const worker_identity& w) {
  if (w.id == 0)
    return "-";
  if (w.host.empty())
    return "worker #" + std::to_string(w.id);
  return (w.name.empty() ? "#" + std::to_string(w.id) : w.name) + " on " + w.host + " pid "
         + std::to_string(w.pid);
}

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& raw_rows) {
  auto rows = raw_rows;
  for (auto& r : rows)
    for (auto& cell : r)
      cell = printable(cell);
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
