"""``engram.agents``: the doors agent hosts use.

- ``contract``: the one event shape adapters produce and the eventId scheme;
- ``registry`` and ``adapters/``: one module per host, its hook adapter and its connect record
  (Claude Code, Codex CLI, Cursor, Gemini CLI, Copilot CLI, OpenCode, Zed, Continue, Windsurf,
  Kimi, raw JSON; others through the ``engram.hosts`` entry points), loaded one at a time by name;
- ``hook``: `engram hook HOST EVENT`, on the agent's hot path (standard library only), with its
  ``transport`` and offline ``spool``; ``capture``: `engram capture` (the spool's state, drain);
- ``connect`` and ``hostconfig/``: `engram connect`/`disconnect`, writing each host's config
  (the edits; the records are in the host modules);
- ``mcp_server``: Engram's MCP server (tools, resources, prompts) over stdio or at /mcp.
"""
