"""Per-process state for task bodies: the settings and a lazily opened store.

Opened lazily so a prefork worker's children each get their own database connections instead of
sharing the parent's sockets across fork().
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from celery.signals import worker_process_init

from engram.settings import Settings, load_settings
from engram.store import Store

if TYPE_CHECKING:
    from celery import Celery

    from engram.lane import DerivedLanes
    from engram.tasks.broker import SingleFlight
    from engram.vectors import Vectors

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


def lane() -> DerivedLanes | None:
    """The embedded server's derived lanes, or None in a worker pool (derived work is sent as
    tasks there)."""
    return _lane


def flight(app: Celery) -> SingleFlight:
    """This process's gate of queued drain tasks on ``app``'s broker (see
    ``engram.tasks.broker.SingleFlight``); ``configure`` and a fork drop it."""
    global _flight
    from engram.tasks.broker import single_flight

    with _lock:
        if _flight is None:
            _flight = single_flight(app)
        return _flight


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


@worker_process_init.connect
def _after_fork(**_: object) -> None:
    reset_after_fork()
