"""The one backoff rule: wait ``first``, then twice as long each time, never more than ``cap``.
Used for capture retries (the inbox), derived-index retries (the drains), a busy gateway (bulk
transcript import) and a failing or absent gateway (memory-file sync)."""

from __future__ import annotations


def backoff_seconds(attempts: int, first: float, cap: float) -> float:
    """The wait after the ``attempts``-th failure (1: ``first``, 2: twice that, ...)."""
    return float(min(cap, first * (2 ** max(attempts - 1, 0))))


def doubled(previous: float, first: float, cap: float) -> float:
    """The wait after ``previous`` (0 when nothing was waited yet): the same sequence as
    ``backoff_seconds``, for callers that keep the last wait rather than a count."""
    return float(min(cap, first if previous <= 0 else previous * 2))
