"""`engram connect <host>` and `engram disconnect <host>`: write Engram's MCP server entry (and,
with --with-hooks, its hook commands) into each host's own config files, and take them out again.

Contracts: every user entry is kept (comments too where the format allows); a second run changes
nothing and says so; a file is backed up (``<file>.engram-backup-<timestamp>``) before it is
changed; --dry-run prints a unified diff and writes nothing; a file that does not parse is named
with its line and left untouched, and then no file is written at all. Which hosts have hooks
connected is recorded in ``<config dir>/connected.json`` for the transcript watcher.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from engram.agents.hostconfig.hosts import Context, Host, Part
    from engram.settings import Settings

CONNECTED_FILE = "connected.json"
"""Name of the record of connected hosts, in the config dir."""

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class ConnectError(Exception):
    """A problem to report in one line (exit code in ``code``); nothing was written."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


# --- the record read by the transcript watcher ----------------------------------------------------


def _read_connected(config_dir: Path) -> dict[str, Any]:
    import json

    path = config_dir / CONNECTED_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConnectError(f"cannot read {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def hooks_connected(settings: Settings) -> set[str]:
    """Hosts whose hooks `engram connect --with-hooks` installed (from connected.json)."""
    try:
        record = _read_connected(settings.config_dir)
    except ConnectError:
        return set()
    return {
        host for host, entry in record.items() if isinstance(entry, dict) and entry.get("hooks")
    }


def drifted(settings: Settings) -> dict[str, tuple[bool, list[str]]]:
    """For each host `engram connect` wrote to (connected.json): whether its hooks were
    connected, and the files a connect would change now (Engram's entries removed, edited or
    pointing at another `engram`). Reads only; a file that no longer parses is named too."""
    from engram.agents.hostconfig.hosts import host_named

    found: dict[str, tuple[bool, list[str]]] = {}
    for name, entry in _read_connected(settings.config_dir).items():
        host = host_named(name) if isinstance(entry, dict) else None
        if host is None or not isinstance(entry, dict):
            continue
        hooks = bool(entry.get("hooks"))
        args = argparse.Namespace(
            project_dir=None, scope=None, config=entry.get("mcp"), hooks_config=entry.get("hooks")
        )
        try:
            outcomes = compute(plan_files(host, args, hooks), _context(host, entry), True)
        except ConnectError as exc:
            found[name] = (hooks, [str(exc)])
            continue
        found[name] = (hooks, [str(o.plan.path) for o in outcomes if o.changed])
    return found


def _write_connected(config_dir: Path, record: dict[str, Any]) -> None:
    import json

    config_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(config_dir / CONNECTED_FILE, json.dumps(record, indent=2) + "\n")


# --- planning: which files, which edits -----------------------------------------------------------


@dataclass
class FilePlan:
    path: Path
    fmt: str
    parts: list[Part] = field(default_factory=list)
    owned: bool = False
    skeleton: str = ""


def _home() -> Path:
    import os

    return Path(os.environ.get("HOME") or Path.home())


def _resolve(template: str, home: Path, project: Path) -> Path:
    if template.startswith("~/"):
        return home / template[2:]
    return project / template[2:]


def _path_for(
    part: Part, scope: str, explicit: bool, home: Path, project: Path, override: Path | None
) -> Path | None:
    if override is not None:
        return override
    if scope in part.paths:
        return _resolve(part.paths[scope], home, project)
    if explicit:
        return None
    (only,) = part.paths.values()  # a host with one scope for this part: use it
    return _resolve(only, home, project)


def plan_files(
    host: Host, args: argparse.Namespace, with_hooks: bool, recorded: dict[str, Any] | None = None
) -> list[FilePlan]:
    home, project = _home(), Path(args.project_dir or ".").resolve()
    explicit = args.scope is not None
    scope = args.scope or "user"
    config = Path(args.config).expanduser().resolve() if args.config else None
    hooks_config = Path(args.hooks_config).expanduser().resolve() if args.hooks_config else None
    plans: dict[Path, FilePlan] = {}
    mcp_path: Path | None = None
    for part in host.parts:
        if part.kind == "hooks" and not with_hooks:
            continue
        if part.kind == "mcp" or part.flag:  # e.g. Codex's hooks flag lives in the MCP file
            override = config
        else:
            shares_file = any(p.kind == "mcp" and p.paths == part.paths for p in host.parts)
            override = hooks_config or (config if shares_file else None)
        path = _path_for(part, scope, explicit, home, project, override)
        if path is None:
            raise ConnectError(
                f"{host.display} has no {scope}-scope {part.kind} config "
                f"(it reads {part.kind} from: {', '.join(part.paths.values())})",
                EXIT_USAGE,
            )
        if part.kind == "mcp":
            mcp_path = path
        plan = plans.setdefault(path, FilePlan(path, part.fmt))
        if plan.fmt != part.fmt:
            raise ConnectError(f"{path} cannot be both {plan.fmt} and {part.fmt}", EXIT_USAGE)
        plan.parts.append(part)
        plan.owned = plan.owned or part.owned
        plan.skeleton = plan.skeleton or part.skeleton
    for kind in ("mcp", "hooks"):  # files an earlier connect wrote (e.g. with --config)
        earlier = (recorded or {}).get(kind)
        if earlier and Path(earlier) not in plans and Path(earlier) != mcp_path:
            parts = [p for p in host.parts if p.kind == kind]
            if parts and Path(earlier).exists():
                fmt = parts[0].fmt
                plans[Path(earlier)] = FilePlan(
                    Path(earlier),
                    fmt,
                    [p for p in parts if p.fmt == fmt],
                    any(p.owned for p in parts),
                )
    return list(plans.values())


# --- executing a plan ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    plan: FilePlan
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is to be deleted
    comments_lost: bool = False
    crlf: bool = False
    """The file ends its lines in CRLF: ``after`` (always "\\n") is written back with CRLF."""

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConnectError(f"{path} is not UTF-8 text; nothing was changed") from None
    except OSError as exc:
        raise ConnectError(
            f"cannot read {path}: {exc.strerror or exc}; nothing was changed"
        ) from None


def _uses_crlf(path: Path) -> bool:
    """Whether the file ends its lines in CRLF (judged by its first line ending). ``_read``
    gives the text with "\\n" only; the write puts the file's own line ending back."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1 << 20)
    except OSError:
        return False
    end = head.find(b"\n")
    return end > 0 and head[end - 1 : end] == b"\r"


def _with_line_endings(text: str, crlf: bool) -> str:
    if not crlf:
        return text
    import re

    return re.sub(r"\r?\n", "\r\n", text)


def _render(plan: FilePlan, base_text: str, data: Any, new: Any) -> tuple[str, bool]:
    from engram.agents.hostconfig import formats

    if plan.fmt == "toml":
        text = formats.dump_toml(new)
        if text.endswith("\n\n") and not base_text.endswith("\n\n"):
            text = text.rstrip("\n") + "\n"  # tomlkit leaves a removed table's blank line
        return text, False
    if plan.fmt == "yaml":
        old_list = data.get("mcpServers") if isinstance(data, dict) else None
        new_list = new.get("mcpServers") if isinstance(new, dict) else None
        old_list = old_list if isinstance(old_list, list) else []
        new_list = new_list if isinstance(new_list, list) else []
        keep = [s for s in new_list if s in old_list]
        rendered = formats.render_yaml_list(
            base_text, "mcpServers", keep, new_list[len(keep) :], new
        )
        return rendered.text, rendered.comments_lost
    rendered = formats.render_json(base_text, new, comments=plan.fmt == "jsonc")
    return rendered.text, rendered.comments_lost


def _is_empty(plan: FilePlan, data: Any) -> bool:
    """Nothing left but what a new file would have held: the file can go."""
    from engram.agents.hostconfig import formats

    if plan.fmt == "toml":
        data = data.unwrap()
    if not isinstance(data, dict):
        return False
    boilerplate = {key for part in plan.parts for key in part.boilerplate}
    leftover = {k: v for k, v in data.items() if k not in boilerplate}
    skeleton = formats.load(plan.fmt, plan.skeleton) if plan.skeleton else {}
    return not leftover or leftover == skeleton


def compute(
    plans: list[FilePlan], ctx: Context, connect: bool, created: frozenset[str] = frozenset()
) -> list[Outcome]:
    """Parse every file first (any error aborts before anything is written), then edit.
    Disconnect deletes a file only when connect created it (``created``) or it is Engram's own,
    and nothing but Engram's entries is left in it."""
    from engram.agents.hostconfig import formats

    outcomes = []
    for plan in plans:
        before = _read(plan.path)
        if connect and before is None:
            for part in plan.parts:
                if part.refuse_if and (plan.path.parent / part.refuse_if).exists():
                    raise ConnectError(
                        f"{plan.path} does not exist but "
                        f"{plan.path.parent / part.refuse_if} does: "
                        f"{part.refuse_why}"
                    )
        if not connect and before is None:
            outcomes.append(Outcome(plan, None, None))
            continue
        base_text = before if before is not None else plan.skeleton
        try:
            data = formats.load(plan.fmt, base_text)
            new = formats.editable(plan.fmt, data)
            for part in plan.parts:
                new = (part.add if connect else part.remove)(new, ctx)
        except formats.ConfigSyntaxError as exc:
            raise ConnectError(
                f"{plan.path}: {exc}; the file was not changed (fix it, or "
                "restore it from a backup, and run again)"
            ) from None
        after: str | None
        if not connect and (plan.owned or str(plan.path) in created) and _is_empty(plan, new):
            after, lost = None, False
        else:
            after, lost = _render(plan, base_text, data, new)
            if before is not None and formats.load(plan.fmt, after) == data and plan.fmt != "toml":
                after = before  # same content: leave the bytes alone
        outcomes.append(
            Outcome(plan, before, after, lost, crlf=before is not None and _uses_crlf(plan.path))
        )
    return outcomes


def _diff(outcome: Outcome) -> str:
    import difflib

    before = (outcome.before or "").splitlines(keepends=True)
    after = (outcome.after or "").splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            before,
            after,
            fromfile=str(outcome.plan.path) if outcome.before is not None else "/dev/null",
            tofile=str(outcome.plan.path) if outcome.after is not None else "/dev/null",
        )
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _atomic_write(path: Path, text: str) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".engram-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if mode is None:  # a new file: what the user's umask gives, not mkstemp's 0600
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _backup(path: Path, stamp: str) -> Path:
    import shutil

    target = path.with_name(f"{path.name}.engram-backup-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.engram-backup-{stamp}-{n}")
        n += 1
    shutil.copy2(path, target)
    return target


