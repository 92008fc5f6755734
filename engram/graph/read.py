"""Reading the graph: the search stream (documents ranked through the entities a query names and
their neighbours), ``query`` for an entity's neighbourhood, and counts for status."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    bindparam,
    func,
    or_,
    select,
    true,
    union_all,
)

from engram.graph.extract import (
    RELATIONS,
    ROLE_WEIGHTS,
    SESSION,
    TYPES,
    Entity,
    _entity,
    _file,
    _package,
    extract,
)
from engram.keyword import KeywordHit
from engram.schema import (
    graph_edges,
    graph_entities,
    graph_mentions,
)
from engram.scope import Scope, Window

PER_ENTITY_DOCS = 3
"""Newest documents read per matched entity, per hit asked for: a common entity's older
documents rank low anyway, and a rare entity has fewer."""
NEIGHBOUR_WEIGHT = 0.3
"""A document reached through a 1-hop neighbour counts this much of a direct mention."""
NEIGHBOURS_PER_ENTITY = 5
EXPAND_ENTITIES = 3
"""Only the rarest few matched entities are expanded to neighbours in the search stream."""
PER_NEIGHBOUR_DOCS = 1
"""Per hit asked for, for each neighbour."""
MAX_QUERY_CANDIDATES = 64


# --- reading the graph --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Match:
    id: int
    type: str
    key: str
    name: str
    project: str
    doc_count: int


def rarity(doc_count: int) -> float:
    """Weight of an entity by how few documents name it: 1 for one document, falling slowly."""
    return 1.0 / math.log2(1 + max(doc_count, 1))


def _visible_to(column: Any, agent: Any) -> ColumnElement[bool]:
    # An agent sees its own items and the project's shared ones, never another agent's.
    return true() if agent is None else or_(column == agent, column == "")


def _agent_clause(column: Any, scope: Scope) -> ColumnElement[bool]:
    return _visible_to(column, scope.agent_id)


def _query_candidates(text: str) -> tuple[set[str], set[str]]:
    """(aliases, full keys) a query names: the entities extraction finds in it, its words and
    adjacent word pairs ("git commit")."""
    entities = extract(text[:4000])
    aliases = {e.alias for e in entities}
    keys = {e.key for e in entities}
    words = [w.strip(".,;:!?()[]{}'\"`").lower() for w in text[:4000].split()]
    words = [w for w in words if len(w) >= 2]
    aliases.update(words)
    aliases.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    return set(sorted(aliases)[: MAX_QUERY_CANDIDATES * 2]), keys


def match(conn: Connection, text: str, scope: Scope, type_: str | None = None) -> list[Match]:
    """Entities in scope that the text names (never session nodes). When the text gives a full
    path, other files with the same basename are left out."""
    aliases, keys = _query_candidates(text)
    return _lookup(conn, aliases, keys, scope, type_)


# The search stream's reads, built once per shape (how many parts, which filters) with bound
# parameters: building a UNION of a dozen subqueries cost more than running it, and every stream
# runs beside BM25 and the vector stream on a 2-core machine (docs/benchmarks.md, "What the
# streams cost each other on two cores"). SQLAlchemy memoizes a built statement's cache key.


def _in_projects(column: Any, all_projects: bool) -> ColumnElement[bool]:
    return true() if all_projects else column.in_(bindparam("projects", expanding=True))


def _for_agent(column: Any, agent: bool) -> ColumnElement[bool]:
    return _visible_to(column, bindparam("agent") if agent else None)


@functools.lru_cache(maxsize=8)
def _lookup_statement(by_alias: bool, by_key: bool, all_projects: bool) -> Any:
    """Entities by alias and by full key (params aliases, wanted, keys, key_types, projects).
    Two index lookups rather than one OR: with the OR, SQLite scans every entity of the project
    (75 ms p50 at 50k observations); each part alone is an index range scan."""
    e = graph_entities.c
    columns = (e.id, e.type, e.key, e.name, e.project, e.doc_count)
    parts = []
    if by_alias:  # ix_graph_entities_alias (alias, project)
        parts.append(
            select(*columns).where(
                e.alias.in_(bindparam("aliases", expanding=True)),
                _in_projects(e.project, all_projects),
                e.type.in_(bindparam("wanted", expanding=True)),
            )
        )
    if by_key:  # uq_graph_entities_project_type_key (project, type, key)
        parts.append(
            select(*columns).where(
                e.key.in_(bindparam("keys", expanding=True)),
                _in_projects(e.project, all_projects),
                e.type.in_(bindparam("key_types", expanding=True)),
            )
        )
    return union_all(*parts) if len(parts) > 1 else parts[0]


@functools.lru_cache(maxsize=256)
def _docs_statement(parts: int, agent: bool, kinds: bool, since: bool, until: bool) -> Any:
    """``parts`` entities' newest documents (params e0, n0, e1, n1, ...; agent, kinds, since,
    until as asked): a UNION of index range scans on (entity_id, created_at)."""
    m = graph_mentions.c
    selects = []
    for i in range(parts):
        stmt = (
            select(m.entity_id, m.doc_id, m.kind, m.session_id, m.role, m.created_at)
            .where(m.entity_id == bindparam(f"e{i}"), _for_agent(m.agent, agent))
            .order_by(m.created_at.desc())
            .limit(bindparam(f"n{i}"))
        )
        if kinds:
            stmt = stmt.where(m.kind.in_(bindparam("kinds", expanding=True)))
        if since:
            stmt = stmt.where(m.created_at >= bindparam("since"))
        if until:
            stmt = stmt.where(m.created_at < bindparam("until"))
        selects.append(select(stmt.subquery()))
    return union_all(*selects) if parts > 1 else selects[0]


@functools.lru_cache(maxsize=64)
def _edges_statement(parts: int, agent: bool) -> Any:
    """``parts`` sources' heaviest edges (params s0, s1, ...; relations, n, agent)."""
    g = graph_edges.c
    selects = [
        select(
            select(g.src, g.dst, g.relation, g.weight)
            .where(
                g.src == bindparam(f"s{i}"),
                g.relation.in_(bindparam("relations", expanding=True)),
                _for_agent(g.agent, agent),
            )
            .order_by(g.weight.desc())
            .limit(bindparam("n"))
            .subquery()
        )
        for i in range(parts)
    ]
    return union_all(*selects) if parts > 1 else selects[0]


