"""The times a query names, read as windows to match items' ``occurred_at``.

"What did Melanie paint in July 2023?", "the outage on 8 May", "what happened in
2022": the words name a time the answer is about, and an item written with
``occurred_at`` inside it is likelier to be that answer than one only similar in
wording. Recall turns these phrases into windows (:func:`windows`) and ranks the
items inside one higher (:mod:`memory.retrieval.hybrid`).

Read, in English: a day ("8 May 2023", "May 8, 2023", "2023-05-08"), a month with
a year ("May 2023"), a year ("in 2023"), a month alone ("in June": that month of
any year), and times relative to the moment of the query (``as_of`` or now):
"today", "yesterday", "last/this week|month|year". Deterministic and cheap: a few
regular expressions, no parser, no model. A month name counts only capitalised,
and "May" only where it cannot be the verb (after a preposition or before a day
or year), so "May I…" or "may have" names no time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("January", "Jan"),
            ("February", "Feb"),
            ("March", "Mar"),
            ("April", "Apr"),
            ("May",),
            ("June", "Jun"),
            ("July", "Jul"),
            ("August", "Aug"),
            ("September", "Sep", "Sept"),
            ("October", "Oct"),
            ("November", "Nov"),
            ("December", "Dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
# Longest forms first; each match consumes its text, so "8 May 2023" is one day,
# not also a month and a year.
_PATTERNS = [
    ("day", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b")),
    ("day", re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b")),
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b")),
    ("month", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b")),
    ("day_any_year", re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH}\b")),
    ("day_any_year", re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*(?:,|\d))")),
    ("year", re.compile(rf"\b(?:in|during|since|of|from|until|by|throughout)\s+{_YEAR}\b", re.IGNORECASE)),
    ("month_any_year", re.compile(rf"\b{_MONTH}\b")),
]
_RELATIVE = re.compile(r"\b(today|yesterday|(?:last|this|past) (?:week|month|year))\b", re.IGNORECASE)
# Words before which "May" is a month, not the verb.
_MAY_BEFORE = re.compile(
    r"(?:\b(?:in|on|of|for|during|since|until|till|from|by|early|late|mid|last|next|this|through)\s+|-)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Windows:
    """Absolute [start, end) ranges, plus months of any year (1-12)."""

    ranges: tuple[tuple[datetime, datetime], ...] = ()
    months: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ranges or self.months)

    def contains(self, moment: datetime | None) -> bool:
        """Python mirror of the SQL test in hybrid (used by tests and callers without SQL)."""
        if moment is None:
            return False
        moment = moment.astimezone(UTC)
        return moment.month in self.months or any(s <= moment < e for s, e in self.ranges)


def _month_range(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _day(year: int, month: int, day: int) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "31 June"
        return None
    return start, start + timedelta(days=1)


def _relative(phrase: str, now: datetime) -> tuple[datetime, datetime]:
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)
    words = phrase.lower().split()
    if words == ["today"]:
        return today, today + timedelta(days=1)
    if words == ["yesterday"]:
        return today - timedelta(days=1), today
    which, unit = words
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        if which == "this":
            return monday, monday + timedelta(days=7)
        # "last week" / "past week": the calendar week before, and the days since.
        return monday - timedelta(days=7), today + timedelta(days=1)
    if unit == "month":
        if which == "this":
            return _month_range(now.year, now.month)
        start, end = _month_range(now.year - (now.month == 1), (now.month - 2) % 12 + 1)
        return start, today + timedelta(days=1) if which == "past" else end
    start, end = datetime(now.year - 1, 1, 1, tzinfo=UTC), datetime(now.year, 1, 1, tzinfo=UTC)
    if which == "this":
        return end, datetime(now.year + 1, 1, 1, tzinfo=UTC)
    return start, today + timedelta(days=1) if which == "past" else end


def _is_month(text: str, match: re.Match[str]) -> bool:
    name = match.group("month")
    if name.isdigit():
        return True
    if name == "May":
        # The verb unless a preposition precedes or a day/year follows ("May 8", "May 2023").
        rest = text[match.end("month") :]
        return bool(_MAY_BEFORE.search(text[: match.start()])) or bool(re.match(r",?\s+\d", rest))
    return True


def windows(text: str, now: datetime | None = None) -> Windows:
    """The time windows ``text`` names (UTC days); empty when it names none."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    ranges: list[tuple[datetime, datetime]] = []
    months: set[int] = set()
    rest = text
    for kind, pattern in _PATTERNS:
        for match in list(pattern.finditer(rest)):
            groups = match.groupdict()
            if groups.get("month") and not _is_month(rest, match):
                continue
            month = groups.get("month")
            m = int(month) if month and month.isdigit() else MONTHS.get((month or "").rstrip("."), 0)
            if kind == "day":
                found = _day(int(groups["year"]), m, int(groups["day"]))
                if found:
                    ranges.append(found)
            elif kind == "month" and 1 <= m <= 12:
                ranges.append(_month_range(int(groups["year"]), m))
            elif kind == "year":
                year = int(groups["year"])
                ranges.append((datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)))
            elif kind in ("day_any_year", "month_any_year") and 1 <= m <= 12:
                # Without a year the day is too narrow to trust: its month stands for it.
                months.add(m)
            else:
                continue
            # Blank what matched (same length, so later offsets hold).
            rest = rest[: match.start()] + " " * (match.end() - match.start()) + rest[match.end() :]
    for match in _RELATIVE.finditer(rest):
        ranges.append(_relative(match.group(1), now))
    return Windows(tuple(sorted(set(ranges))), tuple(sorted(months)))
