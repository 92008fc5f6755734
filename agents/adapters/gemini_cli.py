"""Gemini CLI: hooks under ``hooks`` in ``~/.gemini/settings.json`` or
``<repo>/.gemini/settings.json`` get one JSON object on stdin: ``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name`` and an ISO 8601 ``timestamp``, plus the
event's own fields.

Gemini parses a hook's stdout as JSON and rejects plain text, so session start answers
``hookSpecificOutput.additionalContext`` and every other event prints nothing.
"""

from __future__ import annotations

import json

from engram.agents.adapters._common import epoch_seconds, obj, opt_str, section
from engram.agents.contract import HookEvent, mcp_tool_name, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Part

HOST = "gemini-cli"
DISPLAY = "Gemini CLI"
EVENTS = {
    "SessionStart": "session_start",
    "BeforeAgent": "prompt",
    "BeforeTool": "tool_pre",
    "AfterTool": "tool_post",
    "AfterAgent": "agent_response",
    "PreCompress": "compact",
    "Notification": "notification",
    "SessionEnd": "session_end",
}
CONNECT = (
    "SessionStart",
    "BeforeAgent",
    "AfterTool",
    "AfterAgent",
    "PreCompress",
    "SessionEnd",
)
"""The events `engram connect --with-hooks` registers (see ``engram.agents.contract``)."""


def normalise(hook: str, payload: Any) -> HookEvent:
    payload = obj(payload)
    opt_str(payload, "hook_event_name")
    kind = EVENTS.get(hook, "other")
    tool = opt_str(payload, "tool_name")
    mcp = section(payload, "mcp_context")
    server, mcp_tool = opt_str(mcp, "server_name"), opt_str(mcp, "tool_name")
    if server and mcp_tool:  # already mcp__<server>__<tool>; spelled the same way either way
        tool = mcp_tool_name(server, mcp_tool)
    output = payload.get("tool_response")
    error = None
    if isinstance(output, dict) and output.get("error"):  # {llmContent, returnDisplay, error?}
        failure = output["error"]
        error = (
            text(failure)
            or (text(failure.get("message")) if isinstance(failure, dict) else None)
            or json.dumps(failure, default=str)
        )
        kind = "tool_failure" if kind == "tool_post" else kind
    return HookEvent(
        HOST,
        hook,
        kind,
        session_id=valid_id(payload.get("session_id"), "session_id"),
        cwd=valid_path(payload.get("cwd"), "cwd"),
        transcript_path=valid_path(payload.get("transcript_path"), "transcript_path"),
        tool_name=tool,
        tool_input=payload.get("tool_input"),
        tool_output=output,
        prompt=text(payload.get("prompt")),
        message=text(payload.get("prompt_response") or payload.get("message")),
        error=error,
        timestamp=epoch_seconds(payload.get("timestamp")),
    )


PROMPT_CONTEXT = True
"""BeforeAgent (after the prompt, before planning) takes ``additionalContext``."""


def respond(event: HookEvent, context: str | None) -> str:
    if event.kind not in ("session_start", "prompt") or not context:
        return ""
    name = "SessionStart" if event.kind == "session_start" else "BeforeAgent"
    return json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}})


# --- connect ---------------------------------------------------------------------------------


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    settings = {"user": "~/.gemini/settings.json", "project": "./.gemini/settings.json"}
    return (
        c.part("mcp", "json", settings, c.mcp_map("mcpServers", c.stdio_entry)),
        c.part("hooks", "json", settings, c.nested_hooks(extra={"name": "engram"})),
    )
