"""`engram mcp`: Engram's MCP server over stdio (agents/mcp_server.py)."""

from __future__ import annotations

from typing import Any

MCP_HELP = """\
Run Engram's MCP server over stdio, for an MCP client (Claude Code, Claude Desktop, Cursor, Codex,
Gemini CLI, Cline, Zed, Goose, ...) that starts it as a subprocess; `engram connect HOST` writes
the client's config. Tools call the gateway at ENGRAM_URL (default the local server) with the
secret from the config dir (sent only to loopback) or ENGRAM_SECRET; when no gateway answers, the
server opens the store itself so save and recall still work, and every result says which mode
answered ("gateway" or "local"). ENGRAM_MCP_TOOLS=core|all picks how many tools are listed.
docs/mcp.md has each client's config block and the tool reference."""


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser("mcp", help="run the MCP server over stdio (started by MCP clients)",
                       description=MCP_HELP)
    common(p)
    client_args(p)
    p.add_argument("--tools", choices=("core", "all"),
                   help="tools to list (default ENGRAM_MCP_TOOLS, core)")
    return {"mcp": cmd_mcp}


def cmd_mcp(args: Any) -> int:
    from engram.cli import settings_for

    overrides: dict[str, Any] = {}
    if args.url:
        overrides["url"] = args.url
    if args.tools:
        overrides["mcp_tools"] = args.tools
    settings = settings_for(args, **overrides)
    try:
        from agents.mcp_server import serve_stdio
    except ImportError as exc:  # the `mcp` SDK is a dependency; a broken install says so
        import sys

        print(f"engram mcp: the MCP SDK cannot be imported ({exc}); reinstall Engram "
              "(`make serve` or pip install -e .)", file=sys.stderr)
        return 1
    return serve_stdio(settings)
