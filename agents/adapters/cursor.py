"""Cursor: hooks in ``~/.cursor/hooks.json`` or ``<repo>/.cursor/hooks.json`` (``"version": 1``).
Every payload carries ``conversation_id`` (the session), ``generation_id`` (one turn),
``hook_event_name`` and ``workspace_roots``; MCP hooks send ``tool_input`` and ``result_json``
as JSON strings.

Cursor waits for a JSON answer from its ``before*`` and ``preToolUse`` hooks. Engram gives no
opinion on permissions (``{}``: Cursor's own approval flow decides; answering "allow" would
approve every command without asking) and "continue" to a prompt: it never blocks the agent and
never approves for the user. ``engram connect cursor`` registers none of the permission hooks. Session start answers
``additional_context``; every other event prints nothing.
"""

from __future__ import annotations

import json

from engram.agents.adapters._common import ALLOW_CONTINUE, epoch_seconds, first_root, obj, opt_str
from engram.agents.contract import HookEvent, maybe_json, mcp_tool_name, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Part

HOST = "cursor"
DISPLAY = "Cursor"
EVENTS = {
    "sessionStart": "session_start",
    "beforeSubmitPrompt": "prompt",
    "preToolUse": "tool_pre",
    "postToolUse": "tool_post",
    "postToolUseFailure": "tool_failure",
    "beforeShellExecution": "tool_pre",
    "afterShellExecution": "tool_post",
    "beforeMCPExecution": "tool_pre",
    "afterMCPExecution": "tool_post",
    "beforeReadFile": "tool_pre",
    "afterFileEdit": "file_edit",
    "afterAgentResponse": "agent_response",
    "afterAgentThought": "other",
    "stop": "agent_response",
    "subagentStop": "subagent_stop",
    "preCompact": "compact",
    "sessionEnd": "session_end",
}
CONNECT = (
    "sessionStart",
    "beforeSubmitPrompt",
    "postToolUse",
    "postToolUseFailure",
    "afterAgentResponse",
    "preCompact",
    "sessionEnd",
)
"""The events `engram connect --with-hooks` registers (see ``engram.agents.contract``)."""
NO_OPINION = "{}"
VERDICTS = {
    "beforeShellExecution": NO_OPINION,
    "beforeMCPExecution": NO_OPINION,
    "beforeReadFile": NO_OPINION,
    "preToolUse": NO_OPINION,
    "beforeSubmitPrompt": ALLOW_CONTINUE,
}
"""The answer of each hook Cursor waits on: no permission decision, prompts continue."""


def _mcp_name(payload: dict[str, Any]) -> str | None:
    """``mcp__<server>__<tool>`` when the server is known: a server field, or Cursor's
    ``<server>__<tool>`` spelling; the bare tool name otherwise."""
    tool = opt_str(payload, "tool_name")
    server = opt_str(payload, "server_name", "mcp_server_name", "server")
    if tool and server:
        return mcp_tool_name(server, tool)
    if tool and "__" in tool.strip("_") and not tool.startswith("mcp__"):
        server, _, name = tool.partition("__")
        return mcp_tool_name(server, name)
    return tool


def normalise(hook: str, payload: Any) -> HookEvent:
    payload = obj(payload)
    opt_str(payload, "hook_event_name")
    kind = EVENTS.get(hook, "other")
    cwd = valid_path(payload.get("cwd"), "cwd") or first_root(payload)
    tool = opt_str(payload, "tool_name")
    tool_input = maybe_json(payload.get("tool_input"))
    tool_output = maybe_json(payload.get("tool_output"))
    message = error = None
    if hook in ("beforeShellExecution", "afterShellExecution"):
        tool, tool_input = "Shell", {"command": opt_str(payload, "command")}
        if payload.get("cwd"):
            tool_input["cwd"] = cwd
        tool_output = payload.get("output")
    elif hook in ("beforeMCPExecution", "afterMCPExecution"):
        tool, tool_output = _mcp_name(payload), maybe_json(payload.get("result_json"))
    elif hook == "beforeReadFile":
        tool, tool_input = "Read", {"file_path": opt_str(payload, "file_path")}
    elif hook == "afterFileEdit":
        tool = "Edit"
        tool_input = {
            "file_path": opt_str(payload, "file_path"),
            "edits": payload.get("edits") or [],
        }
    elif hook in ("afterAgentResponse", "afterAgentThought"):
        message = text(payload.get("text"))
    elif hook == "postToolUseFailure":
        error = text(payload.get("error_message") or payload.get("error"))
    elif hook == "stop":
        status = opt_str(payload, "status")  # completed, aborted, error
        error = f"agent loop ended: {status}" if status and status != "completed" else None
    elif hook == "subagentStop":
        tool_input = {"agentType": opt_str(payload, "subagent_type")}
        message = text(payload.get("result") or payload.get("summary"))
    elif hook == "sessionEnd":
        error = text(payload.get("error_message"))
    return HookEvent(
        HOST,
        hook,
        kind,
        session_id=valid_id(
            payload.get("conversation_id") or payload.get("session_id"), "conversation_id"
        ),
        turn_id=valid_id(payload.get("generation_id"), "generation_id"),
        tool_use_id=valid_id(payload.get("tool_use_id"), "tool_use_id"),
        cwd=cwd,
        transcript_path=valid_path(payload.get("transcript_path"), "transcript_path"),
        tool_name=tool,
        tool_input=tool_input,
        tool_output=tool_output,
        prompt=text(payload.get("prompt")),
        message=message,
        error=error,
        timestamp=epoch_seconds(payload.get("timestamp")),
    )


def respond(event: HookEvent, context: str | None) -> str:
    if event.kind == "session_start":
        return json.dumps({"additional_context": context} if context else {})
    return VERDICTS.get(event.hook, "")


# --- connect ---------------------------------------------------------------------------------


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "json",
            {"user": "~/.cursor/mcp.json", "project": "./.cursor/mcp.json"},
            c.mcp_map("mcpServers", c.stdio_entry),
        ),
        c.part(
            "hooks",
            "json",
            {"user": "~/.cursor/hooks.json", "project": "./.cursor/hooks.json"},
            c.flat_hooks(lambda command: {"command": command}, version=1),
            boilerplate=("version",),
        ),
    )
