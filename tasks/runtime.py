"""Per-process state for task bodies: the settings and a lazily opened store.

Opened lazily so a prefork worker's children each get their own database connections instead of
sharing the parent's sockets across fork().
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from kombu.exceptions import OperationalError

from engram.settings import Settings, load_settings
from engram.store import Store

if TYPE_CHECKING:
    from celery import Task

    from engram.lane import DerivedLanes
    from engram.vectors import Vectors
    from tasks.broker import SingleFlight

log = logging.getLogger("engram.tasks")

_lock = threading.Lock()
_settings: Settings | None = None
_store: Store | None = None
_vectors: Vectors | None = None
_lane: DerivedLanes | None = None
_flight: SingleFlight | None = None
_serves_capture = True


def serving_queues(queues: list[str]) -> None:
    """The queues this worker process consumes (set by `engram worker` before it starts). A
    drain task yields to waiting captures only where the same worker would take them: in a pool
    that serves only ``embed,graph`` yielding would just slow the drain (measured: the graph fell
    2,845 documents behind in 3 minutes, one batch a second)."""
    global _serves_capture
    _serves_capture = "capture" in queues or "observe" in queues


def serves_capture() -> bool:
    return _serves_capture


def configure(settings: Settings, store: Store | None = None,
              vectors: Vectors | None = None, lane: DerivedLanes | None = None) -> None:
    """``lane``: the embedded server's derived lane; derived work is kicked there instead of
    being sent as tasks."""
    global _settings, _store, _vectors, _lane, _flight
    with _lock:
        _settings, _store, _vectors, _lane = settings, store, vectors, lane
        _flight = None  # it talks to the broker of the settings it was made for


KICK_INTERVAL = 0.5
"""A burst of writes sends the derived tasks at most once per this many seconds per process;
they run that much later, so one run drains everything the burst committed."""
_last_kick = 0.0
_kick_lock = threading.Lock()


def flight() -> SingleFlight:
    """This process's gate of queued drain tasks (see ``tasks.broker.SingleFlight``)."""
    global _flight
    from tasks.app import celery_app
    from tasks.broker import single_flight

    with _lock:
        if _flight is None:
            _flight = single_flight(celery_app)
        return _flight


def send_drain(task: Task, countdown: float = 0.0) -> None:
    """Send a drain task unless one is queued already."""
    from redis.exceptions import RedisError

    gate = flight()
    try:
        if not gate.claim(task.name):
            return
    except (RedisError, OSError) as exc:
        log.warning("could not dispatch %s (%s); the sweeper will", task.name, exc)
        return
    try:
        task.apply_async(countdown=countdown)
    except (OperationalError, OSError) as exc:
        log.warning("could not dispatch %s (%s); the sweeper will", task.name, exc)
        with contextlib.suppress(RedisError, OSError):
            gate.started(task.name)  # nothing is queued: let the next request send one


def kick_derived() -> None:
    """Ask for the derived indexes (vectors, graph) to catch up soon; cheap to call often. A
    broker that is down loses nothing: the rows stay queued and the sweeper asks again."""
    global _last_kick
    lane = _lane
    if lane is not None:
        lane.kick()
        return
    with _kick_lock:
        at = time.monotonic()
        if at - _last_kick < KICK_INTERVAL:
            return
        _last_kick = at
    from tasks.embed import embed
    from tasks.graph import graph_extract

    if settings().embedder != "none":
        send_drain(embed, KICK_INTERVAL)
    send_drain(graph_extract, KICK_INTERVAL)


def settings() -> Settings:
    global _settings
    with _lock:
        if _settings is None:
            _settings = load_settings()
        return _settings


def store() -> Store:
    global _store
    current = settings()
    with _lock:
        if _store is None:
            _store = Store.open(current.database_url)
        return _store


def reset_after_fork() -> None:
    """Drop inherited connections; the child opens its own on first use."""
    global _store, _vectors, _flight
    with _lock:
        if _store is not None:
            _store.engine.dispose(close=False)
        _vectors = None  # a Chroma client does not survive fork()
        _flight = None


def vectors() -> Vectors:
    """The vector stream of this process (shared with the gateway in embedded mode)."""
    global _vectors
    from engram.vectors import Vectors

    current, opened = settings(), store()
    with _lock:
        if _vectors is None:
            _vectors = Vectors(current, opened)
        return _vectors
