"""Memories: facts, decisions and lessons saved on purpose, with versions.

Only a memory's current version is indexed, so a superseded version can never come back from
recall. Forgetting deletes the content of every version and keeps an audited tombstone.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, or_, select, update

from engram import audit
from engram.errors import FieldErrors
from engram.keyword import KeywordDoc, KeywordIndex
from engram.pagination import keyset_page
from engram.privacy import scrub_text
from engram.schema import memories, memory_versions
from engram.scope import GLOBAL_PROJECT, Scope
from engram.store import Store, dumps, iso, loads, now

MAX_CONTENT_CHARS = 20_000
GLOBAL_SCOPE = "global"


class InvalidMemory(FieldErrors):
    what = "invalid memory"


@dataclasses.dataclass(frozen=True)
class NewMemory:
    content: str
    project: str
    scope: str = "project"
    concepts: tuple[str, ...] = ()
    agent_id: str | None = None
    source: str = "api"


def validate(body: Any) -> NewMemory:
    if not isinstance(body, dict):
        raise InvalidMemory({"body": "must be a JSON object"})
    errors: dict[str, str] = {}
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        errors["content"] = "required, a non-empty string"
    elif len(content) > MAX_CONTENT_CHARS:
        errors["content"] = f"at most {MAX_CONTENT_CHARS} characters"
    scope = body.get("scope", "project")
    if not isinstance(scope, str) or not scope.strip() or len(scope) > 64:
        errors["scope"] = "must be a short non-empty string (e.g. project, global)"
        scope = "project"
    project = body.get("project")
    if scope == GLOBAL_SCOPE:
        project = GLOBAL_PROJECT
    elif not isinstance(project, str) or not project.strip() or len(project) > 200:
        errors["project"] = 'required unless scope is "global"'
    concepts = body.get("concepts", [])
    if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
        errors["concepts"] = "must be a list of strings"
        concepts = []
    agent_id = body.get("agentId")
    if agent_id is not None and (not isinstance(agent_id, str) or not agent_id.strip()):
        errors["agentId"] = "must be a non-empty string when given"
    if errors:
        raise InvalidMemory(errors)
    return NewMemory(
        content=scrub_text(str(content).strip()),
        project=str(project).strip(),
        scope=scope.strip(),
        concepts=tuple(scrub_text(c.strip().lower()) for c in concepts if c.strip()),
        agent_id=agent_id.strip() if agent_id else None,
    )


def _index(
    conn: Connection,
    keyword: KeywordIndex,
    memory_id: str,
    project: str,
    content: str,
    concepts: list[str],
    agent_id: str | None,
    at: float,
) -> None:
    body = f"{content}\n{' '.join(concepts)}" if concepts else content
    keyword.upsert(
        conn,
        KeywordDoc(
            doc_id=memory_id,
            kind="memory",
            project=project,
            body=body,
            created_at=at,
            agent_id=agent_id,
        ),
    )


def remember(
    store: Store,
    keyword: KeywordIndex,
    new: NewMemory,
    actor: str = "api",
    memory_id: str | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    with store.write() as conn:
        return insert_memory(conn, keyword, new, actor=actor, memory_id=memory_id, at=at)


def insert_memory(
    conn: Connection,
    keyword: KeywordIndex,
    new: NewMemory,
    *,
    actor: str = "api",
    memory_id: str | None = None,
    at: float | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create a memory in the caller's transaction (``meta``: its provenance, JSON)."""
    memory_id = memory_id or "mem_" + uuid.uuid4().hex[:24]
    at = at or now()
    conn.execute(
        insert(memories).values(
            id=memory_id,
            project=new.project,
            scope=new.scope,
            agent_id=new.agent_id,
            concepts=dumps(list(new.concepts)),
            content=new.content,
            version=1,
            source=new.source,
            created_at=at,
            updated_at=at,
            meta=dumps(meta) if meta is not None else None,
        )
    )
    conn.execute(
        insert(memory_versions).values(
            memory_id=memory_id, version=1, content=new.content, created_at=at
        )
    )
    _index(conn, keyword, memory_id, new.project, new.content, list(new.concepts), new.agent_id, at)
    audit.record(
        conn,
        actor,
        "memory.create",
        "memory",
        memory_id,
        {"project": new.project, "scope": new.scope, "version": 1},
    )
    return to_dict(conn.execute(select(memories).where(memories.c.id == memory_id)).one())


def update_content(
    store: Store, keyword: KeywordIndex, memory_id: str, content: str, actor: str = "api"
) -> dict[str, Any] | None:
    """Add a new version; the previous one is superseded and leaves the index."""
    with store.write() as conn:
        return new_version(conn, keyword, memory_id, content, actor=actor)


