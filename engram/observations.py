"""Observations: the stored, compressed form of one captured event."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, bindparam, delete, or_, select

from engram import activity, inbox, sessions
from engram.compress import Compressed
from engram.events import Event
from engram.keyword import KeywordDoc, KeywordIndex
from engram.pagination import keyset_page
from engram.schema import observations
from engram.scope import Scope, restrict
from engram.store import Store, dumps, insert_ignore, iso, loads, now


def _json_text(value: Any) -> str | None:
    """Tool input/output as JSON text (strings too), so reads give back what was sent."""
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def store(conn: Connection, keyword: KeywordIndex, event: Event, compressed: Compressed) -> bool:
    """Upsert by observation id, index it, retire its inbox entry: all in the caller's
    transaction, so a crash leaves either everything or nothing. True when newly stored."""
    sessions.ensure(
        conn,
        event.session_id,
        event.project,
        host=event.host,
        agent_id=event.agent_id,
        started_at=event.timestamp,
    )
    created = insert_ignore(
        conn,
        observations,
        {
            "id": event.observation_id,
            "event_id": event.event_id,
            "session_id": event.session_id,
            "project": event.project,
            "agent_id": event.agent_id,
            "host": event.host,
            "hook_type": event.hook_type,
            "kind": compressed.kind,
            "tool_name": event.tool_name,
            "title": compressed.title,
            "text": compressed.text,
            "prompt": event.prompt,
            "tool_input": _json_text(event.tool_input),
            "tool_output": _json_text(event.tool_output),
            "files_read": dumps(list(compressed.files_read)),
            "files_modified": dumps(list(compressed.files_modified)),
            "commands": dumps(list(compressed.commands)),
            "errors": dumps(list(compressed.errors)),
            "concepts": dumps(list(compressed.concepts)),
            "created_at": event.timestamp,
            "stored_at": now(),
        },
    )
    if created:
        activity.record(
            conn,
            "observation.stored",
            id=event.observation_id,
            sessionId=event.session_id,
            project=event.project,
            kind=compressed.kind,
            title=compressed.title[:200],
        )
        keyword.upsert(
            conn,
            KeywordDoc(
                doc_id=event.observation_id,
                kind="observation",
                project=event.project,
                body=index_body(compressed),
                created_at=event.timestamp,
                agent_id=event.agent_id,
                session_id=event.session_id,
                speaker=speaker(compressed.kind),
            ),
        )
    inbox.complete(conn, event.event_id)
    return created


def speaker(kind: str) -> str:
    """Who an observation of ``kind`` is from, as search's neighbours tell the two parties of a
    session apart: ``user`` (a prompt) or ``agent`` (what the agent did, said or was told)."""
    return "user" if kind == "prompt" else "agent"


def index_body(compressed: Compressed) -> str:
    files = " ".join((*compressed.files_read, *compressed.files_modified))
    return f"{compressed.text}\n{files}" if files else compressed.text


def scoped(stmt: Any, scope: Scope, table: Any = observations) -> Any:
    """Restrict a select on observations (or sessions: same column names) to a scope."""
    return restrict(stmt, scope, table)


def get(store_: Store, observation_id: str, scope: Scope | None = None) -> dict[str, Any] | None:
    stmt = select(observations).where(observations.c.id == observation_id)
    if scope is not None and not scope.all_projects:
        stmt = stmt.where(observations.c.project == scope.project)
    with store_.read() as conn:
        row = conn.execute(stmt).first()
    return to_dict(row, detail=True) if row is not None else None


_BY_IDS = select(observations).where(observations.c.id.in_(bindparam("ids", expanding=True)))
"""Built once: search hydrates every page through it (see keyword's ``_IDS``)."""


def get_many(conn: Connection, ids: list[str]) -> dict[str, Any]:
    if not ids:
        return {}
    rows = conn.execute(_BY_IDS, {"ids": ids}).all()
    return {r.id: r for r in rows}


def timeline(
    store_: Store,
    session_id: str,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """A session's observations in the order they happened, keyset-paginated."""
    stmt = select(observations).where(observations.c.session_id == session_id)
    with store_.read() as conn:
        rows, next_cursor = keyset_page(
            conn,
            stmt,
            (observations.c.created_at, observations.c.id),
            limit,
            cursor,
            descending=False,
        )
    return [to_dict(r) for r in rows], next_cursor


def recent(
    store_: Store,
    scope: Scope,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """The scope's observations, newest first, keyset-paginated."""
    with store_.read() as conn:
        rows, next_cursor = keyset_page(
            conn,
            scoped(select(observations), scope),
            (observations.c.created_at, observations.c.id),
            limit,
            cursor,
            descending=True,
        )
    return [to_dict(r) for r in rows], next_cursor


def file_history(
    store_: Store,
    scope: Scope,
    path: str,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Observations that read or changed a file, newest first. ``path`` matches a stored path
    equal to it or ending in ``/<path>`` (``acme/client.py`` finds ``/home/dev/acme/client.py``)."""
    stored = json.dumps(path, ensure_ascii=False)[1:-1]  # as it sits in the JSON array text
    columns = (observations.c.files_read, observations.c.files_modified)
    if store_.engine.dialect.name == "sqlite":
        # SQLite's LIKE ignores ASCII case (File.py is not file.py); GLOB does not
        glob = "".join(f"[{c}]" if c in "*?[" else c for c in stored)
        patterns = (f'*"{glob}"*', f'*/{glob}"*')
        matches = [column.op("GLOB")(p) for column in columns for p in patterns]
    else:
        like = stored.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        patterns = (f'%"{like}"%', f'%/{like}"%')
        matches = [column.like(p, escape="\\") for column in columns for p in patterns]
    stmt = scoped(select(observations), scope).where(or_(*matches))
    with store_.read() as conn:
        rows, next_cursor = keyset_page(
            conn,
            stmt,
            (observations.c.created_at, observations.c.id),
            limit,
            cursor,
            descending=True,
        )
    return [to_dict(r) for r in rows], next_cursor


def for_session(conn: Connection, session_id: str) -> list[Any]:
    return list(
        conn.execute(
            select(observations)
            .where(observations.c.session_id == session_id)
            .order_by(observations.c.created_at, observations.c.id)
        ).all()
    )


def forget(store_: Store, keyword: KeywordIndex, observation_id: str, actor: str) -> bool:
    """Delete an observation and its index entry; its eventId stays known (a replay is a
    duplicate, never a resurrection). Audited."""
    from engram import audit

    with store_.write() as conn:
        row = conn.execute(
            select(observations.c.event_id, observations.c.project).where(
                observations.c.id == observation_id
            )
        ).first()
        if row is None:
            return False
        conn.execute(delete(observations).where(observations.c.id == observation_id))
        keyword.delete(conn, observation_id)
        inbox.mark_forgotten(conn, row.event_id)
        audit.record(
            conn,
            actor,
            "observation.forget",
            "observation",
            observation_id,
            {"project": row.project},
        )
    return True


def to_dict(row: Any, detail: bool = False) -> dict[str, Any]:
    item = {
        "id": row.id,
        "eventId": row.event_id,
        "sessionId": row.session_id,
        "project": row.project,
        "agentId": row.agent_id,
        "host": row.host,
        "hookType": row.hook_type,
        "kind": row.kind,
        "toolName": row.tool_name,
        "title": row.title,
        "text": row.text,
        "filesRead": loads(row.files_read, []),
        "filesModified": loads(row.files_modified, []),
        "commands": loads(row.commands, []),
        "errors": loads(row.errors, []),
        "concepts": loads(row.concepts, []),
        "createdAt": iso(row.created_at),
    }
    llm = getattr(row, "llm", None)
    if llm:
        item["llm"] = loads(llm)
    if detail:
        item.update(
            prompt=row.prompt, toolInput=loads(row.tool_input), toolOutput=loads(row.tool_output)
        )
    return item
