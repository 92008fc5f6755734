"""The gateway's side of the queue: send tasks, probe the broker and the workers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kombu.exceptions import OperationalError

from engram.settings import Settings

log = logging.getLogger("engram.dispatch")

WORKER_PING_TIMEOUT = 1.0


def dispatch_observe(event_id: str) -> None:
    """Enqueue processing of an accepted event. A broker outage is logged, not raised: the event
    is already durable in the inbox and the sweeper dispatches it when the broker is back."""
    from engram.tasks.capture import observe

    try:
        observe.apply_async((event_id,))
    except (OperationalError, OSError) as exc:
        log.warning("broker unavailable, event %s waits in the inbox: %s", event_id, exc)


def enqueue_summary(session_id: str) -> None:
    from engram.tasks.capture import summarize

    try:
        summarize.apply_async((session_id,))
    except (OperationalError, OSError) as exc:
        log.warning("broker unavailable, summary of %s left to the sweeper: %s", session_id, exc)


def derived_changed() -> None:
    """Documents changed outside the capture pipeline (memories, forget, import): ask for the
    derived indexes to catch up soon. Debounced; a broker outage leaves it to the sweeper."""
    from engram.tasks import dispatch

    dispatch.kick_derived()


def broker_probe(settings: Settings) -> Callable[[], str | None]:
    def probe() -> str | None:
        if settings.embedded:
            return None
        from engram.tasks.app import celery_app

        try:
            with celery_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
        except (OperationalError, OSError) as exc:
            return str(exc)
        return None

    return probe


def worker_probe(
    settings: Settings, embedded_alive: Callable[[], bool] | None
) -> Callable[[], dict[str, Any]]:
    def probe() -> dict[str, Any]:
        if embedded_alive is not None:
            alive = embedded_alive()
            return {"alive": int(alive), "names": ["embedded"] if alive else []}
        from engram.tasks.app import celery_app

        try:
            replies = (
                celery_app.control.broadcast(
                    "engram_memory", reply=True, timeout=WORKER_PING_TIMEOUT
                )
                or []
            )
        except (OperationalError, OSError) as exc:
            return {"alive": 0, "names": [], "error": str(exc)}
        memory = {
            name: answer.get("processes", {}) if isinstance(answer, dict) else {}
            for reply in replies
            for name, answer in reply.items()
        }
        names = sorted(memory)
        return {"alive": len(names), "names": names, "memory": memory}

    return probe


def queue_probe(settings: Settings) -> Callable[[], dict[str, int]]:
    """Tasks waiting in the broker per queue (distributed mode; the embedded server's queues
    are in-process lanes, whose backlog the derive queues already show)."""

    def probe() -> dict[str, int]:
        if settings.embedded:
            return {}
        from engram.tasks.app import ALL_QUEUES, celery_app
        from engram.tasks.broker import client_errors, redis_broker

        broker = redis_broker(celery_app)  # a client; it connects on the first read
        if broker is None:
            return {}
        # redis is imported by now: its errors are known
        failures: tuple[type[BaseException], ...] = (OperationalError, OSError, *client_errors())
        try:
            return {queue: broker.queued_count([queue]) for queue in ALL_QUEUES}
        except failures as exc:
            log.warning("could not read the queue lengths from the broker: %s", exc)
            return {}
        finally:
            broker.close()

    return probe
