"""``engram.tasks``: the Celery tasks that turn captured events into memory.

``app`` holds the Celery app, its queues, task names and configuration; ``capture`` the observe
and summarize tasks; ``embed`` and ``graph`` the derived indexes' drain tasks, sent by
``dispatch``; ``sweeper`` the inbox sweeper and ``broker`` what it reads from Redis; ``runtime``
a worker process's settings and store; ``embedded`` the in-process worker of the embedded
default; ``client`` what the gateway sends. Task bodies only call into the core.
"""
