"""Keeping the graph in step with its documents: ``apply`` a batch of derive-queue changes, each
document's previous contribution subtracted first, so applying twice changes nothing."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    case,
    delete,
    insert,
    literal_column,
    select,
    update,
)

from engram.derive import UPSERT, Change
from engram.graph.extract import MAX_NAME_CHARS, SESSION, Entity, document_columns, extract
from engram.keyword import KeywordDoc
from engram.schema import (
    graph_edges,
    graph_entities,
    graph_mentions,
    graph_session_members,
)
from engram.sql import dialect_insert

MAX_PAIRED_PER_DOC = 8
"""Only a document's first entities get co_occurs edges: n entities make n·(n-1) directed edges."""
MAX_SESSION_PAIRED = 64
"""Members of one session (per agent) that get same_session edges; later ones are counted only."""

# --- maintaining the graph ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A change with its document's entities, extracted before the write transaction."""

    change: Change
    entities: list[Entity]


def prepare(conn: Connection, changes: Sequence[Change]) -> list[Prepared]:
    """Extract the entities of ``changes`` (reads only: no write lock needed), in the order
    ``apply_prepared`` applies them. Extraction is a quarter of a document's graph time, and a
    writer that holds the store's write lock for it keeps a hook's capture waiting."""
    docs = [c.doc for c in changes if c.op == UPSERT and c.doc is not None]
    columns = document_columns(conn, docs)
    return [
        Prepared(
            change,
            extract(change.doc.body, project=change.doc.project, **columns.get(change.doc_id, {}))
            if change.op == UPSERT and change.doc is not None
            else [],
        )
        for change in sorted(changes, key=lambda c: c.doc_id)
    ]


def apply(conn: Connection, changes: Sequence[Change]) -> None:
    """Bring the graph up to date with claimed derive-queue changes (in the caller's write
    transaction): each document's previous contribution is removed, an upsert adds the new one.
    Entities and edges left with nothing are deleted last, so re-applying a document keeps its
    entities' ids."""
    touched: set[int] = set()
    for prepared in prepare(conn, changes):
        touched |= apply_prepared(conn, prepared)
    collect(conn, touched)


def apply_prepared(conn: Connection, prepared: Prepared) -> set[int]:
    """Apply one prepared change; returns the entities it touched, for ``collect`` once the
    transaction's last change is applied."""
    change = prepared.change
    touched = _subtract(conn, change.doc_id)
    if change.op == UPSERT and change.doc is not None:
        _add_entities(conn, change.doc, prepared.entities)
    return touched


def add(conn: Connection, doc: KeywordDoc, columns: Mapping[str, Any] | None = None) -> None:
    """Add one document's contribution (the caller has removed any previous one)."""
    _add_entities(conn, doc, extract(doc.body, project=doc.project, **(columns or {})))


def _add_entities(conn: Connection, doc: KeywordDoc, entities: Sequence[Entity]) -> None:
    if not entities:
        return
    agent = doc.agent_id or ""
    ids = _upsert_entities(conn, doc.project, entities, doc.created_at)
    conn.execute(
        insert(graph_mentions),
        [
            {
                "doc_id": doc.doc_id,
                "entity_id": ids[(e.type, e.key)],
                "role": e.role,
                "rank": rank,
                "kind": doc.kind,
                "agent": agent,
                "session_id": doc.session_id,
                "created_at": doc.created_at,
            }
            for rank, e in enumerate(entities)
        ],
    )
    paired = [ids[(e.type, e.key)] for e in entities[:MAX_PAIRED_PER_DOC]]
    _bump(conn, _pairs(paired, "co_occurs"), agent, +1)
    if doc.session_id is None:
        return
    session = _upsert_entities(
        conn, doc.project, [_session_entity(doc.session_id)], doc.created_at
    )[(SESSION, doc.session_id)]
    edited = [ids[(e.type, e.key)] for e in entities if e.type == "file" and e.role == "edits"]
    _bump(conn, _edits(session, edited), agent, +1)
    members = [ids[(e.type, e.key)] for e in entities if _session_member(e.type, e.role)]
    _join_session(conn, doc.session_id, agent, members)


def remove(conn: Connection, doc_id: str) -> None:
    """Subtract everything ``doc_id`` contributed; nothing when it contributed nothing."""
    collect(conn, _subtract(conn, doc_id))


