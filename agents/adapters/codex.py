"""Codex CLI: hooks in ``~/.codex/hooks.json`` or ``<repo>/.codex/hooks.json`` (or ``[hooks]`` in
``config.toml``) get Claude Code's payload shape plus ``turn_id`` on turn-scoped events.

Session start answers ``hookSpecificOutput.additionalContext`` (Codex validates that envelope
strictly: ``hookEventName`` must be ``SessionStart``); every other event prints nothing, which
Codex reads as "carry on".
"""

from __future__ import annotations

from engram.agents.adapters import claude_code
from engram.agents.contract import HookEvent, text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Part

HOST = "codex"
DISPLAY = "Codex CLI"
EVENTS = {
    "SessionStart": "session_start",
    "UserPromptSubmit": "prompt",
    "PreToolUse": "tool_pre",
    "PostToolUse": "tool_post",
    "Stop": "agent_response",
    "StopFailure": "other",
    "SubagentStop": "subagent_stop",
    "PreCompact": "compact",
}
CONNECT = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "Stop",
    "PreCompact",
)
"""The events `engram connect --with-hooks` registers (see ``engram.agents.contract``)."""


def normalise(hook: str, payload: Any) -> HookEvent:
    event = claude_code.normalise(hook, payload, HOST, EVENTS)
    details = text(payload.get("error_details"))
    if event.error and details:  # StopFailure: ``error`` is a category (rate_limit, ...)
        event.error = f"{event.error}: {details}"
    return event


PROMPT_CONTEXT = True
"""Codex's UserPromptSubmit takes ``additionalContext`` as Claude Code's does."""


def respond(event: HookEvent, context: str | None) -> str:
    return claude_code.respond(event, context)


# --- connect ---------------------------------------------------------------------------------

CONNECT_NOTE = "hooks also need [features] codex_hooks = true in config.toml (set by connect)"


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server and hooks (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    config = {"user": "~/.codex/config.toml", "project": "./.codex/config.toml"}
    return (
        c.part("mcp", "toml", config, c.toml_mcp()),
        c.part(
            "hooks",
            "json",
            {"user": "~/.codex/hooks.json", "project": "./.codex/hooks.json"},
            c.nested_hooks(),
        ),
        c.part("hooks", "toml", config, c.codex_hooks_flag(), flag=True),
    )
