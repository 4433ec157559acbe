// The cron parser and next-time function against python3-croniter, on
// thousands of generated specs and instants, in UTC and in zones with DST.
//
// Away from DST transitions, every answer must equal croniter's. In zones,
// every answer must also equal the "rule" oracle of cron_oracle.py:
// croniter's wall clock times mapped to instants by Python's zoneinfo under
// schedule.hpp's DST rule, written without ergon's code. Near a transition
// croniter's own answers differ; the last test lists such instants, each
// with the reason.
#define BOOST_TEST_MODULE cron_differential
#include <boost/test/unit_test.hpp>

#include <date/tz.h>

#include <fstream>
#include <random>
#include <sys/wait.h>

#include "ergon/storage/cron.hpp"
#include "ergon/storage/schedule.hpp"
#include "support/child_process.hpp"
#include "support/test_support.hpp"

using namespace ergon;
using namespace ergon::storage;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

struct cron_case {
  std::string zone;
  std::string spec;
  int64_t after = 0;
};

// The oracle's answer per case ("none": no time within 50 years). `mode`:
// "croniter" or "rule" (see cron_oracle.py).
std::vector<std::string> ask(const std::string& mode, const std::vector<cron_case>& cases) {
  ergon::test::temp_dir dir;
  auto in = dir.file("cases.tsv");
  auto out = dir.file("answers.txt");
  {
    std::ofstream f{in};
    for (auto& c : cases)
      f << mode << '\t' << c.zone << '\t' << c.spec << '\t' << c.after << '\n';
  }
  ergon::test::child_process oracle{{"/usr/bin/python3", ERGON_CRON_ORACLE, in, out}};
  auto st = oracle.wait();
  BOOST_REQUIRE_MESSAGE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the oracle failed");
  std::vector<std::string> answers;
  std::ifstream f{out};
  for (std::string line; std::getline(f, line);)
    answers.push_back(line);
  BOOST_REQUIRE_EQUAL(answers.size(), cases.size());
  return answers;
}

// -- generated specs ---------------------------------------------------------------

class spec_generator {
 public:
  explicit spec_generator(uint64_t seed) : rng_(seed) {}

  std::string spec() {
    if (pick(40) == 0) {
      static const char* macros[] = {"@yearly", "@monthly", "@weekly", "@daily", "@hourly"};
      return macros[pick(5)];
    }
    std::string s;
    if (pick(4) == 0)
      s += field(0, 59, nullptr, 0) + " ";
    s += field(0, 59, nullptr, 0) + " ";
    s += field(0, 23, nullptr, 0) + " ";
    s += field(1, 31, nullptr, 0) + " ";
    s += field(1, 12, months, 1) + " ";
    s += field(0, 7, days, 0);
    return s;
  }

  int64_t pick(int64_t n) { return std::uniform_int_distribution<int64_t>{0, n - 1}(rng_); }

