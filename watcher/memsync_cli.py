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
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

DEBOUNCE_SECONDS = 0.3
"""A file is imported once its writes have been quiet this long (editor temp file + rename,
formatters, several saves in a row: one import)."""

RETRY_MAX_SECONDS = 60.0
"""While the gateway is down, the daemon retries a file after 1, 2, 4, ... up to this many s."""

OUTCOMES = ("imported", "unchanged", "skipped-conflict", "reconciled")
LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
SYNC_PATH = "/v1/sync/files"

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
    from agents.contract import project_for
    from engram.cli import client_for, settings_for

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
                    out=sys.stderr)
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


# --- one file ------------------------------------------------------------------------------------

class Syncer:
    """Posts one file and reports what the gateway did with it, one line per file that changed.
    Raises ``GatewayUnreachable``; every other failure is logged and counted as an error."""

    def __init__(self, client: Any, *, user: str, scope: str, force: bool,
                 projects: dict[Path, str], out: TextIO) -> None:
        self.client = client
        self.user, self.scope, self.force = user, scope, force
        self.projects = projects
        self.out = out
        self.totals: dict[str, int] = {name: 0 for name in (*OUTCOMES, "errors")}

    def log(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def label(self, source: Any) -> str:
        if len(self.projects) > 1:
            return f"{source.tool} {source.root.name}/{source.relpath}"
        return source.label

    def sync(self, source: Any, *, gone_ok: bool = True) -> str:
        """Post ``source``; its outcome, ``"error"``, or ``"absent"`` (missing and not
        ``gone_ok``: nothing to retire)."""
        from watcher.memfiles import FileTooLarge, sync_body

        try:
            data: bytes | None = source.path.read_bytes()
        except FileNotFoundError:
            if not gone_ok:
                return "absent"
            data = None
        except OSError as exc:
            return self._error(source, f"cannot read {source.path}: {exc.strerror or exc}")
        try:
            body = sync_body(source, user=self.user, project=self.projects[source.root],
                             scope=self.scope, force=self.force, data=data)
        except FileTooLarge as exc:
            return self._error(source, f"{exc}; skipped")
        status, answer = self.client.request("POST", SYNC_PATH, body)
        if status == 404:
            return self._error(source, f"the gateway has no POST {SYNC_PATH} (HTTP 404): "
                                       "upgrade the server")
        if status >= 400 or not isinstance(answer, dict):
            error = answer.get("error", {}) if isinstance(answer, dict) else {}
            details = error.get("details")
            return self._error(source, f"refused (HTTP {status}): {error.get('message', answer)}"
                                       + (f" {details}" if details else ""))
        outcome = str(answer.get("outcome"))
        if outcome not in OUTCOMES:
            return self._error(source, f"unexpected answer: {answer}")
        self.totals[outcome] += 1
        self._report(source, outcome, answer, deleted=data is None)
        return outcome

    def _error(self, source: Any, message: str) -> str:
        self.totals["errors"] += 1
        self.log(f"sync error: {self.label(source)}: {message}")
        return "error"

    def _report(self, source: Any, outcome: str, answer: dict[str, Any], *,
                deleted: bool) -> None:
        label = self.label(source)
        counts = ", ".join(f"{answer[key]} {key}" for key in
                           ("created", "updated", "removed", "reconciled") if answer.get(key))
        if outcome == "imported":
            what = "file deleted" if deleted else ""
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


def run_once(syncer: Syncer, roots: list[Path]) -> int:
    from engram.client import GatewayUnreachable
    from watcher.memfiles import discover

    for root in roots:
        for source in discover(root):
            try:
                syncer.sync(source, gone_ok=False)
            except GatewayUnreachable as exc:
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
        self._limit: OSError | None = None
        self._rescan = False
        self._retry = 0.0  # current back-off while the gateway is down; 0 when it answers

    # Called from watchdog's threads.
    def wake(self) -> None:
        self._wake.set()

    def touch(self, path: Path) -> None:
        from watcher.memfiles import source_for

        source = source_for(self.roots, path)
        if source is not None:
            with self._lock:
                self._due[source] = time.monotonic() + self.debounce
            self._wake.set()

    def folder_appeared(self, folder: Path) -> None:
        from watcher.memfiles import skipped_dir

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
        from watcher.memfiles import discover

        for root in self.roots:
            for source in discover(root):
                with self._lock:
                    self._known.add(source)
                self._sync(source)

    def _rescan_all(self) -> None:
        from watcher.memfiles import discover

        found = {source for root in self.roots for source in discover(root)}
        with self._lock:
            stale = self._known - found
        for source in found | stale:
            self.touch(source.path)

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

    def _sync(self, source: Any) -> None:
        from engram.client import GatewayUnreachable

        with self._lock:
            known = source in self._known
        try:
            outcome = self.syncer.sync(source, gone_ok=known)
        except GatewayUnreachable as exc:
            if not self._retry:
                self.syncer.log(f"watch: the gateway is not answering ({exc}); retrying "
                                "(start it with `engram serve`)")
            self._retry = min(RETRY_MAX_SECONDS, max(1.0, self._retry * 2))
            with self._lock:
                self._due.setdefault(source, time.monotonic() + self._retry)
            return
        if self._retry:
            self.syncer.log("watch: the gateway answers again")
            self._retry = 0.0
        with self._lock:
            if source.path.exists():
                self._known.add(source)
            elif outcome != "error":
                self._known.discard(source)