def _lookup(
    conn: Connection, aliases: set[str], keys: set[str], scope: Scope, type_: str | None
) -> list[Match]:
    if not aliases and not keys:
        return []
    wanted = [type_] if type_ else [t for t in TYPES]
    key_types = [t for t in wanted if t != "file"] if aliases else wanted
    by_key = bool(keys and key_types)
    if not aliases and not by_key:
        return []
    params: dict[str, Any] = {"aliases": sorted(aliases), "wanted": wanted}
    params.update(keys=sorted(keys), key_types=key_types, projects=list(scope.projects()))
    rows = conn.execute(_lookup_statement(bool(aliases), by_key, scope.all_projects), params)
    seen: set[int] = set()
    found = []
    for r in rows:
        if r.id not in seen:
            seen.add(r.id)
            found.append(Match(r.id, r.type, r.key, r.name, r.project, r.doc_count))
    exact_files = {m.key.rpartition("/")[2] for m in found if m.type == "file" and m.key in keys}
    return [
        m
        for m in found
        if m.type != "file" or m.key in keys or m.key.rpartition("/")[2] not in exact_files
    ]


def _docs_of(
    conn: Connection,
    limits: Mapping[int, int],
    scope: Scope,
    kinds: tuple[str, ...] | None,
    window: Window | None = None,
) -> dict[int, list[Any]]:
    """Per entity, its newest ``limits[entity]`` in-scope documents (inside ``window`` when
    given): one round trip (a UNION of index range scans on (entity_id, created_at))."""
    if not limits:
        return {}
    params: dict[str, Any] = {"agent": scope.agent_id, "kinds": list(kinds or ())}
    for i, (entity_id, limit) in enumerate(sorted(limits.items())):
        params[f"e{i}"], params[f"n{i}"] = entity_id, limit
    since, until = (window.since, window.until) if window else (None, None)
    params.update(since=since, until=until)
    stmt = _docs_statement(
        len(limits), scope.agent_id is not None, bool(kinds), since is not None, until is not None
    )
    found: dict[int, list[Any]] = {}
    for row in conn.execute(stmt, params):
        found.setdefault(row.entity_id, []).append(row)
    return found


def _neighbours(
    conn: Connection,
    entity_ids: Sequence[int],
    scope: Scope,
    per_entity: int,
    relations: Sequence[str] = RELATIONS,
) -> list[tuple[int, int, str, int]]:
    """(source, neighbour, relation, weight) for each source's strongest in-scope edges,
    heaviest first. Reads at most a few rows per source through the (src, weight) index, so a
    common entity's thousands of edges cost no more than a rare one's."""
    if not entity_ids:
        return []
    sources = sorted(set(entity_ids))
    params: dict[str, Any] = {f"s{i}": src for i, src in enumerate(sources)}
    params.update(relations=list(relations), n=per_entity * 4, agent=scope.agent_id)
    stmt = _edges_statement(len(sources), scope.agent_id is not None)
    summed: Counter[tuple[int, int, str]] = Counter()
    for row in conn.execute(stmt, params):
        summed[(row.src, row.dst, row.relation)] += row.weight  # one row per agent
    best: dict[int, list[tuple[int, int, str, int]]] = {}
    for (src, dst, relation), weight in sorted(summed.items(), key=lambda kv: (-kv[1], kv[0])):
        best.setdefault(src, []).append((src, dst, relation, weight))
    return [edge for src in entity_ids for edge in best.get(src, [])[:per_entity]]