 private:
  static constexpr const char* months[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                           "jul", "aug", "sep", "oct", "nov", "dec"};
  static constexpr const char* days[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

  int value(int lo, int hi) { return lo + static_cast<int>(pick(hi - lo + 1)); }

  std::string name_or_number(int v, const char* const* names, int base) {
    // Day 7 has no name of its own (it is Sunday's second number).
    if (names && pick(3) == 0 && v - base < (names == days ? 7 : 12))
      return names[v - base];
    return std::to_string(v);
  }

  std::string item(int lo, int hi, const char* const* names, int base) {
    switch (pick(5)) {
      case 0:
        return name_or_number(value(lo, hi), names, base);
      case 1: {
        int a = value(lo, hi);
        int b = value(a, hi);
        return name_or_number(a, names, base) + "-" + name_or_number(b, names, base);
      }
      case 2: {
        int a = value(lo, hi);
        int b = value(a, hi);
        return std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(value(1, hi - lo + 1));
      }
      case 3:
        return std::to_string(value(lo, hi)) + "/" + std::to_string(value(1, hi - lo + 1));
      default:
        return "*/" + std::to_string(value(1, (hi - lo + 1) / 2 + 1));
    }
  }

  std::string field(int lo, int hi, const char* const* names, int base) {
    auto r = pick(10);
    if (r < 4)
      return "*";
    std::string s = item(lo, hi, names, base);
    if (r >= 8)
      for (auto n = pick(2) + 1; n > 0; --n)
        s += "," + item(lo, hi, names, base);
    return s;
  }

  std::mt19937_64 rng_;
};

// True if `z` changes its offset between `from` and `to` (ms).
bool transition_between(const date::time_zone& z, int64_t from, int64_t to) {
  auto info = z.get_info(date::sys_seconds{seconds{from / 1'000}});
  return info.end.time_since_epoch().count() * 1'000 <= to;
}

std::string describe(const cron_case& c) {
  return "'" + c.spec + "' in '" + c.zone + "' after " + std::to_string(c.after);
}

std::vector<cron_case> generated_cases() {
  spec_generator gen{20'261'125};
  const std::vector<std::string> zones = {
    "America/New_York", "Europe/Berlin",   "Australia/Lord_Howe", "Asia/Kolkata",
    "America/Sao_Paulo", "Pacific/Chatham", "Europe/London",       "America/St_Johns",
    "Pacific/Apia"};
  constexpr int64_t from_ms = 946'684'800'000;    // 2000-01-01
  constexpr int64_t span_ms = 1'104'537'600'000;  // to 2035-01-01
  std::vector<cron_case> cases;
  for (int i = 0; i < 6'000; ++i) {
    cron_case c;
    if (i >= 2'000)
      c.zone = zones[static_cast<size_t>(gen.pick(static_cast<int64_t>(zones.size())))];
    c.spec = gen.spec();
    c.after = from_ms + gen.pick(span_ms);
    switch (gen.pick(3)) {
      case 0:
        c.after -= c.after % 60'000;  // on a minute
        break;
      case 1:
        c.after -= c.after % 1'000;  // on a second
        break;
      default:
        break;
    }
    cases.push_back(c);
  }
  return cases;
}

// Ours for `c`: a time, "none", or "refused".
std::string ours_for(const cron_case& c) {
  auto s = schedule::parse(c.spec, c.zone, 0);
  if (!s)
    return "refused";
  auto next = s->next_after(c.after);
  return next ? std::to_string(*next) : "none";
}

}  // namespace

// Ours must equal the rule oracle everywhere, in UTC and in zones.
BOOST_AUTO_TEST_CASE(generated_specs_follow_the_rule_oracle) {
  std::vector<cron_case> cases;
  int refused = 0;
  for (auto& c : generated_cases()) {
    if (ours_for(c) == "refused")
      ++refused;
    else
      cases.push_back(c);
  }
  auto answers = ask("rule", cases);
  for (size_t i = 0; i < cases.size(); ++i)
    BOOST_TEST(ours_for(cases[i]) == answers[i],
               describe(cases[i]) << ": ours " << ours_for(cases[i]) << ", rule " << answers[i]);
  BOOST_TEST(refused < 30);
}

// Away from DST transitions ours must equal croniter's own search too,
// except where croniter skips a matching time that the rule oracle finds.
BOOST_AUTO_TEST_CASE(generated_specs_agree_with_croniter_away_from_dst) {
  auto cases = generated_cases();
  auto answers = ask("croniter", cases);
  auto rule = ask("rule", cases);
  int agreed = 0, never = 0, near_dst = 0, croniter_skips = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto& c = cases[i];
    auto ours = ours_for(c);
    if (ours == "refused") {
      // Only specs that can never fire are refused: croniter finds none either.
      BOOST_TEST(answers[i] == "none", describe(c) << ": refused, croniter gives " << answers[i]);
      ++never;
      continue;
    }
    BOOST_REQUIRE_MESSAGE(ours != "none", describe(c) << ": ours none");
    if (!c.zone.empty() && answers[i] != "none") {
      constexpr int64_t day = 86'400'000;
      auto last = std::max(std::stoll(ours), std::stoll(answers[i]));
      if (transition_between(*date::locate_zone(c.zone), c.after - day, last + day)) {
        ++near_dst;  // croniter's DST handling is not ours (last test)
        continue;
      }
    }
    if (ours != answers[i] && ours == rule[i]
        && (answers[i] == "none" || std::stoll(answers[i]) > std::stoll(ours))) {
      ++croniter_skips;
      continue;
    }
    BOOST_TEST(ours == answers[i], describe(c) << ": ours " << ours << ", croniter " << answers[i]);
    ++agreed;
  }
  BOOST_TEST_MESSAGE(agreed << " agree with croniter, " << never << " never fire, " << near_dst
                            << " span a DST transition, " << croniter_skips
                            << " where croniter skips a match");
  BOOST_TEST(agreed >= 5'000);
  BOOST_TEST(croniter_skips < 60);
}

namespace {

// Where croniter's DST handling differs from schedule.hpp's rule.
struct croniter_difference {
  cron_case c;
  int64_t ours;
  int64_t croniter;
  const char* reason;
};

const croniter_difference croniter_dst_differences[] = {
  {{"America/New_York", "30 2 * * *", 1'772'949'600'000}, 1'772'953'200'000, 1'772'955'000'000,
   "02:30 does not exist on 2026-03-08: croniter moves it on by the gap's length, to 03:30 "
   "EDT; the rule runs it at the gap's end, 03:00 EDT"},
  {{"Europe/Berlin", "30 2 * * *", 1'774'742'400'000}, 1'774'746'000'000, 1'774'747'800'000,
   "02:30 does not exist on 2026-03-29: croniter gives 03:30 CEST, the rule 03:00 CEST"},
  {{"America/New_York", "*/15 2 * * *", 1'772'953'140'000}, 1'772'953'200'000,
   1'773'032'400'000,
   "02:00-02:45 do not exist on 2026-03-08: croniter skips the day and lands on 01:00 EDT of "
   "the next, outside hour 2; the rule runs them once at 03:00 EDT"},
  {{"America/New_York", "30 1 * * *", 1'793'511'000'000}, 1'793'601'000'000, 1'793'604'600'000,
   "after 01:30 EDT ran on 2026-11-01, croniter keeps the summer offset for the next day and "
   "gives 02:30 EST, outside hour 1; the rule gives 01:30 EST"},
  {{"America/New_York", "*/20 * * * *", 1'793'513'400'000}, 1'793'516'400'000,
   1'793'510'400'000,
   "at 01:10 EST, in the repeated hour, croniter answers 01:20 EDT, an instant before the "
   "start; the repeated hour already ran, so the rule gives 02:00 EST"},
  {{"Europe/Berlin", "30 2 * * *", 1'792'888'200'000}, 1'792'978'200'000, 1'792'981'800'000,
   "after 02:30 CEST ran on 2026-10-25, croniter gives 03:30 CET the next day, outside hour 2"},
  {{"Australia/Lord_Howe", "45 1 * * *", 1'775'313'900'000}, 1'775'402'100'000,
   1'775'403'900'000,
   "after a 30-minute fall-back on 2026-04-05, croniter is 30 minutes late the next day "
   "(02:15 local); the rule gives 01:45"},
};

}  // namespace

// Each listed instant: ours follows the rule (and the rule oracle agrees),
// and croniter still gives the listed answer.
BOOST_AUTO_TEST_CASE(croniter_differs_from_the_dst_rule_where_listed) {
  std::vector<cron_case> cases;
  for (auto& d : croniter_dst_differences)
    cases.push_back(d.c);
  auto rule = ask("rule", cases);
  auto theirs = ask("croniter", cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    auto& d = croniter_dst_differences[i];
    BOOST_TEST_CONTEXT(describe(d.c) << ": " << d.reason) {
      BOOST_TEST(ours_for(d.c) == std::to_string(d.ours));
      BOOST_TEST(rule[i] == std::to_string(d.ours));
      BOOST_TEST(theirs[i] == std::to_string(d.croniter));
    }
  }
}
