"""The inbox sweeper: re-dispatches work whose task was lost.

A task is lost when its worker was killed before acknowledging it and the broker did not
redeliver it, or when the broker itself lost its queue (Redis restarted without persistence, the
in-memory broker of a stopped embedded server). The inbox still has the entry, so the sweeper
sends it again; the worker's claim makes a double dispatch harmless.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from engram import derive, heartbeat, inbox
from engram.heartbeat import SWEEPER
from engram.schema import sessions
from engram.store import now
from tasks import runtime
from tasks.app import celery_app

log = logging.getLogger("engram.sweeper")


def dispatch_observe(event_ids: list[str]) -> int:
    from tasks.capture import observe

    for event_id in event_ids:
        observe.apply_async((event_id,))
    return len(event_ids)


def sweep_once(everything: bool = False) -> dict[str, int]:
    settings, store = runtime.settings(), runtime.store()
    lost = inbox.due_for_dispatch(store, settings.inbox_lease_seconds, everything=everything)
    dispatch_observe(lost)
    # Sessions that ended but never got their summary (the summarize task was lost too).
    cutoff = now() - settings.inbox_lease_seconds
    with store.read() as conn:
        unsummarised = list(conn.execute(
            select(sessions.c.id).where(
                sessions.c.status == "ended", sessions.c.summary.is_(None),
                sessions.c.ended_at < cutoff,
            ).limit(500)
        ).scalars())
    from tasks.capture import summarize

    for session_id in unsummarised:
        summarize.apply_async((session_id,))
    with store.read() as conn:  # graph work whose task was lost (or never sent: import, forget)
        graph_pending = derive.pending(conn, "graph")
    if graph_pending:
        from tasks.graph import graph_extract

        graph_extract.apply_async()
    vector_pending = 0
    if settings.embedder != "none":
        with store.read() as conn:  # vector work whose embed task was lost, or is backing off
            vector_pending = derive.pending(conn, "vector")
        if vector_pending:
            from tasks.embed import embed

            embed.apply_async()
    result = {"events": len(lost), "summaries": len(unsummarised), "graph": graph_pending,
              "vectors": vector_pending}
    with store.write() as conn:
        heartbeat.beat(conn, SWEEPER, result)
    if lost or unsummarised:
        log.info("sweeper re-dispatched %d events and %d summaries",
                 len(lost), len(unsummarised))
    return result


@celery_app.task(name="engram.sweep")
def sweep() -> dict[str, int]:
    return sweep_once()