def _subtract(conn: Connection, doc_id: str) -> set[int]:
    """Subtract a document's contribution, leaving emptied rows for ``collect``; returns the
    ids of the entities it touched."""
    m, e = graph_mentions.c, graph_entities.c
    rows = conn.execute(
        select(m.entity_id, m.role, m.rank, m.agent, m.session_id, e.type, e.project)
        .select_from(graph_mentions.join(graph_entities, graph_entities.c.id == m.entity_id))
        .where(m.doc_id == doc_id)
        .order_by(m.rank)
    ).all()
    if not rows:
        return set()
    conn.execute(delete(graph_mentions).where(m.doc_id == doc_id))
    ids = [r.entity_id for r in rows]
    agent, session_id, project = rows[0].agent, rows[0].session_id, rows[0].project
    _bump(
        conn,
        _pairs([r.entity_id for r in rows if r.rank < MAX_PAIRED_PER_DOC], "co_occurs"),
        agent,
        -1,
    )
    if session_id is not None:
        session = conn.execute(
            select(e.id).where(e.project == project, e.type == SESSION, e.key == session_id)
        ).scalar()
        members = [r.entity_id for r in rows if _session_member(r.type, r.role)]
        _leave_session(conn, session_id, agent, members)
        if session is not None:
            edited = [r.entity_id for r in rows if r.type == "file" and r.role == "edits"]
            _bump(conn, _edits(session, edited), agent, -1)
            ids.append(session)
    conn.execute(
        update(graph_entities).where(e.id == bindparam("eid")).values(doc_count=e.doc_count - 1),
        [{"eid": i} for i in ids],
    )
    return set(ids)


def collect(conn: Connection, touched: set[int]) -> None:
    """Delete the edges (weight 0) and entities (no document) that ``touched`` left empty."""
    if not touched:
        return
    ids, g = sorted(touched), graph_edges.c
    # a literal 0: the planner uses the partial index on emptied edges only for "weight <= 0"
    # as written in its definition, not for a bound parameter
    empty = g.weight <= literal_column("0")
    for column in (g.src, g.dst):
        conn.execute(delete(graph_edges).where(column.in_(ids), empty))
    conn.execute(
        delete(graph_entities).where(graph_entities.c.id.in_(ids), graph_entities.c.doc_count <= 0)
    )


def _session_entity(session_id: str) -> Entity:
    return Entity(
        SESSION,
        session_id[:MAX_NAME_CHARS],
        session_id[:MAX_NAME_CHARS],
        session_id[:MAX_NAME_CHARS],
    )


def _session_member(type_: str, role: str) -> bool:
    """What same_session relates: the files a session edited and the errors it met."""
    return type_ == "error" or (type_ == "file" and role == "edits")


def _pairs(ids: Sequence[int], relation: str) -> list[tuple[int, int, str]]:
    return [(a, b, relation) for a in ids for b in ids if a != b]


def _edits(session: int, files: Sequence[int]) -> list[tuple[int, int, str]]:
    return [t for f in files for t in ((session, f, "edits"), (f, session, "edited_in"))]


@functools.lru_cache(maxsize=4)
def _statements(dialect: str) -> dict[str, Any]:
    """The maintenance statements of one dialect, built once: building an upsert (its
    ``excluded`` columns, its ``case``) cost more than running it, ~40 % of a document's graph
    time (measured with cProfile on the spine benchmark's realistic corpus)."""
    insert = dialect_insert(dialect)
    t = graph_entities
    ins = insert(t)
    entities = ins.on_conflict_do_update(
        index_elements=[t.c.project, t.c.type, t.c.key],
        set_={
            "doc_count": t.c.doc_count + 1,
            "first_seen": case(
                (ins.excluded.first_seen < t.c.first_seen, ins.excluded.first_seen),
                else_=t.c.first_seen,
            ),
            "last_seen": case(
                (ins.excluded.last_seen > t.c.last_seen, ins.excluded.last_seen),
                else_=t.c.last_seen,
            ),
        },
    ).returning(t.c.id, t.c.type, t.c.key)
    e = graph_edges
    ins_edges = insert(e)
    edges_up = ins_edges.on_conflict_do_update(
        index_elements=[e.c.src, e.c.dst, e.c.relation, e.c.agent],
        set_={"weight": e.c.weight + ins_edges.excluded.weight},
    )
    edges_down = (
        update(e)
        .where(
            e.c.src == bindparam("s"),
            e.c.dst == bindparam("d"),
            e.c.relation == bindparam("r"),
            e.c.agent == bindparam("a"),
        )
        .values(weight=e.c.weight - bindparam("n"))
    )
    m = graph_session_members
    join = (
        insert(m)
        .values(
            session_id=bindparam("sid"),
            agent=bindparam("agent"),
            entity_id=bindparam("eid"),
            refs=1,
            paired=0,
        )
        .on_conflict_do_update(
            index_elements=[m.c.session_id, m.c.agent, m.c.entity_id], set_={"refs": m.c.refs + 1}
        )
        .returning(m.c.refs)
    )
    return {"entities": entities, "edges_up": edges_up, "edges_down": edges_down, "join": join}


