"""``engram watch``: keep the store current from native memory files (CLAUDE.md, AGENTS.md, ...).

One pass (``--once``, for cron) or a daemon: a first full pass, then watchdog events, debounced
per file, each settled change posted as one ``POST /v1/sync/files``. The gateway owns the import
ledger, never-clobber and conflict copies; this side discovers, parses and posts, and refuses to
run half-blind: a watch it cannot add (the inotify limit) stops it with a clear message.

Heavy imports (watchdog, the parsers) stay inside the handlers: ``engram --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import getpass
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from engram.backoff import doubled

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

DEBOUNCE_SECONDS = 0.3
"""A file is imported once its writes have been quiet this long (editor temp file + rename,
formatters, several saves in a row: one import)."""

RETRY_MAX_SECONDS = 60.0
"""While the gateway is down, the daemon retries a file after 1, 2, 4, ... up to this many s."""

OUTCOMES = ("imported", "unchanged", "skipped-conflict", "reconciled")
LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
SYNC_PATH = "/v1/sync/files"
STATE_FILE = "watch-state.json"
"""In the data dir: per root fingerprint, the files last synced from it (so a file deleted while
nothing watched has its memories retired on the next pass)."""

DESCRIPTION = """\
Import the agents' native memory files into Engram and keep them in sync (files -> Engram).

Sources, searched recursively under each PATH (.git, node_modules, .venv and build output are
skipped):
  claude-code  CLAUDE.md, CLAUDE.local.md, .claude/**/memory/*.md
  codex        AGENTS.md
  gemini       GEMINI.md
  cursor       .cursor/rules/**/*.mdc, .cursorrules
  copilot      .github/copilot-instructions.md, .github/instructions/**/*.instructions.md

Each file becomes facts: its sections and list items, with anchors made from their headings and
first words, so editing one line re-imports one fact. The gateway keeps an import ledger (one
row per file and fact, per watched root): an unchanged file writes nothing, a memory edited in
Engram since the last import is never overwritten (the sync logs a conflict, skips the file and
keeps the file's version as a copy in the 'sync-conflict' scope). Reconcile (make the file match
the Engram edit, or paste the copy into the memory), then run once with --force.

