"""Pacing, written once. The backoff rule: wait ``first``, then twice as long each time, never
more than ``cap`` (capture retries in the inbox, derived-index retries in the drains, a busy
gateway during a bulk transcript import, a failing or absent gateway in memory-file sync). And
``Throttle``: at most one go per interval (the drain tasks a burst of writes asks for)."""

from __future__ import annotations

import threading
import time


def backoff_seconds(attempts: int, first: float, cap: float) -> float:
    """The wait after the ``attempts``-th failure (1: ``first``, 2: twice that, ...)."""
    return float(min(cap, first * (2 ** max(attempts - 1, 0))))


class Throttle:
    """``ready()`` is True at most once per ``interval`` seconds, across threads."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: float | None = None
        self._lock = threading.Lock()

    def ready(self) -> bool:
        with self._lock:
            at = time.monotonic()
            if self._last is not None and at - self._last < self.interval:
                return False
            self._last = at
            return True


def doubled(previous: float, first: float, cap: float) -> float:
    """The wait after ``previous`` (0 when nothing was waited yet): the same sequence as
    ``backoff_seconds``, for callers that keep the last wait rather than a count."""
    return float(min(cap, first if previous <= 0 else previous * 2))
