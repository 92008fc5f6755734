"""The audit trail: every mutation of memory, every forget, retry and import leaves a row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select

from engram import activity
from engram.pagination import BadCursor, decode_cursor, encode_cursor
from engram.privacy import scrub, scrub_name
from engram.schema import audit_log
from engram.store import Store, dumps, iso, loads, now

FOLLOWED = {
    "memory.create": "memory.created",
    "memory.update": "memory.changed",
    "memory.forget": "memory.forgotten",
    "memory.evict": "memory.evicted",
    "memory.restore": "memory.restored",
    "observation.forget": "observation.forgotten",
}
"""Audited actions the viewer follows live (engram.activity)."""


def record(
    conn: Connection,
    actor: str,
    action: str,
    target_kind: str,
    target_id: str,
    details: dict[str, Any] | None = None,
) -> None:
    """Write one audit row inside the caller's transaction (so it commits with the change).

    ``details`` must never carry memory content or payloads: ids, counts and reasons only; a
    reason is the caller's text, scrubbed like everything else stored.
    """
    target_id, kept = scrub_name(target_id), scrub(details or {})
    followed = FOLLOWED.get(action)
    if followed is not None and isinstance(kept, dict):
        activity.record(
            conn,
            followed,
            id=target_id,
            **{k: kept[k] for k in ("project", "version", "reason") if k in kept},
        )
    conn.execute(
        insert(audit_log).values(
            at=now(),
            actor=actor,
            action=action,
            target_kind=target_kind,
            target_id=target_id,
            details=dumps(kept),
        )
    )


def list_entries(
    store: Store,
    limit: int,
    cursor: str | None = None,
    target_id: str | None = None,
    action: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Newest first, keyset-paginated on the row id."""
    stmt = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit + 1)
    if cursor is not None:
        (last_id,) = decode_cursor(cursor, 1)
        if not isinstance(last_id, int) or isinstance(last_id, bool):
            raise BadCursor("cursor is not valid; pass back nextCursor unchanged")
        stmt = stmt.where(audit_log.c.id < last_id)
    if target_id:
        stmt = stmt.where(audit_log.c.target_id == target_id)
    if action:
        stmt = stmt.where(audit_log.c.action == action)
    with store.read() as conn:
        rows = conn.execute(stmt).all()
    items = [
        {
            "id": r.id,
            "at": iso(r.at),
            "actor": r.actor,
            "action": r.action,
            "targetKind": r.target_kind,
            "targetId": r.target_id,
            "details": loads(r.details, {}),
        }
        for r in rows[:limit]
    ]
    next_cursor = encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    return items, next_cursor
