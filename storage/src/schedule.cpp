#include "ergon/storage/schedule.hpp"
#include "ergon/storage/times.hpp"

#include <date/tz.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

namespace ergon::storage {
namespace {

using namespace date;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The first millisecond of the year 10000: nothing is due at or after it.
constexpr int64_t end_ms = 253'402'300'800'000;
// 0001-01-01T00:00:00Z, one second earlier.
constexpr int64_t begin_ms = -62'135'596'801'000;
constexpr int64_t max_period_ms = int64_t{100} * 36'525 * 86'400'000 / 100;

bool starts_with_every(const std::string& spec) {
  size_t i = 0;
  while (i < spec.size() && std::isspace(static_cast<unsigned char>(spec[i])))
    ++i;
  static const std::string word = "every";
  if (spec.size() - i < word.size())
    return false;
  for (size_t k = 0; k < word.size(); ++k)
    if (std::tolower(static_cast<unsigned char>(spec[i + k])) != word[k])
      return false;
  return i + word.size() == spec.size()
         || std::isspace(static_cast<unsigned char>(spec[i + word.size()]));
}

std::string trimmed(const std::string& text) {
  auto first = text.find_first_not_of(" \t");
  auto last = text.find_last_not_of(" \t");
  return first == std::string::npos ? std::string{} : text.substr(first, last - first + 1);
}

status every_error(const std::string& what) {
  return invalid_field("schedule", "every: " + what);
}

// "1h30m" and the like, spaces allowed between parts.
result<int64_t> parse_period(const std::string& text) {
  int64_t total = 0;
  size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t digits = i;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
      ++digits;
    if (digits == i)
      return every_error("'" + text.substr(i) + "' does not start with a number");
    if (digits - i > 13)
      return every_error(text.substr(i, digits - i) + " is more than 100 years");
    int64_t count = std::stoll(text.substr(i, digits - i));
    size_t unit_end = digits;
    while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end])))
      ++unit_end;
    auto unit = text.substr(digits, unit_end - digits);
    auto scale = unit_ms(unit);
    if (scale == 0)
      return every_error("'" + text.substr(i, unit_end - i)
                         + "' needs a unit of ms, s, m, h or d");
    if (count > max_period_ms / scale || total + count * scale > max_period_ms)
      return every_error("'" + trimmed(text) + "' is more than 100 years");
    total += count * scale;
    any = true;
    i = unit_end;
  }
  if (!any)
    return every_error("a duration is missing, for example 'every 90s'");
  if (total <= 0)
    return every_error("the duration must be more than 0 ms");
  return total;
}

// The instant a wall clock time of `zone` stands for: its only instant, the
// first of two in a fall-back overlap, or the end of a spring-forward gap.
sys_seconds instant_of(const time_zone& zone, local_seconds t) {
  auto info = zone.get_info(t);
  switch (info.result) {
    case local_info::nonexistent:
      return info.second.begin;
    case local_info::ambiguous:
    case local_info::unique:
    default:
      return sys_seconds{t.time_since_epoch()} - info.first.offset;
  }
}

}  // namespace

result<schedule> schedule::parse(const std::string& spec, const std::string& time_zone,
                                 int64_t anchor_ms) {
  schedule s;
  if (starts_with_every(spec)) {
    if (!time_zone.empty())
      return invalid_field("time_zone", "an 'every' schedule counts milliseconds and takes "
                                        "no time zone; got '" + time_zone + "'");
    auto period = parse_period(spec.substr(spec.find_first_of("eE") + 5));
    if (!period)
      return period.error();
    s.period_ms_ = *period;
    s.anchor_ms_ = anchor_ms;
    return s;
  }
  auto cron = parse_cron(spec);
  if (!cron)
    return cron.error();
  s.cron_ = *cron;
  if (!time_zone.empty()) {
    try {
      s.zone_ = locate_zone(time_zone);
    } catch (const std::exception&) {
      return invalid_field("time_zone", "unknown time zone '" + time_zone
                                          + "' (an IANA name such as Europe/Berlin)");
    }
  }
  return s;
}

