"""Heartbeats of singleton services, so status can say when one is missing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, update

from engram.schema import heartbeats
from engram.store import dumps, insert_ignore, loads, now

SWEEPER = "sweeper"


def beat(conn: Connection, name: str, detail: dict[str, Any]) -> None:
    at = now()
    if not insert_ignore(conn, heartbeats, {"name": name, "at": at, "detail": dumps(detail)}):
        conn.execute(
            update(heartbeats).where(heartbeats.c.name == name).values(at=at, detail=dumps(detail))
        )


def last(conn: Connection, name: str) -> tuple[float, dict[str, Any]] | None:
    row = conn.execute(select(heartbeats).where(heartbeats.c.name == name)).first()
    return (row.at, loads(row.detail, {})) if row is not None else None
