"""What happened, as a feed the viewer follows live.

``record`` writes one row in the caller's transaction (so an event exists exactly when its change
committed): observations stored, sessions started and ended, memories created, changed,
forgotten, evicted and restored, dead letters and their retries. Rows hold ids and short titles,
never payloads, and are pruned to the newest ``KEEP``.

``Feed`` is one reader per process: a thread polls the table (every ``POLL_SECONDS``, only while
someone listens), keeps the newest events in memory and wakes every listener; a listener
resuming after a drop gets what it missed from memory or from the table, or ``reset`` when
that is older than what is kept. Because every gateway replica polls the same store, an event
reaches every replica's listeners, whichever process wrote it.

On PostgreSQL an id is taken when a transaction inserts and becomes visible when it commits, so
a lower id can appear after a higher one. The feed holds a gap for ``GAP_HOLD_SECONDS`` before
passing it (a rolled-back insert leaves a gap for good) and delivers what appears late.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

from engram.schema import activity, capture_inbox, memories, observations, sessions
from engram.store import Store, dumps, loads, now

log = logging.getLogger("engram.activity")

KEEP = 5000
"""Rows kept in the table (pruned every ``PRUNE_EVERY`` inserts)."""
PRUNE_EVERY = 500
TYPES = (
    "observation.stored",
    "session.started",
    "session.ended",
    "memory.created",
    "memory.changed",
    "memory.forgotten",
    "memory.evicted",
    "memory.restored",
    "observation.forgotten",
    "capture.dead",
    "capture.retried",
)
POLL_SECONDS = 0.25
GAP_HOLD_SECONDS = 2.0
MEMORY_EVENTS = 2000
"""Events each process keeps in memory for listeners that resume."""
COUNTS_EVERY_SECONDS = 10.0


def record(conn: Connection, type_: str, **data: Any) -> None:
    """One event, in the caller's transaction. ``data``: ids, counts and short titles only."""
    if type_ not in TYPES:
        raise ValueError(f"unknown activity type {type_!r}")
    result = conn.execute(insert(activity).values(at=now(), type=type_, data=dumps(data)))
    new_id = result.inserted_primary_key[0] if result.inserted_primary_key else None
    if new_id is not None and int(new_id) % PRUNE_EVERY == 0:
        conn.execute(delete(activity).where(activity.c.id <= int(new_id) - KEEP))


@dataclasses.dataclass(frozen=True)
class Event:
    id: int | None  # None for events that are not in the table (counts, reset)
    type: str
    at: float
    data: dict[str, Any]

    def sse(self) -> str:
        """The event in Server-Sent Events framing."""
        head = f"id: {self.id}\n" if self.id is not None else ""
        body = json.dumps({"type": self.type, "at": self.at, **self.data}, separators=(",", ":"))
        return f"{head}event: {self.type}\ndata: {body}\n\n"


def _event(row: Any) -> Event:
    return Event(int(row.id), row.type, float(row.at), loads(row.data, {}))


def after(conn: Connection, last_id: int, limit: int = 500) -> list[Event]:
    rows = conn.execute(
        select(activity).where(activity.c.id > last_id).order_by(activity.c.id).limit(limit)
    )
    return [_event(r) for r in rows]


def latest_id(conn: Connection) -> int:
    return int(conn.execute(select(func.max(activity.c.id))).scalar() or 0)


def oldest_id(conn: Connection) -> int:
    return int(conn.execute(select(func.min(activity.c.id))).scalar() or 0)


def counts(conn: Connection) -> dict[str, int]:
    """The figures the viewer's header shows, cheap enough to read every few seconds."""

    def count(table: Any, *where: Any) -> int:
        return int(
            conn.execute(select(func.count()).select_from(table).where(*where)).scalar() or 0
        )

    return {
        "observations": count(observations),
        "sessions": count(sessions),
        "activeSessions": count(sessions, sessions.c.status == "active"),
        "memories": count(memories, memories.c.forgotten_at.is_(None)),
        "inboxWaiting": count(capture_inbox, capture_inbox.c.state != "dead"),
        "deadLetters": count(capture_inbox, capture_inbox.c.state == "dead"),
    }


