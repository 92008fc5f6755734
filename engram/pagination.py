"""Opaque list cursors and the limit rule shared by every list endpoint."""

from __future__ import annotations

import base64
import json
from typing import Any

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
