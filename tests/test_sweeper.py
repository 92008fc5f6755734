"""The sweeper tells lost work from waiting work, against a real Redis with no worker running:
a backlog is never sent twice, and what the broker loses is sent again exactly once."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram import inbox, sessions
from engram.events import validate_event
from engram.schema import capture_inbox
from engram.schema import sessions as sessions_table
from engram.settings import Settings
from engram.store import Store
from tests.conftest import make_settings

pytestmark = pytest.mark.slow

BACKLOG = 10_000


@pytest.fixture
def broker(tmp_path: Path, redis_url: str) -> Iterator[tuple[Settings, Store, Any]]:
    import redis

    from engram.tasks import runtime
    from engram.tasks.app import configure

    settings = make_settings(
        tmp_path,
        ENGRAM_BROKER_URL=redis_url,
        ENGRAM_INBOX_MAX="20000",
        ENGRAM_INBOX_LEASE_SECONDS="1",
    )
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    configure(settings)
    runtime.install(runtime.Services(settings, store))
    client = redis.Redis.from_url(redis_url)
    yield settings, store, client
    client.flushdb()
    client.close()
    store.close()
    embedded = make_settings(tmp_path / "after")
    configure(embedded)
    runtime.install(runtime.Services(embedded))


def accept(settings: Settings, store: Store, n: int, session: str = "s") -> str:
    from engram.tasks.client import dispatch_observe

    event = validate_event(
        {
            "eventId": f"{session}:{n}",
            "sessionId": session,
            "project": "p",
            "host": "raw",
            "hookType": "PostToolUse",
            "toolName": "Bash",
            "toolInput": {"command": f"pytest -k case{n}"},
            "toolOutput": "1 failed",
        },
        max_field_chars=10_000,
        received_at=time.time(),
    )
    assert inbox.accept(store, event, settings.inbox_max).is_new
    dispatch_observe(event.event_id)  # as the gateway does after accepting
    return event.event_id


def queued(client: Any, queue: str = "capture") -> Counter[str]:
    """How many tasks the broker's queue holds for each first argument."""
    from engram.tasks.broker import _task_and_arg

    found: Counter[str] = Counter()
    for raw in client.lrange(queue, 0, -1):
        parsed = _task_and_arg(raw)
        assert parsed is not None
        found[parsed[1]] += 1
    return found


def age_dispatches(store: Store, seconds: float = 600) -> None:
    """Pretend every entry was dispatched long ago, so no grace period hides a re-dispatch."""
    with store.write() as conn:
        conn.execute(capture_inbox.update().values(dispatched_at=time.time() - seconds))


