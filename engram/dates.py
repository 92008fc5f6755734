"""The dates a query names, as time windows: "on 8 December, 2023", "in January 2022",
"2024-03-05", "March 5th, 2024". A question about what happened at a time is answered by what
was recorded then (``context.build`` shows those sessions in depth)."""

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
