"""What a connect record is made of: the files a host reads (``Part``), and the entries Engram
adds to and removes from them. Each host's record lives in its host module (``connect_parts``,
``engram.agents.registry``); ``connect_hosts`` gathers them.

Every edit is a pair of pure functions over parsed data (plain JSON/YAML data or a tomlkit
document): ``add`` puts Engram's entry in (replacing a stale one, keeping every other key and the
user's own extra keys inside Engram's entry), ``remove`` takes out exactly what ``add`` put in.
Engram's entries are recognised by the server name ``engram`` and by hook commands whose first
two words are ``engram hook`` (any path to the executable).

Sources for each format are listed in docs/connect.md.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engram.agents.hostconfig.formats import ConfigSyntaxError

SERVER_NAME = "engram"
"""Name of Engram's MCP server entry in every host config."""

TOOL_KINDS = ("tool_post", "tool_failure")


@dataclass
class Context:
    """What an edit needs to know: the executable, the host, its events, and a record of the
    optional things this connect added (so disconnect removes only those)."""

    exe: str
    host: str
    events: dict[str, str]
    added: list[str] = field(default_factory=list)
    recorded: tuple[str, ...] = ()

    def hook_command(self, event: str) -> str:
        return f"{shlex.quote(self.exe)} hook {self.host} {event}"

    def mcp_argv(self) -> list[str]:
        return [self.exe, "mcp"]


Edit = Callable[[Any, Context], Any]


@dataclass(frozen=True)
class Part:
    """One thing connect writes (the MCP server, or the hooks) into one file per scope."""

    kind: str  # "mcp" | "hooks"
    fmt: str  # "json" | "jsonc" | "toml" | "yaml"
    paths: dict[str, str]  # scope -> "~/..." (home) or "./..." (project dir)
    add: Edit
    remove: Edit
    skeleton: str = ""  # text of a new file, before Engram's entry goes in
    owned: bool = False  # the file is Engram's own: deleted when nothing else is left
    refuse_if: str = ""  # a sibling file whose presence means this file must not be created
    refuse_why: str = ""
    flag: bool = False  # an auxiliary setting the hooks need (lives in the MCP file)
    boilerplate: tuple[str, ...] = ()  # keys add() puts in a new file besides Engram's entries


@dataclass(frozen=True)
class Host:
    name: str
    display: str
    parts: tuple[Part, ...]
    note: str = ""


