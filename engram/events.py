"""The captured event: validation of a ``POST /v1/observe`` body and derivation of its ids.

An event id comes from the host (tool_use_id, turn id, ...) when the client sends one; otherwise it
is derived from a hash of session, hook type, host timestamp and content, so a replay is recognised
and two real calls with different timestamps are not merged. The observation id is derived from the
event id, which is what makes it final at accept time and workers idempotent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any

from engram.errors import FieldErrors
from engram.privacy import scrub
from engram.wire import EVENT_KINDS, MAX_ID_CHARS, derived_event_id

MAX_NAME_LENGTH = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidEvent(FieldErrors):
    what = "invalid observe payload"


@dataclasses.dataclass(frozen=True)
class Event:
    event_id: str
    observation_id: str
    session_id: str
    project: str
    host: str
    hook_type: str
    timestamp: float
    tool_name: str | None = None
    tool_input: Any = None
    tool_output: Any = None
    prompt: str | None = None
    agent_id: str | None = None
    event_id_derived: bool = False
    event_kind: str | None = None

    def to_payload(self) -> dict[str, Any]:
        """The inbox payload: the normalised, scrubbed event in the API's camelCase shape."""
        return {
            "eventId": self.event_id,
            "sessionId": self.session_id,
            "project": self.project,
            "host": self.host,
            "hookType": self.hook_type,
            "eventKind": self.event_kind,
            "timestamp": self.timestamp,
            "toolName": self.tool_name,
            "toolInput": self.tool_input,
            "toolOutput": self.tool_output,
            "prompt": self.prompt,
            "agentId": self.agent_id,
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Event:
        return cls(
            event_id=payload["eventId"],
            observation_id=observation_id_for(payload["eventId"]),
            session_id=payload["sessionId"],
            project=payload["project"],
            host=payload["host"],
            hook_type=payload["hookType"],
            timestamp=float(payload["timestamp"]),
            tool_name=payload.get("toolName"),
            tool_input=payload.get("toolInput"),
            tool_output=payload.get("toolOutput"),
            prompt=payload.get("prompt"),
            agent_id=payload.get("agentId"),
            event_kind=payload.get("eventKind"),
        )


def observation_id_for(event_id: str) -> str:
    return "obs_" + hashlib.sha256(event_id.encode("utf-8")).hexdigest()[:24]


def parse_timestamp(value: Any) -> float:
    """ISO 8601 (``Z`` or offset; naive means UTC) or epoch seconds / milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected an ISO 8601 string or epoch seconds")
    if isinstance(value, (int, float)):
        if not -1e15 < value < 1e15:  # also keeps float() from overflowing on a huge integer
            raise ValueError("out of range")
        seconds = float(value) / 1000.0 if value > 1e11 else float(value)
        if not 0 < seconds < 4102444800:  # year 2100
            raise ValueError("out of range")
        return seconds
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError("expected an ISO 8601 string or epoch seconds") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    raise ValueError("expected an ISO 8601 string or epoch seconds")


def bound_text(text: str, limit: int) -> str:
    """Keep head and tail of an over-long text, saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2 - 40, 1)
    return f"{text[:keep]}\n… [{len(text) - 2 * keep} chars omitted] …\n{text[-keep:]}"


def bound_value(value: Any, limit: int) -> Any:
    """A JSON value whose serialised form is at most about ``limit`` characters."""
    if value is None:
        return None
    if isinstance(value, str):
        return bound_text(value, limit)
    serialised = json.dumps(value, ensure_ascii=False, default=str)
    if len(serialised) <= limit:
        return value
    return bound_text(serialised, limit)


def _name(
    body: dict[str, Any],
    key: str,
    errors: dict[str, str],
    *,
    required: bool,
    limit: int = MAX_NAME_LENGTH,
) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            errors[key] = "required"
        return None
    if not isinstance(value, str) or not value.strip():
        errors[key] = "must be a non-empty string"
        return None
    if len(value) > limit:
        errors[key] = f"at most {limit} characters"
        return None
    if _CONTROL.search(value):
        errors[key] = "must not contain control characters"
        return None
    return value.strip()


def validate_event(body: Any, *, max_field_chars: int, received_at: float) -> Event:
    """Validate and normalise an observe body; raises InvalidEvent with per-field problems.

    The returned event is already scrubbed of secrets (one `privacy.scrub` of the whole body:
    text, keys, and ids kept distinct by `scrub_name`) and bounded in size: it is what gets
    written to the inbox.
    """
    if not isinstance(body, dict):
        raise InvalidEvent({"body": "must be a JSON object"})
    body = scrub(body)
    errors: dict[str, str] = {}
    session_id = _name(body, "sessionId", errors, required=True, limit=MAX_ID_CHARS)
    project = _name(body, "project", errors, required=True)
    host = _name(body, "host", errors, required=True, limit=64)
    hook_type = _name(body, "hookType", errors, required=True, limit=64)
    event_id = _name(body, "eventId", errors, required=False, limit=MAX_ID_CHARS)
    tool_name = _name(body, "toolName", errors, required=False)
    agent_id = _name(body, "agentId", errors, required=False, limit=MAX_ID_CHARS)
    event_kind = body.get("eventKind")
    if event_kind is not None and event_kind not in EVENT_KINDS:
        errors["eventKind"] = "must be one of " + ", ".join(sorted(EVENT_KINDS))
    prompt = body.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        errors["prompt"] = "must be a string"
    timestamp: float | None = None
    if body.get("timestamp") is not None:
        try:
            timestamp = parse_timestamp(body["timestamp"])
        except ValueError as exc:
            errors["timestamp"] = str(exc)
    if errors:
        raise InvalidEvent(errors)
    assert session_id and project and host and hook_type  # guaranteed by the checks above

    tool_input = bound_value(body.get("toolInput"), max_field_chars)
    tool_output = bound_value(body.get("toolOutput"), max_field_chars)
    prompt_text = bound_text(prompt, max_field_chars) if isinstance(prompt, str) else None
    derived = event_id is None
    if event_id is None:
        # Without a host timestamp the receive time stands in: two real calls are never merged,
        # at the price that a replay without id or timestamp cannot be recognised.
        event_id = derived_event_id(
            session_id,
            hook_type,
            timestamp if timestamp is not None else received_at,
            [tool_name, tool_input, tool_output, prompt_text],
        )
    return Event(
        event_id=event_id,
        observation_id=observation_id_for(event_id),
        session_id=session_id,
        project=project,
        host=host,
        hook_type=hook_type,
        timestamp=timestamp if timestamp is not None else received_at,
        tool_name=tool_name,
        tool_input=tool_input,
        tool_output=tool_output,
        prompt=prompt_text,
        agent_id=agent_id,
        event_id_derived=derived,
        event_kind=event_kind,
    )