def _upsert_entities(
    conn: Connection, project: str, entities: Sequence[Entity], at: float
) -> dict[tuple[str, str], int]:
    """Insert or count one more document for each entity; their ids by (type, key)."""
    stmt = _statements(conn.dialect.name)["entities"]
    # one cached statement run as executemany (insertmanyvalues batches it into one INSERT);
    # sorted so concurrent writers lock rows in the same order
    rows = sorted(
        (
            {
                "project": project,
                "type": x.type,
                "key": x.key,
                "alias": x.alias,
                "name": x.name,
                "doc_count": 1,
                "first_seen": at,
                "last_seen": at,
            }
            for x in entities
        ),
        key=lambda v: (v["type"], v["key"]),
    )
    return {(r.type, r.key): r.id for r in conn.execute(stmt, rows)}


def _bump(conn: Connection, edges: Iterable[tuple[int, int, str]], agent: str, delta: int) -> None:
    counted = Counter(edges)
    if not counted:
        return
    statements = _statements(conn.dialect.name)
    if delta > 0:
        conn.execute(
            statements["edges_up"],
            [
                {"src": s, "dst": d, "relation": r, "agent": agent, "weight": n * delta}
                for (s, d, r), n in sorted(counted.items())
            ],
        )
        return
    conn.execute(
        statements["edges_down"],
        [
            {"s": s, "d": d, "r": r, "a": agent, "n": n * -delta}
            for (s, d, r), n in sorted(counted.items())
        ],
    )


def _join_session(conn: Connection, session_id: str, agent: str, members: Sequence[int]) -> None:
    t = graph_session_members
    join = _statements(conn.dialect.name)["join"]
    for entity in sorted(set(members)):
        refs = conn.execute(join, {"sid": session_id, "agent": agent, "eid": entity}).scalar_one()
        if refs != 1:
            continue
        others = list(
            conn.execute(
                select(t.c.entity_id).where(
                    t.c.session_id == session_id, t.c.agent == agent, t.c.paired == 1
                )
            ).scalars()
        )
        if len(others) >= MAX_SESSION_PAIRED:
            continue
        conn.execute(
            update(t)
            .where(t.c.session_id == session_id, t.c.agent == agent, t.c.entity_id == entity)
            .values(paired=1)
        )
        _bump(
            conn,
            [x for o in others for x in ((entity, o, "same_session"), (o, entity, "same_session"))],
            agent,
            +1,
        )


def _leave_session(conn: Connection, session_id: str, agent: str, members: Sequence[int]) -> None:
    t = graph_session_members
    for entity in sorted(set(members), reverse=True):
        row = conn.execute(
            update(t)
            .where(
                t.c.session_id == session_id,
                t.c.agent == agent,
                t.c.entity_id == entity,
            )
            .values(refs=t.c.refs - 1)
            .returning(t.c.refs, t.c.paired)
        ).first()
        if row is None or row.refs > 0:
            continue
        conn.execute(
            delete(t).where(
                t.c.session_id == session_id, t.c.agent == agent, t.c.entity_id == entity
            )
        )
        if row.paired:
            others = list(
                conn.execute(
                    select(t.c.entity_id).where(
                        t.c.session_id == session_id, t.c.agent == agent, t.c.paired == 1
                    )
                ).scalars()
            )
            _bump(
                conn,
                [
                    x
                    for o in others
                    for x in ((entity, o, "same_session"), (o, entity, "same_session"))
                ],
                agent,
                -1,
            )