def _rank(
    conn: Connection,
    matched: Sequence[Match],
    scope: Scope,
    limit: int,
    kinds: tuple[str, ...] | None,
    expand: bool,
    window: Window | None = None,
) -> list[KeywordHit]:
    scores: dict[str, list[Any]] = {}

    def credit(rows: Iterable[Any], weight: float) -> None:
        for row in rows:
            entry = scores.setdefault(row.doc_id, [0.0, row.kind, row.session_id, row.created_at])
            entry[0] += weight * ROLE_WEIGHTS.get(row.role, 1.0)

    weights = {m.id: rarity(m.doc_count) for m in matched}
    limits = dict.fromkeys(weights, max(PER_ENTITY_DOCS * limit, 30))
    if expand:
        rarest = sorted(matched, key=lambda m: (m.doc_count, m.id))[:EXPAND_ENTITIES]
        edges = [
            e
            for e in _neighbours(
                conn,
                [m.id for m in rarest],
                scope,
                NEIGHBOURS_PER_ENTITY,
                ("co_occurs", "same_session"),
            )
            if e[1] not in weights
        ]
        strongest = max((w for *_, w in edges), default=1)
        counts = _doc_counts(conn, {dst for _, dst, _, _ in edges})
        for _, dst, _, weight in edges:
            nweight = NEIGHBOUR_WEIGHT * rarity(counts.get(dst, 1)) * weight / strongest
            if nweight > weights.get(dst, 0.0):
                weights[dst] = nweight
                limits[dst] = max(PER_NEIGHBOUR_DOCS * limit, 10)
    for entity_id, rows in _docs_of(conn, limits, scope, kinds, window).items():
        credit(rows, weights[entity_id])
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1][0], -kv[1][3], kv[0]))[:limit]
    return [
        KeywordHit(doc_id, kind, session_id, score)
        for doc_id, (score, kind, session_id, _) in ranked
    ]


def _doc_counts(conn: Connection, ids: set[int]) -> dict[int, int]:
    if not ids:
        return {}
    e = graph_entities.c
    return dict(conn.execute(select(e.id, e.doc_count).where(e.id.in_(sorted(ids)))).all())


def stream(
    conn: Connection,
    query: str,
    scope: Scope,
    limit: int,
    kinds: tuple[str, ...] | None = None,
    window: Window | None = None,
) -> list[KeywordHit]:
    """The graph retrieval stream: documents that name the entities the query names (rarer
    entities and stronger roles score higher), then documents naming their strongest 1-hop
    neighbours at a lower weight. Best first; empty when the query names no known entity.
    With ``window``, only documents from inside it (entities and edges are not narrowed)."""
    matched = match(conn, query, scope)
    if not matched:
        return []
    return _rank(conn, matched, scope, limit, kinds, expand=True, window=window)


@dataclasses.dataclass(frozen=True)
class Answer:
    entities: list[dict[str, Any]]
    neighbours: list[dict[str, Any]]
    hits: list[KeywordHit]


MAX_MATCHED_ENTITIES = 10