def new_version(
    conn: Connection,
    keyword: KeywordIndex,
    memory_id: str,
    content: str,
    *,
    actor: str = "api",
    meta: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """``update_content`` in the caller's transaction; ``meta`` replaces the provenance."""
    content = scrub_text(content.strip())
    at = now()
    # FOR UPDATE (PostgreSQL): two writers of one memory take turns, each on the version the
    # other left, instead of both writing version n+1
    row = conn.execute(
        select(memories)
        .where(memories.c.id == memory_id, memories.c.forgotten_at.is_(None))
        .with_for_update()
    ).first()
    if row is None:
        return None
    version = row.version + 1
    conn.execute(
        update(memory_versions)
        .where(
            memory_versions.c.memory_id == memory_id,
            memory_versions.c.version == row.version,
        )
        .values(superseded_at=at)
    )
    conn.execute(
        insert(memory_versions).values(
            memory_id=memory_id, version=version, content=content, created_at=at
        )
    )
    # an edit is a use: an evicted memory that is edited is back in the indexes
    values: dict[str, Any] = {
        "content": content,
        "version": version,
        "updated_at": at,
        "evicted_at": None,
    }
    if meta is not None:
        values["meta"] = dumps(meta)
    conn.execute(update(memories).where(memories.c.id == memory_id).values(**values))
    _index(
        conn, keyword, memory_id, row.project, content, loads(row.concepts, []), row.agent_id, at
    )
    audit.record(
        conn,
        actor,
        "memory.update",
        "memory",
        memory_id,
        {"version": version, "supersedes": row.version},
    )
    return to_dict(conn.execute(select(memories).where(memories.c.id == memory_id)).one())


def forget(
    store: Store,
    keyword: KeywordIndex,
    memory_id: str,
    actor: str = "api",
    reason: str | None = None,
) -> bool:
    with store.write() as conn:
        return forget_in(conn, keyword, memory_id, actor=actor, reason=reason)


def forget_in(
    conn: Connection,
    keyword: KeywordIndex,
    memory_id: str,
    *,
    actor: str = "api",
    reason: str | None = None,
) -> bool:
    """``forget`` in the caller's transaction."""
    at = now()
    row = conn.execute(
        select(memories.c.project, memories.c.version).where(
            memories.c.id == memory_id, memories.c.forgotten_at.is_(None)
        )
    ).first()
    if row is None:
        return False
    conn.execute(delete(memory_versions).where(memory_versions.c.memory_id == memory_id))
    conn.execute(
        update(memories)
        .where(memories.c.id == memory_id)
        .values(content="", concepts="[]", forgotten_at=at, updated_at=at)
    )
    keyword.delete(conn, memory_id)
    audit.record(
        conn,
        actor,
        "memory.forget",
        "memory",
        memory_id,
        {
            "project": row.project,
            "versions": row.version,
            **({"reason": reason[:500]} if reason else {}),
        },
    )
    return True


TOUCH_EVERY_SECONDS = 60.0
"""A memory returned again within this long by the same process is not written again: search
and context blocks write at most once a minute per memory, however often it comes back (decay
counts in days)."""
_TOUCH_MEMO_MAX = 20_000
_touched: dict[str, float] = {}
_touched_lock = threading.Lock()


def due_for_touch(memory_ids: list[str], at: float | None = None) -> list[str]:
    """Which of ``memory_ids`` this process has not touched in ``TOUCH_EVERY_SECONDS`` (they are
    marked as touched now): call before opening a write for ``touch``."""
    at = at or now()
    with _touched_lock:
        if len(_touched) > _TOUCH_MEMO_MAX:
            for key in [k for k, v in _touched.items() if at - v >= TOUCH_EVERY_SECONDS]:
                del _touched[key]
        due = [
            i
            for i in dict.fromkeys(memory_ids)
            if at - _touched.get(i, -1e18) >= TOUCH_EVERY_SECONDS
        ]
        _touched.update(dict.fromkeys(due, at))
    return due


def touch(conn: Connection, memory_ids: list[str], at: float | None = None) -> int:
    """Memories were used (returned by search, given to a session): their decay starts over
    and their strength grows (``engram.consolidate.strength``)."""
    if not memory_ids:
        return 0
    result = conn.execute(
        update(memories)
        .where(memories.c.id.in_(memory_ids[:200]), memories.c.forgotten_at.is_(None))
        .values(accessed_at=at or now(), access_count=memories.c.access_count + 1)
    )
    return int(result.rowcount or 0)


def evict_in(conn: Connection, keyword: KeywordIndex, memory_id: str, reason: str) -> bool:
    """Take a decayed memory out of every index, keeping it (and its versions) to restore."""
    at = now()
    row = conn.execute(
        select(memories.c.project).where(
            memories.c.id == memory_id,
            memories.c.forgotten_at.is_(None),
            memories.c.evicted_at.is_(None),
        )
    ).first()
    if row is None:
        return False
    conn.execute(update(memories).where(memories.c.id == memory_id).values(evicted_at=at))
    keyword.delete(conn, memory_id)
    audit.record(
        conn,
        "decay",
        "memory.evict",
        "memory",
        memory_id,
        {"project": row.project, "reason": reason},
    )
    return True


def restore(
    store: Store, keyword: KeywordIndex, memory_id: str, actor: str = "api"
) -> dict[str, Any] | None:
    """An evicted memory back in the indexes, its decay started over; None when it is not
    evicted (unknown, forgotten, or live)."""
    at = now()
    with store.write() as conn:
        row = conn.execute(
            select(memories).where(
                memories.c.id == memory_id,
                memories.c.forgotten_at.is_(None),
                memories.c.evicted_at.is_not(None),
            )
        ).first()
        if row is None:
            return None
        conn.execute(
            update(memories)
            .where(memories.c.id == memory_id)
            .values(evicted_at=None, accessed_at=at)
        )
        _index(
            conn,
            keyword,
            memory_id,
            row.project,
            row.content,
            loads(row.concepts, []),
            row.agent_id,
            row.updated_at,
        )
        audit.record(conn, actor, "memory.restore", "memory", memory_id, {"project": row.project})
        return to_dict(conn.execute(select(memories).where(memories.c.id == memory_id)).one())


def get(store: Store, memory_id: str, with_versions: bool = False) -> dict[str, Any] | None:
    with store.read() as conn:
        row = conn.execute(
            select(memories).where(memories.c.id == memory_id, memories.c.forgotten_at.is_(None))
        ).first()
        if row is None:
            return None
        item = to_dict(row)
        if with_versions:
            item["versions"] = [
                {
                    "version": v.version,
                    "content": v.content,
                    "createdAt": iso(v.created_at),
                    "supersededAt": iso(v.superseded_at),
                }
                for v in conn.execute(
                    select(memory_versions)
                    .where(memory_versions.c.memory_id == memory_id)
                    .order_by(memory_versions.c.version)
                )
            ]
    return item


def scoped(stmt: Any, scope: Scope, evicted: bool = False) -> Any:
    """Live memories in scope: not forgotten, and not evicted (or, ``evicted``, only those)."""
    stmt = stmt.where(memories.c.forgotten_at.is_(None))
    stmt = stmt.where(
        memories.c.evicted_at.is_not(None) if evicted else memories.c.evicted_at.is_(None)
    )
    if not scope.all_projects:
        stmt = stmt.where(memories.c.project.in_(scope.projects()))
    if scope.agent_id is not None:
        stmt = stmt.where(or_(memories.c.agent_id == scope.agent_id, memories.c.agent_id.is_(None)))
    return stmt


def list_memories(
    store: Store,
    scope: Scope,
    limit: int,
    cursor: str | None = None,
    memory_scope: str | None = None,
    evicted: bool = False,
) -> tuple[list[dict[str, Any]], str | None]:
    """Most recently updated first, keyset-paginated on (updated_at, id); ``evicted``: the
    evicted ones instead (restorable)."""
    stmt = scoped(select(memories), scope, evicted=evicted)
    if memory_scope:
        stmt = stmt.where(memories.c.scope == memory_scope)
    with store.read() as conn:
        rows, next_cursor = keyset_page(
            conn, stmt, (memories.c.updated_at, memories.c.id), limit, cursor, descending=True
        )
    return [to_dict(r) for r in rows], next_cursor


_LIVE_BY_IDS = select(memories).where(
    memories.c.id.in_(bindparam("ids", expanding=True)), memories.c.forgotten_at.is_(None)
)
"""Built once: search hydrates every page through it (see keyword's ``_IDS``)."""


def get_many(conn: Connection, ids: list[str]) -> dict[str, Any]:
    if not ids:
        return {}
    rows = conn.execute(_LIVE_BY_IDS, {"ids": ids}).all()
    return {r.id: r for r in rows}


def to_dict(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "project": row.project,
        "scope": row.scope,
        "agentId": row.agent_id,
        "content": row.content,
        "concepts": loads(row.concepts, []),
        "version": row.version,
        "source": row.source,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "accessedAt": iso(getattr(row, "accessed_at", None)),
        "accessCount": getattr(row, "access_count", 0) or 0,
        **({"evictedAt": iso(row.evicted_at)} if getattr(row, "evicted_at", None) else {}),
        **({"meta": loads(row.meta, None)} if getattr(row, "meta", None) else {}),
    }
