"""Zed: MCP only (a context server); Zed has no hooks."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from engram.agents.hostconfig.hosts import Part

HOST = "zed"
DISPLAY = "Zed"
CONNECT_NOTE = "no hooks"


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server (docs/connect.md)."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "jsonc",
            {"user": "~/.config/zed/settings.json", "project": "./.zed/settings.json"},
            c.mcp_map("context_servers", c.stdio_entry),
        ),
    )
