"""Small helpers the host adapters share: payload shape checks and host timestamps.

Standard library only, like every adapter: this runs on the agent's hot path.
"""

from __future__ import annotations

import json

from engram.agents.contract import BadPayload, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MS_EPOCH_ABOVE = 100_000_000_000
"""Numeric timestamps above this are milliseconds (1e11 s is the year 5138; 1e11 ms is 1973)."""

ALLOW_CONTINUE = json.dumps({"continue": True})
"""The answer for hosts whose hooks must print a JSON verdict: carry on."""


def obj(payload: Any) -> dict[str, Any]:
    """The payload as a JSON object, or BadPayload."""
    if not isinstance(payload, dict):
        raise BadPayload(f"payload must be a JSON object, got {type(payload).__name__}")
    return payload


def section(payload: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested object (Windsurf's ``tool_info``, Copilot's ``toolResult``); {} when absent."""
    value = payload.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"{key} must be an object, got {type(value).__name__}")
    return value


def opt_str(payload: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` present as a non-empty string, None when none is; BadPayload when
    one is present with another type (a tool name that is a number is a broken payload)."""
    for key in keys:
        value = payload.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise BadPayload(f"{key} must be a string, got {type(value).__name__}")
        return value
    return None


def first_root(payload: dict[str, Any], key: str = "workspace_roots") -> str | None:
    """The first workspace root (Cursor's working directory), validated as a path."""
    roots = payload.get(key)
    if roots is None or roots == []:
        return None
    if not isinstance(roots, list):
        raise BadPayload(f"{key} must be a list of paths, got {type(roots).__name__}")
    return valid_path(roots[0], f"{key}[0]")


def epoch_seconds(value: Any, field: str = "timestamp") -> float | None:
    """A host timestamp as epoch seconds: numbers in seconds or milliseconds (told apart by
    size), numeric strings, and ISO 8601 strings (``Z`` or an offset; none means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadPayload(
            f"{field} must be a number or an ISO 8601 string, got {type(value).__name__}"
        )
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            return _iso_seconds(text, field)
        value = number
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise BadPayload(f"{field} is not a valid time: {value!r}")
    return value / 1000.0 if value > MS_EPOCH_ABOVE else float(value)


def _iso_seconds(text: str, field: str) -> float:
    from datetime import datetime, timezone  # here: only hosts sending ISO times pay ~1 ms

    if text[-1:] in ("Z", "z"):  # Python 3.10's fromisoformat does not read "Z"
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadPayload(f"{field} is not an ISO 8601 time: {text[:40]!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()
