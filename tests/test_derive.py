"""The derive queue: every keyword change reaches the derived indexes exactly as committed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from engram import derive
from engram.keyword import KeywordDoc
from engram.schema import derive_queue
from engram.store import Store


def _doc(doc_id: str, body: str = "alpha beta", project: str = "p") -> KeywordDoc:
    return KeywordDoc(
        doc_id=doc_id,
        kind="observation",
        project=project,
        body=body,
        created_at=1.0,
        session_id="s1",
    )


def _rows(store: Store, target: str) -> dict[str, str]:
    with store.read() as conn:
        return dict(
            conn.execute(
                select(derive_queue.c.doc_id, derive_queue.c.op).where(
                    derive_queue.c.target == target
                )
            ).all()
        )


def test_writes_queue_every_target_in_the_same_transaction(store: Store) -> None:
    with store.write() as conn:
        store.keyword.upsert(conn, _doc("d1"))
        store.keyword.upsert(conn, _doc("d2"))
    try:
        with store.write() as conn:
            store.keyword.upsert(conn, _doc("d3"))
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    for target in derive.TARGETS:
        assert _rows(store, target) == {"d1": "upsert", "d2": "upsert"}
    with store.write() as conn:
        store.keyword.delete(conn, "d1")
    assert _rows(store, "vector") == {"d1": "delete", "d2": "upsert"}


def test_claim_carries_the_body_and_a_vanished_document_is_a_delete(store: Store) -> None:
    with store.write() as conn:
        store.keyword.upsert(conn, _doc("d1", "the body as indexed"))
        store.keyword.upsert(conn, _doc("d2"))
        store.keyword.backend.delete(conn, "d2")  # gone without a queued delete
    with store.write() as conn:
        changes = {c.doc_id: c for c in derive.claim(conn, "vector", 10, lease_seconds=60)}
    assert changes["d1"].op == "upsert" and changes["d1"].doc is not None
    assert changes["d1"].doc.body == "the body as indexed"
    assert changes["d1"].doc.session_id == "s1" and changes["d1"].attempts == 1
    assert changes["d2"].op == "delete" and changes["d2"].doc is None
    with store.write() as conn:  # leased: a second drain finds nothing
        assert derive.claim(conn, "vector", 10, lease_seconds=60) == []


def test_done_keeps_a_row_that_changed_again_while_claimed(store: Store) -> None:
    with store.write() as conn:
        store.keyword.upsert(conn, _doc("d1", "first"))
        store.keyword.upsert(conn, _doc("d2"))
    with store.write() as conn:
        claimed = derive.claim(conn, "graph", 10, lease_seconds=60)
    time.sleep(0.01)
    with store.write() as conn:
        store.keyword.upsert(conn, _doc("d1", "second"))
    with store.write() as conn:
        derive.done(conn, "graph", claimed)
    assert _rows(store, "graph") == {"d1": "upsert"}
    with store.write() as conn:
        again = derive.claim(conn, "graph", 10, lease_seconds=60)
    assert [c.doc.body for c in again if c.doc] == ["second"]
    assert _rows(store, "vector") == {"d1": "upsert", "d2": "upsert"}  # other target untouched


def test_an_expired_lease_is_claimed_again_and_failures_keep_the_error(store: Store) -> None:
    with store.write() as conn:
        store.keyword.upsert(conn, _doc("d1"))
    with store.write() as conn:
        first = derive.claim(conn, "vector", 10, lease_seconds=0.0)
        derive.failed(conn, "vector", first, "ConnectionError: chroma down", retry_in=0.0)
    time.sleep(0.01)
    with store.write() as conn:
        second = derive.claim(conn, "vector", 10, lease_seconds=60)
        assert derive.last_error(conn, "vector") == "ConnectionError: chroma down"
    assert [c.attempts for c in second] == [2]


def test_a_starting_server_releases_leases_but_not_backoffs(store: Store) -> None:
    """The leases an embedded server's previous process (or a restored backup) held are freed
    at start; a row waiting out a failure's backoff keeps waiting."""
    with store.write() as conn:
        for doc_id in ("leased", "failing"):
            store.keyword.upsert(conn, _doc(doc_id))
    with store.write() as conn:
        claimed = derive.claim(conn, "vector", 10, lease_seconds=120)
        failing = [c for c in claimed if c.doc_id == "failing"]
        derive.failed(conn, "vector", failing, "ConnectionError: chroma down", retry_in=300)
        assert derive.claim(conn, "vector", 10, lease_seconds=120) == []  # all held
    with store.write() as conn:
        assert derive.release_claims(conn) >= 1
    with store.write() as conn:
        again = derive.claim(conn, "vector", 10, lease_seconds=120)
    assert [c.doc_id for c in again] == ["leased"]


def test_enqueue_all_backfills_one_target_without_duplicates(store: Store) -> None:
    with store.write() as conn:
        for i in range(5):
            store.keyword.upsert(conn, _doc(f"d{i}"))
        derive.clear(conn, "vector")
        store.keyword.upsert(conn, _doc("d0", "changed"))
    with store.write() as conn:
        assert derive.enqueue_all(conn, "vector") == 4
        assert derive.enqueue_all(conn, "vector") == 0
        assert derive.pending(conn, "vector") == 5


