#include "ergon/storage/cron.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <vector>

namespace ergon::storage {
namespace {

using namespace date;

struct field_rule {
  const char* name;
  int min;
  int max;
  const char* const* names;  ///< names[i] is value i + names_base; null: none
  int names_base;
  size_t name_count;
};

constexpr const char* month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr field_rule second_rule{"second", 0, 59, nullptr, 0, 0};
constexpr field_rule minute_rule{"minute", 0, 59, nullptr, 0, 0};
constexpr field_rule hour_rule{"hour", 0, 23, nullptr, 0, 0};
constexpr field_rule day_of_month_rule{"day_of_month", 1, 31, nullptr, 0, 0};
constexpr field_rule month_rule{"month", 1, 12, month_names, 1, 12};
// 7 is Sunday too, folded into bit 0.
constexpr field_rule day_of_week_rule{"day_of_week", 0, 7, day_names, 0, 7};

status field_error(const field_rule& rule, const std::string& what) {
  return invalid_field("schedule", std::string{rule.name} + ": " + what);
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A number or a name of `rule`.
result<int> parse_value(const field_rule& rule, const std::string& text) {
  if (text.empty())
    return field_error(rule, "a value is missing");
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (text.size() > 4)
      return field_error(rule, text + " is out of range " + std::to_string(rule.min) + "-"
                                 + std::to_string(rule.max));
    int v = std::stoi(text);
    if (v < rule.min || v > rule.max)
      return field_error(rule, text + " is out of range " + std::to_string(rule.min) + "-"
                                 + std::to_string(rule.max));
    return v;
  }
  auto name = lower(text);
  for (size_t i = 0; i < rule.name_count; ++i)
    if (name == rule.names[i])
      return rule.names_base + static_cast<int>(i);
  if (rule.names)
    return field_error(rule, "'" + text + "' is neither a number nor a name");
  return field_error(rule, "'" + text + "' is not a number");
}

// One comma-separated item: *, a value, a range, each with an optional step.
status parse_item(const field_rule& rule, const std::string& item, std::vector<int>& out) {
  if (item.empty())
    return field_error(rule, "an empty list item");
  auto slash = item.find('/');
  std::string base = item.substr(0, slash);
  int step = 1;
  bool stepped = slash != std::string::npos;
  if (stepped) {
    auto step_text = item.substr(slash + 1);
    bool digits = !step_text.empty() && step_text.size() <= 4
                  && std::all_of(step_text.begin(), step_text.end(),
                                 [](char c) { return c >= '0' && c <= '9'; });
    if (!digits)
      return field_error(rule, "step '" + step_text + "' is not a positive number");
    step = std::stoi(step_text);
    if (step < 1)
      return field_error(rule, "step 0 is not a positive number");
  }
  int first = rule.min;
  int last = rule.max;
  if (base != "*") {
    auto dash = base.find('-');
    auto a = parse_value(rule, base.substr(0, dash));
    if (!a)
      return a.error();
    first = *a;
    if (dash != std::string::npos) {
      auto b = parse_value(rule, base.substr(dash + 1));
      if (!b)
        return b.error();
      last = *b;
      if (last < first)
        return field_error(rule, "range " + base + " runs backwards");
    } else if (!stepped) {
      last = first;  // a single value; "10/5" runs to the field's end
    }
  }
  for (int v = first; v <= last; v += step)
    out.push_back(v);
  return {};
}

template <size_t N>
status parse_field(const field_rule& rule, const std::string& text, std::bitset<N>& bits) {
  std::vector<int> values;
  size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    if (auto st = parse_item(rule, text.substr(start, comma - start), values); !st)
      return st;
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  for (int v : values)
    bits.set(static_cast<size_t>(rule.max == 7 && v == 7 ? 0 : v));
  return {};
}

std::vector<std::string> split_fields(const std::string& spec) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < spec.size()) {
    while (i < spec.size() && std::isspace(static_cast<unsigned char>(spec[i])))
      ++i;
    size_t j = i;
    while (j < spec.size() && !std::isspace(static_cast<unsigned char>(spec[j])))
      ++j;
    if (j > i)
      out.push_back(spec.substr(i, j - i));
    i = j;
  }
  return out;
}

