"""Every agent host Engram knows, each registered once: a name and the module that describes it.

A host module (see ``engram.agents.contract``) holds everything about its host: the names
(``HOST``, ``DISPLAY``), the hook adapter (``EVENTS``, ``normalise``, ``respond``, ``CONNECT``)
where the host has hooks, and the connect record (``connect_parts``, ``CONNECT_NOTE``) where
`engram connect` can write its config. A hook imports only the module of its host.

Built-in hosts are listed in ``BUILT_IN``; a host from another package registers the same kind
of module under the ``engram.hosts`` entry-point group::

    [project.entry-points."engram.hosts"]
    acme = "acme_engram.host"

Entry points are read only for a name that is not built in (and for listings): reading package
metadata costs ~50 ms, more than a hook's own work; a built-in host's hook pays nothing for it. Each module is checked
on load, built-in or not, against the same contract.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

ENTRY_POINT_GROUP = "engram.hosts"

BUILT_IN: dict[str, str] = {
    "claude-code": "engram.agents.adapters.claude_code",
    "codex": "engram.agents.adapters.codex",
    "cursor": "engram.agents.adapters.cursor",
    "gemini-cli": "engram.agents.adapters.gemini_cli",
    "copilot-cli": "engram.agents.adapters.copilot_cli",
    "opencode": "engram.agents.adapters.opencode",
    "zed": "engram.agents.adapters.zed",
    "continue": "engram.agents.adapters.continue_dev",
    "windsurf": "engram.agents.adapters.windsurf",
    "kimi": "engram.agents.adapters.kimi",
    "raw": "engram.agents.adapters.raw",
}
"""Host name -> host module, in the order `engram connect --list` shows them."""

ALIASES: dict[str, str] = {
    "claude": "claude-code",
    "codex-cli": "codex",
    "gemini": "gemini-cli",
    "copilot": "copilot-cli",
    "kimi-code": "kimi",
    "generic": "raw",
    "continue-dev": "continue",
}
"""Other spellings users type, for hook commands and `engram connect` alike."""


class UnknownHost(LookupError):
    def __init__(self, host: str, *, hooks: bool = False) -> None:
        if hooks:
            super().__init__(
                f"host {host!r} has no hooks; hosts with hooks: {', '.join(with_hooks())}"
            )
        else:
            super().__init__(f"unknown host {host!r}; known: {', '.join(names())}")


class InvalidHost(LookupError):
    """A registered module that does not describe its host as the contract says."""


def spelling(host: str) -> str:
    """The one spelling of ``host`` (lower case, aliases resolved), known or not."""
    return ALIASES.get(host.lower(), host.lower())


_outside_hosts: dict[str, str] | None = None


def _outside() -> dict[str, str]:
    """Hosts other packages register: name -> module (built-in names cannot be taken over).
    Read once per process: a listing would otherwise read the metadata once per outside host."""
    global _outside_hosts
    if _outside_hosts is None:
        from importlib.metadata import entry_points

        found: dict[str, str] = {}
        for point in entry_points(group=ENTRY_POINT_GROUP):
            name = point.name.lower()
            if name not in BUILT_IN and name not in ALIASES:
                found.setdefault(name, point.value)
        _outside_hosts = found
    return _outside_hosts


def names() -> list[str]:
    """Every host name: built-in first, then those other packages register."""
    return [*BUILT_IN, *_outside()]


def load(host: str) -> ModuleType:
    """The module of ``host`` (a name or an alias), checked against the contract."""
    name = spelling(host)
    path = BUILT_IN.get(name)
    if path is None:
        path = _outside().get(name)
        if path is None:
            raise UnknownHost(host)
    try:
        module = importlib.import_module(path.partition(":")[0])
    except ImportError as exc:
        raise InvalidHost(f"host {name!r}: cannot import {path} ({exc})") from None
    _check(name, path, module)
    return module


def adapter(host: str) -> ModuleType:
    """The module of ``host`` if it has a hook adapter (``normalise``); UnknownHost otherwise,
    listing the hosts that do."""
    module = load(host)
    if not callable(getattr(module, "normalise", None)):
        raise UnknownHost(host, hooks=True)
    return module


def load_all() -> tuple[dict[str, ModuleType], dict[str, str]]:
    """Every host's module (imports them all: for listings), and what is wrong with each host
    whose module cannot be used (name -> why), so a listing can say so."""
    modules: dict[str, ModuleType] = {}
    problems: dict[str, str] = {}
    for name in names():
        try:
            modules[name] = load(name)
        except LookupError as exc:
            problems[name] = str(exc)
    return modules, problems


def with_hooks() -> list[str]:
    """Names of the hosts with a hook adapter."""
    return [n for n, m in load_all()[0].items() if callable(getattr(m, "normalise", None))]


def _check(name: str, path: str, module: ModuleType) -> None:
    problems = []
    if getattr(module, "HOST", None) != name:
        problems.append(f"HOST is {getattr(module, 'HOST', None)!r}, not {name!r}")
    if not isinstance(getattr(module, "DISPLAY", None), str):
        problems.append("DISPLAY (the product name) is missing")
    hooks = callable(getattr(module, "normalise", None))
    if hooks:
        events = getattr(module, "EVENTS", None)
        if not isinstance(events, dict) or not callable(getattr(module, "respond", None)):
            problems.append("a hook adapter needs EVENTS (a dict) and respond()")
        elif not set(getattr(module, "CONNECT", ())) <= set(events):
            problems.append("CONNECT names events that are not in EVENTS")
    elif not callable(getattr(module, "connect_parts", None)):
        problems.append("neither a hook adapter (normalise) nor a connect record (connect_parts)")
    if problems:
        raise InvalidHost(f"host {name!r} ({path}): " + "; ".join(problems))