def test_migration_gives_old_documents_their_bodies(tmp_path: Path) -> None:
    """A store from before the derive queue: bodies rebuilt from the store of record, and every
    document queued for the graph."""
    from engram.db import create_store_engine, migrate
    from engram.schema import kw_docs

    path = tmp_path / "old.db"
    engine = create_store_engine(f"sqlite:///{path}")
    assert 5 in migrate(engine)
    with engine.begin() as conn:  # put it back to the version-4 shape, with two documents
        conn.exec_driver_sql("DROP TABLE derive_queue")
        conn.exec_driver_sql("ALTER TABLE kw_docs DROP COLUMN body")
        conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 5")
        conn.exec_driver_sql(
            "INSERT INTO sessions (id, project, status, started_at, summary) "
            "VALUES ('s1', 'p', 'ended', 0, 'fixed the flaky test')"
        )
        conn.exec_driver_sql(
            "INSERT INTO observations (id, event_id, session_id, project, host, hook_type, kind,"
            " title, text, files_read, files_modified, commands, errors, concepts, created_at,"
            " stored_at) VALUES ('obs_1', 'e1', 's1', 'p', 'h', 'PostToolUse', 'edit', 't',"
            " 'edited the parser', '[]', '[\"src/parser.py\"]', '[]', '[]', '[]', 0, 0)"
        )
        for doc_id, kind in (("obs_1", "observation"), ("sum_s1", "summary")):
            conn.exec_driver_sql(
                "INSERT INTO kw_docs (doc_id, kind, project, length, created_at)"
                " VALUES (?, ?, 'p', 1, 0)",
                (doc_id, kind),
            )
    assert migrate(engine) == [5]
    with engine.connect() as conn:
        bodies = dict(conn.execute(select(kw_docs.c.doc_id, kw_docs.c.body)).all())
        queued = set(
            conn.execute(
                select(derive_queue.c.doc_id).where(derive_queue.c.target == "graph")
            ).scalars()
        )
    assert bodies == {"obs_1": "edited the parser\nsrc/parser.py", "sum_s1": "fixed the flaky test"}
    assert queued == {"obs_1", "sum_s1"}
    engine.dispose()


def test_a_change_to_a_failing_row_starts_it_afresh(store: Store) -> None:
    with store.write() as conn:
        store.keyword.upsert(conn, _doc("d1"))
    with store.write() as conn:
        claimed = derive.claim(conn, "vector", 10, lease_seconds=60)
        derive.failed(conn, "vector", claimed, "TimeoutError", retry_in=3600)
    with store.write() as conn:  # changed again: claimable now, no attempts, no stale error
        store.keyword.delete(conn, "d1")
    with store.read() as conn:
        assert derive.last_error(conn, "vector") is None
    with store.write() as conn:
        again = derive.claim(conn, "vector", 10, lease_seconds=60)
    assert [(c.doc_id, c.op, c.attempts) for c in again] == [("d1", "delete", 1)]


def test_queue_and_insert_ignore_statements_are_compiled_once(store: Store) -> None:
    """Built per call with inline values, these statements had no cache key and were compiled
    for every document an import wrote; a cached statement must report a hit the second time."""
    from sqlalchemy import event
    from sqlalchemy.engine.interfaces import CacheStats

    from engram.schema import sessions
    from engram.store import insert_ignore

    seen: list[tuple[str, CacheStats]] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("INSERT"):
            seen.append((statement.split("(")[0].split()[-1].strip('"'), context.cache_hit))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        for i in range(3):
            with store.write() as conn:
                derive.enqueue(conn, f"d{i}", derive.UPSERT)
                row = {"id": f"s{i % 2}", "project": "p", "started_at": 1.0}
                assert insert_ignore(conn, sessions, row) is (i < 2)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    hits = {table: stats for table, stats in seen}  # the last execution of each
    assert hits == {"derive_queue": CacheStats.CACHE_HIT, "sessions": CacheStats.CACHE_HIT}


def test_done_and_current_find_claimed_rows_by_key_not_by_scanning_the_backlog(
    store: Store,
) -> None:
    """Both run inside the write lock for every graph transaction: scanning every queued row of
    the target made a live capture's wait grow with the backlog (~14 ms a call at 20,000 rows)."""
    from sqlalchemy import event

    if not store.is_sqlite:
        pytest.skip("reads SQLite's query plan (PostgreSQL plans a 50-row table by cost)")
    with store.write() as conn:
        for i in range(50):
            derive.enqueue(conn, f"d{i}", derive.UPSERT)
    with store.write() as conn:
        changes = derive.claim(conn, "graph", 3, 60.0)
    seen: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "derive_queue" in statement and not statement.lstrip().upper().startswith("INSERT"):
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        with store.write() as conn:
            assert derive.current(conn, "graph", changes) == {c.doc_id for c in changes}
            derive.done(conn, "graph", changes)
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert len(seen) == 2
    with store.read() as conn:
        for statement, parameters in seen:
            plan = " | ".join(
                str(row[-1])
                for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)  # type: ignore[arg-type]
            )
            assert "doc_id=?" in plan, (statement, plan)
    assert set(_rows(store, "graph")) == {f"d{i}" for i in range(50)} - {c.doc_id for c in changes}
