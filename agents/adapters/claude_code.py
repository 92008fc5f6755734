"""Claude Code: hooks in ``settings.json`` get one JSON object on stdin per event.

Session start answers ``hookSpecificOutput.additionalContext``; every other event prints nothing.
"""

from __future__ import annotations

import json

from engram.agents.adapters._common import epoch_seconds, obj, opt_str
from engram.agents.contract import HookEvent, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Context, Part

HOST = "claude-code"
DISPLAY = "Claude Code"
EVENTS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "prompt",
    "PreToolUse": "tool_pre",
    "PostToolUse": "tool_post",
    "PostToolUseFailure": "tool_failure",
    "Stop": "agent_response",
    "SubagentStop": "subagent_stop",
    "PreCompact": "compact",
    "Notification": "notification",
    "SessionEnd": "session_end",
}
CONNECT = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "Stop",
    "PreCompact",
    "SessionEnd",
)
"""The events `engram connect --with-hooks` registers (see ``engram.agents.contract``)."""


def normalise(
    hook: str, payload: Any, host: str = HOST, events: dict[str, str] | None = None
) -> HookEvent:
    """Also used by hosts that copied Claude Code's hook payloads (Codex, Kimi Code), with
    their own ``events``."""
    payload = obj(payload)
    opt_str(payload, "hook_event_name")  # type check only: the configured name is ``hook``
    kind = (EVENTS if events is None else events).get(hook, "other")
    subagent = valid_id(payload.get("agent_id"), "agent_id")
    tool_input = payload.get("tool_input")
    if kind == "subagent_stop" and (subagent or payload.get("agent_type")):
        tool_input = {"agentId": subagent, "agentType": payload.get("agent_type")}
    return HookEvent(
        host,
        hook,
        kind,
        session_id=valid_id(payload.get("session_id"), "session_id"),
        turn_id=valid_id(payload.get("turn_id"), "turn_id"),
        tool_use_id=valid_id(payload.get("tool_use_id"), "tool_use_id"),
        cwd=valid_path(payload.get("cwd"), "cwd"),
        transcript_path=valid_path(payload.get("transcript_path"), "transcript_path"),
        tool_name=opt_str(payload, "tool_name"),
        tool_input=tool_input,
        tool_output=payload.get("tool_response"),
        prompt=text(payload.get("prompt")),
        message=text(payload.get("last_assistant_message") or payload.get("message")),
        error=text(payload.get("error")),
        timestamp=epoch_seconds(payload.get("timestamp")),  # Claude Code sends none; copies may
        subagent_id=subagent,
    )


PROMPT_CONTEXT = True
"""UserPromptSubmit takes ``additionalContext``: the hook asks for context for each prompt."""


def respond(event: HookEvent, context: str | None) -> str:
    """SessionStart and UserPromptSubmit add ``additionalContext`` to the session."""
    if event.kind not in ("session_start", "prompt") or not context:
        return ""
    name = "SessionStart" if event.kind == "session_start" else "UserPromptSubmit"
    return json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}})


# --- connect ---------------------------------------------------------------------------------


def _mcp_entry(ctx: Context) -> dict[str, Any]:
    return {"type": "stdio", "command": ctx.exe, "args": ["mcp"]}


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "json",
            {"user": "~/.claude.json", "project": "./.mcp.json"},
            c.mcp_map("mcpServers", _mcp_entry),
        ),
        c.part(
            "hooks",
            "json",
            {"user": "~/.claude/settings.json", "project": "./.claude/settings.json"},
            c.nested_hooks(tool_matcher="*"),
        ),
    )
