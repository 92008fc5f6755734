"""Draining the derive queue into the derived indexes: vectors (Chroma) and the graph.

Both drains claim a batch under a lease, bring their index up to date idempotently and mark the
batch done, so a batch repeated after a crash is harmless. They are called by the Celery tasks of
distributed mode (``engram.embed``, ``engram.graph_extract``) and by the embedded server's
derived lane (``engram.lane``) alike.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from sqlalchemy import Connection, select, text

from engram import derive, graph, inbox
from engram.backoff import backoff_seconds
from engram.schema import observations
from engram.store import Store
from engram.vectors import TARGET as VECTOR_TARGET
from engram.vectors import VectorIndex, Vectors

log = logging.getLogger("engram.drains")

GRAPH_TARGET = "graph"
GRAPH_BATCH = 5
"""Documents claimed at a time. The graph lives in the store of record, so applying holds the
write lock (on SQLite: every writer's): entities are extracted before the lock is taken, and a
transaction ends after ``GRAPH_TRANSACTION_SECONDS`` or as soon as a live request arrives
(``Store.live_pending``), so a hook's /v1/observe waits for one document at most."""
GRAPH_TRANSACTION_SECONDS = 0.015
"""A graph transaction adds documents until it has held the lock this long (~3 ms a document
on a realistic 80k-document graph, alone on the machine)."""
GRAPH_LEASE_SECONDS = 120.0
GRAPH_RETRY_SECONDS = 30.0
"""How long a graph document that failed waits before it is claimed again."""
VECTOR_LEASE_SECONDS = 120.0
VECTOR_RETRY_SECONDS = (5.0, 300.0)
"""Backoff of a failed embedding batch: first retry, cap (doubling per attempt)."""


@dataclasses.dataclass(frozen=True)
class VectorDrain:
    embedded: int = 0
    deleted: int = 0
    more: bool = False
    """Work may be left (a full batch was done, or a batch failed and waits for its retry)."""
    failed: bool = False


def capture_waiting(store: Store) -> bool:
    """True while the capture inbox has work a worker could take now: derived work yields."""
    with store.read() as conn:
        return inbox.has_work(conn)


def drain_vectors(
    store: Store,
    vectors: Vectors,
    batch: int,
    batches: int = 1,
    keep_observations: int = 0,
    yield_to_capture: bool = False,
) -> VectorDrain:
    """Embed up to ``batches`` batches of ``batch`` queued changes. ``keep_observations`` > 0:
    the index keeps the newest that many observations of all projects (older ones are not
    embedded, and are removed as newer ones arrive). ``yield_to_capture``: stop after the first batch
    while capture has work waiting (``more`` says work is left)."""
    if not vectors.enabled:
        with store.write(
            background=True
        ) as conn:  # nothing will ever read them: keep the queue empty
            derive.clear(conn, VECTOR_TARGET)
        return VectorDrain()
    index = vectors.index()
    if index is None:
        vectors.retry()  # Chroma or the embedder may be back by the next sweep
        return VectorDrain(failed=True)
    embedded = deleted = 0
    for number in range(batches):
        if number and yield_to_capture and capture_waiting(store):
            return VectorDrain(embedded, deleted, more=True)
        with store.write(background=True) as conn:
            changes = derive.claim(conn, VECTOR_TARGET, batch, VECTOR_LEASE_SECONDS)
        if not changes:
            return VectorDrain(embedded, deleted)
        try:
            cutoff = _cutoff(store, changes, keep_observations)
            index.apply(changes, drop=_not_embedded(store, changes, cutoff))
            _prune(store, index, cutoff, keep_observations)
        except Exception as exc:  # noqa: BLE001 - kept queued, retried with backoff, shown in status
            attempts = max(c.attempts for c in changes)
            delay = backoff_seconds(attempts, *VECTOR_RETRY_SECONDS)
            with store.write(background=True) as conn:
                derive.failed(conn, VECTOR_TARGET, changes, f"{type(exc).__name__}: {exc}", delay)
            log.warning(
                "embedding %d documents failed (attempt %d, retry in %.0fs): %s",
                len(changes),
                attempts,
                delay,
                exc,
            )
            return VectorDrain(embedded, deleted, more=True, failed=True)
        with store.write(background=True) as conn:
            derive.done(conn, VECTOR_TARGET, changes)
        embedded += sum(1 for c in changes if c.op == derive.UPSERT)
        deleted += sum(1 for c in changes if c.op != derive.UPSERT)
        if len(changes) < batch:
            return VectorDrain(embedded, deleted)
    return VectorDrain(embedded, deleted, more=True)


PRUNE_SLACK = 1.05
"""The index may exceed its observation cap by this factor before old vectors are removed, so
pruning runs once per few hundred new observations, not per batch."""
PRUNE_LIMIT = 5000


def _cutoff(store: Store, changes: list[derive.Change], keep: int) -> float | None:
    """The creation time before which an observation falls outside the newest ``keep`` (None:
    no cap, or no observation in ``changes``)."""
    if keep <= 0 or not any(c.doc is not None and c.doc.kind == "observation" for c in changes):
        return None
    with store.read() as conn:
        return derive.observation_cutoff(conn, keep)


def _prune(store: Store, index: VectorIndex, cutoff: float | None, keep: int) -> None:
    if cutoff is None or index.count() <= keep * PRUNE_SLACK:
        return
    with store.read() as conn:
        old = derive.observations_before(conn, cutoff, PRUNE_LIMIT)
    for project in {p for _, p in old}:
        index.forget(project, [doc_id for doc_id, p in old if p == project])
    log.info("vectors: %d observations older than the newest %d removed", len(old), keep)


UNEMBEDDED_KINDS = ("read", "search")
"""Observations that get no vector: a file read or a listing (grep, glob, ls). Their text is the
file's or the listing's first lines, which a vector would only blur; keyword and graph search
find them by path and content. Measured on the load benchmark's realistic corpus: about a
quarter of all events, so embedding keeps up with capture on one core."""


def _not_embedded(store: Store, changes: list[derive.Change], cutoff: float | None) -> set[str]:
    """Upserted observations the index does not keep: older than the cutoff, or of a kind that
    gets no vector."""
    docs = [
        c.doc
        for c in changes
        if c.op == derive.UPSERT and c.doc is not None and c.doc.kind == "observation"
    ]
    if not docs:
        return set()
    drop = {d.doc_id for d in docs if cutoff is not None and d.created_at < cutoff}
    with store.read() as conn:
        drop |= set(
            conn.execute(
                select(observations.c.id).where(
                    observations.c.id.in_([d.doc_id for d in docs]),
                    observations.c.kind.in_(UNEMBEDDED_KINDS),
                )
            ).scalars()
        )
    return drop


def drain_graph(
    store: Store,
    batch: int = GRAPH_BATCH,
    max_batches: int | None = None,
    yield_to_capture: bool = False,
) -> int:
    """Apply queued graph changes until the queue is empty (or ``max_batches`` ran, or, with
    ``yield_to_capture``, capture has work waiting after a batch); returns how many changes were
    applied. A failing batch is retried one document at a time, so one bad document is set
    aside (``derive.failed``, retried later) without holding up the rest."""
    applied = batches = 0
    while max_batches is None or batches < max_batches:
        if batches and yield_to_capture and capture_waiting(store):
            break
        batches += 1
        store.step_aside()
        with store.write(background=True) as conn:
            changes = derive.claim(conn, GRAPH_TARGET, batch, GRAPH_LEASE_SECONDS)
        if not changes:
            break
        try:
            with store.read() as conn:
                prepared = graph.prepare(conn, changes)
            applied += _apply(store, prepared)
        except Exception:  # noqa: BLE001 - foreign input: isolate the document that fails
            log.warning(
                "graph batch of %d failed; applying its documents one by one",
                len(changes),
                exc_info=True,
            )
            applied += _one_by_one(store, changes)
    return applied


def _apply(store: Store, prepared: list[graph.Prepared]) -> int:
    """Apply prepared changes in transactions bounded by time and by live requests; a change
    whose document changed again since its claim is skipped (its newer row is claimed later)."""
    left = prepared
    while left:
        store.step_aside()
        with store.write(background=True) as conn:
            _serialise_graph(conn)
            current = derive.current(conn, GRAPH_TARGET, [p.change for p in left])
            started, taken, touched = time.monotonic(), 0, set()
            for item in left:
                if item.change.doc_id in current:
                    touched |= graph.apply_prepared(conn, item)
                taken += 1
                if store.live_pending() or time.monotonic() - started >= GRAPH_TRANSACTION_SECONDS:
                    break
            graph.collect(conn, touched)
            derive.done(conn, GRAPH_TARGET, [p.change for p in left[:taken]])
        left = left[taken:]
    return len(prepared)


GRAPH_LOCK_KEY = 7437002
"""PostgreSQL advisory lock serialising graph transactions (migrations use 7437001)."""


def _serialise_graph(conn: Connection) -> None:
    """One graph transaction at a time across every process. Two documents' entities and edges
    overlap (concepts like ``python`` or ``test`` are in most of them), and two batches applied at
    once locked them in different orders: PostgreSQL broke the cycles as deadlocks (12 in a
    3-minute run with two workers), each a document set aside for 30 s. A batch takes tens of
    milliseconds, so waiting for the other costs less. SQLite's write lock does this already."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": GRAPH_LOCK_KEY})


def _one_by_one(store: Store, changes: list[derive.Change]) -> int:
    applied = 0
    for change in changes:
        try:
            with store.write(background=True) as conn:
                _serialise_graph(conn)
                graph.apply(conn, [change])
                derive.done(conn, GRAPH_TARGET, [change])
            applied += 1
        except Exception as exc:  # noqa: BLE001 - recorded on the queue row, shown by status
            error = f"{type(exc).__name__}: {exc}"
            log.error(
                "graph extraction of %s failed (%s); retrying in %.0fs",
                change.doc_id,
                error,
                GRAPH_RETRY_SECONDS,
            )
            with store.write(background=True) as conn:
                derive.failed(conn, GRAPH_TARGET, [change], error, GRAPH_RETRY_SECONDS)
    return applied