result<std::string> expand_macro(const std::string& spec) {
  static const std::array<std::pair<const char*, const char*>, 7> macros{{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
  }};
  auto name = lower(spec);
  for (auto& [macro, fields] : macros)
    if (name == macro)
      return std::string{fields};
  return invalid_field("schedule", "unknown macro '" + spec
                                     + "' (use @yearly, @monthly, @weekly, @daily or @hourly)");
}

// Days in `month` of a leap year: the most it ever has.
int most_days(int month) {
  return static_cast<int>(
    static_cast<unsigned>((year{2000} / month / last).day()));
}

// A spec whose day-of-month never occurs in its months never fires.
status check_fires(const cron_fields& c) {
  if (c.day_of_month_star || !c.day_of_week_star)
    return {};
  for (int m = 1; m <= 12; ++m)
    for (int d = 1; d <= most_days(m); ++d)
      if (c.months[static_cast<size_t>(m)] && c.days_of_month[static_cast<size_t>(d)])
        return {};
  return field_error(day_of_month_rule, "no day of the spec occurs in its months, so it never fires");
}

}  // namespace

bool cron_fields::day_matches(const year_month_day& ymd) const {
  bool dom = days_of_month[static_cast<unsigned>(ymd.day())];
  bool dow = days_of_week[weekday{sys_days{ymd}}.c_encoding()];
  if (day_of_month_star || day_of_week_star)
    return dom && dow;
  return dom || dow;
}

result<cron_fields> parse_cron(const std::string& spec) {
  auto trimmed = split_fields(spec);
  if (trimmed.size() == 1 && trimmed[0][0] == '@') {
    auto expanded = expand_macro(trimmed[0]);
    if (!expanded)
      return expanded.error();
    trimmed = split_fields(*expanded);
  }
  if (trimmed.size() != 5 && trimmed.size() != 6)
    return invalid_field("schedule", "a cron spec has 5 fields (minute hour day_of_month month "
                                     "day_of_week) or 6 with seconds first, got "
                                       + std::to_string(trimmed.size()));
  cron_fields c;
  size_t i = 0;
  if (trimmed.size() == 6) {
    if (auto st = parse_field(second_rule, trimmed[i++], c.seconds); !st)
      return st;
  } else {
    c.seconds.set(0);
  }
  if (auto st = parse_field(minute_rule, trimmed[i++], c.minutes); !st)
    return st;
  if (auto st = parse_field(hour_rule, trimmed[i++], c.hours); !st)
    return st;
  c.day_of_month_star = trimmed[i][0] == '*';
  if (auto st = parse_field(day_of_month_rule, trimmed[i++], c.days_of_month); !st)
    return st;
  if (auto st = parse_field(month_rule, trimmed[i++], c.months); !st)
    return st;
  c.day_of_week_star = trimmed[i][0] == '*';
  if (auto st = parse_field(day_of_week_rule, trimmed[i++], c.days_of_week); !st)
    return st;
  if (auto st = check_fires(c); !st)
    return st;
  return c;
}

std::optional<local_seconds> next_cron_match(const cron_fields& c, local_seconds from) {
  constexpr auto end = local_days{year{10000} / 1 / 1};
  auto t = from;
  while (t < end) {
    auto day = floor<days>(t);
    year_month_day ymd{day};
    if (!c.months[static_cast<unsigned>(ymd.month())]) {
      t = local_days{(ymd.year() / ymd.month() + months{1}) / 1};
      continue;
    }
    if (!c.day_matches(ymd)) {
      t = day + days{1};
      continue;
    }
    hh_mm_ss<std::chrono::seconds> hms{t - day};
    if (!c.hours[static_cast<size_t>(hms.hours().count())]) {
      t = floor<std::chrono::hours>(t) + std::chrono::hours{1};
      continue;
    }
    if (!c.minutes[static_cast<size_t>(hms.minutes().count())]) {
      t = floor<std::chrono::minutes>(t) + std::chrono::minutes{1};
      continue;
    }
    if (!c.seconds[static_cast<size_t>(hms.seconds().count())]) {
      t += std::chrono::seconds{1};
      continue;
    }
    return t;
  }
  return std::nullopt;
}

}  // namespace ergon::storage
