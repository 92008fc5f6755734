"""One registry of host adapters. A hook imports only the adapter of its host.

Built-in adapters register here exactly as any other would: a name and a module path. Each must
be documented in ``docs/hosts.md`` (a test fails otherwise).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

ADAPTERS: dict[str, str] = {
    "claude-code": "engram.agents.adapters.claude_code",
    "codex": "engram.agents.adapters.codex",
    "cursor": "engram.agents.adapters.cursor",
    "gemini-cli": "engram.agents.adapters.gemini_cli",
    "copilot-cli": "engram.agents.adapters.copilot_cli",
    "windsurf": "engram.agents.adapters.windsurf",
    "kimi": "engram.agents.adapters.kimi",
    "raw": "engram.agents.adapters.raw",
}
"""Host name -> adapter module."""

ALIASES: dict[str, str] = {
    "claude": "claude-code", "codex-cli": "codex", "gemini": "gemini-cli",
    "copilot": "copilot-cli", "kimi-code": "kimi", "generic": "raw",
}
"""Other spellings users type in hook configs."""


class UnknownHost(LookupError):
    def __init__(self, host: str) -> None:
        super().__init__(f"unknown host {host!r}; known: {', '.join(ADAPTERS)}")


def canonical(host: str) -> str:
    name = ALIASES.get(host.lower(), host.lower())
    if name not in ADAPTERS:
        raise UnknownHost(host)
    return name


def load(host: str) -> ModuleType:
    """The adapter module for ``host`` (a name or an alias)."""
    return importlib.import_module(ADAPTERS[canonical(host)])