std::optional<int64_t> schedule::next_after(int64_t after_ms) const {
  if (period_ms_ == 0)
    return next_cron_after(after_ms);
  // The first anchor + k * period > after, in 128 bits: any int64 is fine.
  __int128 from = static_cast<__int128>(after_ms) - anchor_ms_;
  __int128 slots = from / period_ms_;
  if (from % period_ms_ != 0 && from < 0)
    --slots;  // round toward minus infinity
  __int128 next = anchor_ms_ + (slots + 1) * period_ms_;
  if (next >= end_ms)
    return std::nullopt;
  return static_cast<int64_t>(next);
}

std::optional<int64_t> schedule::last_at_or_before(int64_t at_ms, int64_t after_ms) const {
  auto first = next_after(after_ms);
  if (!first || *first > at_ms)
    return std::nullopt;
  if (period_ms_ != 0) {
    __int128 k = (static_cast<__int128>(at_ms) - *first) / period_ms_;
    return static_cast<int64_t>(*first + k * period_ms_);
  }
  // A window back from at_ms that holds a slot, growing 8x: cron slots are at
  // least a second apart, so the walk below takes a few dozen steps at most.
  int64_t from = after_ms;
  for (int64_t window = 1'000; window < at_ms - after_ms; window *= 8) {
    auto x = next_after(at_ms - window);
    if (x && *x <= at_ms) {
      from = at_ms - window;
      break;
    }
  }
  int64_t last = *next_after(from);
  for (auto x = next_after(last); x && *x <= at_ms; x = next_after(last))
    last = *x;
  return last;
}

std::optional<next_slot> next_instance(const schedule& s, int64_t slot,
                                       std::optional<int64_t> started_at, int64_t since_ms,
                                       catch_up mode, int64_t now_ms) {
  int64_t base = std::max(slot, since_ms);
  auto next = s.next_after(base);
  if (!next)
    return std::nullopt;
  if (*next > now_ms)
    return next_slot{*next, *next};
  int64_t ran_from = std::max(base, started_at.value_or(base));
  if (mode == catch_up::once)
    if (auto last = s.last_at_or_before(now_ms, ran_from))
      return next_slot{*last, now_ms};
  auto future = s.next_after(now_ms);
  if (!future)
    return std::nullopt;
  return next_slot{*future, *future};
}

std::optional<int64_t> skip_missed(const schedule& s, int64_t slot, int64_t since_ms,
                                   int64_t now_ms) {
  auto next = s.next_after(std::max(slot, since_ms));
  if (!next || *next > now_ms)
    return std::nullopt;
  return s.next_after(now_ms);
}

std::optional<int64_t> schedule::next_cron_after(int64_t after_ms) const {
  if (after_ms >= end_ms)
    return std::nullopt;
  // Before the year 1 nothing is due; clamping keeps the calendar
  // arithmetic in range.
  after_ms = std::max(after_ms, begin_ms);
  auto after = sys_time<milliseconds>{milliseconds{after_ms}};
  auto after_s = floor<seconds>(after);
  // Wall clock times from the one `after` reads as. A time whose instant
  // is not after `after` already ran (or was due): in the second pass of
  // a fall-back overlap, that skips the repeated hour.
  auto local = zone_ ? zone_->to_local(after_s) : local_seconds{after_s.time_since_epoch()};
  for (;;) {
    auto match = next_cron_match(cron_, local);
    if (!match)
      return std::nullopt;
    auto instant = zone_ ? instant_of(*zone_, *match) : sys_seconds{match->time_since_epoch()};
    auto ms = std::chrono::duration_cast<milliseconds>(instant.time_since_epoch()).count();
    if (ms > after_ms)
      return ms < end_ms ? std::optional<int64_t>{ms} : std::nullopt;
    local = *match + seconds{1};
  }
}

}  // namespace ergon::storage
