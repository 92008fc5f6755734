"""The times a query names, as time windows: dates ("on 8 December, 2023", "in January 2022",
"2024-03-05", "March 5th, 2024"), times counted back from now ("two weeks ago", "yesterday",
"last month") and stretches up to now ("in the past two weeks", "this week"). A question about
what happened at a time is answered by what was recorded then (``search.search`` puts those
hits first, ``context.build`` shows those sessions in depth)."""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta, timezone

_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): n for n, name in enumerate(calendar.month_abbr) if name})
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = (
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"(?i)\b{_DAY}(?: of)? {_MONTH},? {_YEAR}\b"),
    re.compile(rf"(?i)\b{_MONTH} {_DAY},? {_YEAR}\b"),
    re.compile(rf"(?i)\b{_MONTH},? {_YEAR}\b"),
)
DAY_SLACK = timedelta(days=1)
"""A named day also takes the day around it: a session recorded late in the evening in one time
zone is the next day in UTC."""


def windows(text: str) -> list[tuple[float, float]]:
    """Each date the text names with a year, as a [start, end) window in epoch seconds (UTC): a
    day (with ``DAY_SLACK`` either side) or a month. A day without a year names no window."""
    found: list[tuple[float, float]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(a <= match.start() < b for a, b in taken):
                continue  # "8 December 2023" is not also "December 2023"
            taken.append(match.span())  # "31 February 2023" is no day, and not February
            window = _window(match.groupdict())
            if window is not None:
                found.append(window)
    return found


def _window(parts: dict[str, str | None]) -> tuple[float, float] | None:
    month_text = (parts.get("month") or "").lower()
    month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text, 0)
    year = int(parts["year"] or 0)
    if not 1 <= month <= 12 or not year:
        return None
    if parts.get("day") is None:
        start = datetime(year, month, 1, tzinfo=timezone.utc)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
        return start.timestamp(), end.timestamp()
    try:
        day = datetime(year, month, int(parts["day"] or 0), tzinfo=timezone.utc)
    except ValueError:  # "31 February"
        return None
    return (day - DAY_SLACK).timestamp(), (day + timedelta(days=1) + DAY_SLACK).timestamp()


_COUNTS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a few": 3,
}  # fmt: skip
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_AGO = re.compile(
    r"(?i)\b(?P<count>\d{1,3}|" + "|".join(sorted(_COUNTS, key=len, reverse=True)) + r")"
    r"\s+(?P<unit>day|week|month|year)s?\s+ago\b"
)
_BACK = {"yesterday": 1.0, "last week": 7.0, "last month": 30.44, "last year": 365.25}
_LAST = re.compile(r"(?i)\b(?P<back>yesterday|last (?:week|month|year))\b(?!\s+of\b)")
AGO_SLACK = 0.25
"""A time counted back is told loosely ("two weeks ago" is 10 to 18 days): its window takes a
quarter of the distance either side, at least a day, and ``DAY_SLACK`` more."""


_SPAN_COUNTS = {**_COUNTS, "few": 3, "couple of": 2, "couple": 2}
_SPAN = re.compile(
    r"(?i)\b(?:(?:in|over|during|within|for)\s+)?(?:(?P<the>the)\s+)?(?P<word>past|last)\s+"
    r"(?:(?P<count>\d{1,3}|" + "|".join(sorted(_SPAN_COUNTS, key=len, reverse=True)) + r")\s+)?"
    r"(?P<unit>day|week|month|year)s?\b(?!\s+of\b)"  # "the last week of August": no stretch
)

_SO_FAR = re.compile(
    r"(?i)(?<!before )(?<!until )\b"
    r"(?:today|this (?P<unit>morning|afternoon|evening|week|month|year))\b"
)


