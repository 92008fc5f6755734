"""The store of record: one engine, its keyword index, and transaction helpers.

Domain modules (inbox, observations, sessions, memories, audit, search, transfer) take a Store and
never open engines of their own.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Connection, Engine

from engram.db import create_store_engine, is_sqlite, migrate, write_transaction
from engram.derive import DerivingIndex
from engram.keyword import KeywordIndex, keyword_index_for
from engram.sql import dialect_insert


class WriteLock:
    """The process's SQLite write lock: live writers first, each kind in order of arrival.

    ``threading.Lock`` is not fair: the thread that releases it usually takes it straight back,
    so a writer looping over batches (an import, a graph drain) kept a hook's one /v1/observe
    write waiting for the whole loop. Here waiting writers are served by ticket, and a
    *background* writer (bulk imports, derived-index drains) also lets every waiting live
    writer (capture, the API) go first: measured during a 10,000-item import, a hook's accept
    waited 83 ms at the median behind the queue of batches.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._held = False
        self._next = {False: 0, True: 0}  # next ticket, by background
        self._serving = {False: 0, True: 0}

    @contextmanager
    def hold(self, background: bool = False) -> Iterator[None]:
        with self._cond:
            ticket = self._next[background]
            self._next[background] += 1
            while (
                self._held
                or self._serving[background] != ticket
                or (background and self._serving[False] != self._next[False])
            ):
                self._cond.wait()
            self._held = True
        try:
            yield
        finally:
            with self._cond:
                self._held = False
                self._serving[background] += 1
                self._cond.notify_all()

    def live_waiting(self) -> bool:
        """A live writer is waiting for the lock (read without the condition: a hint)."""
        return self._serving[False] != self._next[False]


class LiveGate:
    """Live requests in flight (a hook's capture, an API call): background work in the same
    process steps aside for them between its steps.

    The write lock alone lets a live writer go before the *next* background transaction; it
    cannot shorten the one running, and the background threads' Python (graph extraction, an
    import's rows) competes with the live request for the GIL from the moment it arrives, not
    only at the lock. Background loops ask ``busy`` between documents (ending their transaction
    early) and ``wait`` before the next one, so a live request mostly runs alone."""

    MAX_WAIT_SECONDS = 0.25
    """The longest background work waits for live requests at one step: under a steady stream
    of live requests it still advances."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._live = 0

    @contextmanager
    def live(self) -> Iterator[None]:
        with self._cond:
            self._live += 1
        try:
            yield
        finally:
            with self._cond:
                self._live -= 1
                if not self._live:
                    self._cond.notify_all()

    def busy(self) -> bool:
        return self._live > 0

    def wait(self, timeout: float = MAX_WAIT_SECONDS) -> None:
        """Return when no live request is in flight, or after ``timeout`` seconds."""
        if not self._live:
            return
        with self._cond:
            self._cond.wait_for(lambda: not self._live, timeout)


class BulkMark:
    """Bulk work in progress (an import): the embedded derived lanes wait while it runs
    (``engram.lane``), so an embedding batch (seconds of CPU that cannot stop for a live request)
    and graph extraction (Python, on the GIL) do not sit beside a hook's request on a machine
    the import already keeps busy.

    An import arrives as a series of bounded requests; the gap between two is its client reading
    and sending the next, so an import counts as running until ``QUIET_SECONDS`` after its last
    request ended."""

    QUIET_SECONDS = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._ended = -float("inf")

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                self._ended = time.monotonic()

    def recent(self) -> bool:
        """An import is running, or one ended less than ``QUIET_SECONDS`` ago."""
        return self._running > 0 or time.monotonic() - self._ended < self.QUIET_SECONDS


class Store:
    def __init__(self, engine: Engine, keyword: KeywordIndex | None = None) -> None:
        self.engine = engine
        self.keyword = keyword or DerivingIndex(keyword_index_for(engine))
        # SQLite admits one writer; a thread that finds the lock taken sleeps in SQLite's busy
        # handler in growing steps (up to 100 ms) even when the lock frees a millisecond later.
        # Queueing this process's writers on a Python lock first hands the lock over at once,
        # in order of arrival.
        self._write_lock = WriteLock() if is_sqlite(engine) else None
        self.gate = LiveGate()
        self.bulk_mark = BulkMark()

    @classmethod
    def open(cls, database_url: str) -> Store:
        """Open (creating and migrating as needed) the store at ``database_url``."""
        engine = create_store_engine(database_url)
        migrate(engine)
        return cls(engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite(self.engine)

    @contextmanager
    def write(self, background: bool = False) -> Iterator[Connection]:
        """One write transaction (committed on exit, rolled back on error). ``background``: bulk
        or derived work, which lets live writers waiting for the SQLite lock go first."""
        if self._write_lock is None:
            with write_transaction(self.engine) as conn:
                yield conn
            return
        with self._write_lock.hold(background), write_transaction(self.engine) as conn:
            yield conn

    def live(self) -> AbstractContextManager[None]:
        """Mark a live request in flight for its whole duration (``LiveGate``)."""
        return self.gate.live()

    def live_pending(self) -> bool:
        """Whether a background transaction should end now: a live request is in flight or a
        live writer waits for the lock."""
        return self.gate.busy() or (
            self._write_lock is not None and self._write_lock.live_waiting()
        )

    def bulk(self) -> AbstractContextManager[None]:
        """Mark bulk work (an import) running for its whole duration (``BulkMark``)."""
        return self.bulk_mark.running()

    def bulk_running(self) -> bool:
        return self.bulk_mark.recent()

    def step_aside(self) -> None:
        """Called by background work before its next transaction: wait (bounded) while live
        requests are in flight."""
        self.gate.wait()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    def answers(self) -> bool:
        """Whether the database answers a trivial query (the public health check)."""
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.read() as conn:
                conn.execute(text("SELECT 1"))
        except SQLAlchemyError:
            return False
        return True

    def close(self) -> None:
        self.engine.dispose()


def now() -> float:
    return time.time()


def dumps(value: Any) -> str:
    """Compact JSON for JSON-shaped text columns."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def loads(value: str | None, default: Any = None) -> Any:
    if value is None or value == "":
        return default
    return json.loads(value)


def iso(ts: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 UTC string with milliseconds, for the API."""
    if ts is None:
        return None
    from datetime import datetime, timezone

    return (
        datetime.fromtimestamp(ts, tz=timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@functools.lru_cache(maxsize=64)
def _insert_ignore_statement(dialect: str, table: Any) -> Any:
    # RETURNING rather than rowcount: psycopg reports rowcount -1 for these statements.
    key = list(table.primary_key.columns)[0]
    return dialect_insert(dialect)(table).on_conflict_do_nothing().returning(key)


def insert_ignore(conn: Connection, table: Any, values: dict[str, Any]) -> bool:
    """INSERT that does nothing when the primary key exists; True when a row was written.

    The statement is built once per table and the values go as parameters: with the values
    inline, SQLAlchemy walked them for a cache key on every call (a third of an import's held
    GIL, py-spy --gil)."""
    return (
        conn.execute(_insert_ignore_statement(conn.dialect.name, table), values).first() is not None
    )
