"""Memory-file sync, one pass: find the memory files under the roots, parse each into facts and
post it to ``POST /v1/sync/files`` (the gateway owns the ledger, never-clobber and conflict
copies), and remember what was synced from each root (the state file), so a file deleted while
nothing watched has its memories retired on the next pass. ``run_once`` is `engram watch --once`;
the daemon (``engram.watcher.daemon``) calls ``Syncer.sync`` per settled change."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

EXIT_OK, EXIT_FAILURE = 0, 1

OUTCOMES = ("imported", "unchanged", "skipped-conflict", "reconciled")
SYNC_PATH = "/v1/sync/files"
STATE_FILE = "watch-state.json"
"""In the data dir: per root fingerprint, the files last synced from it (so a file deleted while
nothing watched has its memories retired on the next pass)."""


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
            print(
                f"engram watch: cannot read {path} ({exc}); starting afresh: files deleted "
                "before this run are not retired",
                file=sys.stderr,
            )
            return
        if isinstance(loaded, dict):
            self._roots = {k: v for k, v in loaded.items() if isinstance(v, dict)}

    def recorded(self, root: Path) -> list[Any]:
        """The sources last synced under ``root`` (resolved)."""
        from engram.watcher.memfiles import Source, root_fingerprint

        files = self._roots.get(root_fingerprint(root), {}).get("files", {})
        return [
            Source(str(v[0]), str(v[1]), root, str(k))
            for k, v in sorted(files.items())
            if isinstance(v, list) and len(v) == 2
        ]

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
            print(
                f"watch: cannot record what was synced in {self.path}: {exc.strerror or exc}",
                file=sys.stderr,
                flush=True,
            )


def survey(
    roots: list[Path], state: WatchState | None
) -> tuple[list[Any], dict[Any, Any], list[Any]]:
    """(the sources to sync, each file once under its innermost root; aliases: a source that is
    the same file as another, mapped to the one synced in its place; stale: sources recorded as
    synced that are gone or no longer synced, whose memories the pass retires)."""
    from engram.watcher.memfiles import discover_all, resolve_aliases

    found = list(discover_all(roots))
    aliases = resolve_aliases(found)
    sources = [s for s in found if s not in aliases]
    keep = set(sources)
    stale = [s for root in roots for s in (state.recorded(root) if state else []) if s not in keep]
    return sources, aliases, stale


# --- one file ------------------------------------------------------------------------------------


class GatewayFailed(Exception):
    """The gateway answered 5xx: worth retrying (the daemon does, with back-off)."""


class Syncer:
    """Posts one file and reports what the gateway did with it, one line per file that changed.
    Raises ``Unreachable`` and ``GatewayFailed`` (HTTP 5xx); every other failure is
    logged and counted as an error, one line, and the run goes on."""

    def __init__(
        self,
        client: Any,
        *,
        user: str,
        scope: str,
        force: bool,
        projects: dict[Path, str],
        out: TextIO,
        state: WatchState | None = None,
    ) -> None:
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
        self.log(
            f"watch: {self.label(source)} is the same file as {self.label(primary)} (a "
            f"link); imported once, as {self.label(primary)}"
        )

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
            body = sync_body(
                source,
                user=self.user,
                project=self.projects[source.root],
                scope=self.scope,
                force=self.force,
                data=data,
            )
        except FileTooLarge as exc:
            return self.error(source, f"{exc}; skipped")
        except Exception as exc:  # noqa: BLE001 (a parser bug costs one file, not the run)
            return self.error(
                source, f"cannot import it ({type(exc).__name__}: {_one_line(exc)}); skipped"
            )
        status, answer = self.client.request("POST", SYNC_PATH, body)
        if status == 404:
            return self.error(
                source, f"the gateway has no POST {SYNC_PATH} (HTTP 404): upgrade the server"
            )
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
        self._report(
            source, outcome, answer, deleted=data is None, retired=retire and source.path.exists()
        )
        if self.state is not None and (data is not None or outcome != "skipped-conflict"):
            # a skipped retirement leaves its memories in Engram: still recorded
            self.state.update(source, synced=data is not None)
        return outcome

    def error(self, source: Any, message: str, *, count: bool = True) -> str:
        self.totals["errors"] += count
        self.log(f"sync error: {self.label(source)}: {message}")
        return "error"

    def _report(
        self,
        source: Any,
        outcome: str,
        answer: dict[str, Any],
        *,
        deleted: bool,
        retired: bool = False,
    ) -> None:
        label = self.label(source)
        counts = ", ".join(
            f"{answer[key]} {key}"
            for key in ("created", "updated", "removed", "reconciled")
            if answer.get(key)
        )
        if answer.get("renamed"):  # edited facts that kept their memory under a new anchor
            counts = ", ".join(filter(None, [counts, f"{len(answer['renamed'])} re-anchored"]))
        if outcome == "imported":
            what = (
                "no longer synced as its own file" if retired else "file deleted" if deleted else ""
            )
            detail = "; ".join(filter(None, [what, counts]))
            self.log(f"synced {label}" + (f": {detail}" if detail else ""))
        elif outcome == "reconciled":
            self.log(
                f"reconciled {label}: ledger refreshed, Engram's version kept"
                + (f" ({counts})" if counts else "")
            )
        for conflict in answer.get("conflicts") or []:
            copy = conflict.get("copyId")
            kept = (
                f"; the file's version is kept as memory {copy} (scope sync-conflict)"
                if copy
                else ""
            )
            self.log(
                f"sync conflict: {label}#{conflict.get('anchor')} edited in Engram since "
                f"the last import; skipped (use --force after reconciling){kept}"
            )

    def summary(self) -> str:
        t = self.totals
        return (
            f"watch: {sum(t.values())} files: {t['imported']} imported, {t['unchanged']} "
            f"unchanged, {t['skipped-conflict']} skipped-conflict, {t['reconciled']} "
            f"reconciled, {t['errors']} errors"
        )


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
            syncer.log(
                f"engram: the gateway is not answering ({exc}).\n  Start it with "
                "`engram serve`, or point --url / ENGRAM_URL at it; nothing after "
                f"{syncer.label(source)} was synced."
            )
            syncer.log(syncer.summary())
            return EXIT_FAILURE
    syncer.log(syncer.summary())
    return EXIT_FAILURE if syncer.totals["errors"] else EXIT_OK