def apply(outcomes: list[Outcome], stamp: str) -> list[tuple[Outcome, Path | None]]:
    done: list[tuple[Outcome, Path | None]] = []
    for outcome in outcomes:
        if not outcome.changed:
            done.append((outcome, None))
            continue
        path = outcome.plan.path
        if outcome.after is None:  # Engram's own file, emptied: remove it (a link: the link)
            backup = _backup(path, stamp) if outcome.before is not None else None
            path.unlink()
        else:
            # A symlinked config (stow, chezmoi, a dotfiles repo) stays a link: the backup and
            # the new text go to the file it points at.
            target = Path(os.path.realpath(path))
            backup = _backup(target, stamp) if outcome.before is not None else None
            _atomic_write(target, _with_line_endings(outcome.after, outcome.crlf))
        done.append((outcome, backup))
    return done


# --- the commands ---------------------------------------------------------------------------------------


def _engram_executable() -> str:
    """The `engram` on PATH, else the one beside this interpreter (a venv not on PATH: hosts
    start hooks with their own PATH, so a bare name that only works in this shell would fail)."""
    import shutil

    found = shutil.which("engram")
    if found:
        return found
    beside = Path(sys.executable).parent / ("engram.exe" if os.name == "nt" else "engram")
    return str(beside) if beside.exists() else "engram"


