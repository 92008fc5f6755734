"""What task bodies work with: one ``Services`` object per process (settings, the store, the
vector stream, the embedded server's derived lanes, the drain gate).

The composition root hands it over: the embedded server installs the gateway's own services
(``engram.cli.server``), `engram worker` installs services built from its settings
(``engram.cli.main``). Celery calls task functions with their arguments only, so a task finds
its services through ``services()``; a process nobody installed any in (a prefork pool's child)
builds them from the environment on first use. The store and the vector stream open lazily, so
each prefork child gets its own connections instead of sharing the parent's across fork().
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from celery.signals import worker_process_init

from engram.backoff import Throttle
from engram.settings import Settings, load_settings
from engram.store import Store

if TYPE_CHECKING:
    from celery import Celery

    from engram.lane import DerivedLanes
    from engram.llm import LLM
    from engram.tasks.broker import SingleFlight
    from engram.vectors import Vectors


KICK_INTERVAL = 0.5
"""A burst of writes sends the derived tasks at most once per this many seconds per process
(``Services.kicks``, used by ``engram.tasks.dispatch``); they run that much later, so one run
drains everything the burst committed."""


class Services:
    """``settings``; ``store()`` and ``vectors()``, opened on first use and shared after;
    ``lane``: the embedded server's derived lanes (derived work is kicked there instead of sent
    as tasks), None in a worker pool; ``serves_capture``: whether this worker also takes capture
    work (a drain task yields to waiting captures only then: in a pool that serves only
    ``embed,graph`` yielding just slowed the drain, the graph fell 2,845 documents behind in 3
    minutes)."""

    def __init__(
        self,
        settings: Settings,
        store: Store | None = None,
        vectors: Vectors | None = None,
        *,
        lane: DerivedLanes | None = None,
        queues: list[str] | None = None,
    ) -> None:
        self.settings = settings
        self.lane = lane
        self.serves_capture = queues is None or "capture" in queues or "observe" in queues
        self._store = store
        self._vectors = vectors
        self._flight: SingleFlight | None = None
        self._llm: LLM | None = None
        self._lock = threading.Lock()
        self.kicks = Throttle(KICK_INTERVAL)

    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = Store.open(self.settings.database_url)
            return self._store

    def vectors(self) -> Vectors:
        """The vector stream (shared with the gateway in embedded mode)."""
        from engram.vectors import Vectors

        opened = self.store()
        with self._lock:
            if self._vectors is None:
                self._vectors = Vectors(self.settings, opened)
            return self._vectors

    def llm(self) -> LLM | None:
        """The LLM chain, or None when no provider is set (then no LLM call is ever made)."""
        if not self.settings.llm_providers:
            return None
        from engram.llm import llm_from_settings

        opened = self.store()
        with self._lock:
            if self._llm is None:
                self._llm = llm_from_settings(self.settings, opened)
            return self._llm

    def flight(self, app: Celery) -> SingleFlight:
        """The gate of queued drain tasks on ``app``'s broker (``engram.tasks.broker``)."""
        from engram.tasks.broker import single_flight

        with self._lock:
            if self._flight is None:
                self._flight = single_flight(app)
            return self._flight

    def after_fork(self) -> None:
        """Drop inherited connections; the child opens its own on first use."""
        with self._lock:
            if self._store is not None:
                self._store.engine.dispose(close=False)
            self._vectors = None  # a Chroma client does not survive fork()
            self._flight = None


_installed: Services | None = None
_install_lock = threading.Lock()


def install(services: Services) -> Services:
    """Make ``services`` the ones this process's task bodies use."""
    global _installed
    with _install_lock:
        _installed = services
    return services


def services() -> Services:
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = Services(load_settings())
        return _installed


@worker_process_init.connect
def _after_fork(**_: object) -> None:
    services().after_fork()