--once: one pass, one line per changed file and a summary; exit 1 if the gateway is unreachable
or a file was refused. Without --once: a daemon; a full pass, then every change is imported once
its writes settle; a deleted file retires its memories. Linux: one inotify watch per folder under
each PATH; if the limit (fs.inotify.max_user_watches) is reached it says so and exits 1 rather
than miss changes. Ctrl-C or SIGTERM stops it. See docs/memory-file-sync.md.
"""


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    p = sub.add_parser("watch", help="sync CLAUDE.md, AGENTS.md and other memory files",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(p)
    client_args(p)
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="folders to search (a repository checkout, ~/.claude, ...)")
    p.add_argument("--user", default=None,
                   help="whose memories these are (default: the OS user name)")
    p.add_argument("--scope", default="project",
                   help="scope of the imported memories (default: project)")
    p.add_argument("--project", default=None,
                   help="project of every PATH (default: ENGRAM_PROJECT, else each PATH's git "
                        "repository name)")
    p.add_argument("--once", action="store_true",
                   help="one pass over every file, a summary, then exit (for cron and checks)")
    p.add_argument("--force", action="store_true",
                   help="import even over memories edited in Engram since the last import "
                        "(after reconciling a conflict)")
    p.add_argument("--debounce", type=float, default=DEBOUNCE_SECONDS, metavar="SECONDS",
                   help=f"quiet time before a changed file is imported (default "
                        f"{DEBOUNCE_SECONDS})")
    return {"watch": cmd_watch}


def cmd_watch(args: argparse.Namespace) -> int:
    from engram.agents.contract import project_for
    from engram.client import client_for
    from engram.settings import settings_for

    roots = [Path(p).expanduser() for p in args.paths]
    bad = [str(p) for p in roots if not p.is_dir()]
    if bad:
        print(f"engram: not a folder: {', '.join(bad)} (pass the folder holding the memory "
              "files)", file=sys.stderr)
        return EXIT_USAGE
    settings = settings_for(args)
    roots = sorted({p.resolve() for p in roots})
    configured = args.project or settings.project
    syncer = Syncer(client_for(args, settings), user=args.user or getpass.getuser(),
                    scope=args.scope, force=args.force,
                    projects={root: project_for(str(root), configured) for root in roots},
                    out=sys.stderr, state=WatchState(settings.data_dir / STATE_FILE))
    if args.once:
        return run_once(syncer, roots)
    stop = threading.Event()
    daemon = Daemon(syncer, roots, debounce=args.debounce, out=sys.stderr)

    def stopping(*_: Any) -> None:
        stop.set()
        daemon.wake()

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return daemon.run(stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# --- what was synced -----------------------------------------------------------------------------

class WatchState:
    """``<data dir>/watch-state.json``: per root fingerprint, the files whose memories are in
    Engram (synced, not yet retired). A pass retires the recorded files it no longer finds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._roots: dict[str, dict[str, Any]] = {}
        try:
            loaded = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return  # the first run
        except (OSError, ValueError) as exc:
            print(f"engram watch: cannot read {path} ({exc}); starting afresh: files deleted "
                  "before this run are not retired", file=sys.stderr)
            return
        if isinstance(loaded, dict):
            self._roots = {k: v for k, v in loaded.items() if isinstance(v, dict)}

    def recorded(self, root: Path) -> list[Any]:
        """The sources last synced under ``root`` (resolved)."""
        from engram.watcher.memfiles import Source, root_fingerprint

        files = self._roots.get(root_fingerprint(root), {}).get("files", {})
        return [Source(str(v[0]), str(v[1]), root, str(k)) for k, v in sorted(files.items())
                if isinstance(v, list) and len(v) == 2]

    def update(self, source: Any, synced: bool) -> None:
        from engram.watcher.memfiles import root_fingerprint

        fp = root_fingerprint(source.root)
        entry = self._roots.setdefault(fp, {"root": str(source.root), "files": {}})
        files = entry.setdefault("files", {})
        before = files.get(source.relpath)
        if synced:
            files[source.relpath] = [source.tool, source.kind]
        else:
            files.pop(source.relpath, None)
        if files.get(source.relpath) != before:
            self._save(fp, entry)

    def _save(self, fp: str, entry: dict[str, Any]) -> None:
        """Re-read, replace this root's entry, write atomically: another `engram watch` of other
        roots sharing the data dir keeps its entries."""
        try:
            current = json.loads(self.path.read_text("utf-8"))
            current = current if isinstance(current, dict) else {}
        except (OSError, ValueError):
            current = {}
        current[fp] = entry
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            temp.write_text(json.dumps(current, indent=1, sort_keys=True), "utf-8")
            os.replace(temp, self.path)
        except OSError as exc:
            print(f"watch: cannot record what was synced in {self.path}: "
                  f"{exc.strerror or exc}", file=sys.stderr, flush=True)


def survey(roots: list[Path], state: WatchState | None) -> tuple[list[Any], dict[Any, Any],
                                                                  list[Any]]:
    """(the sources to sync, each file once under its innermost root; aliases: a source that is
    the same file as another, mapped to the one synced in its place; stale: sources recorded as
    synced that are gone or no longer synced, whose memories the pass retires)."""
    from engram.watcher.memfiles import discover_all, resolve_aliases

    found = list(discover_all(roots))
    aliases = resolve_aliases(found)
    sources = [s for s in found if s not in aliases]
    keep = set(sources)
    stale = [s for root in roots for s in (state.recorded(root) if state else [])
             if s not in keep]
    return sources, aliases, stale


# --- one file ------------------------------------------------------------------------------------

class GatewayFailed(Exception):
    """The gateway answered 5xx: worth retrying (the daemon does, with back-off)."""