class Feed:
    """The process's reader of the activity table, shared by every listener (see the module)."""

    def __init__(self, store: Store, poll_seconds: float = POLL_SECONDS) -> None:
        self._store = store
        self._poll = poll_seconds
        self._cond = threading.Condition()
        self._events: deque[Event] = deque(maxlen=MEMORY_EVENTS)
        self._floor = -1  # every id <= floor has been seen (or its gap given up on)
        self._seen_above: set[int] = set()
        self._gap_since: float | None = None
        self._counts: dict[str, int] | None = None
        self._counts_at = 0.0
        self._serial = 0  # bumped on every change a listener should look at
        self._listeners = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- the poller ---------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="engram-feed", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed or self._listeners == 0:
                    self._thread = None
                    return
            try:
                self.poll()
            except Exception:  # the store is down or busy: listeners see no events, try again
                log.warning("activity feed: reading the store failed", exc_info=True)
            time.sleep(self._poll)

    def poll(self) -> None:
        """Read what is new (also called directly by tests)."""
        with self._store.read() as conn:
            if self._floor < 0:
                self._floor = latest_id(conn)
                fresh: list[Event] = []
            else:
                fresh = [e for e in after(conn, self._floor) if e.id not in self._seen_above]
            at = time.monotonic()
            counts_due = bool(fresh) or at - self._counts_at >= COUNTS_EVERY_SECONDS
            figures = counts(conn) if counts_due else None
        changed = False
        with self._cond:
            for event in fresh:
                assert event.id is not None
                self._events.append(event)
                self._seen_above.add(event.id)
                changed = True
            self._advance(at)
            if figures is not None:
                self._counts_at = at
                if figures != self._counts:
                    self._counts = figures
                    changed = True
            if changed:
                self._serial += 1
                self._cond.notify_all()

    def _advance(self, at: float) -> None:
        """Move the floor over every id seen; over a gap only once it was held long enough."""
        while self._seen_above:
            following = self._floor + 1
            if following in self._seen_above:
                self._seen_above.discard(following)
                self._floor = following
                self._gap_since = None
                continue
            if self._gap_since is None:
                self._gap_since = at
            if at - self._gap_since < GAP_HOLD_SECONDS:
                return
            self._floor = min(self._seen_above) - 1  # the gap is given up on
            self._gap_since = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- listeners ----------------------------------------------------------------------------

    def listen(
        self,
        last_id: int | None,
        heartbeat_seconds: float,
        until: float,
        stopped: Callable[[], bool] = lambda: False,
    ) -> Iterator[Event | None]:
        """Events after ``last_id`` (None: from now), then new ones as they come, until the
        monotonic time ``until``; ``None`` when ``heartbeat_seconds`` passed with nothing."""
        with self._cond:
            self._listeners += 1
            self._start()
        try:
            yield from self._listen(last_id, heartbeat_seconds, until, stopped)
        finally:
            with self._cond:
                self._listeners -= 1

    def _listen(
        self,
        last_id: int | None,
        heartbeat_seconds: float,
        until: float,
        stopped: Callable[[], bool],
    ) -> Iterator[Event | None]:
        # what the listener has: up to ``last_id``, or (from now) whatever the store holds as it
        # connects. The reader may take events in before this runs, and holds older ones:
        # neither is sent again, nor missed. An id at or below it that commits later (ids are
        # handed out at insert) is news and still goes out.
        if last_id is None:
            with self._store.read() as conn:
                floor = latest_id(conn)
        else:
            floor = last_id
        with self._cond:
            sent = {e.id for e in self._events if e.id is not None and e.id <= floor}
        if last_id is not None:
            missed, reset = self._missed(last_id)
            if reset:
                yield Event(None, "reset", now(), {"reason": "events since then were pruned"})
            for event in missed:
                assert event.id is not None
                sent.add(event.id)
                yield event
        counts_sent: dict[str, int] | None = None
        serial = -1
        while not self._closed and not stopped() and time.monotonic() < until:
            with self._cond:
                if serial == self._serial:
                    self._cond.wait(min(heartbeat_seconds, max(until - time.monotonic(), 0)))
                woke = serial != self._serial
                serial = self._serial
                pending = [e for e in self._events if e.id not in sent]
                figures = self._counts
            for event in pending:
                assert event.id is not None
                sent.add(event.id)
                yield event
            if figures is not None and figures != counts_sent:
                counts_sent = figures
                yield Event(None, "counts", now(), {"counts": figures})
            elif not woke and not pending:
                yield None  # nothing for a heartbeat's length
            if len(sent) > 4 * MEMORY_EVENTS:  # keep only what the memory can still hold
                with self._cond:
                    sent = {e.id for e in self._events if e.id is not None}

    def _missed(self, last_id: int) -> tuple[list[Event], bool]:
        with self._cond:
            held = list(self._events)
        if held and held[0].id is not None and held[0].id <= last_id + 1:
            return [e for e in held if e.id is not None and e.id > last_id], False
        with self._store.read() as conn:
            oldest = oldest_id(conn)
            missed = after(conn, last_id, limit=MEMORY_EVENTS)
        return missed, bool(oldest) and oldest > last_id + 1
