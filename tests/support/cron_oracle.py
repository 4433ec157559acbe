#!/usr/bin/python3
"""Oracles for test-cron-differential, built on python3-croniter.

Reads lines "MODE<TAB>ZONE<TAB>SPEC<TAB>AFTER_MS" from the file IN and
writes one answer per line to the file OUT: a time in ms, or "none" when
there is none within 50 years.

MODE "croniter": croniter's own answer, DST handling included.
MODE "rule": the rule of ergon's schedule.hpp, built without ergon's code
    and without croniter's search (which skips some matches, for example
    2030-03-01 for "* * */10 * 3-6/2"): a walk over days and the field
    values of croniter's expansion, with Python's zoneinfo mapping each wall
    clock time to an instant: the only one, the first of two in a
    fall-back overlap, or the end of a spring-forward gap. The answer is
    the first instant after AFTER_MS.

ergon's syntax is turned into croniter's:
  - macros become their fields;
  - 6 fields have seconds first in ergon and last in croniter (and
    croniter then misreads day-of-week 7, so it gets the field expanded);
  - day-of-month and day-of-week combine as in Vixie cron: by "or" only
    if both start with something other than '*'. croniter decides by
    whether a field covers every value, so "*/2" restricts there and
    "1-31" does not. The "or" case merges the times of the spec with
    either day field made '*' (croniter's own day_or search gives up on
    some specs that fire), and a full field in it (every day matches)
    makes both '*'; otherwise croniter's day_or=False is "and".
"""
import sys
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter, CroniterBadDateError

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@hourly": "0 * * * *"}


def fields_of(spec):
    """The spec's fields, macros expanded, and whether its day fields
    combine by "or" (Vixie: both start with something other than '*')."""
    fields = MACROS.get(spec.strip().lower(), spec).split()
    return fields, fields[-3][0] != '*' and fields[-1][0] != '*'


def croniter_exprs(spec):
    """The croniter expressions whose times, merged, are the spec's."""
    fields, day_or = fields_of(spec)
    if len(fields) == 6:
        dow = croniter.expand(' '.join(fields[1:]))[0][4]
        if dow != ['*']:
            fields[5] = ','.join(str(d) for d in dow)
        fields = fields[1:] + fields[:1]
    if not day_or:
        return [' '.join(fields)]
    expanded = croniter.expand(' '.join(fields))[0]
    if expanded[2] == ['*'] or expanded[4] == ['*']:
        fields[2] = fields[4] = '*'
        return [' '.join(fields)]
    by_day = fields[:4] + ['*'] + fields[5:]
    by_weekday = fields[:2] + ['*'] + fields[3:]
    return [' '.join(by_day), ' '.join(by_weekday)]


def times(expr, start):
    """croniter's times after `start`, in order, until it finds none."""
    it = croniter(expr, start, day_or=False, max_years_between_matches=50)
    try:
        while True:
            yield it.get_next(datetime)
    except CroniterBadDateError:
        return


def croniter_answer(zone, spec, after_ms):
    tz = ZoneInfo(zone) if zone else timezone.utc
    start = datetime.fromtimestamp(after_ms / 1000, tz)
    firsts = [next(times(e, start), None) for e in croniter_exprs(spec)]
    found = [round(t.timestamp() * 1000) for t in firsts if t is not None]
    return str(min(found)) if found else "none"


def wall(t, tz):
    return datetime.fromtimestamp(t, tz).replace(tzinfo=None)


def instant(w, tz):
    """The instant (s) of wall clock time `w` under ergon's rule."""
    a = w.replace(tzinfo=tz, fold=0).timestamp()
    b = w.replace(tzinfo=tz, fold=1).timestamp()
    real = [t for t in (a, b) if wall(t, tz) == w]
    if real:
        return round(min(real))
    # In a gap: the first instant whose wall clock time is past `w`.
    lo, hi = int(min(a, b)), int(max(a, b))
    while lo < hi:
        mid = (lo + hi) // 2
        if wall(mid, tz) > w:
            hi = mid
        else:
            lo = mid + 1
    return lo


def field_sets(spec):
    """The values of each field (seconds first) and whether days combine
    by "or", from croniter's expansion of the spec's fields."""
    fields, day_or = fields_of(spec)
    seconds = [0]
    if len(fields) == 6:
        seconds = croniter.expand(' '.join(fields[1:]) + ' ' + fields[0])[0][5]
        fields = fields[1:]
    expanded = croniter.expand(' '.join(fields))[0]
    full = [range(0, 60), range(0, 24), range(1, 32), range(1, 13), range(0, 7)]
    sets = [sorted(full[i]) if e == ['*'] else sorted(e) for i, e in enumerate(expanded)]
    seconds = sorted(range(0, 60)) if seconds == ['*'] else sorted(seconds)
    return seconds, sets, day_or


def rule_answer(zone, spec, after_ms):
    tz = ZoneInfo(zone) if zone else timezone.utc
    seconds, (minutes, hours, days, months, weekdays), day_or = field_sets(spec)
    days, months, weekdays = set(days), set(months), set(weekdays)
    first = wall(after_ms // 1000, tz)
    day = first.date()
    for _ in range(366 * 50):
        if day.month in months:
            dom = day.day in days
            dow = (day.weekday() + 1) % 7 in weekdays
            if (dom or dow) if day_or else (dom and dow):
                for h in hours:
                    for m in minutes:
                        for s in seconds:
                            w = datetime(day.year, day.month, day.day, h, m, s)
                            if w < first:
                                continue
                            t = instant(w, tz) * 1000
                            if t > after_ms:
                                return str(t)
        day += timedelta(days=1)
    return "none"


def main():
    with open(sys.argv[1]) as cases, open(sys.argv[2], "w") as out:
        for line in cases:
            mode, zone, spec, after_ms = line.rstrip("\n").split("\t")
            answer = croniter_answer if mode == "croniter" else rule_answer
            out.write(answer(zone, spec, int(after_ms)) + "\n")


if __name__ == "__main__":
    main()
