"""The capture pipeline's tasks: observe (scrub → compress → store → index) and summarize."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

from engram import inbox, observations, sessions, summary
from engram.compress import compress
from engram.errors import SessionConflict
from engram.llm import work
from engram.privacy import scrub
from engram.tasks import dispatch, runtime
from engram.tasks.app import OBSERVE_TASK, SUMMARIZE_TASK, celery_app

log = logging.getLogger("engram.tasks")


@celery_app.task(name=OBSERVE_TASK, bind=True, max_retries=None)
def observe(self: Task, event_id: str) -> str:
    """Process one inbox entry. Idempotent: a second delivery finds nothing to claim."""
    services = runtime.services()
    settings, store = services.settings, services.store()
    claim = inbox.claim(store, event_id, settings.inbox_lease_seconds)
    if claim is None:
        return "skipped"
    try:
        # Scrubbed at the gateway already; scrubbing is idempotent and this is the last door
        # before the store for anything that reached the inbox another way.
        payload: dict[str, Any] = scrub(claim.event.to_payload())  # type: ignore[assignment]
        compressed = compress(payload)
        rewrite = work.compresses(settings, claim.event.project)
        with store.write() as conn:
            created = observations.store(conn, store.keyword, claim.event, compressed)
            # the LLM's reading, queued with the record (opted-in projects only)
            queued = (
                work.queue_compress(conn, claim.event.observation_id, settings)
                if (rewrite and created)
                else True
            )
    except Exception as exc:  # noqa: BLE001 - a task body: every failure is retried or dead-lettered
        error = f"{type(exc).__name__}: {exc}"
        permanent = isinstance(exc, SessionConflict)  # resending cannot change whose session it is
        delay = inbox.fail(
            store,
            event_id,
            error,
            claim.attempts,
            claim.attempts if permanent else settings.task_max_attempts,
            settings.retry_base_seconds,
            settings.retry_max_seconds,
        )
        if delay is None:
            log.error(
                "event %s is a dead letter after %d attempts: %s", event_id, claim.attempts, error
            )
            _summarize_if_due(claim.event.session_id)
            return "dead"
        log.warning(
            "event %s attempt %d failed (%s); retrying in %.1fs",
            event_id,
            claim.attempts,
            error,
            delay,
        )
        raise self.retry(countdown=delay, exc=exc) from exc
    if not queued:
        llm = services.llm()
        if llm is not None:
            llm.ledger.add("", "", "compress", dropped=1)
    dispatch.kick_derived()
    _summarize_if_due(claim.event.session_id)
    return "stored"


def _summarize_if_due(session_id: str) -> None:
    """After a session's event left the inbox: when the session has ended and this was its last
    waiting event, its summary can be built now."""
    with runtime.services().store().read() as conn:
        due = sessions.summary_due(conn, session_id)
    if due:
        summarize.apply_async((session_id,))


@celery_app.task(name=SUMMARIZE_TASK)
def summarize(session_id: str) -> str:
    """Summarise an ended session once every event it produced has been processed. While events
    still wait, nothing happens here: storing the last of them sends this task again."""
    store = runtime.services().store()
    with store.read() as conn:
        waiting = inbox.pending_for_session(conn, session_id)
    if waiting:
        return "waiting"
    llm = runtime.services().llm()
    dropped: list[str] = []

    def then(conn: Any) -> None:  # the LLM's work on the session, queued with its summary
        dropped.extend(work.queue_session(conn, session_id, runtime.services().settings))

    result = summary.summarize_session(store, session_id, then if llm is not None else None)
    for task in dropped:
        log.info("LLM backlog full: session %s keeps its heuristic %s", session_id, task)
        if llm is not None:
            llm.ledger.add("", "", task, dropped=1)
    if result is not None:
        dispatch.kick_derived()
    return "missing" if result is None else "summarized"
