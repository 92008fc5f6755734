"""Background work steps aside for live requests: graph drains and imports end their write
transaction as soon as a live request is in flight, skip a change claimed before its document
changed again, and the gateway marks every request but bulk transfers live."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select

from engram import drains, transfer
from engram.api import NOT_LIVE, _live_requests
from engram.derive import enqueue
from engram.schema import derive_queue, graph_mentions, observations
from engram.store import Store
from tests.test_graph import edit, semantic_graph


@contextmanager
def commits(store: Store) -> Iterator[list[int]]:
    """Counts the store's committed transactions while the block runs."""
    counted = [0]

    def count(_conn: Any) -> None:
        counted[0] += 1

    event.listen(store.engine, "commit", count)
    try:
        yield counted
    finally:
        event.remove(store.engine, "commit", count)


@contextmanager
def live_request(store: Store) -> Iterator[None]:
    """A live request held open on another thread (as the gateway's middleware holds one)."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.live():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    entered.wait(5)
    try:
        yield
    finally:
        release.set()
        thread.join(5)


def test_graph_transactions_end_for_a_live_request(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drains, "GRAPH_TRANSACTION_SECONDS", 3600.0)
    monkeypatch.setattr(type(store.gate), "MAX_WAIT_SECONDS", 0.01)
    for i in range(4):
        edit(store, "p", "s1", f"src/a{i}.py")
    with commits(store) as alone:
        assert drains.drain_graph(store, batch=4, max_batches=1) == 4
    assert alone[0] == 2  # the claim, then all four documents in one transaction
    built = semantic_graph(store)

    with store.write() as conn:  # the same four again, now with a live request in flight
        for doc_id in conn.execute(select(graph_mentions.c.doc_id).distinct()).scalars().all():
            enqueue(conn, doc_id, "upsert", ("graph",))
    with live_request(store), commits(store) as shared:
        assert drains.drain_graph(store, batch=4, max_batches=1) == 4
    assert shared[0] == 5  # the claim, then one document per transaction
    assert semantic_graph(store) == built


def test_a_change_claimed_before_its_document_changed_again_is_left_queued(
    store: Store,
) -> None:
    doc_id = edit(store, "p", "s1", "src/a.py")
    from engram import derive, graph

    with store.write() as conn:
        claimed = derive.claim(conn, drains.GRAPH_TARGET, 5, 60)
    with store.read() as conn:
        prepared = graph.prepare(conn, claimed)
    with store.write() as conn:  # the document changes while the drain holds its claim
        conn.execute(
            derive_queue.update()
            .where(derive_queue.c.doc_id == doc_id, derive_queue.c.target == "graph")
            .values(enqueued_at=derive_queue.c.enqueued_at + 1, claimed_until=None)
        )
    drains._apply(store, prepared)
    assert semantic_graph(store)["mentions"] == set()  # the stale claim applied nothing
    with store.read() as conn:
        assert derive.pending(conn, "graph") == 1  # the newer change is still queued
    assert drains.drain_graph(store) == 1
    assert {m[0] for m in semantic_graph(store)["mentions"]} == {doc_id}


def export_of(n: int) -> dict[str, Any]:
    return {
        "format": "engram-export",
        "version": 1,
        "sessions": [],
        "memories": [],
        "observations": [
            {
                "id": f"obs_{i}",
                "eventId": f"e{i}",
                "sessionId": "s1",
                "project": "p",
                "host": "claude-code",
                "hookType": "PostToolUse",
                "kind": "command",
                "title": f"Ran step {i}",
                "text": f"Ran step {i}: make build-{i}",
                "createdAt": 1.7e9 + i,
            }
            for i in range(n)
        ],
    }


def test_import_transactions_end_for_a_live_request(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(type(store.gate), "MAX_WAIT_SECONDS", 0.01)
    with commits(store) as alone:
        transfer.import_(store, export_of(5), "merge", batch=5)
    with live_request(store), commits(store) as shared:
        counts = transfer.import_(store, export_of(5), "merge", batch=5)
    assert counts["observations"] + counts["updated"] == 5
    assert shared[0] - alone[0] == 4  # five one-item transactions instead of one of five
    with store.read() as conn:
        assert len(conn.execute(select(observations.c.id)).all()) == 5


def test_the_gateway_marks_requests_live_except_bulk_transfers(store: Store) -> None:
    seen: dict[str, bool] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen[environ["PATH_INFO"]] = store.gate.busy()
        return [b""]

    wrapped = _live_requests(app, store)
    for path in ("/v1/observe", "/v1/context", "/v1/livez", *NOT_LIVE):
        wrapped({"PATH_INFO": path}, None)
    assert seen == {
        "/v1/observe": True,
        "/v1/context": True,
        "/v1/livez": True,
        **dict.fromkeys(NOT_LIVE, False),
    }
    assert not store.gate.busy()  # and released when the answer is built
