"""The delivery guarantee with real processes: `engram serve`, `engram worker`, `engram beat`,
a real Redis. Every accepted event ends as exactly one observation, through worker kills,
broker loss and server restarts."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES_URL
from tests.support import (
    Cluster,
    assert_cluster_stored_exactly_once,
    observe_body,
    postgres_database,
    wait_for,
)

pytestmark = pytest.mark.slow

FAST_RECOVERY = {"ENGRAM_INBOX_LEASE_SECONDS": "3", "ENGRAM_SWEEP_INTERVAL_SECONDS": "1"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made: list[Cluster] = []

    def make(**env: str) -> Cluster:
        made.append(Cluster(tmp_path, **env))
        return made[-1]

    yield make  # type: ignore[misc]
    for c in made:
        c.stop_all()


def drained(cluster: Cluster) -> bool:
    status, body = cluster.request("GET", "/v1/capture?limit=1")
    counts = body["counts"]
    return status == 200 and not (counts["pending"] or counts["processing"] or counts["retrying"])


def post_stream(
    cluster: Cluster, project: str, count: int, accepted: list[str], start: int = 0
) -> None:
    for n in range(start, start + count):
        body = observe_body(project, f"s-{n % 7}", n)
        status, answer = cluster.request("POST", "/v1/observe", body)
        assert status == 201, answer
        accepted.append(answer["eventId"])


def test_embedded_server_end_to_end_and_restart(cluster: Any) -> None:
    c = cluster()
    server = c.serve()
    accepted: list[str] = []
    post_stream(c, "demo", 60, accepted)
    wait_for(lambda: drained(c), 30, message="embedded worker to drain")
    status, found = c.request("POST", "/v1/search", {"query": "marker42x", "project": "demo"})
    assert (
        status == 200
        and [h["id"] for h in found["items"]][:1]
        and found["items"][0]["text"].count("marker42x") == 1
    )
    assert server.stop() == 0, server.output()
    assert "Stopped." in server.output()

    c.serve()  # restart: same data dir
    status, found = c.request("POST", "/v1/search", {"query": "marker42x", "project": "demo"})
    assert status == 200 and found["items"]
    assert c.request("POST", "/v1/observe", observe_body("demo", "s-0", 0))[0] == 200
    assert_cluster_stored_exactly_once(c, accepted)


def test_embedded_server_killed_with_work_in_flight(cluster: Any) -> None:
    """kill -9 of the whole embedded server while its in-memory queue holds work: on restart
    the inbox is re-dispatched and nothing is lost or doubled."""
    c = cluster(ENGRAM_WORKER_CONCURRENCY="1")
    server = c.serve()
    accepted: list[str] = []
    post_stream(c, "crash", 300, accepted)
    server.kill9()
    c.serve()
    wait_for(lambda: drained(c), 60, message="restarted server to drain")
    assert_cluster_stored_exactly_once(c, accepted)


@contextlib.contextmanager
def store_url(backend: str) -> Iterator[dict[str, str]]:
    if backend == "sqlite":
        yield {}
    else:
        with postgres_database(POSTGRES_URL) as url:
            yield {"ENGRAM_DATABASE_URL": url}


BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_URL else [])


@pytest.mark.parametrize("backend", BACKENDS)
def test_distributed_worker_killed_mid_stream(cluster: Any, redis_url: str, backend: str) -> None:
    with store_url(backend) as env:
        c = cluster(ENGRAM_BROKER_URL=redis_url, **FAST_RECOVERY, **env)
        c.serve()
        workers = [c.start("worker", "--concurrency", "1", "--name", f"w{i}@%h") for i in range(2)]
        c.start("beat")
        wait_for(
            lambda: c.request("GET", "/v1/status")[1]["workers"]["alive"] == 2,
            30,
            message="two workers answering",
        )
        accepted: list[str] = []
        producer = threading.Thread(target=post_stream, args=(c, "dist", 400, accepted))
        producer.start()
        wait_for(lambda: len(accepted) >= 120, 30, message="stream under way")
        workers[0].kill9()  # mid-stream, with tasks reserved and unacknowledged
        producer.join(60)
        assert not producer.is_alive() and len(accepted) == 400
        c.start("worker", "--concurrency", "1", "--name", "w0b@%h")
        wait_for(lambda: drained(c), 90, message="all work to finish after the kill")
        assert_cluster_stored_exactly_once(c, accepted)
        status, found = c.request("POST", "/v1/search", {"query": "marker399x", "project": "dist"})
        assert status == 200 and found["items"]


def test_distributed_broker_state_lost_sweeper_recovers(cluster: Any, redis_url: str) -> None:
    import redis

    c = cluster(ENGRAM_BROKER_URL=redis_url, ENGRAM_INBOX_MAX="80", **FAST_RECOVERY)
    c.serve()
    accepted: list[str] = []
    post_stream(c, "flush", 80, accepted)  # no worker yet: all of it sits in Redis
    status, answer = c.request("POST", "/v1/observe", observe_body("flush", "s-x", 999))
    assert status == 503 and answer["retryable"] is True
    redis.Redis.from_url(redis_url).flushdb()  # the broker forgets every queued task
    c.start("worker", "--concurrency", "2")
    c.start("beat")
    wait_for(lambda: drained(c), 60, message="sweeper to recover the flushed tasks")
    assert_cluster_stored_exactly_once(c, accepted)
    status, report = c.request("GET", "/v1/status")
    assert report["ok"], report["problems"]


def test_distributed_status_says_what_is_wrong(cluster: Any, redis_url: str) -> None:
    c = cluster(ENGRAM_BROKER_URL=redis_url)
    c.serve()
    status, report = c.request("GET", "/v1/status")
    assert status == 200 and report["mode"] == "distributed" and not report["ok"]
    problem = next(p for p in report["problems"] if p["component"] == "workers")
    assert "engram worker" in problem["fix"]
    problem = next(p for p in report["problems"] if p["component"] == "sweeper")
    assert "engram beat" in problem["fix"]
    c.start("worker", "--concurrency", "1")
    c.start("beat")
    wait_for(lambda: c.request("GET", "/v1/status")[1]["ok"], 30, message="status OK")
    # each worker answers for its own memory (its process and its pool's children)
    memory = c.request("GET", "/v1/status")[1]["memory"]["processes"]
    workers = [mem for who, mem in memory.items() if who.startswith("worker ")]
    assert len(workers) >= 2 and all(m["rssMb"] > 20 for m in workers)  # parent + one child
