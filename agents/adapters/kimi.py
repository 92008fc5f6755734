"""Kimi Code CLI: ``[[hooks]]`` tables in ``~/.kimi-code/config.toml`` (``~/.kimi/config.toml``
for the older Python ``kimi-cli``) get a Claude-like payload: ``session_id``, ``cwd``,
``hook_event_name``, ``tool_call_id`` as the tool-use id, ``tool_output`` instead of
``tool_response``, and a prompt that may be a list of text parts.

Kimi adds a hook's plain stdout to the agent's context (exit code 0), so session start prints the
context block as it is; every other event prints nothing.
"""

from __future__ import annotations

from engram.agents.adapters._common import epoch_seconds, obj, opt_str
from engram.agents.adapters.claude_code import CONNECT as CLAUDE_CONNECT
from engram.agents.adapters.claude_code import EVENTS as CLAUDE_EVENTS
from engram.agents.contract import HookEvent, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Part

HOST = "kimi"
DISPLAY = "Kimi Code"
EVENTS = {**CLAUDE_EVENTS, "StopFailure": "other"}
"""Claude Code's hook events, which Kimi copied, and its StopFailure."""
CONNECT = CLAUDE_CONNECT
"""The events `engram connect --with-hooks` registers: Claude Code's (see ``engram.agents.contract``)."""


def normalise(hook: str, payload: Any) -> HookEvent:
    payload = obj(payload)
    opt_str(payload, "hook_event_name")
    kind = EVENTS.get(hook, "other")
    tool_input = payload.get("tool_input")
    message = text(payload.get("message"))
    error = text(payload.get("error"))
    if kind == "subagent_stop":  # agent_name, response
        name = opt_str(payload, "agent_name")
        tool_input = {"agentName": name} if name else tool_input
        message = text(payload.get("response")) or message
    elif kind == "notification":  # sink, notification_type, title, body, severity
        title, body = opt_str(payload, "title"), opt_str(payload, "body")
        message = ": ".join(p for p in (title, body) if p) or message
    elif hook == "StopFailure":  # error_type, error_message
        parts = (opt_str(payload, "error_type"), opt_str(payload, "error_message"))
        error = ": ".join(p for p in parts if p) or error
    return HookEvent(
        HOST,
        hook,
        kind,
        session_id=valid_id(payload.get("session_id"), "session_id"),
        turn_id=valid_id(payload.get("turn_id"), "turn_id"),
        tool_use_id=valid_id(
            payload.get("tool_call_id") or payload.get("tool_use_id"), "tool_call_id"
        ),
        cwd=valid_path(payload.get("cwd"), "cwd"),
        transcript_path=valid_path(payload.get("transcript_path"), "transcript_path"),
        tool_name=opt_str(payload, "tool_name"),
        tool_input=tool_input,
        tool_output=payload.get("tool_output", payload.get("tool_response")),
        prompt=text(payload.get("prompt")),
        message=message,
        error=error,
        timestamp=epoch_seconds(payload.get("timestamp")),
    )


PROMPT_CONTEXT = True
"""Kimi adds a UserPromptSubmit hook's stdout to the prompt's context, as at SessionStart."""


def respond(event: HookEvent, context: str | None) -> str:
    if event.kind not in ("session_start", "prompt") or not context:
        return ""
    return context


# --- connect ---------------------------------------------------------------------------------


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "json",
            {"user": "~/.kimi-code/mcp.json", "project": "./.kimi-code/mcp.json"},
            c.mcp_map("mcpServers", c.stdio_entry),
        ),
        c.part("hooks", "toml", {"user": "~/.kimi-code/config.toml"}, c.toml_hooks()),
    )
