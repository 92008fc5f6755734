"""Engram: persistent, searchable memory for coding agents.

This package is the core: settings, store, keyword index, privacy, capture inbox, retrieval and the
CLI. The ``api``, ``tasks``, ``agents`` and ``watcher`` packages are thin doors onto it.

Keep this module import-free: the hook CLI imports ``engram.privacy`` on an agent's hot path.
"""

__version__ = "0.1.0"
