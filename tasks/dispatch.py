"""Sending the derived indexes' drain tasks: at most one queued per index (a Redis marker), and
at most one send per burst of writes (a debounce). In the embedded server the derived lanes take
the kick instead of a task."""

from __future__ import annotations

import contextlib
import logging

from kombu.exceptions import OperationalError

from engram.tasks import runtime
from engram.tasks.app import EMBED_TASK, GRAPH_TASK, LLM_TASK, celery_app
from engram.tasks.runtime import KICK_INTERVAL

log = logging.getLogger("engram.tasks")


def send_drain(name: str, countdown: float = 0.0) -> None:
    """Send the drain task ``name`` unless one is queued already."""
    from redis.exceptions import RedisError

    gate = runtime.services().flight(celery_app)
    try:
        if not gate.claim(name):
            return
    except (RedisError, OSError) as exc:
        log.warning("could not dispatch %s (%s); the sweeper will", name, exc)
        return
    try:
        celery_app.send_task(name, countdown=countdown)
    except (OperationalError, OSError) as exc:
        log.warning("could not dispatch %s (%s); the sweeper will", name, exc)
        with contextlib.suppress(RedisError, OSError):
            gate.started(name)  # nothing is queued: let the next request send one


def kick_derived() -> None:
    """Ask for the derived indexes (vectors, graph) and, with a provider set, the LLM backlog to
    catch up soon; cheap to call often. A
    broker that is down loses nothing: the rows stay queued and the sweeper asks again."""
    services = runtime.services()
    if services.lane is not None:
        services.lane.kick()
        return
    if not services.kicks.ready():
        return
    if services.settings.embedder != "none":
        send_drain(EMBED_TASK, KICK_INTERVAL)
    send_drain(GRAPH_TASK, KICK_INTERVAL)
    if services.settings.llm_providers:
        send_drain(LLM_TASK, KICK_INTERVAL)
