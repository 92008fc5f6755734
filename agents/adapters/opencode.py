"""OpenCode: MCP only. It has no command hooks (it extends through JavaScript plugins), so Engram
captures nothing from it on its own; its sessions reach Engram through the MCP tools."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engram.agents.hostconfig.hosts import Context, Part

HOST = "opencode"
DISPLAY = "OpenCode"
CONNECT_NOTE = "no command hooks (OpenCode extends through JS plugins)"


def _mcp_entry(ctx: Context) -> dict[str, Any]:
    return {"type": "local", "command": ctx.mcp_argv(), "enabled": True}


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "jsonc",
            {"user": "~/.config/opencode/opencode.json", "project": "./opencode.json"},
            c.mcp_map("mcp", _mcp_entry),
        ),
    )