def _context(host: Host, recorded: dict[str, Any] | None) -> Context:
    from engram.agents.hostconfig.hosts import Context, events_for

    return Context(
        _engram_executable(),
        host.name,
        events_for(host.name),
        recorded=tuple((recorded or {}).get("added") or ()),
    )


def _host(name: str | None) -> Host:
    from engram.agents.hostconfig.hosts import connect_hosts, host_named
    from engram.agents.registry import InvalidHost

    try:
        host = host_named(name or "")
    except InvalidHost as exc:
        raise ConnectError(str(exc), EXIT_USAGE) from None
    if host is None:
        supported = ", ".join(connect_hosts()[0])
        raise ConnectError(
            f"unknown host {name!r}; supported: {supported} (see `engram connect --list`)",
            EXIT_USAGE,
        )
    return host


def _labels(plan: FilePlan, connect: bool, ctx: Context) -> str:
    kinds = []
    if any(p.kind == "mcp" for p in plan.parts):
        kinds.append("MCP server 'engram'")
    if any(p.kind == "hooks" and not p.flag for p in plan.parts):
        kinds.append(f"hooks ({', '.join(ctx.events)})" if connect else "hooks")
    if any(p.flag for p in plan.parts):
        kinds.append("the setting that enables hooks" if connect else "that setting")
    return " + ".join(kinds) or "entries"


