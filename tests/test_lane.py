"""The embedded server's derived lane (engram/lane.py) against a real store: it drains the graph
(and vectors) only while capture has nothing waiting, and never starves."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engram import derive, lane
from engram.lane import DerivedLane
from engram.store import Store
from engram.vectors import Vectors
from tests.conftest import make_settings
from tests.support import wait_for
from tests.test_graph import edit


def graph_pending(store: Store) -> int:
    with store.read() as conn:
        return derive.pending(conn, "graph")


def test_lane_yields_to_capture_then_catches_up(store: Store, tmp_path: Path) -> None:
    for n in range(60):
        edit(store, "p", "s1", f"src/module_{n}.py")
    assert graph_pending(store) == 60
    busy = threading.Event()
    busy.set()
    derived = DerivedLane(
        store,
        Vectors(make_settings(tmp_path), store),
        capture_busy=busy.is_set,
        vector_batch=8,
        graph_batch=10,
    )
    derived.start()
    try:
        derived.kick()
        time.sleep(0.5)  # well under MAX_YIELD_SECONDS: nothing done while capture is busy
        assert graph_pending(store) == 60 and derived.steps == 0 and derived.yields > 0
        busy.clear()
        wait_for(lambda: graph_pending(store) == 0, 20, message="the lane to catch up")
        assert derived.steps >= 1
    finally:
        derived.stop(5)
    assert not derived.alive


def test_lane_never_starves_behind_endless_capture(store: Store, tmp_path: Path) -> None:
    for n in range(5):
        edit(store, "p", "s2", f"lib/part_{n}.py")
    derived = DerivedLane(
        store,
        Vectors(make_settings(tmp_path), store),
        capture_busy=lambda: True,
        vector_batch=8,
        graph_batch=10,
    )
    derived.start()
    try:
        started = time.monotonic()
        derived.kick()
        wait_for(
            lambda: graph_pending(store) == 0,
            10 * lane.MAX_YIELD_SECONDS,
            message="one step after the longest yield",
        )
        assert time.monotonic() - started >= lane.MAX_YIELD_SECONDS * 0.9
    finally:
        derived.stop(5)


@contextmanager
def _lane_behind_bulk_work(
    store: Store, tmp_path: Path, documents: int, bound: float
) -> Iterator[tuple[DerivedLane, threading.Event]]:
    """A graph lane with ``documents`` queued, told that bulk work runs, which it may wait for
    at most ``bound`` seconds; started and kicked."""
    for n in range(documents):
        edit(store, "p", f"bulk-{documents}", f"bulk/file_{n}.py")
    bulk = threading.Event()
    bulk.set()
    derived = DerivedLane(
        store,
        Vectors(make_settings(tmp_path), store),
        capture_busy=lambda: False,
        bulk_busy=bulk.is_set,
        vector_batch=8,
        graph_batch=5,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lane, "BULK_MAX_YIELD_SECONDS", bound)
        derived.start()
        try:
            derived.kick()
            yield derived, bulk
        finally:
            derived.stop(5)


def test_lane_given_bulk_busy_waits_while_bulk_work_runs(store: Store, tmp_path: Path) -> None:
    with _lane_behind_bulk_work(store, tmp_path, 20, bound=30.0) as (derived, bulk):
        time.sleep(0.5)
        assert graph_pending(store) == 20 and derived.steps == 0 and derived.yields > 0
        bulk.clear()  # long before the bound: the lane goes on at once
        wait_for(lambda: graph_pending(store) == 0, 5, message="the lane to catch up")


def test_lane_never_starves_behind_endless_bulk_work(store: Store, tmp_path: Path) -> None:
    with _lane_behind_bulk_work(store, tmp_path, 5, bound=1.5) as (_, bulk):
        started = time.monotonic()
        wait_for(lambda: graph_pending(store) == 0, 15, message="one step after the bound")
        assert time.monotonic() - started >= 1.5 * 0.9 and bulk.is_set()


def test_lane_stops_promptly(store: Store, tmp_path: Path) -> None:
    derived = DerivedLane(
        store, Vectors(make_settings(tmp_path), store), capture_busy=lambda: False, vector_batch=8
    )
    derived.start()
    started = time.monotonic()
    derived.stop(5)
    assert not derived.alive and time.monotonic() - started < 1.0


def test_drain_tasks_yield_to_waiting_capture_after_one_batch(store: Store) -> None:
    """A worker pool that consumes capture and derived queues never keeps capture waiting
    behind more than one derived batch."""
    from engram import drains, inbox
    from tests.test_store import _event

    for n in range(30):
        edit(store, "p", "s3", f"pkg/file_{n}.py")
    inbox.accept(store, _event("p", "waiting", 0, "a capture waits"), 100)
    assert drains.drain_graph(store, batch=10, max_batches=10, yield_to_capture=True) == 10
    assert graph_pending(store) == 20
    assert drains.drain_graph(store, batch=10, max_batches=10) == 20  # no yield asked


def test_drain_tasks_yield_only_where_the_worker_also_captures(tmp_path: Path) -> None:
    from engram.tasks.runtime import Services

    settings = make_settings(tmp_path)
    # a derived-only pool: nothing to yield to
    assert not Services(settings, queues=["embed", "graph"]).serves_capture
    assert Services(settings, queues=["capture", "maintenance", "embed", "graph"]).serves_capture
    assert Services(settings, queues=["observe"]).serves_capture  # the queue's name before 0.2
    assert Services(settings).serves_capture  # the embedded server's worker takes captures
