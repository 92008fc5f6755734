"""Celery tasks: the worker pools that turn captured events into memory.

``tasks.app`` holds the Celery app and its configuration, ``tasks.capture`` the observe and
summarize tasks, ``tasks.sweeper`` the inbox sweeper, ``tasks.embedded`` the in-process worker of
the embedded default. Task bodies only call into ``engram``.
"""
