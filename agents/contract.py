"""The contract between Engram and an agent host: one event shape, one adapter interface, and the
event-id scheme every capture path (hooks, transcript import, transcript watch) shares.

Loaded by the hook CLI on the agent's hot path: standard library only, and cheap ones at that
(no ``dataclasses`` or ``typing`` at run time).

A host is one module (built in: ``engram.agents.adapters``; from another package: the
``engram.hosts`` entry-point group, see ``engram.agents.registry``) that defines:

- ``HOST``: the registry name (``"claude-code"``), ``DISPLAY``: the product name;

where the host has hooks, the adapter:

- ``EVENTS``: the host's own hook event names mapped to a kind in ``KINDS``;
- ``normalise(hook, payload) -> HookEvent``: the host's stdin JSON as one event, raising
  ``BadPayload`` with a clear message when the payload cannot be used;
- ``respond(event, context) -> str``: what the host expects on stdout (``context`` is the
  session-start block, or for a prompt what the gateway adds for it, or None when there is none
  or the gateway did not answer); ``""`` prints nothing;
- ``CONNECT`` (optional): the events ``engram connect --with-hooks`` registers, keys of
  ``EVENTS`` ("before" events are left out: Engram only observes; where a host fires two events
  for one thing, only one);
- ``PROMPT_CONTEXT`` (optional, default False): True where the host takes context from a prompt
  hook; the hook then asks the gateway for context for each prompt;

and where `engram connect` can write the host's config, the connect record:

- ``connect_parts() -> tuple[Part, ...]``: the files and entries (``engram.agents.hostconfig``,
  imported inside the function: a hook never loads it);
- ``CONNECT_NOTE`` (optional): one line `engram connect --list` shows.

The module imports only the standard library at its top: the hook imports it on every event.
"""

from __future__ import annotations

import json
import os
import re

from engram.wire import EVENT_KINDS, MAX_ID_CHARS, derived_event_id, sha256

TYPE_CHECKING = False  # typing costs the hook ~2 ms to import
if TYPE_CHECKING:
    from typing import Any

KINDS = EVENT_KINDS
"""The event kinds (``engram.wire.EVENT_KINDS``)."""

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")
"""Ids from stdin: letters, digits and ``._:@+=-``; no slash, no ``..``, no control characters."""


class BadPayload(ValueError):
    """The host's payload cannot be turned into an event; the message says why."""


class HookEvent:
    """One hook call from any host, normalised. Only ``host``, ``hook`` and ``kind`` are always
    set; ``session_id`` and ``project`` are filled by ``finish`` when the adapter had none."""

    __slots__ = (
        "host",
        "hook",
        "kind",
        "session_id",
        "turn_id",
        "tool_use_id",
        "cwd",
        "project",
        "tool_name",
        "tool_input",
        "tool_output",
        "prompt",
        "message",
        "error",
        "transcript_path",
        "timestamp",
        "subagent_id",
    )

    host: str
    hook: str
    kind: str
    session_id: str | None
    turn_id: str | None
    tool_use_id: str | None
    cwd: str | None
    project: str | None
    tool_name: str | None
    tool_input: Any
    tool_output: Any
    prompt: str | None
    message: str | None
    error: str | None
    transcript_path: str | None
    timestamp: float | None
    subagent_id: str | None  # the host's subagent, not Engram's agent scope (agentId)

    def __init__(self, host: str, hook: str, kind: str, **fields: Any) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        self.host, self.hook, self.kind = host, hook, kind
        for name in self.__slots__[3:]:
            setattr(self, name, fields.pop(name, None))
        if fields:
            raise TypeError(f"unknown event fields: {', '.join(sorted(fields))}")

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items() if v is not None)
        return f"HookEvent({shown})"


# --- validation of what came from stdin ------------------------------------------------------


def valid_id(value: Any, field: str) -> str | None:
    """An id from the payload, or None when absent; BadPayload when it is not a safe id."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise BadPayload(f"{field} must be a string, got {type(value).__name__}")
    if len(value) > MAX_ID_CHARS or not _ID.fullmatch(value) or ".." in value:
        raise BadPayload(
            f"{field} is not a safe id (letters, digits and ._:@+=- only, at most "
            f"{MAX_ID_CHARS} characters): {value[:60]!r}"
        )
    return value


def valid_path(value: Any, field: str) -> str | None:
    """An absolute path from the payload, normalised, or None when absent; BadPayload when it is
    relative, has ``..`` segments or control characters. Nothing here touches the filesystem."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadPayload(f"{field} must be a string, got {type(value).__name__}")
    if len(value) > 4096 or any(ord(c) < 32 for c in value):
        raise BadPayload(f"{field} is too long or has control characters")
    if not os.path.isabs(value):
        raise BadPayload(f"{field} must be an absolute path: {value[:80]!r}")
    if ".." in value.replace("\\", "/").split("/"):
        raise BadPayload(f"{field} must not contain '..' segments: {value[:80]!r}")
    return os.path.normpath(value)


