"""The graph task: drains the derive queue's ``graph`` target into the knowledge graph.

The graph lives in the store of record, so claiming a batch, applying it and marking it done is
one write transaction: a crash leaves the batch queued, never half applied.
"""

from __future__ import annotations

import logging
import threading
import time

from kombu.exceptions import OperationalError

from engram import derive, graph
from engram.store import Store
from tasks import runtime
from tasks.app import celery_app

log = logging.getLogger("engram.tasks")

TARGET = "graph"
GRAPH_BATCH = 200
"""Documents per transaction: big enough to amortise the commit, small enough to hold the SQLite
write lock for only a few hundred milliseconds."""
GRAPH_MAX_BATCHES = 20
"""Batches per task run; a run that stops with work left sends itself again, so other tasks get
the worker in between."""
GRAPH_LEASE_SECONDS = 120.0
GRAPH_RETRY_SECONDS = 30.0
"""How long a batch that failed waits before it is claimed again."""


def drain_graph(store: Store, batch: int = GRAPH_BATCH, max_batches: int | None = None) -> int:
    """Apply queued graph changes until the queue is empty (or ``max_batches`` ran); returns how
    many changes were applied. A failing batch is retried one document at a time, so one bad
    document is set aside (``derive.failed``, retried later) without holding up the rest."""
    applied = batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        changes: list[derive.Change] = []
        try:
            with store.write() as conn:
                changes = derive.claim(conn, TARGET, batch, GRAPH_LEASE_SECONDS)
                graph.apply(conn, changes)
                derive.done(conn, TARGET, changes)
        except Exception:  # noqa: BLE001 - foreign input: isolate the document that fails
            if not changes:
                raise
            log.warning("graph batch of %d failed; applying its documents one by one",
                        len(changes), exc_info=True)
            applied += _one_by_one(store, changes)
            continue
        if not changes:
            break
        applied += len(changes)
    return applied


def _one_by_one(store: Store, changes: list[derive.Change]) -> int:
    applied = 0
    for change in changes:
        try:
            with store.write() as conn:
                graph.apply(conn, [change])
                derive.done(conn, TARGET, [change])
            applied += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the queue row, shown by status
            error = f"{type(exc).__name__}: {exc}"
            log.error("graph extraction of %s failed (%s); retrying in %.0fs",
                      change.doc_id, error, GRAPH_RETRY_SECONDS)
            with store.write() as conn:
                derive.failed(conn, TARGET, [change], error, GRAPH_RETRY_SECONDS)
    return applied


@celery_app.task(name="engram.graph_extract")
def graph_extract() -> int:
    """Drain the graph queue for a bounded number of batches; send itself again when work is
    left. Any number of these may run at once: claims are leases."""
    store = runtime.store()
    applied = drain_graph(store, max_batches=GRAPH_MAX_BATCHES)
    with store.read() as conn:
        left = derive.pending(conn, TARGET)
    if left and applied:
        graph_extract.apply_async()
    return applied


KICK_INTERVAL = 0.5
"""A burst of writes dispatches one graph task per this many seconds per process; the task runs
that much later, so it drains everything the burst committed."""
_last_kick = 0.0
_kick_lock = threading.Lock()


def kick() -> None:
    """Ask for a drain soon (after a write that queued graph work); cheap to call often. A
    broker that is down loses nothing: the rows stay queued and the sweeper dispatches again."""
    global _last_kick
    with _kick_lock:
        at = time.monotonic()
        if at - _last_kick < KICK_INTERVAL:
            return
        _last_kick = at
    try:
        graph_extract.apply_async(countdown=KICK_INTERVAL)
    except (OperationalError, OSError) as exc:
        log.warning("could not dispatch graph extraction (%s); the sweeper will", exc)
