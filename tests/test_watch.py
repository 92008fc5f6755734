"""`engram watch`: the daemon (debounce, recursive folders, deletions, the inotify limit) against a
real gateway served in-process (its requests recorded), and the runbook's three checks against a
real `engram serve`."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from watchdog.observers.inotify_c import InotifyFD

from engram.client import Client
from engram.watcher.daemon import Daemon, checked_observer_class
from engram.watcher.memfiles import root_fingerprint
from engram.watcher.syncer import Syncer, WatchState, run_once
from tests.support import ENGRAM, REPO, Cluster, free_port, wait_for


class RecordingGateway:
    """A real embedded gateway (the Flask app, its store and ledger) served over HTTP by waitress
    in a thread, with a hook that records each POST /v1/sync/files body the daemon sends, so a
    test can count the imports a burst of writes caused."""

    def __init__(self, tmp: Path) -> None:
        from flask import request
        from waitress.server import create_server

        from engram.cli.server import build_gateway
        from tests.conftest import make_settings

        self.bodies: list[dict[str, Any]] = []
        self.failures = 0  # the next this-many sync requests answer 503 (see fail_next)
        self.gateway = build_gateway(make_settings(tmp), start_worker=False)
        self.secret = self.gateway.secret

        @self.gateway.app.before_request
        def unavailable() -> Any:
            if request.path == "/v1/sync/files" and self.failures > 0:
                self.failures -= 1
                return {"error": {"code": "unavailable", "message": "database is locked"}}, 503
            return None

        @self.gateway.app.after_request
        def record(response: Any) -> Any:
            if request.path == "/v1/sync/files" and response.status_code == 200:
                self.bodies.append(request.get_json())
            return response

        self.server = create_server(self.gateway.app, host="127.0.0.1", port=0, threads=4)
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self.closing = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            self.server.run()
        except OSError:
            if not self.closing:  # only close() shutting the sockets under select is expected
                raise

    def posts(self, relpath: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b["relpath"] == relpath]

    def posts_of(self, path: Path) -> list[dict[str, Any]]:
        """Every post of the file at ``path``, under whichever root."""
        return [b for b in self.bodies if Path(b["path"]) == path.resolve()]

    def close(self) -> None:
        self.closing = True
        self.server.close()
        self.server.task_dispatcher.shutdown()
        self.thread.join(10)
        self.gateway.close()


@pytest.fixture
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingGateway]:
    # its own dir: the daemon watches tmp_path, and the store's folders must not count there
    recording = RecordingGateway(tmp_path_factory.mktemp("gateway"))
    yield recording
    recording.close()


def syncer_for(
    gateway: RecordingGateway,
    root: Path | list[Path],
    out: StringIO,
    state: WatchState | None = None,
) -> Syncer:
    roots = root if isinstance(root, list) else [root]
    return Syncer(
        Client(gateway.url, gateway.secret),
        user="alice",
        scope="project",
        force=False,
        projects={r.resolve(): "acme-api" for r in roots},
        out=out,
        state=state,
    )


class Running:
    def __init__(self, daemon: Daemon, out: StringIO) -> None:
        self.daemon, self.out = daemon, out
        self.stop = threading.Event()
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.code = self.daemon.run(self.stop)

    def settled(self) -> bool:
        return self.daemon.idle


@contextlib.contextmanager
def running(
    gateway: RecordingGateway,
    root: Path | list[Path],
    *,
    state: WatchState | None = None,
    **kw: Any,
) -> Iterator[Running]:
    out = StringIO()
    roots = sorted(r.resolve() for r in (root if isinstance(root, list) else [root]))
    daemon = Daemon(syncer_for(gateway, roots, out, state), roots, debounce=0.3, out=out, **kw)
    run = Running(daemon, out)
    run.thread.start()
    wait_for(lambda: daemon.ready.is_set() or run.code is not None, message="the first pass")
    try:
        yield run
    finally:
        run.stop.set()
        daemon.wake()
        run.thread.join(10)
        assert not run.thread.is_alive()


def test_a_burst_and_an_editor_save_are_each_one_import(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    target = tmp_path / "AGENTS.md"
    target.write_text("## Build\n\n- make check\n")
    with running(gateway, tmp_path) as run:
        assert len(gateway.posts("AGENTS.md")) == 1  # the first full pass
        # An editor's save: write a temp file, rename it over the target (a `moved` event).
        temp = tmp_path / ".AGENTS.md.swp"
        temp.write_text("## Build\n\n- make check\n- make e2e\n")
        os.replace(temp, target)
        wait_for(lambda: len(gateway.posts("AGENTS.md")) == 2, message="the save's import")
        wait_for(run.settled, message="the daemon to settle")
        assert len(gateway.posts("AGENTS.md")) == 2
        assert [f["content"] for f in gateway.posts("AGENTS.md")[-1]["facts"]][-1] == "make e2e"
        # A burst of writes (a formatter rewriting in steps): one import after it settles.
        with open(target, "a") as handle:
            for n in range(20):
                handle.write(f"- step {n}\n")
                handle.flush()
        wait_for(lambda: len(gateway.posts("AGENTS.md")) == 3, message="the burst's import")
        wait_for(run.settled, message="the daemon to settle")
        assert len(gateway.posts("AGENTS.md")) == 3
        # two items and 20 steps; the section holds only bullets: no fact of its own
        assert len(gateway.posts("AGENTS.md")[-1]["facts"]) == 2 + 20
    assert run.code == 0
    assert "synced codex AGENTS.md" in run.out.getvalue()


def test_folders_made_fast_inside_a_watch_raise_no_warning(tmp_path: Path) -> None:
    """watchdog 7 adds a folder made inside a recursive watch twice when its children come
    quickly (its walk, then the folder's own event) and warns on stderr each time; nothing is
    wrong, so `engram watch` says nothing. Without the filter this made ~130 warnings; with it
    installed once per process, every test after the first that made the class showed them."""
    import time
    import warnings

    from watchdog.events import FileSystemEventHandler

    observer_class = checked_observer_class()  # made before the filters are reset, as in a suite
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        observer = observer_class(lambda exc: None, lambda: None)
        # watchdog's own words, raised here so the check does not hang on the race below
        warnings.warn(
            "Callback with id '1' already exists for watch w. It will be Overwritten.",
            RuntimeWarning,
            stacklevel=1,
        )
        observer.schedule(FileSystemEventHandler(), str(tmp_path), recursive=True)
        observer.start()
        try:
            for n in range(200):
                (tmp_path / f"n{n}" / "a" / "b" / "c").mkdir(parents=True)
            time.sleep(1.0)
        finally:
            observer.stop()
            observer.join()
    assert [str(w.message)[:60] for w in caught if w.category is RuntimeWarning] == []


def test_new_nested_folders_are_watched(gateway: RecordingGateway, tmp_path: Path) -> None:
    with running(gateway, tmp_path):
        assert gateway.bodies == []
        created = [
            ".github/instructions/lang/go/go.instructions.md",
            ".cursor/rules/backend/db/sql.mdc",
            ".claude/agents/x/memory/notes.md",
            "packages/web/CLAUDE.md",
        ]
        for relpath in created:
            path = tmp_path / relpath
            path.parent.mkdir(parents=True)
            path.write_text("- a rule\n")
        (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
        (tmp_path / "node_modules" / "pkg" / "AGENTS.md").write_text("- not ours\n")
        wait_for(
            lambda: {b["relpath"] for b in gateway.bodies} >= set(created),
            message="every new file's import",
        )
        tools = {b["relpath"]: b["tool"] for b in gateway.bodies}
        assert tools == {
            created[0]: "copilot",
            created[1]: "cursor",
            created[2]: "claude-code",
            created[3]: "claude-code",
        }


def test_a_deleted_file_is_sent_with_no_facts(gateway: RecordingGateway, tmp_path: Path) -> None:
    (tmp_path / "GEMINI.md").write_text("- use 2 spaces\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "AGENTS.md").write_text("- nested\n")
    with running(gateway, tmp_path) as run:
        (tmp_path / "GEMINI.md").unlink()
        wait_for(lambda: len(gateway.posts("GEMINI.md")) == 2, message="the deletion")
        assert gateway.posts("GEMINI.md")[-1]["facts"] == []
        # A folder moved out of the tree takes its files with it.
        (tmp_path / "rules").rename(tmp_path.parent / f"{tmp_path.name}-moved-away")
        wait_for(lambda: len(gateway.posts("rules/AGENTS.md")) == 2, message="the folder move")
        assert gateway.posts("rules/AGENTS.md")[-1]["facts"] == []
        wait_for(run.settled, message="the daemon to settle")
    assert "synced codex rules/AGENTS.md: file deleted" in run.out.getvalue()


def test_an_overflow_rescans_every_file(gateway: RecordingGateway, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("- one\n")
    with running(gateway, tmp_path) as run:
        run.daemon.on_overflow()
        wait_for(lambda: len(gateway.posts("AGENTS.md")) == 2, message="the rescan")
    assert "overflowed; rescanning" in run.out.getvalue()


# --- fixes: nested roots, links, odd files, 5xx, deletions while stopped ------------------------


def once(
    gateway: RecordingGateway,
    roots: list[Path],
    state: WatchState | None = None,
) -> tuple[int, str]:
    out = StringIO()
    resolved = sorted(r.resolve() for r in roots)
    code = run_once(syncer_for(gateway, resolved, out, state), resolved)
    return code, out.getvalue()


def test_nested_roots_sync_each_file_once_under_the_innermost_root(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    outer, inner = tmp_path / "r3", tmp_path / "r3" / "sub"
    (outer / "AGENTS.md").parent.mkdir()
    (outer / "AGENTS.md").write_text("- outer\n")
    inner.mkdir()
    (inner / "AGENTS.md").write_text("- inner\n")
    code, out = once(gateway, [outer, inner])
    assert code == 0, out
    assert [b["root"] for b in gateway.posts_of(inner / "AGENTS.md")] == [
        root_fingerprint(inner)
    ]  # never also as r3's sub/AGENTS.md
    gateway.bodies.clear()
    with running(gateway, [outer, inner]) as run:
        assert len(gateway.posts_of(inner / "AGENTS.md")) == 1
        assert len(gateway.posts_of(outer / "AGENTS.md")) == 1
        (inner / "AGENTS.md").write_text("- inner, edited\n")
        wait_for(lambda: len(gateway.posts_of(inner / "AGENTS.md")) == 2, message="the edit")
        wait_for(run.settled, message="the daemon to settle")
        (inner / "AGENTS.md").unlink()
        wait_for(lambda: len(gateway.posts_of(inner / "AGENTS.md")) == 3, message="the deletion")
        wait_for(run.settled, message="the daemon to settle")
    posts = gateway.posts_of(inner / "AGENTS.md")
    assert {(b["root"], b["relpath"]) for b in posts} == {(root_fingerprint(inner), "AGENTS.md")}
    assert posts[-1]["facts"] == []


def test_claude_md_linked_to_agents_md_is_imported_once(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("- Run make check\n")
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    code, out = once(gateway, [tmp_path])
    assert code == 0, out
    assert [b["relpath"] for b in gateway.bodies] == ["AGENTS.md"]
    assert (
        "watch: claude-code CLAUDE.md is the same file as codex AGENTS.md (a link); "
        "imported once, as codex AGENTS.md"
    ) in out
    gateway.bodies.clear()
    with running(gateway, tmp_path) as run:
        (tmp_path / "AGENTS.md").write_text("- Run make check\n- Run make e2e\n")
        wait_for(lambda: len(gateway.posts("AGENTS.md")) == 2, message="the edit")
        wait_for(run.settled, message="the daemon to settle")
        # A file that stops being a link is its own source again; a new link is no import.
        (tmp_path / "CLAUDE.md").unlink()
        (tmp_path / "CLAUDE.md").write_text("- Claude only\n")
        wait_for(lambda: gateway.posts("CLAUDE.md"), message="the real CLAUDE.md")
        (tmp_path / "GEMINI.md").symlink_to("AGENTS.md")
        wait_for(
            lambda: (
                "claude-code CLAUDE.md" in run.out.getvalue()
                and "gemini GEMINI.md is the same file" in run.out.getvalue()
            ),
            message="the new link",
        )
        wait_for(run.settled, message="the daemon to settle")
    assert [b["relpath"] for b in gateway.bodies] == ["AGENTS.md", "AGENTS.md", "CLAUDE.md"]


def test_a_file_that_becomes_a_link_has_its_own_memories_retired(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    state = WatchState(tmp_path / "data" / "watch-state.json")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "AGENTS.md").write_text("- Run make check\n")
    (root / "CLAUDE.md").write_text("- Run make check\n")
    assert once(gateway, [root], state)[0] == 0
    (root / "CLAUDE.md").unlink()
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    code, out = once(gateway, [root], state)
    assert code == 0, out
    assert gateway.posts("CLAUDE.md")[-1]["facts"] == []
    assert "synced claude-code CLAUDE.md: no longer synced as its own file; 1 removed" in out


def test_an_unusable_at_token_or_a_failing_file_is_one_error_and_the_run_goes_on(
    gateway: RecordingGateway, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "CLAUDE.md").write_text(f"- See @{'x' * 300} first\n")  # ENAMETOOLONG
    (tmp_path / "GEMINI.md").write_text("- fine\n")
    code, out = once(gateway, [tmp_path])
    assert code == 0, out
    assert {b["relpath"] for b in gateway.bodies} == {"CLAUDE.md", "GEMINI.md"}
    with running(gateway, tmp_path) as run:  # the daemon's first pass survives it too
        assert run.code is None
    # Whatever else a parser raises costs that file, one line, and never the run.
    from engram.watcher import memfiles

    def broken(text: str, source: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/x/secret/\nnotes.md")

    monkeypatch.setitem(memfiles.IMPORTERS, "claude-md", broken)
    (tmp_path / "GEMINI.md").write_text("- fine, edited\n")
    code, out = once(gateway, [tmp_path])
    assert code == 1
    assert (
        "sync error: claude-code CLAUDE.md: cannot import it (PermissionError: [Errno 13] "
        "Permission denied: '/x/secret/\\nnotes.md'); skipped" in out
    )
    assert "Traceback" not in out and "synced gemini GEMINI.md" in out
    assert "1 imported, 0 unchanged, 0 skipped-conflict, 0 reconciled, 1 errors" in out


def test_a_5xx_answer_is_retried_with_back_off(gateway: RecordingGateway, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("- one\n")
    gateway.failures = 2
    with running(gateway, tmp_path) as run:
        wait_for(lambda: gateway.posts("AGENTS.md"), timeout=10, message="the retried import")
        wait_for(run.settled, message="the daemon to settle")
    out = run.out.getvalue()
    assert (
        "sync error: codex AGENTS.md: refused (HTTP 503: database is locked); retrying in 1s" in out
    )
    assert "retrying in 2s" in out and "synced codex AGENTS.md: 1 created" in out
    assert run.daemon.syncer.totals["errors"] == 1  # one failure episode, one error


def test_a_fifo_named_like_a_source_is_skipped_not_read(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")  # no writer: reading it would block forever
    (tmp_path / "GEMINI.md").write_text("- fine\n")
    with running(gateway, tmp_path) as run:
        assert run.code is None and gateway.posts("GEMINI.md")
    assert "watch: skipped codex AGENTS.md: not a regular file" in run.out.getvalue()
    assert gateway.posts("AGENTS.md") == []


def test_files_deleted_while_nothing_watched_are_retired_on_the_next_pass(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    state_file = tmp_path / "data" / "watch-state.json"
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    for relpath in ("AGENTS.md", "GEMINI.md", "docs/CLAUDE.md"):
        (root / relpath).write_text(f"- from {relpath}\n")
    assert once(gateway, [root], WatchState(state_file))[0] == 0
    (root / "GEMINI.md").unlink()  # between two --once runs
    code, out = once(gateway, [root], WatchState(state_file))
    assert code == 0, out
    assert gateway.posts("GEMINI.md")[-1]["facts"] == []
    assert "synced gemini GEMINI.md: file deleted; 1 removed" in out
    assert len(gateway.posts("GEMINI.md")) == 2
    assert once(gateway, [root], WatchState(state_file))[0] == 0
    assert len(gateway.posts("GEMINI.md")) == 2  # retired once, then forgotten
    # While the daemon was stopped.
    with running(gateway, root, state=WatchState(state_file)):
        pass
    (root / "docs" / "CLAUDE.md").unlink()
    with running(gateway, root, state=WatchState(state_file)) as run:
        wait_for(run.settled, message="the first pass")
    assert gateway.posts("docs/CLAUDE.md")[-1]["facts"] == []
    assert "synced claude-code docs/CLAUDE.md: file deleted; 1 removed" in run.out.getvalue()
    recorded = WatchState(state_file).recorded(root.resolve())
    assert [s.relpath for s in recorded] == ["AGENTS.md"]


# --- the inotify limit -------------------------------------------------------------------------


def limited_observer(max_watches: int) -> type:
    """The daemon's real inotify observer on an inotify instance that refuses watches past
    ``max_watches`` exactly as the kernel does (OSError ENOSPC from inotify_add_watch)."""
    base: Any = checked_observer_class()
    checked_fd = base.fd_class

    class KernelLimit(InotifyFD):
        def add_callback(self, path: bytes, mask: Any, callback: Any, id_: Any) -> Any:
            if len(self._watch_for_wd) >= max_watches:
                raise OSError(errno.ENOSPC, "inotify watch limit reached")
            return super().add_callback(path, mask, callback, id_)

    class LimitedFD(checked_fd, KernelLimit):  # type: ignore[misc, valid-type]
        pass

    class Limited(base):
        fd_class = LimitedFD

    return Limited


def test_a_root_that_cannot_be_watched_stops_with_the_limit_and_the_fix(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    class NoWatches(checked_observer_class()):  # type: ignore[misc]
        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    (tmp_path / "AGENTS.md").write_text("- one\n")
    with running(gateway, tmp_path, observer_factory=NoWatches) as run:
        wait_for(lambda: run.code is not None, message="the daemon to exit")
    assert run.code == 1
    out = run.out.getvalue()
    assert "inotify watch limit reached (fs.inotify.max_user_watches = " in out
    assert "sudo sysctl fs.inotify.max_user_watches=" in out
    assert gateway.bodies == []  # it stopped before syncing anything half-blind


def test_a_subfolder_over_the_limit_at_start_is_not_silently_skipped(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    for relpath in ("a/b/c", "d"):
        (tmp_path / relpath).mkdir(parents=True)
    # watchdog itself swallows a failed watch below the root; the daemon must not.
    with running(gateway, tmp_path, observer_factory=limited_observer(2)) as run:
        wait_for(lambda: run.code is not None, message="the daemon to exit")
    assert run.code == 1
    assert "fs.inotify.max_user_watches" in run.out.getvalue()


def test_a_new_folder_over_the_limit_stops_the_daemon(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    with running(gateway, tmp_path, observer_factory=limited_observer(2)) as run:
        assert run.code is None  # root and docs/: exactly at the limit
        (tmp_path / ".github" / "instructions").mkdir(parents=True)
        wait_for(lambda: run.code is not None, message="the daemon to exit")
    assert run.code == 1
    assert "cannot watch every folder below" in run.out.getvalue()


# --- the command -------------------------------------------------------------------------------


def cli_env(tmp_path: Path, secret: str = "unused") -> dict[str, str]:
    return {
        **os.environ,
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_CONFIG_DIR": str(tmp_path / "config"),
        "ENGRAM_SECRET": secret,
    }


def test_once_posts_every_file_and_prints_a_summary(
    gateway: RecordingGateway, tmp_path: Path
) -> None:
    repo = tmp_path / "acme-api"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("- one\n")
    (repo / "CLAUDE.md").write_text("- two\n")
    command = [ENGRAM, "watch", "--once", "--url", gateway.url, "--user", "bob", str(repo)]
    done = subprocess.run(
        command,
        env=cli_env(tmp_path, gateway.secret),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "synced codex AGENTS.md: 1 created" in done.stderr
    assert (
        "watch: 2 files: 2 imported, 0 unchanged, 0 skipped-conflict, 0 reconciled, "
        "0 errors" in done.stderr
    )
    assert {(b["user"], b["project"], b["scope"]) for b in gateway.bodies} == {
        ("bob", "acme-api", "project")
    }
    again = subprocess.run(
        command,
        env=cli_env(tmp_path, gateway.secret),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert "synced" not in again.stderr and "2 unchanged" in again.stderr


def test_once_without_a_gateway_says_so_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("- one\n")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: refused
    done = subprocess.run(
        [ENGRAM, "watch", "--once", "--url", url, str(tmp_path)],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "the gateway is not answering" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_daemon_stops_cleanly_on_sigterm(gateway: RecordingGateway, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("- one\n")
    log = tmp_path / "watch.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen(
            [ENGRAM, "watch", "--url", gateway.url, str(tmp_path)],
            env=cli_env(tmp_path, gateway.secret),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: gateway.posts("AGENTS.md"), message="the first pass")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "watch: stopped;" in log.read_text()


# --- the runbook's three checks against a real server ------------------------------------------

AGENTS_MD = """\
# Acme API

## Build and test

- Run make check before pushing to main so that CI stays green
- Tests need Docker running
"""


@pytest.fixture
def server(served: Cluster) -> Cluster:
    return served


def watch_once(cluster: Cluster, repo: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENGRAM, "watch", "--once", *extra, str(repo)],
        env=cluster.env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def memories(cluster: Cluster, project: str) -> list[dict[str, Any]]:
    status, page = cluster.request("GET", f"/v1/memories?project={project}&limit=1000")
    assert status == 200, page
    return list(page["items"])


def recall(cluster: Cluster, query: str, project: str) -> list[str]:
    status, answer = cluster.request("POST", "/v1/search", {"query": query, "project": project})
    assert status == 200, answer
    return [hit["text"] for hit in answer["items"]]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    checkout = tmp_path / "acme-api"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "AGENTS.md").write_text(AGENTS_MD)
    return checkout


@pytest.mark.slow
def test_runbook_edit_agents_md_then_recall_returns_the_new_fact(
    server: Cluster, repo: Path
) -> None:
    first = watch_once(server, repo)
    assert first.returncode == 0, first.stderr
    (repo / "AGENTS.md").write_text(AGENTS_MD + "- Migrations run with alembic upgrade head\n")
    done = watch_once(server, repo)
    assert done.returncode == 0, done.stderr
    assert "synced codex AGENTS.md" in done.stderr
    wait_for(
        lambda: any(
            "alembic upgrade head" in text
            for text in recall(server, "alembic migrations", "acme-api")
        ),
        message="recall to return the new fact",
    )


@pytest.mark.slow
def test_runbook_touching_an_unchanged_file_writes_nothing(server: Cluster, repo: Path) -> None:
    assert watch_once(server, repo).returncode == 0
    before = memories(server, "acme-api")
    os.utime(repo / "AGENTS.md")
    done = watch_once(server, repo)
    assert done.returncode == 0, done.stderr
    assert "synced" not in done.stderr
    assert "0 imported, 1 unchanged" in done.stderr
    assert memories(server, "acme-api") == before


@pytest.mark.slow
def test_runbook_an_engram_edit_survives_a_file_edit_as_a_conflict(
    server: Cluster, repo: Path
) -> None:
    assert watch_once(server, repo).returncode == 0
    fact = "Run make check before pushing to main so that CI stays green"
    memory = next(m for m in memories(server, "acme-api") if m["content"] == fact)
    edited = fact + " (and run make e2e on Fridays)"
    status, _ = server.request("PATCH", f"/v1/memories/{memory['id']}", {"content": edited})
    assert status == 200
    (repo / "AGENTS.md").write_text(AGENTS_MD.replace("stays green", "stays green and fast"))
    done = watch_once(server, repo)
    assert done.returncode == 0, done.stderr
    anchor = "build-and-test/run-make-check-before-pushing-to-main-so"
    assert (
        f"sync conflict: codex AGENTS.md#{anchor} edited in Engram since the last import; "
        "skipped (use --force after reconciling)" in done.stderr
    )
    assert "1 skipped-conflict" in done.stderr
    status, current = server.request("GET", f"/v1/memories/{memory['id']}")
    assert status == 200 and current["content"] == edited
