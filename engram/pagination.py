"""Opaque list cursors and the limit rule shared by every list endpoint."""

from __future__ import annotations

import base64
import json
from typing import Any

from sqlalchemy import Column, Connection, Select, and_, or_

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


class BadCursor(ValueError):
    """The cursor was not produced by this server."""


def encode_cursor(*parts: Any) -> str:
    raw = json.dumps(list(parts), separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError):
        raise BadCursor("cursor is not valid; pass back nextCursor unchanged") from None
    if not isinstance(parts, list) or len(parts) != arity:
        raise BadCursor("cursor is not valid; pass back nextCursor unchanged")
    return parts


def parse_limit(raw: Any) -> int:
    """``limit`` as the contract says: default 50, at most 1000; raises ValueError otherwise."""
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"limit must be an integer 1-{MAX_LIMIT}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer 1-{MAX_LIMIT}")
    return value


def keyset_page(
    conn: Connection,
    stmt: Select[Any],
    key: tuple[Column[Any], Column[Any]],
    limit: int,
    cursor: str | None,
    *,
    descending: bool,
) -> tuple[list[Any], str | None]:
    """One page of ``stmt`` ordered by ``key`` (a sort column and a unique tie-breaker),
    starting after ``cursor``; returns the rows and the cursor of the next page (or None).

    Keyset rather than offset pagination: a page stays correct while rows are being added.
    """
    first, second = key
    if descending:
        stmt = stmt.order_by(first.desc(), second.desc())
    else:
        stmt = stmt.order_by(first, second)
    if cursor:
        after_first, after_second = decode_cursor(cursor, 2)
        if (
            not isinstance(after_first, (int, float))
            or isinstance(after_first, bool)
            or not isinstance(after_second, str)
        ):
            raise BadCursor("cursor is not valid; pass back nextCursor unchanged")
        if descending:
            stmt = stmt.where(
                or_(first < after_first, and_(first == after_first, second < after_second))
            )
        else:
            stmt = stmt.where(
                or_(first > after_first, and_(first == after_first, second > after_second))
            )
    rows = list(conn.execute(stmt.limit(limit + 1)).all())
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1]._mapping
    return rows[:limit], encode_cursor(last[first.name], last[second.name])
