"""The inbox sweeper: re-dispatches work whose task was lost, and only that.

A task is lost when its worker was killed holding the claim (the claim expires), or when the
broker lost it (Redis flushed or restarted without persistence, a publish that failed while the
broker was down). An event that waits its turn behind a backlog is not lost: its task is in the
broker's queue, so the sweeper leaves it alone. To know which is which it reads what the Redis
broker holds — but only when the broker holds fewer capture tasks than the inbox has entries
waiting for one, which is the only way a loss can show. The decisions are the core's
(``engram.inbox``, ``engram.sessions``); this module reads the broker and sends the tasks.

The embedded server's in-memory broker loses nothing while the process lives; its start
re-dispatches everything that was waiting (the previous process's queue died with it).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kombu.exceptions import OperationalError

from engram import context, derive, heartbeat, inbox, sessions
from engram.heartbeat import SWEEPER
from engram.llm.work import TARGETS as LLM_TARGETS
from engram.store import now
from engram.tasks import dispatch, runtime
from engram.tasks.app import (
    EMBED_QUEUE,
    EMBED_TASK,
    GRAPH_QUEUE,
    GRAPH_TASK,
    LLM_QUEUE,
    LLM_TASK,
    SWEEP_TASK,
    celery_app,
)
from engram.tasks.broker import (
    CAPTURE_QUEUES,
    MAINTENANCE_QUEUES,
    RedisBroker,
    client_errors,
    redis_broker,
)

log = logging.getLogger("engram.sweeper")

DISPATCH_LIMIT = 2000
"""Tasks one sweep sends at most per rule; the rest go at the next sweep."""
GRACE_SECONDS = 10.0
"""An entry dispatched this recently may have its task on the way to the broker: never lost."""
CONFIRM_SECONDS = 0.5
"""Between reading the queues and deciding: a task a worker popped in that instant shows up in
the unacknowledged deliveries (or its entry is claimed) by then."""
SUMMARY_LIMIT = 500


def dispatch_observe(event_ids: list[str]) -> int:
    from engram.tasks.capture import observe

    for event_id in event_ids:
        observe.apply_async((event_id,))
    return len(event_ids)


def dispatch_summaries(session_ids: list[str]) -> int:
    from engram.tasks.capture import summarize

    for session_id in session_ids:
        summarize.apply_async((session_id,))
    return len(session_ids)


def _lost_events(reader: RedisBroker, expired: list[str]) -> tuple[list[str], bool]:
    """Waiting entries whose task the broker does not hold (or holds for a worker that died);
    (ids, whether the queues were read). The dead workers' deliveries of what is sent again,
    including ``expired`` claims, are dropped from the broker so it never hands them back."""
    from engram.tasks.capture import observe

    services = runtime.services()
    settings, store = services.settings, services.store()
    claim_grace = max(settings.inbox_lease_seconds, GRACE_SECONDS)
    deliveries = reader.deliveries(observe.name)
    stale = {d.arg: d.tag for d in deliveries if d.arg in set(expired)}
    with store.read() as conn:
        unclaimed = inbox.unclaimed_count(conn)
    fresh = [d for d in deliveries if d.delivered_at > time.time() - claim_grace]
    read = False
    lost: list[str] = []
    if unclaimed and reader.queued_count(CAPTURE_QUEUES) + len(fresh) < unclaimed:
        # fewer tasks than waiting entries: find which are missing
        read = True
        queued = reader.queued(CAPTURE_QUEUES, observe.name)
        time.sleep(CONFIRM_SECONDS)  # a task popped in that instant is delivered by now
        deliveries = reader.deliveries(observe.name)
        delivered = {d.arg: d.delivered_at for d in deliveries}
        lost = inbox.dispatch_missing(store, queued, delivered, claim_grace, DISPATCH_LIMIT)
        lost_set = set(lost)
        stale.update({d.arg: d.tag for d in deliveries if d.arg in lost_set})
    reader.forget_deliveries(stale.values())
    return lost, read


def _release_lost_drains(reader: RedisBroker, vectors: int, graph: int, llm: int = 0) -> int:
    """Drain tasks marked as queued that the broker no longer holds (a worker killed holding
    one, a flushed queue): their marker is released so the kick that follows sends one again,
    instead of the index waiting for the marker to expire. Returns how many were released."""
    gate = runtime.services().flight(celery_app)
    released = 0
    for name, queue, pending in (
        (EMBED_TASK, EMBED_QUEUE, vectors),
        (GRAPH_TASK, GRAPH_QUEUE, graph),
        (LLM_TASK, LLM_QUEUE, llm),
    ):
        if not pending or not gate.claimed(name) or reader.holds([queue], name):
            continue
        time.sleep(CONFIRM_SECONDS)  # a task being published in that instant is queued by now
        if gate.claimed(name) and not reader.holds([queue], name):
            gate.started(name)
            released += 1
            log.warning("sweeper: the queued %s task was lost; sending another", name)
    return released


def sweep_once(starting: bool = False) -> dict[str, Any]:
    """One sweep. ``starting``: an embedded server starting, whose in-memory queue died with the
    previous process, so every waiting entry and pending summary is sent again."""
    services = runtime.services()
    settings, store = services.settings, services.store()
    result: dict[str, Any] = {"events": 0, "expiredClaims": 0, "summaries": 0, "brokerRead": False}
    reader = None if starting else redis_broker(celery_app)
    # after redis_broker: it imports redis where the broker is Redis
    unreachable: tuple[type[Exception], ...] = (OperationalError, OSError, *client_errors())
    try:
        if starting:
            result["events"] = dispatch_observe(inbox.dispatch_all_waiting(store))
        else:
            expired = inbox.dispatch_expired_claims(store, DISPATCH_LIMIT)
            if reader is not None:
                lost, result["brokerRead"] = _lost_events(reader, expired)
                result["events"] = dispatch_observe(lost)
            result["expiredClaims"] = dispatch_observe(expired)
        with store.read() as conn:
            awaiting = sessions.awaiting_summary(conn, now() - GRACE_SECONDS, SUMMARY_LIMIT)
        if awaiting and reader is not None:
            from engram.tasks.capture import summarize

            held = reader.queued(MAINTENANCE_QUEUES, summarize.name) | {
                d.arg for d in reader.deliveries(summarize.name)
            }
            awaiting = [s for s in awaiting if s not in held]
        result["summaries"] = dispatch_summaries(awaiting)
    except unreachable as exc:
        log.warning("sweeper could not read or reach the broker (%s); next sweep tries again", exc)
        result["error"] = str(exc)
    finally:
        if reader is not None:
            reader.close()
    if settings.embedder == "none":
        with store.write() as conn:  # every write queues vector work; with no embedder, drop it
            derive.clear(conn, "vector")
    with store.read() as conn:  # derived work whose task was lost (or never sent: import, forget)
        result["graph"] = derive.pending(conn, "graph")
        result["vectors"] = derive.pending(conn, "vector")
        result["llm"] = (
            sum(derive.pending(conn, target) for target in LLM_TARGETS)
            if settings.llm_providers
            else 0
        )
    if reader is not None and (result["graph"] or result["vectors"] or result["llm"]):
        result["lostDrains"] = _release_lost_drains(
            reader, result["vectors"], result["graph"], result["llm"]
        )
    if result["graph"] or result["vectors"] or result["llm"]:
        dispatch.kick_derived()
    result["injectionsPruned"] = context.prune_injections(store)
    with store.write() as conn:
        heartbeat.beat(conn, SWEEPER, result)
    if result["events"] or result["expiredClaims"] or result["summaries"]:
        log.info(
            "sweeper re-dispatched %d lost events, %d expired claims and %d summaries",
            result["events"],
            result["expiredClaims"],
            result["summaries"],
        )
    return result


@celery_app.task(name=SWEEP_TASK)
def sweep() -> dict[str, Any]:
    return sweep_once()
