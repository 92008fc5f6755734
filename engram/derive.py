"""The derive queue: keeps the indexes derived from keyword documents (vectors, graph) in step.

Every change to a keyword document (upsert or delete) writes one row per derived target in the
same transaction, so a derived index can never miss a change that the store committed. A drain
task claims a batch (a lease, like the capture inbox), brings its index up to date — which must be
idempotent: an upsert by document id, a delete of what may already be gone — and then removes the
rows it handled, unless the document changed again meanwhile (the row's ``enqueued_at`` moved on,
so the newer change is drained next). A crash mid-batch leaves the rows; their lease runs out and
the next drain takes them again.

A new derived index (another embedding model, a graph built for the first time) is filled by
``enqueue_all``: every indexed document becomes an upsert row for that target, drained in the
background like any other change.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    delete,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
    update,
)

from engram.keyword import KeywordDoc, KeywordHit, KeywordIndex
from engram.schema import derive_queue, kw_docs
from engram.scope import Scope, Window
from engram.sql import dialect_insert

TARGETS = ("vector", "graph")
UPSERT = "upsert"
DELETE = "delete"


@functools.lru_cache(maxsize=4)
def _enqueue_statement(dialect: str) -> Any:
    """The queue's upsert, built once per dialect. Built per call with its values inline it
    was not cacheable ("no key" in SQLAlchemy's log): compiled on every change, ~0.5 ms of
    held GIL per document during an import."""
    ins = dialect_insert(dialect)(derive_queue)
    return ins.on_conflict_do_update(
        index_elements=[derive_queue.c.target, derive_queue.c.doc_id],
        set_={
            "op": ins.excluded.op,
            "enqueued_at": ins.excluded.enqueued_at,
            "attempts": literal_column("0"),
            "claimed_until": null(),
            "last_error": null(),
        },
    )


def enqueue(conn: Connection, doc_id: str, op: str, targets: Sequence[str] = TARGETS) -> None:
    """Record that ``doc_id`` changed (``op``) for each target; the latest change wins."""
    at = time.time()
    conn.execute(
        _enqueue_statement(conn.dialect.name),
        [
            {"target": t, "doc_id": doc_id, "op": op, "enqueued_at": at, "attempts": 0}
            for t in targets
        ],
    )


def enqueue_all(conn: Connection, target: str) -> int:
    """Every indexed document becomes an upsert for ``target`` (a back-fill). Returns how many
    rows were queued; documents already queued keep their row."""
    at = time.time()
    before = pending(conn, target)
    select_docs = select(
        literal(target, derive_queue.c.target.type),
        kw_docs.c.doc_id,
        literal(UPSERT, derive_queue.c.op.type),
        literal(at, derive_queue.c.enqueued_at.type),
        literal(0, derive_queue.c.attempts.type),
    ).where(true())
    # (the WHERE lets SQLite parse ON CONFLICT after INSERT ... SELECT)
    stmt = dialect_insert(conn.dialect.name)(derive_queue).from_select(
        ["target", "doc_id", "op", "enqueued_at", "attempts"], select_docs
    )
    conn.execute(stmt.on_conflict_do_nothing())
    return pending(conn, target) - before


@dataclasses.dataclass(frozen=True)
class Change:
    """One claimed queue row. ``doc`` is the document as indexed now (None for a delete, or when
    the document is gone by the time the row was claimed: treat that as a delete)."""

    doc_id: str
    op: str
    enqueued_at: float
    attempts: int
    doc: KeywordDoc | None


def claim(conn: Connection, target: str, limit: int, lease_seconds: float) -> list[Change]:
    """Lease up to ``limit`` of the oldest unleased rows of ``target`` (call in a write
    transaction)."""
    at = time.time()
    rows = conn.execute(
        select(
            derive_queue.c.doc_id,
            derive_queue.c.op,
            derive_queue.c.enqueued_at,
            derive_queue.c.attempts,
        )
        .where(
            derive_queue.c.target == target,
            or_(derive_queue.c.claimed_until.is_(None), derive_queue.c.claimed_until < at),
        )
        .order_by(derive_queue.c.enqueued_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    if not rows:
        return []
    ids = [r.doc_id for r in rows]
    conn.execute(
        update(derive_queue)
        .where(derive_queue.c.target == target, derive_queue.c.doc_id.in_(ids))
        .values(claimed_until=at + lease_seconds, attempts=derive_queue.c.attempts + 1)
    )
    docs = {r.doc_id: r for r in conn.execute(select(kw_docs).where(kw_docs.c.doc_id.in_(ids)))}
    changes = []
    for r in rows:
        d = docs.get(r.doc_id)
        doc = None
        if r.op == UPSERT and d is not None:
            doc = KeywordDoc(
                doc_id=d.doc_id,
                kind=d.kind,
                project=d.project,
                body=d.body or "",
                created_at=d.created_at,
                agent_id=d.agent_id,
                session_id=d.session_id,
                speaker=d.speaker,
            )
        changes.append(
            Change(
                r.doc_id, r.op if doc is not None else DELETE, r.enqueued_at, r.attempts + 1, doc
            )
        )
    return changes


def _as_claimed(target: str, changes: Sequence[Change]) -> tuple[Any, ...]:
    """The queue rows of ``changes`` as they were claimed (same enqueued_at). The ``doc_id IN``
    term is what lets SQLite look them up by primary key: with the row-value ``IN`` alone it
    scanned every row of the target, ~14 ms a call at a 20,000-row backlog, twice in each graph
    transaction and inside the write lock, so live captures waited longer as the backlog grew."""
    return (
        derive_queue.c.target == target,
        derive_queue.c.doc_id.in_([c.doc_id for c in changes]),
        tuple_(derive_queue.c.doc_id, derive_queue.c.enqueued_at).in_(
            [(c.doc_id, c.enqueued_at) for c in changes]
        ),
    )


def done(conn: Connection, target: str, changes: Sequence[Change]) -> None:
    """Remove the rows of ``changes`` that did not change again since they were claimed."""
    if not changes:
        return
    conn.execute(delete(derive_queue).where(*_as_claimed(target, changes)))


def current(conn: Connection, target: str, changes: Sequence[Change]) -> set[str]:
    """The doc ids of ``changes`` still queued as claimed: a change enqueued again since (the
    document changed) is left to the claim of its newer row."""
    if not changes:
        return set()
    return set(
        conn.execute(select(derive_queue.c.doc_id).where(*_as_claimed(target, changes))).scalars()
    )


def release_claims(conn: Connection) -> int:
    """Make every row leased by a running drain claimable again at once; rows waiting out a
    failure's backoff (they carry its error) keep waiting. Returns how many were released.

    Only for an embedded server starting up: the leases were its previous process's (one per
    data dir), which is gone, or a restored backup's; waiting them out left the vectors of a
    restored store unbuilt for the whole lease (tests/test_backup.py)."""
    result = conn.execute(
        update(derive_queue)
        .where(derive_queue.c.claimed_until.is_not(None), derive_queue.c.last_error.is_(None))
        .values(claimed_until=null())
    )
    return int(result.rowcount or 0)


def failed(
    conn: Connection, target: str, changes: Sequence[Change], error: str, retry_in: float
) -> None:
    """Keep the rows, leased for ``retry_in`` seconds, with the error for status."""
    if not changes:
        return
    conn.execute(
        update(derive_queue)
        .where(
            derive_queue.c.target == target, derive_queue.c.doc_id.in_([c.doc_id for c in changes])
        )
        .values(claimed_until=time.time() + retry_in, last_error=error[:2000])
    )


def due(conn: Connection, targets: Sequence[str]) -> bool:
    """Some row of ``targets`` is unleased (``claim`` would take it)."""
    at = time.time()
    return (
        conn.execute(
            select(derive_queue.c.doc_id)
            .where(
                derive_queue.c.target.in_(targets),
                or_(derive_queue.c.claimed_until.is_(None), derive_queue.c.claimed_until < at),
            )
            .limit(1)
        ).first()
        is not None
    )


def pending(conn: Connection, target: str) -> int:
    return int(
        conn.execute(
            select(func.count()).select_from(derive_queue).where(derive_queue.c.target == target)
        ).scalar_one()
    )


def oldest_enqueued(conn: Connection, target: str) -> float | None:
    """When the oldest change still queued for ``target`` was queued (None: nothing queued)."""
    value = conn.execute(
        select(func.min(derive_queue.c.enqueued_at)).where(derive_queue.c.target == target)
    ).scalar()
    return None if value is None else float(value)


def observation_cutoff(conn: Connection, keep: int) -> float | None:
    """The creation time of the ``keep``-th newest observation (of every project): older ones
    fall outside an index that keeps the newest ``keep`` (None: there are no more than that)."""
    value = conn.execute(
        select(kw_docs.c.created_at)
        .where(kw_docs.c.kind == "observation")
        .order_by(kw_docs.c.created_at.desc())
        .limit(1)
        .offset(keep - 1)
    ).scalar()
    return None if value is None else float(value)


def observations_before(conn: Connection, cutoff: float, limit: int) -> list[tuple[str, str]]:
    """(id, project) of observations created before ``cutoff``, newest first."""
    rows = conn.execute(
        select(kw_docs.c.doc_id, kw_docs.c.project)
        .where(kw_docs.c.kind == "observation", kw_docs.c.created_at < cutoff)
        .order_by(kw_docs.c.created_at.desc())
        .limit(limit)
    ).all()
    return [(r.doc_id, r.project) for r in rows]


def last_error(conn: Connection, target: str) -> str | None:
    return conn.execute(
        select(derive_queue.c.last_error)
        .where(derive_queue.c.target == target, derive_queue.c.last_error.is_not(None))
        .order_by(derive_queue.c.enqueued_at.desc())
        .limit(1)
    ).scalar()


def clear(conn: Connection, target: str) -> None:
    conn.execute(delete(derive_queue).where(derive_queue.c.target == target))


class DerivingIndex:
    """A keyword index that also queues each change for the derived indexes. The store's
    ``keyword`` attribute is one of these, so every write path (capture, memories, summaries,
    import, forget) reaches vectors and graph without knowing they exist."""

    def __init__(self, backend: KeywordIndex, targets: Sequence[str] = TARGETS) -> None:
        self.backend = backend
        self.targets = tuple(targets)
        self.name = backend.name

    def create(self, conn: Connection) -> None:
        self.backend.create(conn)

    def upsert(self, conn: Connection, doc: KeywordDoc) -> None:
        self.backend.upsert(conn, doc)
        if self.targets:
            enqueue(conn, doc.doc_id, UPSERT, self.targets)

    def delete(self, conn: Connection, doc_id: str) -> None:
        self.backend.delete(conn, doc_id)
        if self.targets:
            enqueue(conn, doc_id, DELETE, self.targets)

    def search(
        self,
        conn: Connection,
        query: str,
        scope: Scope,
        limit: int,
        kinds: tuple[str, ...] | None = None,
        window: Window | None = None,
    ) -> list[KeywordHit]:
        return self.backend.search(conn, query, scope, limit, kinds, window)

    def count(self, conn: Connection) -> int:
        return self.backend.count(conn)

    def frequencies(self, conn: Connection, terms: Mapping[str, str]) -> tuple[int, dict[str, int]]:
        return self.backend.frequencies(conn, terms)
