"""The capture pipeline's tasks: observe (scrub → compress → store → index) and summarize."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

from engram import inbox, observations, sessions
from engram.compress import compress
from engram.privacy import scrub
from tasks import embed, runtime
from tasks import graph as graph_tasks
from tasks.app import celery_app

log = logging.getLogger("engram.tasks")

SUMMARY_WAIT_SECONDS = 2.0
"""How long summarize waits before looking again when the session still has events in flight."""
SUMMARY_MAX_WAITS = 30


@celery_app.task(name="engram.observe", bind=True, max_retries=None)
def observe(self: Task, event_id: str) -> str:
    """Process one inbox entry. Idempotent: a second delivery finds nothing to claim."""
    settings, store = runtime.settings(), runtime.store()
    claim = inbox.claim(store, event_id, settings.inbox_lease_seconds)
    if claim is None:
        return "skipped"
    try:
        # Scrubbed at the gateway already; scrubbing is idempotent and this is the last door
        # before the store for anything that reached the inbox another way.
        payload: dict[str, Any] = scrub(claim.event.to_payload())  # type: ignore[assignment]
        compressed = compress(payload)
        with store.write() as conn:
            observations.store(conn, store.keyword, claim.event, compressed)
    except Exception as exc:  # noqa: BLE001 - a task body: every failure is retried or dead-lettered
        error = f"{type(exc).__name__}: {exc}"
        delay = inbox.fail(store, event_id, error, claim.attempts, settings.task_max_attempts,
                           settings.retry_base_seconds, settings.retry_max_seconds)
        if delay is None:
            log.error("event %s is a dead letter after %d attempts: %s",
                      event_id, claim.attempts, error)
            return "dead"
        log.warning("event %s attempt %d failed (%s); retrying in %.1fs",
                    event_id, claim.attempts, error, delay)
        raise self.retry(countdown=delay, exc=exc) from exc
    embed.kick()
    graph_tasks.kick()
    return "stored"


@celery_app.task(name="engram.summarize", bind=True, max_retries=SUMMARY_MAX_WAITS)
def summarize(self: Task, session_id: str) -> str:
    """Summarise an ended session once every event it produced has been processed."""
    store = runtime.store()
    with store.read() as conn:
        waiting = inbox.pending_for_session(conn, session_id)
    if waiting and self.request.retries < SUMMARY_MAX_WAITS:
        raise self.retry(countdown=SUMMARY_WAIT_SECONDS)
    result = sessions.summarize(store, session_id)
    if result is not None:
        embed.kick()
        graph_tasks.kick()
    return "missing" if result is None else "summarized"
