"""The `engram watch` daemon: a first full pass, then watchdog events, debounced per file, each
settled change synced by the ``Syncer``; a gateway that fails or is down is retried with
backoff. It refuses to run half-blind: a watch it cannot add (the inotify limit) stops it with a
clear message (``checked_observer_class`` makes watchdog say so instead of dropping it)."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from engram.backoff import doubled
from engram.watcher.syncer import GatewayFailed, Syncer, survey

EXIT_OK, EXIT_FAILURE = 0, 1

DEBOUNCE_SECONDS = 0.3
"""A file is imported once its writes have been quiet this long (editor temp file + rename,
formatters, several saves in a row: one import)."""

RETRY_MAX_SECONDS = 60.0
"""While the gateway is down, the daemon retries a file after 1, 2, 4, ... up to this many s."""

LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)


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
        why = (
            "each watching process takes an inotify instance (on macOS/BSD: an open file per "
            "watched file; raise `ulimit -n`)"
        )
    try:
        current = Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        current = "unknown"
    return (
        f"engram: cannot watch {where}: {exc.strerror or exc} ({name} = {current}; {why}).\n"
        f"  Raise it:  sudo sysctl {name}={example}\n"
        f"  Keep it:   echo {name}={example} | sudo tee /etc/sysctl.d/60-engram-watch.conf\n"
        "  Or watch fewer or smaller folders, or run `engram watch --once` from cron.\n"
        "  Stopping rather than silently missing changes."
    )


@functools.cache
def checked_observer_class() -> type:
    """watchdog's inotify observer, minus what it swallows: it skips a folder whose watch cannot
    be added below a recursive root (the watch limit) and only logs a queue overflow. Here the
    first stops the daemon and the second triggers a rescan."""
    from watchdog.observers.api import BaseObserver
    from watchdog.observers.inotify import InotifyEmitter, InotifyObserver
    from watchdog.observers.inotify_c import InotifyFD

    class CheckedInotifyFD(InotifyFD):
        def __init__(
            self, on_limit: Callable[[OSError], None], on_overflow: Callable[[], None]
        ) -> None:
            # A folder created inside a recursive watch can be added twice (watchdog's walk of
            # the new folder, then the folder's own create event): the same callback replaces
            # itself, and watchdog 7 says so with a RuntimeWarning on the user's terminal.
            # Nothing is wrong. Installed with each watch, not once per process: whoever reset
            # the filters since (pytest does, per test) gets it back; an identical filter
            # replaces itself, so they do not pile up.
            warnings.filterwarnings(
                "ignore",
                message=r"Callback with id .* already exists for watch",
                category=RuntimeWarning,
            )
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

        def __init__(
            self,
            on_limit: Callable[[OSError], None],
            on_overflow: Callable[[], None],
            *,
            timeout: float = 1.0,
        ) -> None:
            # InotifyObserver.__init__, with the checked inotify instance instead of its own.
            self._inotify_fd = self.fd_class(on_limit, on_overflow)
            self._inotify_fd.start()
            BaseObserver.__init__(
                self, InotifyEmitter, timeout=timeout, inotify_fd=self._inotify_fd
            )

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

    def __init__(
        self,
        syncer: Syncer,
        roots: list[Path],
        *,
        debounce: float = DEBOUNCE_SECONDS,
        observer_factory: Callable[..., Any] = default_observer,
        out: TextIO = sys.stderr,
    ) -> None:
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
            self.syncer.log(f"watch: watching {names} (debounce {self.debounce:g}s); Ctrl-C stops")
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
        self.syncer.log(f"watch: stopped; {self.syncer.summary()[len('watch: ') :]}")
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
            raise WatchError(
                f"engram: cannot watch {', '.join(map(str, self.roots))}: {exc.strerror or exc}"
            ) from None
        except NotImplementedError as exc:
            raise WatchError(
                f"engram: this platform cannot watch folders recursively ({exc}); "
                "run `engram watch --once` from cron instead"
            ) from None
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
            raise WatchError(
                limit_message(limit, "every folder below " + ", ".join(map(str, self.roots)))
            )
        if not observer.is_alive():
            raise WatchError(
                "engram: the file watcher stopped unexpectedly; exiting so that "
                "a supervisor restarts it"
            )
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
        for alias, primary in sorted(aliases.items(), key=lambda a: (str(a[0].root), a[0].relpath)):
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
            peers = [
                k for k in self._known if k != source and os.path.realpath(k.path) == str(real)
            ]
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
                source.root
            )
            if not (known or recorded):
                return
            retire = True  # it was imported as its own file: its memories go
        try:
            outcome = self.syncer.sync(source, gone_ok=known or retire, retire=retire)
        except GatewayFailed as exc:
            delay = doubled(self._backoff.get(source, 0.0), 1.0, RETRY_MAX_SECONDS)
            self.syncer.error(
                source, f"{exc}; retrying in {delay:g}s", count=source not in self._backoff
            )
            self._backoff[source] = delay
            with self._lock:
                self._due.setdefault(source, time.monotonic() + delay)
            return
        except Unreachable as exc:
            if not self._retry:
                self.syncer.log(
                    f"watch: the gateway is not answering ({exc}); retrying "
                    "(start it with `engram serve`)"
                )
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
