// Schedules: the cron parser's errors, next times in UTC, across DST in
// several zones (the rules of schedule.hpp), `every`, and the extremes.
#define BOOST_TEST_MODULE schedule
#include <boost/test/unit_test.hpp>

#include <date/date.h>

#include <cstdio>
#include <limits>

#include "ergon/storage/schedule.hpp"

using namespace ergon;
using namespace ergon::storage;

namespace {

// "2026-03-08 07:00:00" or "... 07:00:00.500" (UTC) as ms since the epoch.
int64_t utc(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0;
  int n = std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d.%d", &y, &mo, &d, &h, &mi, &sec, &ms);
  BOOST_REQUIRE_MESSAGE(n >= 6, "bad time in the test: " + text);
  auto day = date::sys_days{date::year{y} / mo / d};
  auto t = day + std::chrono::hours{h} + std::chrono::minutes{mi} + std::chrono::seconds{sec}
           + std::chrono::milliseconds{ms};
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string iso(std::optional<int64_t> ms) {
  if (!ms)
    return "never";
  date::sys_time<std::chrono::milliseconds> t{std::chrono::milliseconds{*ms}};
  if (*ms % 1'000 == 0)  // whole seconds read without ""
    return date::format("%F %T", date::floor<std::chrono::seconds>(t));
  return date::format("%F %T", t);
}

schedule parse(const std::string& spec, const std::string& zone = {}, int64_t anchor = 0) {
  auto s = schedule::parse(spec, zone, anchor);
  BOOST_REQUIRE_MESSAGE(s.has_value(), spec + " in '" + zone + "': " + s.error().to_string());
  return *s;
}

// The next due time after `after` (UTC text), as UTC text.
std::string next(const std::string& spec, const std::string& zone, const std::string& after) {
  return iso(parse(spec, zone).next_after(utc(after)));
}

// The error a spec gets: "<field>|<message>".
std::string error_of(const std::string& spec, const std::string& zone = {}) {
  auto s = schedule::parse(spec, zone, 0);
  if (s.has_value())
    return "accepted";
  BOOST_TEST(s.error().code() == error::invalid_argument);
  return s.error().field() + "|" + s.error().message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(parsing)

BOOST_AUTO_TEST_CASE(a_bad_spec_names_the_cron_field_and_what_is_wrong) {
  BOOST_TEST(error_of("61 * * * *") == "schedule|field 'schedule': minute: 61 is out of range 0-59");
  BOOST_TEST(error_of("* 24 * * *") == "schedule|field 'schedule': hour: 24 is out of range 0-23");
  BOOST_TEST(error_of("* * 0 * *")
             == "schedule|field 'schedule': day_of_month: 0 is out of range 1-31");
  BOOST_TEST(error_of("* * * 13 *") == "schedule|field 'schedule': month: 13 is out of range 1-12");
  BOOST_TEST(error_of("* * * * 8")
             == "schedule|field 'schedule': day_of_week: 8 is out of range 0-7");
  BOOST_TEST(error_of("60 * * * * *")
             == "schedule|field 'schedule': second: 60 is out of range 0-59");
  BOOST_TEST(error_of("99999999 * * * *")
             == "schedule|field 'schedule': minute: 99999999 is out of range 0-59");
  BOOST_TEST(error_of("*/0 * * * *")
             == "schedule|field 'schedule': minute: step 0 is not a positive number");
  BOOST_TEST(error_of("*/x * * * *")
             == "schedule|field 'schedule': minute: step 'x' is not a positive number");
  BOOST_TEST(error_of("5-2 * * * *")
             == "schedule|field 'schedule': minute: range 5-2 runs backwards");
  BOOST_TEST(error_of("1,,2 * * * *")
             == "schedule|field 'schedule': minute: an empty list item");
  BOOST_TEST(error_of("-5 * * * *") == "schedule|field 'schedule': minute: a value is missing");
  BOOST_TEST(error_of("* * * foo *")
             == "schedule|field 'schedule': month: 'foo' is neither a number nor a name");
  BOOST_TEST(error_of("* * * * funday")
             == "schedule|field 'schedule': day_of_week: 'funday' is neither a number nor a name");
  BOOST_TEST(error_of("jan * * * *") == "schedule|field 'schedule': minute: 'jan' is not a number");
  BOOST_TEST(error_of("* * * *").find("got 4") != std::string::npos);
  BOOST_TEST(error_of("* * * * * * *").find("got 7") != std::string::npos);
  BOOST_TEST(error_of("").find("got 0") != std::string::npos);
  BOOST_TEST(error_of("   ").find("got 0") != std::string::npos);
  BOOST_TEST(error_of("@fortnightly").find("unknown macro '@fortnightly'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_spec_that_never_fires_is_refused) {
  BOOST_TEST(error_of("0 0 30 2 *").find("day_of_month: no day of the spec occurs in its months")
             != std::string::npos);
  BOOST_TEST(error_of("0 0 31 4,6,9,11 *").find("never fires") != std::string::npos);
  // February 29th occurs; with a day of week the day fields combine by "or".
  BOOST_TEST(error_of("0 0 29 2 *") == "accepted");
  BOOST_TEST(error_of("0 0 30 2 1") == "accepted");
}

BOOST_AUTO_TEST_CASE(names_macros_and_sunday_as_7_are_accepted) {
  BOOST_TEST(error_of("0 0 * JAN-mar Mon-FRI") == "accepted");
  BOOST_TEST(error_of("0 0 * * 7") == "accepted");
  BOOST_TEST(error_of("@YEARLY") == "accepted");
  BOOST_TEST(error_of("  @hourly  ") == "accepted");
}

BOOST_AUTO_TEST_CASE(a_bad_zone_or_every_is_named) {
  BOOST_TEST(error_of("* * * * *", "Mars/Olympus_Mons")
             == "time_zone|field 'time_zone': unknown time zone 'Mars/Olympus_Mons' (an IANA "
                "name such as Europe/Berlin)");
  BOOST_TEST(error_of("every 0s") == "schedule|field 'schedule': every: the duration must be "
                                     "more than 0 ms");
  BOOST_TEST(error_of("every") == "schedule|field 'schedule': every: a duration is missing, for "
                                  "example 'every 90s'");
  BOOST_TEST(error_of("every 5x")
             == "schedule|field 'schedule': every: '5x' needs a unit of ms, s, m, h or d");
  BOOST_TEST(error_of("every 5") == "schedule|field 'schedule': every: '5' needs a unit of ms, "
                                    "s, m, h or d");
  BOOST_TEST(error_of("every m") == "schedule|field 'schedule': every: 'm' does not start with a "
                                    "number");
  BOOST_TEST(error_of("every 36526d").find("more than 100 years") != std::string::npos);
  BOOST_TEST(error_of("every 99999999999999999999ms").find("more than 100 years")
             != std::string::npos);
  BOOST_TEST(error_of("every 1s", "UTC").find("time_zone|") == 0);
  BOOST_TEST(error_of("every 1h 30m") == "accepted");
  BOOST_TEST(error_of("EVERY 250ms") == "accepted");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(next_in_utc)

BOOST_AUTO_TEST_CASE(the_next_time_is_strictly_after) {
  BOOST_TEST(next("*/15 * * * *", "", "2026-01-01 10:00:00") == "2026-01-01 10:15:00");
  BOOST_TEST(next("*/15 * * * *", "", "2026-01-01 10:14:59") == "2026-01-01 10:15:00");
  BOOST_TEST(next("*/10 * * * * *", "", "2026-01-01 00:00:05.500") == "2026-01-01 00:00:10");
  BOOST_TEST(next("0 9 * * mon-fri", "", "2026-01-02 09:00:00") == "2026-01-05 09:00:00");
  BOOST_TEST(next("@hourly", "", "2026-01-01 10:30:00") == "2026-01-01 11:00:00");
  BOOST_TEST(next("@weekly", "", "2026-01-01 10:30:00") == "2026-01-04 00:00:00");  // Sunday
  BOOST_TEST(next("@monthly", "", "2026-01-31 23:59:59") == "2026-02-01 00:00:00");
  BOOST_TEST(next("@yearly", "", "2026-01-01 00:00:00") == "2027-01-01 00:00:00");
  BOOST_TEST(next("0 0 29 2 *", "", "2026-01-01 00:00:00") == "2028-02-29 00:00:00");
  BOOST_TEST(next("10/20 * * * *", "", "2026-01-01 00:11:00") == "2026-01-01 00:30:00");
  BOOST_TEST(next("0 0 * * 7", "", "2026-01-01 00:00:00") == "2026-01-04 00:00:00");
}

BOOST_AUTO_TEST_CASE(day_of_month_and_day_of_week_combine_as_in_vixie_cron) {
  // Both restricted: the 13th or a Friday (2026-01-01 is a Thursday).
  BOOST_TEST(next("0 0 13 * 5", "", "2026-01-01 00:00:00") == "2026-01-02 00:00:00");
  BOOST_TEST(next("0 0 13 * 5", "", "2026-01-09 00:00:00") == "2026-01-13 00:00:00");
  // A field that starts with * restricts together with the other: odd days
  // that are Fridays.
  BOOST_TEST(next("0 0 */2 * 5", "", "2026-01-01 00:00:00") == "2026-01-09 00:00:00");
  BOOST_TEST(next("0 0 13 * *", "", "2026-01-01 00:00:00") == "2026-01-13 00:00:00");
  // 1-31 does not start with *: every day, or Mondays, is every day.
  BOOST_TEST(next("0 0 1-31 * 1", "", "2026-01-01 00:00:00") == "2026-01-02 00:00:00");
}

BOOST_AUTO_TEST_CASE(the_extremes_of_time_are_handled) {
  auto hourly = parse("@hourly");
  BOOST_TEST(iso(hourly.next_after(std::numeric_limits<int64_t>::min())) == "0001-01-01 00:00:00");
  BOOST_TEST(iso(hourly.next_after(std::numeric_limits<int64_t>::max())) == "never");
  BOOST_TEST(next("0 0 1 1 *", "", "9999-01-01 00:00:00") == "never");
  BOOST_TEST(next("0 0 1 1 *", "America/New_York", "9999-01-01 00:00:00") == "9999-01-01 05:00:00");
  BOOST_TEST(next("0 0 1 1 *", "America/New_York", "9999-01-01 05:00:00") == "never");
  BOOST_TEST(next("59 23 31 12 *", "", "9999-12-31 23:58:00") == "9999-12-31 23:59:00");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dst)

// New York, 2026: 02:00 EST becomes 03:00 EDT on March 8 (07:00 UTC);
// 02:00 EDT becomes 01:00 EST on November 1 (06:00 UTC).
BOOST_AUTO_TEST_CASE(a_time_in_a_spring_forward_gap_runs_once_at_the_gap_s_end) {
  const std::string ny = "America/New_York";
  BOOST_TEST(next("30 2 * * *", ny, "2026-03-08 06:00:00") == "2026-03-08 07:00:00");
  BOOST_TEST(next("30 2 * * *", ny, "2026-03-08 07:00:00") == "2026-03-09 06:30:00");
  // Several missing times run once together, and with 03:00 itself.
  BOOST_TEST(next("*/15 2 * * *", ny, "2026-03-08 06:59:00") == "2026-03-08 07:00:00");
  BOOST_TEST(next("*/15 2 * * *", ny, "2026-03-08 07:00:00") == "2026-03-09 06:00:00");
  BOOST_TEST(next("0,30 2,3 * * *", ny, "2026-03-08 06:59:00") == "2026-03-08 07:00:00");
  BOOST_TEST(next("0,30 2,3 * * *", ny, "2026-03-08 07:00:00") == "2026-03-08 07:30:00");
  // Times around the gap keep their wall clock meaning.
  BOOST_TEST(next("59 1 * * *", ny, "2026-03-08 06:00:00") == "2026-03-08 06:59:00");
  BOOST_TEST(next("0 4 * * *", ny, "2026-03-08 06:00:00") == "2026-03-08 08:00:00");
}

BOOST_AUTO_TEST_CASE(a_time_in_a_fall_back_overlap_runs_once_at_its_first_occurrence) {
  const std::string ny = "America/New_York";
  BOOST_TEST(next("30 1 * * *", ny, "2026-11-01 04:00:00") == "2026-11-01 05:30:00");
  BOOST_TEST(next("30 1 * * *", ny, "2026-11-01 05:30:00") == "2026-11-02 06:30:00");
  // The repeated hour runs nothing again, from anywhere inside it.
  BOOST_TEST(next("*/20 * * * *", ny, "2026-11-01 05:50:00") == "2026-11-01 07:00:00");
  BOOST_TEST(next("*/20 * * * *", ny, "2026-11-01 06:10:00") == "2026-11-01 07:00:00");
  BOOST_TEST(next("* * * * * *", ny, "2026-11-01 05:59:59") == "2026-11-01 07:00:00");
}

// Berlin: 02:00 CET becomes 03:00 CEST on 2026-03-29 (01:00 UTC); 03:00
// CEST becomes 02:00 CET on 2026-10-25 (01:00 UTC).
BOOST_AUTO_TEST_CASE(berlin_s_transitions_follow_the_same_rules) {
  const std::string berlin = "Europe/Berlin";
  BOOST_TEST(next("30 2 * * *", berlin, "2026-03-29 00:00:00") == "2026-03-29 01:00:00");
  BOOST_TEST(next("30 2 * * *", berlin, "2026-10-24 23:00:00") == "2026-10-25 00:30:00");
  BOOST_TEST(next("30 2 * * *", berlin, "2026-10-25 00:30:00") == "2026-10-26 01:30:00");
  BOOST_TEST(next("0 9 * * *", berlin, "2026-03-29 00:00:00") == "2026-03-29 07:00:00");
}

// Lord Howe Island shifts by 30 minutes: 02:00 +11 becomes 01:30 +10:30 on
// 2026-04-05 (15:00 UTC the day before); 02:00 +10:30 becomes 02:30 +11 on
// 2026-10-04 (15:30 UTC the day before).
BOOST_AUTO_TEST_CASE(a_half_hour_shift_follows_the_same_rules) {
  const std::string lord_howe = "Australia/Lord_Howe";
  BOOST_TEST(next("45 1 * * *", lord_howe, "2026-04-04 12:00:00") == "2026-04-04 14:45:00");
  BOOST_TEST(next("45 1 * * *", lord_howe, "2026-04-04 14:45:00") == "2026-04-05 15:15:00");
  BOOST_TEST(next("15 2 * * *", lord_howe, "2026-10-03 12:00:00") == "2026-10-03 15:30:00");
}

BOOST_AUTO_TEST_CASE(a_zone_without_dst_is_a_fixed_offset) {
  BOOST_TEST(next("30 9 * * *", "Asia/Kolkata", "2026-03-08 00:00:00") == "2026-03-08 04:00:00");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(every)

BOOST_AUTO_TEST_CASE(slots_count_from_the_anchor_in_milliseconds) {
  auto s = parse("every 250ms", "", 1'000);
  BOOST_TEST(s.period_ms() == 250);
  BOOST_TEST(*s.next_after(1'000) == 1'250);
  BOOST_TEST(*s.next_after(999) == 1'000);
  BOOST_TEST(*s.next_after(1'249) == 1'250);
  BOOST_TEST(*s.next_after(-1) == 0);
  BOOST_TEST(*s.next_after(-250) == 0);
  BOOST_TEST(*s.next_after(-251) == -250);
  BOOST_TEST(parse("every 1h 30m").period_ms() == 5'400'000);
  BOOST_TEST(parse("every 1d").period_ms() == 86'400'000);
  BOOST_TEST(s.next_after(std::numeric_limits<int64_t>::max()).has_value() == false);
  BOOST_TEST(s.next_after(std::numeric_limits<int64_t>::min()).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(next_instances)

using slot_pair = std::pair<std::string, std::string>;

slot_pair next(const schedule& s, const std::string& slot, std::optional<std::string> started,
               const std::string& now, catch_up mode = catch_up::once,
               const std::string& since = "2000-01-01 00:00:00") {
  auto n = next_instance(s, utc(slot), started ? std::optional<int64_t>{utc(*started)}
                                               : std::nullopt,
                         utc(since), mode, utc(now));
  BOOST_REQUIRE(n.has_value());
  return {iso(n->scheduled_at), iso(n->run_at)};
}

BOOST_AUTO_TEST_CASE(an_instance_that_ends_in_time_is_followed_by_the_next_slot) {
  auto hourly = parse("0 * * * *");
  BOOST_TEST((next(hourly, "2026-05-01 10:00:00", "2026-05-01 10:00:00", "2026-05-01 10:05:00")
              == slot_pair{"2026-05-01 11:00:00", "2026-05-01 11:00:00"}));
  // Late (started 10:40) but done before 11:00: no drift.
  BOOST_TEST((next(hourly, "2026-05-01 10:00:00", "2026-05-01 10:40:00", "2026-05-01 10:59:00")
              == slot_pair{"2026-05-01 11:00:00", "2026-05-01 11:00:00"}));
}

BOOST_AUTO_TEST_CASE(slots_missed_while_it_ran_give_one_catch_up_for_the_latest) {
  auto hourly = parse("0 * * * *");
  BOOST_TEST((next(hourly, "2026-05-01 10:00:00", "2026-05-01 10:00:00", "2026-05-01 13:30:00")
              == slot_pair{"2026-05-01 13:00:00", "2026-05-01 13:30:00"}));
  BOOST_TEST((next(hourly, "2026-05-01 10:00:00", "2026-05-01 10:00:00", "2026-05-01 13:30:00",
                   catch_up::skip)
              == slot_pair{"2026-05-01 14:00:00", "2026-05-01 14:00:00"}));
}

BOOST_AUTO_TEST_CASE(slots_due_before_a_late_start_count_as_run_by_it) {
  // Down from 10:00 to 15:00; the 10:00 instance ran at 15:00 as the one
  // catch-up, so nothing else runs for 11:00 to 15:00.
  auto hourly = parse("0 * * * *");
  BOOST_TEST((next(hourly, "2026-05-01 10:00:00", "2026-05-01 15:00:00", "2026-05-01 15:00:10")
              == slot_pair{"2026-05-01 16:00:00", "2026-05-01 16:00:00"}));
  // A cancelled instance never started: the slots after its own count.
  BOOST_TEST((next(hourly, "2026-05-01 10:00:00", std::nullopt, "2026-05-01 12:10:00")
              == slot_pair{"2026-05-01 12:00:00", "2026-05-01 12:10:00"}));
}

BOOST_AUTO_TEST_CASE(slots_before_a_schedule_change_do_not_count) {
  auto five = parse("every 5m", "", utc("2026-05-01 10:02:00"));
  BOOST_TEST((next(five, "2026-05-01 10:00:00", "2026-05-01 10:00:00", "2026-05-01 10:03:00",
                   catch_up::once, "2026-05-01 10:02:00")
              == slot_pair{"2026-05-01 10:07:00", "2026-05-01 10:07:00"}));
}

BOOST_AUTO_TEST_CASE(the_last_slot_is_found_in_a_few_steps_after_long_downtime) {
  auto yearly = parse("@yearly");
  BOOST_TEST(iso(yearly.last_at_or_before(utc("2026-05-01 00:00:00"), utc("1980-06-01 00:00:00")))
             == "2026-01-01 00:00:00");
  auto each_second = parse("* * * * * *");
  BOOST_TEST(iso(each_second.last_at_or_before(utc("2026-05-01 12:00:00.500"),
                                               utc("2025-05-01 00:00:00")))
             == "2026-05-01 12:00:00");
  BOOST_TEST(!each_second.last_at_or_before(utc("2026-05-01 12:00:00"),
                                            utc("2026-05-01 12:00:00")));
  auto every_ms = parse("every 7ms", "", 0);
  BOOST_TEST(*every_ms.last_at_or_before(1'000'000'000'000, 0) == 999'999'999'999);  // 7 divides it
  // Zoned: the last 09:00 in New York (EDT since March 8) before a UTC instant.
  auto nine = parse("0 9 * * *", "America/New_York");
  BOOST_TEST(iso(nine.last_at_or_before(utc("2026-03-09 14:00:00"), utc("2026-01-01 00:00:00")))
             == "2026-03-09 13:00:00");
}

BOOST_AUTO_TEST_CASE(skip_mode_moves_only_an_instance_that_missed_a_later_slot) {
  auto hourly = parse("0 * * * *");
  BOOST_TEST(!skip_missed(hourly, utc("2026-05-01 10:00:00"), 0, utc("2026-05-01 10:59:00")));
  BOOST_TEST(iso(skip_missed(hourly, utc("2026-05-01 10:00:00"), 0, utc("2026-05-01 12:30:00")))
             == "2026-05-01 13:00:00");
}

BOOST_AUTO_TEST_SUITE_END()
