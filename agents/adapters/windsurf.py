"""Windsurf (Cascade hooks): ``hooks.json`` at the system, user (``~/.codeium/windsurf/``) or
workspace (``.windsurf/``) level. Every payload carries ``agent_action_name``, ``trajectory_id``
(the conversation), ``execution_id`` (one turn), an ISO 8601 ``timestamp`` and the event's
details under ``tool_info``.

Windsurf reads only the exit code (2 blocks a pre-hook) and shows stdout at most, so every
event prints nothing: Engram never blocks Cascade. There is no session-start hook; the context
block reaches Cascade through the MCP server.
"""

from __future__ import annotations

from engram.agents.adapters._common import epoch_seconds, obj, opt_str, section
from engram.agents.contract import HookEvent, maybe_json, mcp_tool_name, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Part

HOST = "windsurf"
DISPLAY = "Windsurf"
EVENTS = {
    "pre_user_prompt": "prompt",
    "pre_read_code": "tool_pre",
    "post_read_code": "tool_post",
    "pre_write_code": "tool_pre",
    "post_write_code": "file_edit",
    "pre_run_command": "tool_pre",
    "post_run_command": "tool_post",
    "pre_mcp_tool_use": "tool_pre",
    "post_mcp_tool_use": "tool_post",
    "post_cascade_response": "agent_response",
    "post_setup_worktree": "other",
}
CONNECT = (
    "pre_user_prompt",
    "post_write_code",
    "post_run_command",
    "post_mcp_tool_use",
    "post_cascade_response",
)
"""The events `engram connect --with-hooks` registers (see ``engram.agents.contract``)."""


def normalise(hook: str, payload: Any) -> HookEvent:
    payload = obj(payload)
    opt_str(payload, "agent_action_name")
    kind = EVENTS.get(hook, "other")
    info = section(payload, "tool_info")
    action = hook[hook.find("_") + 1 :] if hook.startswith(("pre_", "post_")) else hook
    tool: str | None = None
    prompt: str | None = None
    message: str | None = None
    cwd: str | None = None
    tool_input: Any = None
    tool_output: Any = None
    if action == "run_command":
        cwd = valid_path(info.get("cwd"), "tool_info.cwd")
        tool, tool_input = "Shell", {"command": opt_str(info, "command_line")}
        if cwd:
            tool_input["cwd"] = cwd
        tool_output = info.get("output")
    elif action in ("read_code", "write_code"):
        tool = "Read" if action == "read_code" else "Edit"
        tool_input = {"file_path": opt_str(info, "file_path")}
        if action == "write_code":
            tool_input["edits"] = info.get("edits") or []
    elif action == "mcp_tool_use":
        server, name = opt_str(info, "mcp_server_name"), opt_str(info, "mcp_tool_name")
        tool = mcp_tool_name(server, name) if server and name else name
        tool_input = info.get("mcp_tool_arguments")
        tool_output = maybe_json(info.get("mcp_result"))
    elif action == "user_prompt":
        prompt = text(info.get("user_prompt"))
    elif action == "cascade_response":
        message = text(info.get("response"))
    elif info:  # post_setup_worktree and actions newer than this adapter: keep what came
        tool_input = info
    return HookEvent(
        HOST,
        hook,
        kind,
        session_id=valid_id(payload.get("trajectory_id"), "trajectory_id"),
        turn_id=valid_id(payload.get("execution_id"), "execution_id"),
        cwd=cwd,  # only run_command has one; the hook falls back to its own working directory
        tool_name=tool,
        tool_input=tool_input,
        tool_output=tool_output,
        prompt=prompt,
        message=message,
        timestamp=epoch_seconds(payload.get("timestamp")),
    )


def respond(event: HookEvent, context: str | None) -> str:
    return ""


# --- connect ---------------------------------------------------------------------------------


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "json",
            {"user": "~/.codeium/windsurf/mcp_config.json"},
            c.mcp_map("mcpServers", c.stdio_entry),
        ),
        c.part(
            "hooks",
            "json",
            {"user": "~/.codeium/windsurf/hooks.json", "project": "./.windsurf/hooks.json"},
            c.flat_hooks(lambda command: {"command": command, "show_output": False}),
        ),
    )