def ago(text: str, now: float) -> list[tuple[float, float]]:
    """Each time the text counts back from ``now`` (epoch seconds): "4 days ago", "a couple of
    weeks ago", "yesterday", "last month", as a window around that time; "in the past two
    weeks", "the last few months", "past month", as the whole stretch up to now (``stretches``);
    "today", "this week", from its start (``so_far``). "How many days ago" counts nothing: it
    asks for the distance, it does not name a time."""
    found, taken = stretches(text, now)
    back: list[float] = []
    for match in _AGO.finditer(text):
        count = match["count"].lower()
        n = int(count) if count.isdigit() else _COUNTS[count]
        back.append(n * _UNIT_DAYS[match["unit"].lower()])
    back += [
        _BACK[m["back"].lower()]
        for m in _LAST.finditer(text)
        if not any(a <= m.start() < b for a, b in taken)  # "the last month" is a stretch
    ]
    for days in back:
        centre = now - days * 86400
        slack = max(1.0, AGO_SLACK * days) * 86400 + DAY_SLACK.total_seconds()
        found.append((centre - slack, centre + slack))
    return found + so_far(text, now)


def so_far(text: str, now: float) -> list[tuple[float, float]]:
    """The part of the present day, week (from Monday), month or year the text names ("today",
    "this morning", "this week", "this month", "this year"; not "before today"), from its
    start (UTC) to ``now``, with ``DAY_SLACK`` either side."""
    today = datetime.fromtimestamp(now, timezone.utc).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    found = []
    for match in _SO_FAR.finditer(text):
        unit = (match["unit"] or "day").lower()
        if unit == "week":
            start = today - timedelta(days=today.weekday())
        elif unit == "month":
            start = today.replace(day=1)
        elif unit == "year":
            start = today.replace(month=1, day=1)
        else:  # today, this morning / afternoon / evening
            start = today
        found.append(((start - DAY_SLACK).timestamp(), now + DAY_SLACK.total_seconds()))
    return found


def stretches(text: str, now: float) -> tuple[list[tuple[float, float]], list[tuple[int, int]]]:
    """The stretches of time up to ``now`` the text names ("in the past two weeks", "over the
    last 3 months", "the past month", "past few days"; "last month" alone is a time counted
    back, not a stretch), each from a quarter further back than it says (as ``AGO_SLACK``) to
    ``now`` and ``DAY_SLACK`` past it; and where in the text each was named."""
    found: list[tuple[float, float]] = []
    taken: list[tuple[int, int]] = []
    slack = DAY_SLACK.total_seconds()
    for match in _stretches(text):
        count = (match["count"] or "").lower()
        n = int(count) if count.isdigit() else _SPAN_COUNTS.get(count, 1)
        days = n * _UNIT_DAYS[match["unit"].lower()] * (1.0 + AGO_SLACK)
        found.append((now - days * 86400 - slack, now + slack))
        taken.append(match.span())
    return found, taken


def _stretches(text: str) -> list[re.Match[str]]:
    return [
        match
        for match in _SPAN.finditer(text)
        if match["word"].lower() == "past" or match["the"] or match["count"]
    ]  # "last month" alone: ``_LAST``'s


def without_counted_back(text: str) -> str:
    """``text`` without the times it counts back ("What did I buy 10 days ago?" -> "What did I
    buy?") and the stretches up to now it names ("in the past two weeks"): search ranks by the
    rest and puts what was recorded then first (``named``). The words of a distance from now
    are the asker's, not the record's: what was written that day says "today" or "just", so
    "days" and "ago" matched only records that mention days (on LongMemEval-S, "What kitchen
    appliance did I buy 10 days ago?" ranked a trip plan first among that week's turns;
    docs/benchmarks.md, "A time counted back is not a topic"). "Last week" and "yesterday"
    stay: records say them too, and removing them cost questions there.
    ``text`` itself when nothing else would be left."""
    rest = text
    for match in reversed(_stretches(text)):
        rest = rest[: match.start()] + " " + rest[match.end() :]
    rest = _SPACE_BEFORE_MARK.sub(r"\1", _SPACES.sub(" ", _AGO.sub(" ", rest))).strip()
    return rest if any(c.isalnum() for c in rest) else text


_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_MARK = re.compile(r"\s+([?.!,;:])")


def named(text: str, now: float | None = None) -> list[tuple[float, float]]:
    """Every window the text names: its dates, and (given ``now``) the times it counts back."""
    return windows(text) + (ago(text, now) if now is not None else [])