def is_engram_hook(command: Any) -> bool:
    """True for ``engram hook ...`` with any path to the engram executable."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return (
        len(words) >= 2
        and os.path.basename(words[0]) in ("engram", "engram.exe")
        and words[1] == "hook"
    )


def _object(data: Any, key: str, where: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigSyntaxError(f"expected a JSON object at {where or 'the top level'}")
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigSyntaxError(
            f"expected '{(where + '.' if where else '') + key}' to be an "
            f"object, found {type(value).__name__}"
        )
    return value


# --- MCP server entries --------------------------------------------------------------------------


def mcp_map(key: str, entry: Callable[[Context], dict[str, Any]]) -> tuple[Edit, Edit]:
    """``{key: {"engram": entry}}`` in a JSON object (mcpServers, context_servers, mcp)."""

    def add(data: Any, ctx: Context) -> Any:
        servers = _object(data, key)
        desired = entry(ctx)
        current = servers.get(SERVER_NAME)
        merged = {**current, **desired} if isinstance(current, dict) else desired
        if current != merged:
            servers[SERVER_NAME] = merged
        return data

    def remove(data: Any, ctx: Context) -> Any:
        servers = data.get(key) if isinstance(data, dict) else None
        if isinstance(servers, dict) and SERVER_NAME in servers:
            del servers[SERVER_NAME]
            if not servers:
                del data[key]
        return data

    return add, remove


def toml_mcp() -> tuple[Edit, Edit]:
    """Codex: ``[mcp_servers.engram]`` with command and args."""

    def add(doc: Any, ctx: Context) -> Any:
        import tomlkit

        servers = doc.get("mcp_servers")
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc["mcp_servers"] = servers
        if not isinstance(servers, dict):
            raise ConfigSyntaxError("expected 'mcp_servers' to be a table")
        current = servers.get(SERVER_NAME)
        desired = {"command": ctx.exe, "args": ["mcp"]}
        if isinstance(current, dict):
            for k, v in desired.items():
                if current.get(k) != v:
                    current[k] = v
        else:
            table = tomlkit.table()
            table.update(desired)
            servers[SERVER_NAME] = table
        return doc

    def remove(doc: Any, ctx: Context) -> Any:
        servers = doc.get("mcp_servers")
        if isinstance(servers, dict) and SERVER_NAME in servers:
            del servers[SERVER_NAME]
            if not servers:
                del doc["mcp_servers"]
        return doc

    return add, remove


def yaml_mcp_list() -> tuple[Edit, Edit]:
    """Continue: ``mcpServers:`` is a list of ``{name, command, args}``."""

    def add(data: Any, ctx: Context) -> Any:
        if not isinstance(data, dict):
            raise ConfigSyntaxError("expected a mapping at the top level")
        servers = data.setdefault("mcpServers", [])
        if not isinstance(servers, list):
            raise ConfigSyntaxError("expected 'mcpServers' to be a list")
        desired = {"name": SERVER_NAME, "command": ctx.exe, "args": ["mcp"]}
        ours = [s for s in servers if isinstance(s, dict) and s.get("name") == SERVER_NAME]
        if len(ours) == 1 and {**ours[0], **desired} == ours[0]:
            return data
        merged = {**ours[0], **desired} if ours else desired
        data["mcpServers"] = [s for s in servers if not any(s is o for o in ours)] + [merged]
        return data

    def remove(data: Any, ctx: Context) -> Any:
        servers = data.get("mcpServers") if isinstance(data, dict) else None
        if isinstance(servers, list):
            kept = [
                s for s in servers if not (isinstance(s, dict) and s.get("name") == SERVER_NAME)
            ]
            if len(kept) != len(servers):
                if kept:
                    data["mcpServers"] = kept
                else:
                    del data["mcpServers"]
        return data

    return add, remove


# --- hooks ---------------------------------------------------------------------------------------


def _strip_engram(entries: list[Any], command_of: Callable[[Any], Any]) -> list[Any]:
    return [e for e in entries if not is_engram_hook(command_of(e))]


def nested_hooks(
    tool_matcher: str | None = None, extra: dict[str, Any] | None = None
) -> tuple[Edit, Edit]:
    """Claude Code / Codex / Gemini CLI: ``hooks.<Event> = [{matcher?, hooks: [{type, command}]}]``.
    ``tool_matcher`` goes on tool events only; lifecycle events get no matcher."""

    def groups_commands(groups: list[Any]) -> list[Any]:
        return [
            h.get("command")
            for g in groups
            if isinstance(g, dict)
            for h in (g.get("hooks") or [])
            if isinstance(h, dict)
        ]

    def strip(groups: list[Any]) -> list[Any]:
        out = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list):
                kept = _strip_engram(
                    inner, lambda h: h.get("command") if isinstance(h, dict) else None
                )
                if len(kept) != len(inner):
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
            out.append(group)
        return out

    def add(data: Any, ctx: Context) -> Any:
        hooks = _object(data, "hooks")
        for event, kind in ctx.events.items():
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise ConfigSyntaxError(f"expected 'hooks.{event}' to be a list")
            command = ctx.hook_command(event)
            ours = [c for c in groups_commands(groups) if is_engram_hook(c)]
            if ours == [command]:
                continue
            group: dict[str, Any] = {}
            if tool_matcher is not None and kind in TOOL_KINDS:
                group["matcher"] = tool_matcher
            group["hooks"] = [{**(extra or {}), "type": "command", "command": command}]
            hooks[event] = strip(groups) + [group]
        return data

    def remove(data: Any, ctx: Context) -> Any:
        hooks = data.get("hooks") if isinstance(data, dict) else None
        if not isinstance(hooks, dict):
            return data
        for event in list(hooks):
            groups = hooks[event]
            if isinstance(groups, list):
                kept = strip(groups)
                if kept != groups:
                    if kept:
                        hooks[event] = kept
                    else:
                        del hooks[event]
        if not hooks and "hooks" in data:
            del data["hooks"]
        return data

    return add, remove


def flat_hooks(
    entry: Callable[[str], dict[str, Any]], command_key: str = "command", version: int | None = None
) -> tuple[Edit, Edit]:
    """Cursor / Windsurf / Copilot CLI: ``hooks.<event> = [{command...}]`` (+ ``version``)."""

    def command_of(e: Any) -> Any:
        return e.get(command_key) if isinstance(e, dict) else None

    def add(data: Any, ctx: Context) -> Any:
        if version is not None and isinstance(data, dict):
            data.setdefault("version", version)
        hooks = _object(data, "hooks")
        for event in ctx.events:
            entries = hooks.setdefault(event, [])
            if not isinstance(entries, list):
                raise ConfigSyntaxError(f"expected 'hooks.{event}' to be a list")
            command = ctx.hook_command(event)
            ours = [command_of(e) for e in entries if is_engram_hook(command_of(e))]
            if ours == [command]:
                continue
            hooks[event] = _strip_engram(entries, command_of) + [entry(command)]
        return data

    def remove(data: Any, ctx: Context) -> Any:
        hooks = data.get("hooks") if isinstance(data, dict) else None
        if not isinstance(hooks, dict):
            return data
        for event in list(hooks):
            entries = hooks[event]
            if isinstance(entries, list):
                kept = _strip_engram(entries, command_of)
                if len(kept) != len(entries):
                    if kept:
                        hooks[event] = kept
                    else:
                        del hooks[event]
        if not hooks:
            del data["hooks"]
        return data

    return add, remove


def toml_hooks() -> tuple[Edit, Edit]:
    """Kimi Code: ``[[hooks]]`` tables with ``event`` and ``command`` (only four keys allowed)."""

    def ours(doc: Any) -> list[Any]:
        hooks = doc.get("hooks")
        if hooks is None:
            return []
        if not isinstance(hooks, list):
            raise ConfigSyntaxError("expected 'hooks' to be an array of tables ([[hooks]])")
        return hooks

    def add(doc: Any, ctx: Context) -> Any:
        import tomlkit

        hooks = ours(doc)
        have = [
            (h.get("event"), h.get("command"))
            for h in hooks
            if isinstance(h, dict) and is_engram_hook(h.get("command"))
        ]
        want = [(event, ctx.hook_command(event)) for event in ctx.events]
        if have == want:
            return doc
        aot = tomlkit.aot()
        for h in hooks:
            if not (isinstance(h, dict) and is_engram_hook(h.get("command"))):
                aot.append(h)
        for event, command in want:
            table = tomlkit.table()
            table.update({"event": event, "command": command})
            aot.append(table)
        doc["hooks"] = aot
        return doc

    def remove(doc: Any, ctx: Context) -> Any:
        import tomlkit

        hooks = ours(doc)
        kept = [h for h in hooks if not (isinstance(h, dict) and is_engram_hook(h.get("command")))]
        if len(kept) == len(hooks):
            return doc
        if not kept:
            del doc["hooks"]
            return doc
        aot = tomlkit.aot()
        for h in kept:
            aot.append(h)
        doc["hooks"] = aot
        return doc

    return add, remove


CODEX_FLAG = "codex:features.codex_hooks"


def codex_hooks_flag() -> tuple[Edit, Edit]:
    """Codex runs hooks only with ``[features] codex_hooks = true`` in config.toml. Set it when
    missing and remember that connect did, so disconnect removes it only then."""

    def add(doc: Any, ctx: Context) -> Any:
        import tomlkit

        features = doc.get("features")
        if isinstance(features, dict) and features.get("codex_hooks") is True:
            if CODEX_FLAG in ctx.recorded:
                ctx.added.append(CODEX_FLAG)
            return doc
        if features is None:
            features = tomlkit.table()
            doc["features"] = features
        features["codex_hooks"] = True
        ctx.added.append(CODEX_FLAG)
        return doc

    def remove(doc: Any, ctx: Context) -> Any:
        features = doc.get("features")
        if CODEX_FLAG in ctx.recorded and isinstance(features, dict) and "codex_hooks" in features:
            del features["codex_hooks"]
            if not features:
                del doc["features"]
        return doc

    return add, remove


# --- the records ---------------------------------------------------------------------------------


def stdio_entry(ctx: Context) -> dict[str, Any]:
    """The MCP server entry most hosts take: ``{"command": <engram>, "args": ["mcp"]}``."""
    return {"command": ctx.exe, "args": ["mcp"]}


def part(kind: str, fmt: str, paths: dict[str, str], edits: tuple[Edit, Edit], **kw: Any) -> Part:
    """A ``Part`` from an ``(add, remove)`` pair, as the edit builders above return them."""
    return Part(kind, fmt, paths, edits[0], edits[1], **kw)


def connect_hosts() -> tuple[dict[str, Host], dict[str, str]]:
    """Every host connect knows, in the order `engram connect --list` shows them (each host
    module with a connect record, built-in or registered by a package: see
    ``engram.agents.registry``), and the registered hosts that cannot be used, with why."""
    from engram.agents import registry

    modules, problems = registry.load_all()
    records = {name: _record(module) for name, module in modules.items()}
    return {name: r for name, r in records.items() if r is not None}, problems


def host_named(name: str) -> Host | None:
    """The connect record of ``name`` (a name or an alias), or None."""
    from engram.agents import registry

    try:
        return _record(registry.load(name))
    except registry.UnknownHost:
        return None


def _record(module: Any) -> Host | None:
    parts = getattr(module, "connect_parts", None)
    if not callable(parts):
        return None
    return Host(module.HOST, module.DISPLAY, tuple(parts()), getattr(module, "CONNECT_NOTE", ""))


def events_for(host: str) -> dict[str, str]:
    """Host event name -> kind, for the events connect registers hooks for: the host's module
    says which (``CONNECT``) and what each is (``EVENTS``); a host without hooks (OpenCode,
    Zed, Continue) gets none."""
    from engram.agents import registry

    try:
        module = registry.load(host)
    except registry.UnknownHost:
        return {}
    events = getattr(module, "EVENTS", {})
    return {event: str(events[event]) for event in getattr(module, "CONNECT", ())}
