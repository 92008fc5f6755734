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
    "claude": "claude-code",
    "codex-cli": "codex",
    "gemini": "gemini-cli",
    "copilot": "copilot-cli",
    "kimi-code": "kimi",
    "generic": "raw",
    "continue-dev": "continue",
}
"""Other spellings users type, for hook commands and `engram connect` alike (``continue`` has
a connect record and no adapter)."""


class UnknownHost(LookupError):
    def __init__(self, host: str) -> None:
        super().__init__(f"unknown host {host!r}; known: {', '.join(ADAPTERS)}")


def spelling(host: str) -> str:
    """The one spelling of ``host`` (lower case, aliases resolved), whether or not it has an
    adapter."""
    return ALIASES.get(host.lower(), host.lower())


def canonical(host: str) -> str:
    name = spelling(host)
    if name not in ADAPTERS:
        raise UnknownHost(host)
    return name


def load(host: str) -> ModuleType:
    """The adapter module for ``host`` (a name or an alias)."""
    return importlib.import_module(ADAPTERS[canonical(host)])