def text(value: Any) -> str | None:
    """A prompt or message as text: strings as they are, a list of text parts joined (Kimi,
    Claude content blocks), anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in value]
        joined = "\n".join(p for p in parts if isinstance(p, str) and p)
        return joined or None
    return None


def maybe_json(value: Any) -> Any:
    """Hosts that send tool input or output as a JSON string (Cursor, Copilot): decoded when it
    is a JSON object or array, else the string as it is."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def mcp_tool_name(server: str, tool: str) -> str:
    """One spelling of an MCP tool across hosts, Claude Code's: ``mcp__<server>__<tool>``."""
    return f"mcp__{server}__{tool}"


# --- project and ids ---------------------------------------------------------------------------


def project_for(cwd: str | None, configured: str = "") -> str:
    """The project an event belongs to: the configured name, else the name of the git repository
    holding ``cwd`` (its top folder), else ``cwd``'s own folder name."""
    if configured:
        return configured
    if not cwd:
        return "default"
    path = os.path.normpath(cwd)
    probe = path
    for _ in range(64):  # bounded walk up; a few stat calls
        if os.path.exists(os.path.join(probe, ".git")):
            return os.path.basename(probe) or "default"
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return os.path.basename(path) or "default"


def event_id(event: HookEvent, fallback_time: float) -> str:
    """The eventId the gateway deduplicates on. From the host's own ids where it has them, so a
    replay (spool, retry, a transcript import of the same call) is the same event:

    - a tool call: ``<host>:<session>:<hook>:<tool_use_id>`` (Pre and Post of one call differ);
    - a turn-scoped event (prompt, answer): ``<host>:<session>:<hook>:turn:<turn_id>``;
    - otherwise ``derived:`` + a hash of session, hook, host timestamp (or ``fallback_time``, the
      hook's own clock) and content, so two real calls with the same content are not merged.
    """
    if event.tool_use_id:
        return _bounded(f"{event.host}:{event.session_id}:{event.hook}:{event.tool_use_id}")
    if event.turn_id and event.kind in ("prompt", "agent_response"):
        return _bounded(f"{event.host}:{event.session_id}:{event.hook}:turn:{event.turn_id}")
    when = event.timestamp if event.timestamp is not None else fallback_time
    return derived_event_id(
        event.session_id,
        event.hook,
        when,
        [
            event.tool_name,
            event.tool_input,
            event.tool_output,
            event.prompt,
            event.message,
            event.error,
        ],
    )


def _bounded(event_id: str) -> str:
    """An id within MAX_ID_CHARS: a longer one keeps its head and ends in a hash of the whole,
    so two ids differing only past the limit stay different."""
    if len(event_id) <= MAX_ID_CHARS:
        return event_id
    digest = sha256(event_id.encode("utf-8")).hexdigest()[:32]
    return f"{event_id[: MAX_ID_CHARS - 33]}#{digest}"


def observe_body(event: HookEvent, event_id_: str) -> dict[str, Any]:
    """The ``POST /v1/observe`` body for an event: the host's own hook name is the hookType, what
    it means is the eventKind (the gateway knows no host's names); an answer, notification or error that is not a tool's
    goes in ``toolOutput`` under ``message`` / ``error``, where the compressor looks for it."""
    output = event.tool_output
    if output is None and (event.message or event.error):
        output = {k: v for k, v in (("message", event.message), ("error", event.error)) if v}
    elif event.error and event.kind == "tool_failure":
        output = {"output": output, "error": event.error}
    body: dict[str, Any] = {
        "eventId": event_id_,
        "sessionId": event.session_id,
        "project": event.project,
        "host": event.host,
        "hookType": event.hook,
        "eventKind": event.kind,
    }
    for key, value in (
        ("toolName", event.tool_name),
        ("toolInput", event.tool_input),
        ("toolOutput", output),
        ("prompt", event.prompt),
        ("timestamp", event.timestamp),
    ):
        if value is not None:
            body[key] = value
    return body