def test_a_backlog_is_never_sent_twice_and_a_loss_is_sent_once(
    broker: tuple[Settings, Store, Any],
) -> None:
    from engram.tasks.sweeper import DISPATCH_LIMIT, sweep_once

    settings, store, client = broker
    ids = [accept(settings, store, n) for n in range(BACKLOG)]
    assert queued(client) == Counter(ids)
    age_dispatches(store)
    # waiting is not lost: sweeps leave a queued backlog alone, without even reading it
    for _ in range(3):
        result = sweep_once()
        assert (result["events"], result["expiredClaims"], result["brokerRead"]) == (0, 0, False)
    assert client.llen("capture") == BACKLOG

    # the broker forgets everything: each entry is sent again once, a bounded number per sweep
    client.flushdb()
    sent = []
    for _ in range(BACKLOG // DISPATCH_LIMIT + 2):
        result = sweep_once()
        assert result["events"] <= DISPATCH_LIMIT
        sent.append(result["events"])
    assert sum(sent) == BACKLOG and sent[-1] == 0
    assert queued(client) == Counter(ids)

    # part of the queue is lost: exactly those entries are sent again
    lost = [json.loads(client.rpop("capture")) for _ in range(25)]
    assert len(lost) == 25
    age_dispatches(store)
    result = sweep_once()
    assert result["events"] == 25 and result["brokerRead"]
    assert queued(client) == Counter(ids)
    assert sweep_once()["events"] == 0


def test_a_dead_workers_delivery_is_sent_again_and_a_live_ones_is_not(
    broker: tuple[Settings, Store, Any],
) -> None:
    from engram.tasks.broker import UNACKED_INDEX_KEY, UNACKED_KEY
    from engram.tasks.sweeper import sweep_once

    settings, store, client = broker
    ids = [accept(settings, store, n, session="d") for n in range(6)]
    age_dispatches(store)
    # two workers took a task each, as kombu records it: one an instant ago, one long ago and
    # never claimed it (the worker was killed)
    now = time.time()
    for tag, delivered_at in (("tag-live", now), ("tag-dead", now - 600)):
        raw = client.rpop("capture")
        client.hset(UNACKED_KEY, tag, json.dumps([json.loads(raw), "", "capture"]))
        client.zadd(UNACKED_INDEX_KEY, {tag: delivered_at})
    live = delivered_arg(client, "tag-live")
    dead = delivered_arg(client, "tag-dead")
    result = sweep_once()
    assert result["events"] == 1 and result["brokerRead"]
    assert queued(client) == Counter(i for i in ids if i != live)  # dead's task is back
    assert dead in queued(client)
    # the dead worker's delivery is gone, so the broker will not hand it back later as well
    assert client.hkeys(UNACKED_KEY) == [b"tag-live"]
    assert sweep_once()["events"] == 0


def delivered_arg(client: Any, tag: str) -> str:
    from engram.tasks.broker import UNACKED_KEY, _task_and_arg

    parsed = _task_and_arg(client.hget(UNACKED_KEY, tag))
    assert parsed is not None
    return parsed[1]


def test_expired_claims_are_sent_once_per_expiry(broker: tuple[Settings, Store, Any]) -> None:
    from engram.tasks.sweeper import sweep_once

    settings, store, client = broker
    event_id = accept(settings, store, 0, session="x")
    client.delete("capture")  # a worker took it ...
    assert inbox.claim(store, event_id, 0.05) is not None  # ... claimed it, and was killed
    time.sleep(0.1)
    assert sweep_once()["expiredClaims"] == 1
    assert sweep_once()["expiredClaims"] == 0
    assert queued(client) == Counter([event_id])


def test_summaries_wait_for_their_events_and_are_sent_once(
    broker: tuple[Settings, Store, Any],
) -> None:
    from engram.tasks.sweeper import GRACE_SECONDS, sweep_once

    settings, store, client = broker
    accept(settings, store, 0, session="sum")
    with store.write() as conn:
        sessions.ensure(conn, "sum", "p")
    assert sessions.end(store, "sum") is not None
    with store.write() as conn:
        conn.execute(sessions_table.update().values(ended_at=time.time() - 2 * GRACE_SECONDS))
    # its event still waits: no summary task, at any sweep
    assert sweep_once()["summaries"] == 0
    with store.read() as conn:
        assert not sessions.summary_due(conn, "sum")
    with store.write() as conn:
        conn.execute(capture_inbox.delete())  # as if stored
    with store.read() as conn:
        assert sessions.summary_due(conn, "sum")
    assert sweep_once()["summaries"] == 1
    assert sweep_once()["summaries"] == 0  # its task is queued: not sent again
    assert queued(client, "maintenance") == Counter(["sum"])


def test_drain_tasks_are_queued_once_however_often_asked(
    broker: tuple[Settings, Store, Any],
) -> None:
    from engram.tasks import runtime
    from engram.tasks.app import EMBED_TASK, GRAPH_TASK, celery_app
    from engram.tasks.dispatch import send_drain

    _, _, client = broker
    for _ in range(50):
        send_drain(EMBED_TASK)
        send_drain(GRAPH_TASK)
    assert (client.llen("embed"), client.llen("graph")) == (1, 1)
    runtime.services().flight(celery_app).started(EMBED_TASK)  # a worker started the queued one
    send_drain(EMBED_TASK)
    send_drain(EMBED_TASK)
    assert client.llen("embed") == 2  # one running, one queued behind it


def test_a_lost_drain_task_is_sent_again_at_the_next_sweep(
    broker: tuple[Settings, Store, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queued drain task that the broker lost (a flushed queue, a worker killed holding it)
    leaves its marker behind; the sweeper releases it, so the index does not wait for the
    marker to expire, and never sends a second one while the first is held."""
    from engram import derive
    from engram.backoff import Throttle
    from engram.tasks import dispatch, runtime
    from engram.tasks.app import GRAPH_TASK
    from engram.tasks.sweeper import sweep_once

    _, store, client = broker
    with store.write() as conn:
        derive.enqueue(conn, "obs_lost", "upsert", ("graph",))
    dispatch.send_drain(GRAPH_TASK)
    assert client.llen("graph") == 1
    monkeypatch.setattr(runtime.services(), "kicks", Throttle(0.5))
    assert sweep_once()["lostDrains"] == 0  # queued: waiting, not lost
    assert client.llen("graph") == 1
    client.delete("graph")  # the broker lost it; its marker stays
    monkeypatch.setattr(runtime.services(), "kicks", Throttle(0.5))
    assert sweep_once()["lostDrains"] == 1
    assert client.llen("graph") == 1
    monkeypatch.setattr(runtime.services(), "kicks", Throttle(0.5))
    assert sweep_once()["lostDrains"] == 0
    assert client.llen("graph") == 1
