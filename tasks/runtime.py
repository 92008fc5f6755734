"""Per-process state for task bodies: the settings and a lazily opened store.

Opened lazily so a prefork worker's children each get their own database connections instead of
sharing the parent's sockets across fork().
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from engram.settings import Settings, load_settings
from engram.store import Store

if TYPE_CHECKING:
    from engram.vectors import Vectors

_lock = threading.Lock()
_settings: Settings | None = None
_store: Store | None = None
_vectors: Vectors | None = None


def configure(settings: Settings, store: Store | None = None,
              vectors: Vectors | None = None) -> None:
    global _settings, _store, _vectors
    with _lock:
        _settings, _store, _vectors = settings, store, vectors


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
    global _store, _vectors
    with _lock:
        if _store is not None:
            _store.engine.dispose(close=False)
        _vectors = None  # a Chroma client does not survive fork()


def vectors() -> Vectors:
    """The vector stream of this process (shared with the gateway in embedded mode)."""
    global _vectors
    from engram.vectors import Vectors

    current, opened = settings(), store()
    with _lock:
        if _vectors is None:
            _vectors = Vectors(current, opened)
        return _vectors
