"""What the broker holds: the tasks it has queued or delivered, so the sweeper can tell an event
that waits its turn from one whose task was lost.

Only Redis can lose tasks while Engram runs (a FLUSHDB, a restart without persistence, a
delivered task whose worker died and whose entry the broker dropped). Its queues are plain
lists and delivered-but-unacknowledged tasks sit in the ``unacked`` hash until acknowledged (the
tasks are ``acks_late``), so both can be read. The in-memory broker of the embedded server loses
nothing while its process lives (and everything when it dies, which the server's start handles):
for it there is nothing to read, and ``held`` answers None.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import sys
from collections.abc import Iterable
from typing import Any

from celery import Celery

log = logging.getLogger("engram.broker")

CAPTURE_QUEUES = ("capture", "observe")
"""Queues an observe task can be waiting in (``observe``: its name before 0.2, for tasks queued by
an older gateway)."""
MAINTENANCE_QUEUES = ("maintenance", "summarize")
PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
"""kombu's Redis transport keeps each priority step of a queue in its own list."""
UNACKED_KEY = "unacked"
UNACKED_INDEX_KEY = "unacked_index"
SCAN_CHUNK = 1000


@dataclasses.dataclass(frozen=True)
class Delivery:
    """A task delivered to a worker and not yet acknowledged (the ``unacked`` hash)."""

    tag: str
    task: str
    arg: str
    delivered_at: float


def _task_name(raw: bytes | str) -> str | None:
    try:
        message = json.loads(raw)
        if isinstance(message, list):
            message = message[0]
        return str(message["headers"]["task"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _task_and_arg(raw: bytes | str) -> tuple[str, str] | None:
    """(task name, first argument) of one Celery message as kombu stores it in Redis."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # an ``unacked`` value: [message, exchange, routing key]
            message = message[0]
        task = message["headers"]["task"]
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None  # not a Celery task message (another client's, or a future format)
    if not args or not isinstance(args[0], str):
        return None
    return str(task), args[0]


class RedisBroker:
    """Reads Engram's queues and the unacknowledged deliveries of a Redis broker."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def close(self) -> None:
        self.client.close()

    @staticmethod
    def _keys(queues: Iterable[str]) -> list[str]:
        return [f"{q}{suffix}" for q in queues for suffix in PRIORITY_SUFFIXES]

    def queued_count(self, queues: Iterable[str]) -> int:
        pipe = self.client.pipeline(transaction=False)
        for key in self._keys(queues):
            pipe.llen(key)
        return int(sum(pipe.execute()))

    def queued(self, queues: Iterable[str], task: str) -> set[str]:
        """First arguments of the ``task`` messages waiting in ``queues``."""
        found: set[str] = set()
        for key in self._keys(queues):
            start = 0
            while True:
                chunk = self.client.lrange(key, start, start + SCAN_CHUNK - 1)
                for raw in chunk:
                    parsed = _task_and_arg(raw)
                    if parsed is not None and parsed[0] == task:
                        found.add(parsed[1])
                if len(chunk) < SCAN_CHUNK:
                    break
                start += SCAN_CHUNK
        return found

    def holds(self, queues: Iterable[str], task: str) -> bool:
        """Whether some ``task`` message waits in ``queues`` or is delivered and not yet
        acknowledged (a drain task has no argument, so this looks at names only)."""
        for key in self._keys(queues):
            if any(_task_name(raw) == task for raw in self.client.lrange(key, 0, SCAN_CHUNK - 1)):
                return True
        return any(_task_name(raw) == task for raw in self.client.hvals(UNACKED_KEY))

    def deliveries(self, task: str) -> list[Delivery]:
        """The ``task`` messages delivered to some worker and not acknowledged yet."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(UNACKED_KEY).zrange(UNACKED_INDEX_KEY, 0, -1, withscores=True)
        raw_by_tag, index = pipe.execute()
        when = {_text(tag): float(score) for tag, score in index}
        out = []
        for tag, raw in raw_by_tag.items():
            parsed = _task_and_arg(raw)
            if parsed is not None and parsed[0] == task:
                out.append(Delivery(_text(tag), task, parsed[1], when.get(_text(tag), 0.0)))
        return out

    def forget_deliveries(self, tags: Iterable[str]) -> None:
        """Drop deliveries whose worker is gone and whose work was sent again, so the broker
        does not also hand them back later (its own restore, after the visibility timeout)."""
        tags = list(tags)
        if tags:
            pipe = self.client.pipeline(transaction=True)
            pipe.hdel(UNACKED_KEY, *tags).zrem(UNACKED_INDEX_KEY, *tags)
            pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _redis_client(app: Celery) -> Any | None:
    url = str(app.conf.broker_url or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    import redis

    options = app.conf.broker_transport_options or {}
    return redis.Redis.from_url(
        url,
        socket_timeout=options.get("socket_timeout", 5),
        socket_connect_timeout=options.get("socket_connect_timeout", 2),
    )


def client_errors() -> tuple[type[Exception], ...]:
    """What a Redis client raises when the broker is away or refuses, once one was opened:
    ``redis`` is imported only for a Redis broker (~6 MB the embedded server never needs)."""
    exceptions = sys.modules.get("redis.exceptions")
    return () if exceptions is None else (exceptions.RedisError,)


def redis_broker(app: Celery) -> RedisBroker | None:
    """The broker as something the sweeper can read, or None for the in-memory broker."""
    client = _redis_client(app)
    return None if client is None else RedisBroker(client)


QUEUED_KEY = "engram:queued:{task}"
QUEUED_TTL_SECONDS = 600
"""A marker older than this is presumed lost with its task (a broker that dropped the task but
kept the key); a flushed broker drops both."""


class SingleFlight:
    """At most one queued (not yet started) task per name: a drain task (embed, graph) that
    finds work re-sends itself, and every capture asks for one, so without this a lagging
    derived index would gather a chain per request. The marker is set when a task is sent and
    cleared when it starts, so a request during a run queues exactly one more."""

    def __init__(self, client: Any | None) -> None:
        self.client = client

    def claim(self, task: str) -> bool:
        """True when the caller should send ``task`` (no other is queued)."""
        if self.client is None:
            return True
        return bool(
            self.client.set(QUEUED_KEY.format(task=task), "1", nx=True, ex=QUEUED_TTL_SECONDS)
        )

    def claimed(self, task: str) -> bool:
        """Whether a ``task`` is marked as queued."""
        return self.client is not None and bool(self.client.exists(QUEUED_KEY.format(task=task)))

    def started(self, task: str) -> None:
        if self.client is not None:
            self.client.delete(QUEUED_KEY.format(task=task))


def single_flight(app: Celery) -> SingleFlight:
    return SingleFlight(_redis_client(app))
