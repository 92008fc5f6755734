"""Continue: MCP only, in ``config.yaml``; Continue has no hooks. (The module is not named
``continue``: that is a Python keyword.)"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from engram.agents.hostconfig.hosts import Part

HOST = "continue"
DISPLAY = "Continue"
CONNECT_NOTE = "no hooks"


def connect_parts() -> tuple[Part, ...]:
    """Where `engram connect` writes Engram's MCP server (docs/connect.md). A config.json
    beside it means Continue has not moved to config.yaml: connect refuses rather than make
    Continue switch files under the user."""
    from engram.agents.hostconfig import hosts as c

    return (
        c.part(
            "mcp",
            "yaml",
            {"user": "~/.continue/config.yaml"},
            c.yaml_mcp_list(),
            skeleton="name: Local Config\nversion: 1.0.0\nschema: v1\n",
            refuse_if="config.json",
            refuse_why="Continue loads config.yaml instead of config.json once it exists; "
            "migrate config.json to config.yaml first (docs.continue.dev), then "
            "run connect again",
        ),
    )
