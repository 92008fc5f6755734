"""The embed task: drains the derive queue's ``vector`` target into the vector index.

A batch is claimed (leased) in one short transaction, embedded and written to Chroma outside
it, then marked done. Chroma upserts and deletes by document id, so a batch done twice (a worker
killed after writing, before marking) is harmless; a failed batch keeps its rows, leased for a
backoff, with the error shown in ``/v1/status``.
"""

from __future__ import annotations

import logging
import threading
import time

from engram import derive
from engram.vectors import TARGET
from tasks import runtime
from tasks.app import celery_app

log = logging.getLogger("engram.tasks")

BATCHES_PER_TASK = 8
"""Batches one task drains before handing over (it re-dispatches itself when more is queued)."""
LEASE_SECONDS = 120.0
RETRY_SECONDS = (5.0, 300.0)
"""Backoff of a failed batch: first retry, cap (doubling per attempt)."""


def drain_vectors(batches: int = BATCHES_PER_TASK) -> dict[str, int]:
    """Embed up to ``batches`` batches of queued changes; counts of what was done."""
    settings, store, vectors = runtime.settings(), runtime.store(), runtime.vectors()
    if not vectors.enabled:
        with store.write() as conn:  # nothing will ever read them: keep the queue empty
            derive.clear(conn, TARGET)
        return {"embedded": 0, "deleted": 0, "more": 0}
    index = vectors.index()
    if index is None:
        vectors.retry()  # Chroma or the embedder may be back by the next sweep
        return {"embedded": 0, "deleted": 0, "more": 0}
    size = max(settings.embedding_batch * 2, 16)
    embedded = deleted = 0
    for _ in range(batches):
        with store.write() as conn:
            changes = derive.claim(conn, TARGET, size, LEASE_SECONDS)
        if not changes:
            return {"embedded": embedded, "deleted": deleted, "more": 0}
        try:
            index.apply(changes)
        except Exception as exc:  # noqa: BLE001 - kept queued, retried with backoff, shown in status
            attempts = max(c.attempts for c in changes)
            delay = min(RETRY_SECONDS[0] * 2 ** (attempts - 1), RETRY_SECONDS[1])
            with store.write() as conn:
                derive.failed(conn, TARGET, changes, f"{type(exc).__name__}: {exc}", delay)
            log.warning("embedding %d documents failed (attempt %d, retry in %.0fs): %s",
                        len(changes), attempts, delay, exc)
            return {"embedded": embedded, "deleted": deleted, "more": 1}
        with store.write() as conn:
            derive.done(conn, TARGET, changes)
        embedded += sum(1 for c in changes if c.op == derive.UPSERT)
        deleted += sum(1 for c in changes if c.op != derive.UPSERT)
    return {"embedded": embedded, "deleted": deleted, "more": 1}


KICK_INTERVAL = 0.5
"""A burst of stored events dispatches one embed task per this many seconds per process."""
_last_kick = 0.0
_kick_lock = threading.Lock()


def kick() -> None:
    """Ask for a drain soon (after a write that queued vector work); cheap to call often."""
    global _last_kick
    if runtime.settings().embedder == "none":
        return
    with _kick_lock:
        at = time.monotonic()
        if at - _last_kick < KICK_INTERVAL:
            return
        _last_kick = at
    embed.apply_async(countdown=KICK_INTERVAL)


@celery_app.task(name="engram.embed")
def embed() -> dict[str, int]:
    result = drain_vectors()
    if result["more"]:
        embed.apply_async(countdown=1.0 if result["embedded"] == 0 else 0)
    return result
