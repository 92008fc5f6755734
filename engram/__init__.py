"""Engram: persistent, searchable memory for coding agents.

One importable namespace. This folder is the core: settings, store, keyword and vector indexes,
privacy, the capture inbox, retrieval, context, memory-file sync and export/import. The doors are
subpackages kept in top-level folders of their own and linked in here: ``engram.api`` (the Flask
gateway, ``api/``), ``engram.tasks`` (Celery tasks, ``tasks/``), ``engram.agents`` (host
adapters, the hook, ``connect``, the MCP server, ``agents/``), ``engram.watcher`` (transcript and
memory-file watchers, ``watcher/``) and ``engram.cli`` (the `engram` command and the process
wiring, ``cli/``). The core never imports a door; doors call the core (tests/test_layers.py).

Keep this module import-free: the hook CLI imports ``engram.privacy`` on an agent's hot path.
"""

__version__ = "0.1.0"