class Syncer:
    """Posts one file and reports what the gateway did with it, one line per file that changed.
    Raises ``Unreachable`` and ``GatewayFailed`` (HTTP 5xx); every other failure is
    logged and counted as an error, one line, and the run goes on."""

    def __init__(self, client: Any, *, user: str, scope: str, force: bool,
                 projects: dict[Path, str], out: TextIO, state: WatchState | None = None) -> None:
        self.client = client
        self.user, self.scope, self.force = user, scope, force
        self.projects = projects
        self.out = out
        self.state = state
        self.totals: dict[str, int] = {name: 0 for name in (*OUTCOMES, "errors")}

    def log(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def label(self, source: Any) -> str:
        if len(self.projects) > 1:
            return f"{source.tool} {source.root.name}/{source.relpath}"
        return source.label

    def alias(self, source: Any, primary: Any) -> None:
        self.log(f"watch: {self.label(source)} is the same file as {self.label(primary)} (a "
                 f"link); imported once, as {self.label(primary)}")

    def sync(self, source: Any, *, gone_ok: bool = True, retire: bool = False) -> str:
        """Post ``source``; its outcome, ``"error"``, ``"skipped"`` (not a regular file) or
        ``"absent"`` (missing and not ``gone_ok``: nothing to retire). ``retire``: post it with
        no facts whatever is on disk (it is no longer synced as its own file)."""
        from engram.watcher.memfiles import FileTooLarge, NotRegularFile, read_source, sync_body

        data: bytes | None = None
        try:
            if not retire:
                data = read_source(source.path)
        except FileNotFoundError:
            if not gone_ok:
                return "absent"
        except NotRegularFile:
            self.log(f"watch: skipped {self.label(source)}: not a regular file")
            return "skipped"
        except FileTooLarge as exc:
            return self.error(source, f"{exc}; skipped")
        except OSError as exc:
            return self.error(source, f"cannot read {source.path}: {exc.strerror or exc}")
        try:
            body = sync_body(source, user=self.user, project=self.projects[source.root],
                             scope=self.scope, force=self.force, data=data)
        except FileTooLarge as exc:
            return self.error(source, f"{exc}; skipped")
        except Exception as exc:  # noqa: BLE001 (a parser bug costs one file, not the run)
            return self.error(source, f"cannot import it ({type(exc).__name__}: "
                                       f"{_one_line(exc)}); skipped")
        status, answer = self.client.request("POST", SYNC_PATH, body)
        if status == 404:
            return self.error(source, f"the gateway has no POST {SYNC_PATH} (HTTP 404): "
                                       "upgrade the server")
        if status >= 400 or not isinstance(answer, dict):
            from engram.wire import error_message, is_transient

            message = f"refused ({error_message(status, answer)})"
            if is_transient(status):
                raise GatewayFailed(message)
            return self.error(source, message)
        outcome = str(answer.get("outcome"))
        if outcome not in OUTCOMES:
            return self.error(source, f"unexpected answer: {answer}")
        self.totals[outcome] += 1
        self._report(source, outcome, answer, deleted=data is None,
                     retired=retire and source.path.exists())
        if self.state is not None and (data is not None or outcome != "skipped-conflict"):
            # a skipped retirement leaves its memories in Engram: still recorded
            self.state.update(source, synced=data is not None)
        return outcome

    def error(self, source: Any, message: str, *, count: bool = True) -> str:
        self.totals["errors"] += count
        self.log(f"sync error: {self.label(source)}: {message}")
        return "error"

    def _report(self, source: Any, outcome: str, answer: dict[str, Any], *,
                deleted: bool, retired: bool = False) -> None:
        label = self.label(source)
        counts = ", ".join(f"{answer[key]} {key}" for key in
                           ("created", "updated", "removed", "reconciled") if answer.get(key))
        if outcome == "imported":
            what = ("no longer synced as its own file" if retired
                    else "file deleted" if deleted else "")
            detail = "; ".join(filter(None, [what, counts]))
            self.log(f"synced {label}" + (f": {detail}" if detail else ""))
        elif outcome == "reconciled":
            self.log(f"reconciled {label}: ledger refreshed, Engram's version kept"
                     + (f" ({counts})" if counts else ""))
        for conflict in answer.get("conflicts") or []:
            copy = conflict.get("copyId")
            kept = (f"; the file's version is kept as memory {copy} (scope sync-conflict)"
                    if copy else "")
            self.log(f"sync conflict: {label}#{conflict.get('anchor')} edited in Engram since "
                     f"the last import; skipped (use --force after reconciling){kept}")

    def summary(self) -> str:
        t = self.totals
        return (f"watch: {sum(t.values())} files: {t['imported']} imported, {t['unchanged']} "
                f"unchanged, {t['skipped-conflict']} skipped-conflict, {t['reconciled']} "
                f"reconciled, {t['errors']} errors")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or "no message"


def run_once(syncer: Syncer, roots: list[Path]) -> int:
    from engram.client import Unreachable

    sources, aliases, stale = survey(roots, syncer.state)
    for alias, primary in sorted(aliases.items(), key=lambda a: (str(a[0].root), a[0].relpath)):
        syncer.alias(alias, primary)
    work = [(s, False) for s in sources] + [(s, True) for s in stale]
    for source, retire in work:
        try:
            syncer.sync(source, gone_ok=retire, retire=retire)
        except GatewayFailed as exc:
            syncer.error(source, str(exc))
        except Unreachable as exc:
            syncer.log(f"engram: the gateway is not answering ({exc}).\n  Start it with "
                       "`engram serve`, or point --url / ENGRAM_URL at it; nothing after "
                       f"{syncer.label(source)} was synced.")
            syncer.log(syncer.summary())
            return EXIT_FAILURE
    syncer.log(syncer.summary())
    return EXIT_FAILURE if syncer.totals["errors"] else EXIT_OK


# --- the daemon ----------------------------------------------------------------------------------

class WatchError(Exception):
    """The file watcher cannot (or can no longer) see every change: the daemon must stop."""


def limit_message(exc: OSError, where: str) -> str:
    """What limit was hit and how to raise it."""
    if exc.errno == errno.ENOSPC:
        name, example = "fs.inotify.max_user_watches", 524288
        why = "every folder under a watched PATH takes one watch (node_modules and .venv too)"
    else:
        name, example = "fs.inotify.max_user_instances", 1024
        why = ("each watching process takes an inotify instance (on macOS/BSD: an open file per "
               "watched file; raise `ulimit -n`)")
    try:
        current = Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        current = "unknown"
    return (f"engram: cannot watch {where}: {exc.strerror or exc} ({name} = {current}; {why}).\n"
            f"  Raise it:  sudo sysctl {name}={example}\n"
            f"  Keep it:   echo {name}={example} | sudo tee /etc/sysctl.d/60-engram-watch.conf\n"
            "  Or watch fewer or smaller folders, or run `engram watch --once` from cron.\n"
            "  Stopping rather than silently missing changes.")


@functools.cache
def checked_observer_class() -> type:
    """watchdog's inotify observer, minus what it swallows: it skips a folder whose watch cannot
    be added below a recursive root (the watch limit) and only logs a queue overflow. Here the
    first stops the daemon and the second triggers a rescan."""
    from watchdog.observers.api import BaseObserver
    from watchdog.observers.inotify import InotifyEmitter, InotifyObserver
    from watchdog.observers.inotify_c import InotifyFD

    class CheckedInotifyFD(InotifyFD):
        def __init__(self, on_limit: Callable[[OSError], None],
                     on_overflow: Callable[[], None]) -> None:
            super().__init__()
            self.on_limit, self.on_overflow = on_limit, on_overflow

        def add_callback(self, path: bytes, mask: Any, callback: Any, id_: Any) -> Any:
            try:
                return super().add_callback(path, mask, callback, id_)
            except OSError as exc:
                if exc.errno in LIMIT_ERRNOS:
                    self.on_limit(exc)
                raise

        def handle_event(self, event: Any) -> None:
            if event.is_queue_overflow:
                self.on_overflow()
            super().handle_event(event)

    class CheckedInotifyObserver(InotifyObserver):
        fd_class = CheckedInotifyFD

        def __init__(self, on_limit: Callable[[OSError], None],
                     on_overflow: Callable[[], None], *, timeout: float = 1.0) -> None:
            # InotifyObserver.__init__, with the checked inotify instance instead of its own.
            self._inotify_fd = self.fd_class(on_limit, on_overflow)
            self._inotify_fd.start()
            BaseObserver.__init__(self, InotifyEmitter, timeout=timeout,
                                  inotify_fd=self._inotify_fd)

    return CheckedInotifyObserver


def default_observer(on_limit: Callable[[OSError], None], on_overflow: Callable[[], None]) -> Any:
    try:
        return checked_observer_class()(on_limit, on_overflow)
    except ImportError:  # not Linux: FSEvents, ReadDirectoryChangesW or kqueue, all recursive
        from watchdog.observers import Observer

        return Observer()


class Daemon:
    """A first full pass, then one sync per file after its events settle; retries while the
    gateway is down; rescans after an inotify queue overflow; stops on ``stop``."""

    def __init__(self, syncer: Syncer, roots: list[Path], *, debounce: float = DEBOUNCE_SECONDS,
                 observer_factory: Callable[..., Any] = default_observer,
                 out: TextIO = sys.stderr) -> None:
        self.syncer = syncer
        self.roots = roots
        self.debounce = debounce
        self.observer_factory = observer_factory
        self.out = out
        self.ready = threading.Event()  # set after the first full pass
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._due: dict[Any, float] = {}  # source -> when to sync it
        self._known: set[Any] = set()  # sources seen on disk: a deletion is sent for these
        self._aliases: dict[Any, Any] = {}  # a source that is the same file as another -> it
        self._targets: dict[Path, set[Any]] = {}  # a link's target (no source) -> the links
        self._backoff: dict[Any, float] = {}  # source -> its back-off after an HTTP 5xx
        self._limit: OSError | None = None
        self._rescan = False
        self._retry = 0.0  # current back-off while the gateway is down; 0 when it answers

    # Called from watchdog's threads.
    def wake(self) -> None:
        self._wake.set()

    def touch(self, path: Path) -> None:
        from engram.watcher.memfiles import source_for

        source = source_for(self.roots, path)
        with self._lock:
            # a file some source links to: an edit of it is an edit of the source
            due = [*([source] if source is not None else []), *self._targets.get(path, ())]
            for each in due:
                self._due[each] = time.monotonic() + self.debounce
        if due:
            self._wake.set()

    def folder_appeared(self, folder: Path) -> None:
        from engram.watcher.memfiles import skipped_dir

        for dirpath, dirnames, filenames in os.walk(folder):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if not skipped_dir(here / d)]
            for name in filenames:
                self.touch(here / name)

    def folder_gone(self, folder: Path) -> None:
        with self._lock:
            gone = [s for s in self._known if folder in s.path.parents]
        for source in gone:
            self.touch(source.path)

    def on_limit(self, exc: OSError) -> None:
        with self._lock:
            self._limit = self._limit or exc
        self._wake.set()

    def on_overflow(self) -> None:
        with self._lock:
            self._rescan = True
        self._wake.set()

    @property
    def idle(self) -> bool:
        """No file waiting to be synced (for tests and status)."""
        with self._lock:
            return self.ready.is_set() and not self._due

    # The main thread.
    def run(self, stop: threading.Event) -> int:
        try:
            observer = self._start_observer()
        except WatchError as exc:
            self.syncer.log(str(exc))
            return EXIT_FAILURE
        try:
            names = ", ".join(map(str, self.roots))
            self.syncer.log(f"watch: watching {names} (debounce {self.debounce:g}s); Ctrl-C "
                            "stops")
            self._pass()
            self.ready.set()
            while not stop.is_set():
                self._check(observer)
                for source in self._pop_due():
                    if stop.is_set():
                        break
                    self._sync(source)
                self._wake.wait(self._next_wait())
                self._wake.clear()
        except WatchError as exc:
            self.syncer.log(str(exc))
            return EXIT_FAILURE
        finally:
            observer.stop()
            with contextlib.suppress(RuntimeError):
                observer.join(5)
        self.syncer.log(f"watch: stopped; {self.syncer.summary()[len('watch: '):]}")
        return EXIT_OK

    def _start_observer(self) -> Any:
        from watchdog.events import FileSystemEventHandler

        daemon = self

        class Events(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                # Our own reads open and close files: never a change.
                if event.event_type in ("opened", "closed_no_write"):
                    return
                src = Path(os.fsdecode(event.src_path)) if event.src_path else None
                dest = Path(os.fsdecode(event.dest_path)) if event.dest_path else None
                if event.is_directory:
                    if event.event_type in ("deleted", "moved") and src is not None:
                        daemon.folder_gone(src)
                    if event.event_type == "created" and src is not None:
                        daemon.folder_appeared(src)
                    if event.event_type == "moved" and dest is not None:
                        daemon.folder_appeared(dest)
                    return
                # An editor's save is a temp file moved onto the target: dest is the change.
                for path in (src, dest):
                    if path is not None:
                        daemon.touch(path)

        try:
            observer = self.observer_factory(self.on_limit, self.on_overflow)
            for root in self.roots:
                observer.schedule(Events(), str(root), recursive=True)
            observer.start()
        except OSError as exc:
            if exc.errno in LIMIT_ERRNOS:
                raise WatchError(limit_message(exc, ", ".join(map(str, self.roots)))) from None
            raise WatchError(f"engram: cannot watch {', '.join(map(str, self.roots))}: "
                             f"{exc.strerror or exc}") from None
        except NotImplementedError as exc:
            raise WatchError(f"engram: this platform cannot watch folders recursively ({exc}); "
                             "run `engram watch --once` from cron instead") from None
        try:
            self._check(observer)
        except WatchError:
            observer.stop()
            raise
        return observer

    def _check(self, observer: Any) -> None:
        with self._lock:
            limit, rescan, self._rescan = self._limit, self._rescan, False
        if limit is not None:
            raise WatchError(limit_message(limit, "every folder below "
                                           + ", ".join(map(str, self.roots))))
        if not observer.is_alive():
            raise WatchError("engram: the file watcher stopped unexpectedly; exiting so that "
                             "a supervisor restarts it")
        if rescan:
            self.syncer.log("watch: the inotify queue overflowed; rescanning every file")
            self._rescan_all()

    def _pass(self) -> None:
        """Every file once, under its innermost root; a file two sources name (a link) once;
        the files recorded as synced and gone since (the daemon was stopped) retired."""
        sources, aliases, stale = survey(self.roots, self.syncer.state)
        with self._lock:
            self._known.update(sources)
            self._aliases.update(aliases)
        for alias, primary in sorted(aliases.items(),
                                     key=lambda a: (str(a[0].root), a[0].relpath)):
            self.syncer.alias(alias, primary)
        for source in sources:
            self._sync(source)
        for source in stale:
            self._sync(source, retire=True)

    def _rescan_all(self) -> None:
        sources, aliases, _ = survey(self.roots, None)
        found = {*sources, *aliases}
        with self._lock:
            stale = self._known - found
        for source in found | stale:
            self.touch(source.path)

    def _primary(self, source: Any) -> Any:
        """The source imported in place of ``source`` when both are the same file (a link),
        else None. Remembers a link to a file that is no source, so its edits reach the link."""
        from engram.watcher.memfiles import resolve_aliases, source_for

        real = Path(os.path.realpath(source.path))
        if real == source.path or not real.exists():
            return None
        target = source_for(self.roots, real)
        if target is not None and target != source:
            return target
        with self._lock:
            peers = [k for k in self._known if k != source
                     and os.path.realpath(k.path) == str(real)]
            if not peers:
                self._targets.setdefault(real, set()).add(source)
        return resolve_aliases([source, *peers]).get(source)

    def _pop_due(self) -> list[Any]:
        now = time.monotonic()
        with self._lock:
            due = [s for s, when in self._due.items() if when <= now]
            for source in due:
                del self._due[source]
        return sorted(due, key=lambda s: (str(s.root), s.relpath))

    def _next_wait(self) -> float:
        with self._lock:
            if not self._due:
                return 1.0
            return max(0.0, min(1.0, min(self._due.values()) - time.monotonic()))

    def _sync(self, source: Any, *, retire: bool = False) -> None:
        from engram.client import Unreachable

        primary = None if retire else self._primary(source)
        with self._lock:
            known = source in self._known
            if primary is not None:
                seen = self._aliases.get(source) == primary
                self._aliases[source] = primary
                self._known.discard(source)
                pending = primary not in self._known and primary not in self._due
            else:
                self._aliases.pop(source, None)
        if primary is not None:  # the same file as another source: imported once, as that one
            if not seen:
                self.syncer.alias(source, primary)
            if pending:
                self.touch(primary.path)
            recorded = self.syncer.state is not None and source in self.syncer.state.recorded(
                source.root)
            if not (known or recorded):
                return
            retire = True  # it was imported as its own file: its memories go
        try:
            outcome = self.syncer.sync(source, gone_ok=known or retire, retire=retire)
        except GatewayFailed as exc:
            delay = doubled(self._backoff.get(source, 0.0), 1.0, RETRY_MAX_SECONDS)
            self.syncer.error(source, f"{exc}; retrying in {delay:g}s",
                              count=source not in self._backoff)
            self._backoff[source] = delay
            with self._lock:
                self._due.setdefault(source, time.monotonic() + delay)
            return
        except Unreachable as exc:
            if not self._retry:
                self.syncer.log(f"watch: the gateway is not answering ({exc}); retrying "
                                "(start it with `engram serve`)")
            self._retry = doubled(self._retry, 1.0, RETRY_MAX_SECONDS)
            with self._lock:
                self._due.setdefault(source, time.monotonic() + self._retry)
            return
        if self._retry:
            self.syncer.log("watch: the gateway answers again")
            self._retry = 0.0
        self._backoff.pop(source, None)
        if retire:
            return
        with self._lock:
            if source.path.exists():
                self._known.add(source)
            elif outcome != "error":
                self._known.discard(source)
