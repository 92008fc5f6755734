"""Facts between named things, with when each held: what the heuristic graph cannot see in code
("orders-service uses PostgreSQL", "the user prefers pnpm", "staging runs on eu-west-1").

Facts come from the LLM's reading of a session (``engram.llm.graphing``); this module keeps them.
Before anything is asked, the names a project already has (its graph entities and the things
its facts name) are offered to the model, and every name it answers is merged with a known one
by exact match of the normalised name, then by fuzzy match (``FUZZY_RATIO``), so "Postgres"
and "PostgreSQL" are one thing. A fact whose relation holds one object at a time
(``exclusive``: "deployed on", "uses database", "version is") replaces the live facts with the
same subject and relation and another object: they get ``valid_to`` and ``replaced_by``, and
stay. Nothing here deletes; the same fact again is left as it is.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, func, or_, select, update

from engram.schema import graph_entities, graph_facts
from engram.store import iso, now

FUZZY_RATIO = 0.88
"""SequenceMatcher ratio above which two normalised names are one thing (postgres ~
postgresql: 0.89; redis ~ rediss: 0.91; api ~ app: 0.67)."""
KNOWN_NAMES = 80
MAX_NAME_CHARS = 120
RELATION = re.compile(r"[a-z][a-z0-9_ ]{0,62}\Z")


@dataclasses.dataclass(frozen=True)
class Fact:
    subject: str
    relation: str
    object: str
    exclusive: bool = False


def name_key(name: str) -> str:
    """What two names are compared by: lower case, spaces and punctuation folded."""
    return re.sub(r"[\s_\-./]+", " ", name.strip().lower()).strip()[:300]


def relation_key(relation: str) -> str:
    return re.sub(r"[\s\-]+", "_", relation.strip().lower())[:64]


def known_names(conn: Connection, project: str, limit: int = KNOWN_NAMES) -> list[str]:
    """The names a project already has, the most mentioned first: its facts' subjects and
    objects, then its graph entities (files and symbols left out: the heuristics own them)."""
    names: dict[str, str] = {}
    facts = conn.execute(
        select(graph_facts.c.subject, graph_facts.c.object)
        .where(graph_facts.c.project == project, graph_facts.c.valid_to.is_(None))
        .order_by(graph_facts.c.created_at.desc())
        .limit(limit)
    ).all()
    for subject, obj in facts:
        names.setdefault(name_key(subject), subject)
        names.setdefault(name_key(obj), obj)
    entities = conn.execute(
        select(graph_entities.c.name)
        .where(
            graph_entities.c.project == project,
            graph_entities.c.type.in_(("package", "concept", "command", "error")),
        )
        .order_by(graph_entities.c.doc_count.desc())
        .limit(limit)
    ).scalars()
    for name in entities:
        names.setdefault(name_key(name), name)
    merged: list[str] = []  # one spelling per thing: what is sent is already merged
    for name in names.values():
        if merge_name(name, merged) not in merged:
            merged.append(name)
    return merged[:limit]


def merge_name(name: str, known: Sequence[str]) -> str:
    """``name`` as a known name when it is one (exactly, then fuzzily), else as given."""
    key = name_key(name)
    by_key = {name_key(k): k for k in known}
    if key in by_key:
        return by_key[key]
    # get_close_matches bounds each ratio cheaply first (real_quick_ratio, quick_ratio)
    close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=FUZZY_RATIO)
    return by_key[close[0]] if close else " ".join(name.split())[:MAX_NAME_CHARS]


def record(
    conn: Connection,
    project: str,
    facts: Iterable[Fact],
    known: Sequence[str],
    *,
    by: str,
    session_id: str | None = None,
    source_doc: str | None = None,
    at: float | None = None,
) -> dict[str, int]:
    """Keep ``facts`` (names merged with ``known`` first); counts of what was added, left as it
    was (the same live fact) and replaced (ended by an exclusive fact)."""
    at = at or now()
    names = list(known)
    counts = {"added": 0, "same": 0, "replaced": 0}
    for fact in facts:
        subject = merge_name(fact.subject, names)
        obj = merge_name(fact.object, names)
        names += [subject, obj]
        relation = relation_key(fact.relation)
        live = conn.execute(
            select(graph_facts.c.id, graph_facts.c.object_key).where(
                graph_facts.c.project == project,
                graph_facts.c.subject_key == name_key(subject),
                graph_facts.c.relation == relation,
                graph_facts.c.valid_to.is_(None),
            )
        ).all()
        if any(row.object_key == name_key(obj) for row in live):
            counts["same"] += 1
            continue
        inserted = conn.execute(
            graph_facts.insert().values(
                project=project,
                subject_key=name_key(subject),
                subject=subject,
                relation=relation,
                object_key=name_key(obj),
                object=obj,
                exclusive=int(fact.exclusive),
                valid_from=at,
                session_id=session_id,
                source_doc=source_doc,
                by=by[:300],
                created_at=at,
            )
        ).inserted_primary_key
        new_id = inserted[0] if inserted is not None else None
        counts["added"] += 1
        if fact.exclusive and live:
            conn.execute(
                update(graph_facts)
                .where(graph_facts.c.id.in_([row.id for row in live]))
                .values(valid_to=at, replaced_by=new_id)
            )
            counts["replaced"] += len(live)
    return counts


def about(
    conn: Connection, project: str, name: str | None = None, history: bool = False, limit: int = 50
) -> list[dict[str, Any]]:
    """A project's facts (about ``name``, as subject or object, when given), newest first;
    ``history``: the ended ones too."""
    stmt = select(graph_facts).where(graph_facts.c.project == project)
    if name:
        key = name_key(merge_name(name, known_names(conn, project)))
        stmt = stmt.where(or_(graph_facts.c.subject_key == key, graph_facts.c.object_key == key))
    if not history:
        stmt = stmt.where(graph_facts.c.valid_to.is_(None))
    rows = conn.execute(
        stmt.order_by(graph_facts.c.valid_from.desc(), graph_facts.c.id.desc()).limit(limit)
    ).all()
    return [
        {
            "id": row.id,
            "subject": row.subject,
            "relation": row.relation,
            "object": row.object,
            "exclusive": bool(row.exclusive),
            "validFrom": iso(row.valid_from),
            "validTo": iso(row.valid_to),
            "replacedBy": row.replaced_by,
            "sessionId": row.session_id,
            "by": row.by,
        }
        for row in rows
    ]


def count(conn: Connection) -> int:
    return int(
        conn.execute(
            select(func.count()).select_from(graph_facts).where(graph_facts.c.valid_to.is_(None))
        ).scalar_one()
    )