def query(
    conn: Connection,
    scope: Scope,
    *,
    name: str | None = None,
    text: str | None = None,
    type: str | None = None,
    depth: int = 1,
    limit: int = 20,
) -> Answer:  # noqa: A002
    """Entity lookup and neighbourhood for the API: the entities ``name`` (one entity's name) or
    ``text`` (free text) names, their neighbours up to ``depth`` hops with relation and weight,
    and the documents most about them. Only what has an in-scope document is returned."""
    if name is not None:
        aliases = {e.alias for t in TYPES for e in _named(t, name)} | {name.strip().lower()}
        keys = {e.key for t in TYPES for e in _named(t, name)} | {name.strip().lower()}
        if type == SESSION:
            aliases, keys = {name.strip()}, {name.strip()}
        found = _lookup(conn, aliases, keys, scope, type)
    else:
        found = match(conn, text or "", scope, type)
    counts = _scoped_counts(conn, found, scope)
    found = sorted(
        (m for m in found if counts.get(m.id)), key=lambda m: (-counts[m.id], m.type, m.key)
    )[:MAX_MATCHED_ENTITIES]
    entities = [_entity_json(conn, m, counts[m.id]) for m in found]
    neighbours: list[dict[str, Any]] = []
    seen = {m.id for m in found}
    frontier = [m.id for m in found]
    names = {m.id: m.name for m in found}
    for hop in range(1, max(1, min(depth, 2)) + 1):
        edges = _neighbours(conn, frontier, scope, limit + len(seen))  # seen ones are skipped
        edges.sort(key=lambda e: (-e[3], e[1]))
        info = _entity_rows(conn, {dst for _, dst, _, _ in edges})
        added: list[int] = []
        for src, dst, relation, weight in edges:
            if dst in seen or dst not in info or len(neighbours) >= limit * hop:
                continue
            row = info[dst]
            neighbours.append(
                {
                    "type": row.type,
                    "name": row.name,
                    "key": row.key,
                    "relation": relation,
                    "weight": weight,
                    "via": names[src],
                    "depth": hop,
                }
            )
            names[dst] = row.name
            seen.add(dst)
            added.append(dst)
        frontier = added[:NEIGHBOURS_PER_ENTITY]
    docs = [m for m in found if m.type != SESSION]
    hits = _rank(conn, docs, scope, limit, None, expand=False) if docs else []
    if any(m.type == SESSION for m in found):
        hits += _session_hits(conn, [m for m in found if m.type == SESSION], scope, limit)
    return Answer(entities, neighbours, hits[:limit])


def _named(type_: str, name: str) -> list[Entity]:
    """The entity ``name`` would be if it were of ``type_`` (normalised the same way)."""
    if type_ == "file":
        return _file(name, "")
    if type_ == "package":
        e = _package(name)
        return [e] if e else []
    entity = _entity(type_, name)
    return [entity] if entity else []


def _scoped_counts(conn: Connection, found: Sequence[Match], scope: Scope) -> dict[int, int]:
    """Documents in scope per entity (per session for session nodes, which have no mentions of
    their own). An entity with none is invisible in this scope."""
    counts: dict[int, int] = {}
    m = graph_mentions.c
    plain = [x.id for x in found if x.type != SESSION]
    if plain:
        counts.update(
            conn.execute(
                select(m.entity_id, func.count())
                .where(m.entity_id.in_(plain), _agent_clause(m.agent, scope))
                .group_by(m.entity_id)
            ).all()
        )
    sessions = {x.key: x.id for x in found if x.type == SESSION}
    if sessions:
        counts.update(
            (sessions[key], n)
            for key, n in conn.execute(
                select(m.session_id, func.count(func.distinct(m.doc_id)))
                .where(m.session_id.in_(sorted(sessions)), _agent_clause(m.agent, scope))
                .group_by(m.session_id)
            ).all()
        )
    return counts


def _entity_rows(conn: Connection, ids: set[int]) -> dict[int, Any]:
    if not ids:
        return {}
    e = graph_entities.c
    return {
        r.id: r
        for r in conn.execute(select(e.id, e.type, e.key, e.name).where(e.id.in_(sorted(ids))))
    }


def _entity_json(conn: Connection, m: Match, count: int) -> dict[str, Any]:
    from engram.store import iso

    e = graph_entities.c
    row = conn.execute(select(e.first_seen, e.last_seen).where(e.id == m.id)).one()
    return {
        "type": m.type,
        "name": m.name,
        "key": m.key,
        "project": m.project,
        "docCount": count,
        "firstSeen": iso(row.first_seen),
        "lastSeen": iso(row.last_seen),
    }


def _session_hits(
    conn: Connection, sessions: Sequence[Match], scope: Scope, limit: int
) -> list[KeywordHit]:
    """A session node's documents: every in-scope document that session contributed."""
    m = graph_mentions.c
    rows = conn.execute(
        select(m.doc_id, m.kind, m.session_id, func.max(m.created_at).label("at"))
        .where(m.session_id.in_([s.key for s in sessions]), _agent_clause(m.agent, scope))
        .group_by(m.doc_id, m.kind, m.session_id)
        .order_by(func.max(m.created_at).desc())
        .limit(limit)
    )
    return [KeywordHit(r.doc_id, r.kind, r.session_id, 1.0) for r in rows]


def stats(conn: Connection) -> dict[str, int]:
    """Sizes of the graph, for status: entities (session nodes included), mentions, edges."""
    return {
        name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
        for name, table in (
            ("entities", graph_entities),
            ("mentions", graph_mentions),
            ("edges", graph_edges),
        )
    }


def by_type(conn: Connection) -> dict[str, int]:
    e = graph_entities.c
    return dict(conn.execute(select(e.type, func.count()).group_by(e.type)).all())
