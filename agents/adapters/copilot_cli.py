"""GitHub Copilot CLI: hooks in ``.github/hooks/*.json`` (``"version": 1``) run a ``bash`` /
``powershell`` command per event. Configured by their camelCase names (``sessionStart``) the
payloads use camelCase fields (``sessionId``, ``toolName``, ``toolArgs`` as a JSON string,
``toolResult``, ``timestamp`` in milliseconds); configured by the VS Code-compatible PascalCase
names (``SessionStart``) they use snake_case fields and ISO 8601 timestamps. Both are read.

Copilot ignores the output of every hook Engram uses except ``preToolUse``, where empty output
means "the normal permission flow decides"; so every event prints nothing and the context block
reaches Copilot through the MCP server.

Older Copilot CLIs send no session id. Then the session is derived: a hash of the parent process
id (the Copilot CLI that spawned the hook's shell) and the working directory, stable for one
running CLI in one folder. See ``derived_session_id``.
"""

from __future__ import annotations

import hashlib
import os

from engram.agents.adapters._common import epoch_seconds, obj, opt_str, section
from engram.agents.contract import HookEvent, maybe_json, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Context, Part

HOST = "copilot-cli"
DISPLAY = "GitHub Copilot CLI"
EVENTS = {
    "sessionStart": "session_start",
    "userPromptSubmitted": "prompt",
    "preToolUse": "tool_pre",
    "postToolUse": "tool_post",
    "postToolUseFailure": "tool_failure",
    "agentStop": "agent_response",
    "subagentStop": "subagent_stop",
    "errorOccurred": "other",
    "preCompact": "compact",
    "notification": "notification",
    "sessionEnd": "session_end",
}
CONNECT = (
    "sessionStart",
    "userPromptSubmitted",
    "postToolUse",
    "postToolUseFailure",
    "agentStop",
    "preCompact",
    "sessionEnd",
)
"""The events `engram connect --with-hooks` registers (see ``engram.agents.contract``)."""
VSCODE_NAMES = {
    "SessionStart": "sessionStart",
    "UserPromptSubmit": "userPromptSubmitted",
    "PreToolUse": "preToolUse",
    "PostToolUse": "postToolUse",
    "PostToolUseFailure": "postToolUseFailure",
    "Stop": "agentStop",
    "SubagentStop": "subagentStop",
    "ErrorOccurred": "errorOccurred",
    "PreCompact": "preCompact",
    "Notification": "notification",
    "SessionEnd": "sessionEnd",
}
"""The VS Code-compatible event names -> the camelCase event they are."""
FAILED_RESULTS = ("failure", "denied", "error")


def derived_session_id(cwd: str | None, parent_pid: int | None = None) -> str:
    """A session id for payloads without one: every hook of one running Copilot CLI has the
    same parent process, and the CLI keeps its working directory."""
    pid = os.getppid() if parent_pid is None else parent_pid
    digest = hashlib.sha256(f"{pid}\0{cwd or ''}".encode()).hexdigest()[:24]
    return f"copilot-{digest}"


def normalise(hook: str, payload: Any) -> HookEvent:
    payload = obj(payload)
    name = VSCODE_NAMES.get(hook, hook)
    kind = EVENTS.get(name, "other")
    cwd = valid_path(payload.get("cwd"), "cwd")
    session = valid_id(payload.get("sessionId") or payload.get("session_id"), "sessionId")
    tool_input = maybe_json(payload.get("toolArgs", payload.get("tool_input")))
    raw_result = payload.get("toolResult", payload.get("tool_result"))
    result = section(payload, "toolResult" if "toolResult" in payload else "tool_result")
    message = error = None
    if result:  # {resultType, textResultForLlm} or {result_type, text_result_for_llm}
        status = opt_str(result, "resultType", "result_type")
        if status in FAILED_RESULTS:
            kind = "tool_failure" if kind == "tool_post" else kind
            error = text(result.get("textResultForLlm", result.get("text_result_for_llm")))
            error = f"{status}: {error}" if error else status
    if name == "postToolUseFailure":
        error = text(payload.get("error"))
    elif name == "errorOccurred":
        failure = section(payload, "error")
        parts = (opt_str(failure, "name"), opt_str(failure, "message"))
        error = ": ".join(p for p in parts if p) or None
        where = opt_str(payload, "errorContext", "error_context")
        error = f"{error} (during {where})" if error and where else error
    elif name == "subagentStop":
        agent = opt_str(payload, "agentName", "agent_name")
        tool_input = {"agentName": agent} if agent else tool_input
    elif name == "notification":
        title, body = opt_str(payload, "title"), opt_str(payload, "message")
        message = ": ".join(p for p in (title, body) if p) or None
    return HookEvent(
        HOST,
        hook,
        kind,
        session_id=session or derived_session_id(cwd),
        cwd=cwd,
        transcript_path=valid_path(
            payload.get("transcriptPath", payload.get("transcript_path")), "transcriptPath"
        ),
        tool_name=opt_str(payload, "toolName", "tool_name"),
        tool_input=tool_input,
        tool_output=raw_result,
        prompt=text(payload.get("prompt")),
        message=message,
        error=error,
        timestamp=epoch_seconds(payload.get("timestamp")),
    )


def respond(event: HookEvent, context: str | None) -> str:
    return ""


# --- connect ---------------------------------------------------------------------------------

CONNECT_NOTE = "Copilot CLI reads hooks only from .github/hooks/*.json of the repository"


def _mcp_entry(ctx: Context) -> dict[str, Any]:
    return {"type": "local", "command": ctx.exe, "args": ["mcp"], "tools": ["*"]}


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "json",
            {"user": "~/.copilot/mcp-config.json"},
            c.mcp_map("mcpServers", _mcp_entry),
        ),
        c.part(
            "hooks",
            "json",
            {"project": "./.github/hooks/engram.json"},
            c.flat_hooks(
                lambda command: {"type": "command", "bash": command, "timeoutSec": 30},
                command_key="bash",
                version=1,
            ),
            owned=True,
            boilerplate=("version",),
        ),
    )
