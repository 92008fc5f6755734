"""The wire rules every client of the gateway shares with it: the error body's shape, the one
reading of it, and which answers a resend can change.

Clients: the hook and its spool (``engram.agents.hook``, ``engram.agents.spool``), the transcript
and memory-file watchers (``engram.watcher.delivery``), the MCP server, the CLI
(``engram.client``). The gateway builds its error bodies with ``error_body``. The hook imports
this module on an agent's hot path: standard library only, nothing imported at all.

An error body is ``{"error": {"code": ..., "message": ..., "details": {"fields": {...}}}}``,
``details`` optional, beside any extra top-level keys a route adds (``retryAfterSeconds``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs the hook ~2 ms
if TYPE_CHECKING:
    from typing import Any

MAX_ID_CHARS = 200
"""The longest id the gateway takes (eventId, sessionId, agentId)."""

EVENT_KINDS = frozenset(
    {
        "session_start",  # a session begins or resumes: the hook injects the context block
        "prompt",  # the user's prompt, before the agent works on it
        "tool_pre",  # a tool is about to run (input only)
        "tool_post",  # a tool ran (input and output)
        "tool_failure",  # a tool ran and failed
        "file_edit",  # the agent edited a file (hosts that report edits apart from tools)
        "agent_response",  # the agent's answer at the end of a turn
        "subagent_stop",  # a subagent finished
        "compact",  # the host is about to compact its context
        "notification",  # the host notified the user (permission asked, idle, ...)
        "session_end",  # the session ended: the hook also asks for its summary
        "other",
    }
)
"""What happened, whatever the host called it: an adapter maps its host's hook names to one of
these and sends it as ``eventKind``, so the gateway and the compressor need no host's names."""

PERMANENT = frozenset({400, 404, 409, 413, 422})
"""Answers a resend of the same request cannot change: malformed (400), no such route or
resource (404), a session id another project owns (409), too large (413), invalid (422). The
request is kept aside as refused and never retried."""
AUTH = frozenset({401, 403})
"""A wrong or missing secret, or a refused origin: a setup problem. Nothing about the request is
wrong, so it is kept for a resend once the setup is fixed, and the user is told."""
BUSY = 503
"""The gateway is alive but cannot take it now (inbox full, store down): resend later, after
``retryAfterSeconds`` when the body gives it."""


class Unreachable(Exception):
    """No HTTP answer came: refused, reset, timed out, or not HTTP. ``refused``: the request was
    never sent (the connection was refused or never made, no time was left), so doing it
    elsewhere cannot do it twice; otherwise it may have reached the gateway and been carried
    out."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def derived_event_id(
    session_id: str | None, hook: str, when: float | None, content: list[Any]
) -> str:
    """The eventId of an event that came without one (the hook's, when its host gives no call or
    turn id; the gateway's, when a client sends none): ``derived:`` + a hash of the session,
    the hook, the time and the content, so a replay is the same event and two real calls with
    the same content at different times are not."""
    import json

    material = json.dumps(
        [session_id, hook, when, content], sort_keys=True, default=str, ensure_ascii=False
    )
    return "derived:" + sha256(material.encode("utf-8")).hexdigest()[:32]


def sha256(data: bytes) -> Any:
    """hashlib's OpenSSL binding costs the hook ~2 ms to load; the builtin module is enough."""
    try:
        from _sha256 import sha256 as builtin  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256 as builtin  # Python 3.12+
        except ImportError:
            from hashlib import sha256 as builtin
    return builtin(data)


def is_permanent(status: int) -> bool:
    return status in PERMANENT


def is_transient(status: int) -> bool:
    """Resend later: busy, a server error, a timeout or rate limit, or no HTTP answer at all
    (``status`` 0)."""
    return status == 0 or status in (408, 425, 429) or status >= 500


def error_body(
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = dict(extra or {})
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    body["error"] = error
    return body


def error_parts(body: Any) -> tuple[str, str, dict[str, Any]]:
    """(code, message, field problems) of an error body; empty when ``body`` is not one."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "", "", {}
    details = error.get("details")
    fields = details.get("fields") if isinstance(details, dict) else None
    return (
        str(error.get("code") or ""),
        str(error.get("message") or ""),
        fields if isinstance(fields, dict) else {},
    )


def error_message(status: int, body: Any) -> str:
    """One line for a person: ``HTTP 422: invalid event (sessionId: required)``; for a body that
    is not an error body, its start."""
    _, message, fields = error_parts(body)
    if not message and not fields:
        shown = "" if body is None else str(body)[:300]
        return f"HTTP {status}" + (f": {shown}" if shown else "")
    detail = "; ".join(f"{k}: {v}" for k, v in fields.items())
    return f"HTTP {status}: {message}" + (f" ({detail})" if detail else "")