def _report(
    done: list[tuple[Outcome, Path | None]], ctx: Context, connect: bool, dry_run: bool
) -> None:
    for outcome, backup in done:
        path, what = outcome.plan.path, _labels(outcome.plan, connect, ctx)
        if not outcome.changed:
            state = "already connected" if connect else "no Engram entries"
            print(f"unchanged  {path} ({state})")
            continue
        if dry_run:
            print(_diff(outcome), end="")
            if outcome.comments_lost:
                print(
                    f"note: {path} has comments that cannot be kept in this edit; the "
                    "file would be rewritten without them (a backup is made first)"
                )
            continue
        verb = (
            ("created" if outcome.before is None else "updated")
            if connect
            else ("deleted" if outcome.after is None else "cleaned")
        )
        action = f"added {what}" if connect else f"removed Engram's {what}"
        tail = f"; backup {backup}" if backup else ""
        lost = "; its comments could not be kept (see the backup)" if outcome.comments_lost else ""
        print(f"{verb:<10} {path}: {action}{tail}{lost}")


def _now() -> tuple[str, str]:
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S"), now.isoformat(timespec="seconds")


def cmd_connect(args: argparse.Namespace) -> int:
    if args.list or not args.host:
        print(list_hosts())
        return EXIT_OK
    return _run(args, connect=True)


def cmd_disconnect(args: argparse.Namespace) -> int:
    return _run(args, connect=False)


def _run(args: argparse.Namespace, connect: bool) -> int:
    from engram.settings import settings_for

    try:
        host = _host(args.host)
        settings = settings_for(args)
        record = _read_connected(settings.config_dir)
        recorded = record.get(host.name) if isinstance(record.get(host.name), dict) else None
        with_hooks = bool(getattr(args, "with_hooks", False)) or not connect
        plans = plan_files(host, args, with_hooks, None if connect else recorded)
        ctx = _context(host, recorded)
        if connect and with_hooks and not any(p.kind == "hooks" for p in host.parts):
            print(f"note: {host.display} has no command hooks; connecting the MCP server only")
            with_hooks = False
        created = frozenset((recorded or {}).get("created") or ())
        outcomes = compute(plans, ctx, connect, created)
        stamp, at = _now()
        if args.dry_run:
            _report([(o, None) for o in outcomes], ctx, connect, dry_run=True)
            changed = any(o.changed for o in outcomes)
            print(
                f"dry run: {'nothing would change' if not changed else 'nothing written'}"
                f" for {host.display}"
            )
            return EXIT_OK
        done = apply(outcomes, stamp)
        _report(done, ctx, connect, dry_run=False)
        _update_record(settings.config_dir, record, host, outcomes, ctx, connect, with_hooks, at)
    except ConnectError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        print(f"engram: cannot write {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE
    changed = any(o.changed for o in outcomes)
    if connect:
        print(
            f"{host.display}: {'connected' if changed else 'already connected; nothing changed'}"
            f"{' (MCP server + hooks)' if with_hooks else ' (MCP server)'}."
            + (f" Restart {host.display} to load it." if changed else "")
        )
        if host.note:
            print(f"note: {host.note}")
    else:
        print(f"{host.display}: {'disconnected' if changed else 'nothing of Engram found'}.")
    return EXIT_OK


def _update_record(
    config_dir: Path,
    record: dict[str, Any],
    host: Host,
    outcomes: list[Outcome],
    ctx: Context,
    connect: bool,
    with_hooks: bool,
    at: str,
) -> None:
    if not connect:
        if host.name in record:
            del record[host.name]
            _write_connected(config_dir, record)
        return
    found = record.get(host.name)
    previous: dict[str, Any] = found if isinstance(found, dict) else {}
    plans = [o.plan for o in outcomes]
    created = {str(o.plan.path) for o in outcomes if o.before is None and o.changed}
    mcp = next(str(p.path) for p in plans if any(part.kind == "mcp" for part in p.parts))
    hooks_files = [
        str(p.path)
        for p in plans
        if any(part.kind == "hooks" and not part.flag for part in p.parts)
    ]
    entry = {
        "mcp": mcp,
        "hooks": (hooks_files[0] if hooks_files else None) if with_hooks else previous.get("hooks"),
        "at": at,
        "added": sorted(set(ctx.added) if with_hooks else set(previous.get("added") or ())),
        "created": sorted(created | set(previous.get("created") or ())),
    }
    if {k: v for k, v in previous.items() if k != "at"} != {
        k: v for k, v in entry.items() if k != "at"
    }:
        record[host.name] = entry
        _write_connected(config_dir, record)


def list_hosts() -> str:
    from engram.agents.hostconfig.hosts import connect_hosts

    hosts, problems = connect_hosts()
    lines = ["Hosts `engram connect <host>` supports (user scope first, then project scope):", ""]
    for host in hosts.values():
        lines.append(f"  {host.name:<12} {host.display}")
        for part in host.parts:
            if part.flag:
                continue
            where = ", ".join(f"{scope}: {path}" for scope, path in part.paths.items())
            label = "MCP   " if part.kind == "mcp" else "hooks "
            lines.append(f"  {'':<12}   {label} {where}")
        if host.note:
            lines.append(f"  {'':<12}   note:  {host.note}")
    if problems:
        lines += ["", "Registered by installed packages but not usable:"]
        lines += [f"  {name:<12} {why}" for name, why in problems.items()]
    lines += [
        "",
        "Hooks are written only with --with-hooks. The exact entries, and how to take",
        "them out by hand, are in docs/connect.md.",
    ]
    return "\n".join(lines)


HELP_EPILOG = """\
examples:
  engram connect --list                    hosts and the files each one gets
  engram connect claude-code --with-hooks  MCP server in ~/.claude.json, hooks in
                                           ~/.claude/settings.json
  engram connect codex --dry-run           show the diff for ~/.codex/config.toml, write nothing
  engram disconnect cursor                 take Engram's entries out again

Every changed file is first copied to <file>.engram-backup-<timestamp>. Running connect twice
changes nothing the second time. See docs/connect.md.
"""


_HOSTS_EPILOG = "<the hosts and their files>"


class _ConnectHelp(argparse.RawDescriptionHelpFormatter):
    """Builds the host list only when --help is asked for: every `engram` run (the hook path
    too) builds this parser, and the host table is not needed for that."""

    def add_text(self, text: str | None) -> None:
        if text == _HOSTS_EPILOG:
            text = list_hosts() + "\n\n" + HELP_EPILOG
        super().add_text(text)


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser(
        "connect",
        help="add Engram's MCP server (and hooks) to an agent host",
        description="Write Engram's MCP server entry (`engram mcp`) into the\n"
        "config file(s) of an agent host and, with --with-hooks, its hook\n"
        "commands (`engram hook <host> <event>`). User entries, comments and\n"
        "formatting are kept; a second run changes nothing.",
        epilog=_HOSTS_EPILOG,
        formatter_class=_ConnectHelp,
    )
    common(p)
    _host_args(p)
    p.add_argument(
        "--with-hooks",
        action="store_true",
        help="also register Engram's hook commands (capture sessions as they happen)",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="list the supported hosts and the files each one gets, then exit",
    )

    p = sub.add_parser(
        "disconnect",
        help="remove what `engram connect` added to a host",
        description="Remove Engram's MCP server entry and hook commands from a "
        "host's config files (recognised by the server name 'engram' and by "
        "commands starting with `engram hook`), keeping everything else. Files "
        "are backed up first; see docs/connect.md.",
    )
    common(p)
    _host_args(p, required=True)
    return {"connect": cmd_connect, "disconnect": cmd_disconnect}


def _host_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument(
        "host",
        nargs=None if required else "?",
        metavar="HOST",
        help="claude-code, codex, cursor, gemini-cli, copilot-cli, opencode, zed, "
        "continue, windsurf or kimi",
    )
    p.add_argument(
        "--scope",
        choices=("user", "project"),
        default=None,
        help="user: the files in your home directory (default); project: the files "
        "in the project directory, where the host has them",
    )
    p.add_argument(
        "--project-dir",
        metavar="DIR",
        help="project directory for --scope project (default: current directory)",
    )
    p.add_argument(
        "--config",
        metavar="PATH",
        help="write the MCP server entry to this file instead of the host's default",
    )
    p.add_argument(
        "--hooks-config",
        metavar="PATH",
        help="write the hooks to this file instead of the host's default",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print a unified diff of what would change; write nothing",
    )
