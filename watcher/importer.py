"""`engram import-jsonl`: send Claude Code transcripts through the capture path, idempotently.

Correctness comes from event ids: a re-run sends the same ids and the gateway answers duplicate.
The ledger (in the data dir) keeps the file size and mtime per path, which only makes a re-run
fast by skipping files that did not change since they were imported completely, and the sessions
this importer created.

One writer per session: a tool call has the same eventId from the live hook and from the
transcript, but a prompt or a final answer does not (Claude Code's hook payloads carry no turn id
or timestamp, so the hook derives its id from its own clock). So a session the gateway already
has, and this importer did not create, belongs to the hooks (or to another writer): the import
sends only its tool calls (duplicates, or calls a hook missed) and no prompts, answers, session
start or end. A file modified in the last ``LIVE_SECONDS`` is skipped unless asked for: its
session is probably still running.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from engram.agents.contract import event_id, observe_body
from engram.backoff import doubled
from engram.watcher import claude_import
from engram.watcher.delivery import (
    ACCEPTED,
    DUPLICATE,
    FOUND,
    REJECTED,
    RETRYING,
    TRANSIENT,
    Delivery,
    read_json,
    write_json_atomic,
)

LEDGER_FILE = "transcript-import-ledger.json"
"""``{"files": {path: {"size", "mtimeNs"}}, "createdSessions": [id, ...]}``: per imported file,
its size and mtime when it was last imported completely; the sessions this importer created (it
remains their writer). An older ledger is the ``files`` mapping alone."""
LIVE_SECONDS = 120.0
"""A transcript modified this recently is still being written (its session is running)."""
TOOL_HOOKS = frozenset({"PostToolUse", "PostToolUseFailure"})
"""Events whose eventId the live hook derives identically: sent for any session."""


BUSY_FIRST_WAIT_SECONDS = 0.5
BUSY_MAX_DELAY_SECONDS = 5.0
BUSY_MAX_WAIT_SECONDS = 300.0
"""How long one event waits for a full inbox to drain before the run stops (a re-run
continues where it stopped)."""


class ImportStopped(Exception):
    """The gateway stopped accepting (down, busy): the run ends, a re-run continues."""


@dataclass
class Totals:
    files: int = 0
    skipped_unchanged: int = 0
    sent: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    invalid_lines: int = 0
    unusable_lines: int = 0
    covered_by_hooks: int = 0
    """Prompts and answers of sessions the hooks captured: not sent (see the module doc)."""
    skipped_live: int = 0
    """Files modified in the last LIVE_SECONDS: still being written, skipped."""
    rejections: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.sent} events sent: {self.accepted} new, {self.duplicates} duplicate, "
            f"{self.rejected} rejected"
            + (f"; {self.covered_by_hooks} covered by hooks" if self.covered_by_hooks else "")
            + f"; {self.invalid_lines} invalid lines skipped"
            + (
                f", {self.unusable_lines} lines with unsafe ids skipped"
                if self.unusable_lines
                else ""
            )
        )


class Importer:
    def __init__(
        self,
        gateway: Delivery,
        data_dir: Path,
        project: str = "",
        out: TextIO = sys.stderr,
        use_ledger: bool = True,
        include_live: bool = False,
        live_seconds: float = LIVE_SECONDS,
        sleep: Any = time.sleep,
    ) -> None:
        """``use_ledger=False`` (``--rescan``) reads every file again; the ledger still records
        the sessions this importer created, which decide who writes a session."""
        self.gateway = gateway
        self.sleep = sleep
        self.project = project
        self.out = out
        self.use_ledger = use_ledger
        self.include_live = include_live
        self.live_seconds = live_seconds
        self.ledger_path = data_dir / LEDGER_FILE
        stored = read_json(self.ledger_path, {})
        if not isinstance(stored, dict):
            stored = {}
        files = stored.get("files") if "files" in stored else stored  # older: the files alone
        self.ledger: dict[str, Any] = dict(files) if isinstance(files, dict) else {}
        created = stored.get("createdSessions") if "files" in stored else None
        self.created: set[str] = (
            {s for s in created if isinstance(s, str)} if isinstance(created, list) else set()
        )
        """Sessions this importer created: it stays their writer."""
        self.owner: dict[str, bool] = {}
        """Per session looked up in this run: whether this importer writes all of it."""
        self.totals = Totals()

    def run(self, files: list[Path]) -> Totals:
        """Import each file; raises ImportStopped (after saving the ledger) on a transient
        failure."""
        try:
            for number, path in enumerate(files, 1):
                self._file(path, number, len(files))
        finally:
            write_json_atomic(
                self.ledger_path, {"files": self.ledger, "createdSessions": sorted(self.created)}
            )
        return self.totals

    def _file(self, path: Path, number: int, total: int) -> None:
        key = str(path.resolve())
        stat = path.stat()
        seen = {"size": stat.st_size, "mtimeNs": stat.st_mtime_ns}
        self.totals.files += 1
        if self.use_ledger and self.ledger.get(key) == seen:
            self.totals.skipped_unchanged += 1
            print(
                f"[{number}/{total}] {path}: unchanged since the last import, skipped",
                file=self.out,
            )
            return
        age = time.time() - stat.st_mtime
        if not self.include_live and age < self.live_seconds:
            self.totals.skipped_live += 1
            print(
                f"[{number}/{total}] {path}: still being written, skipped (modified "
                f"{max(age, 0):.0f}s ago; --include-live imports it)",
                file=self.out,
            )
            return
        parsed = claude_import.parse(path, self.project)
        self.totals.invalid_lines += parsed.invalid
        self.totals.unusable_lines += parsed.unusable
        counts = {ACCEPTED: 0, DUPLICATE: 0, REJECTED: 0}
        for session_id in dict.fromkeys(e.session_id for e in parsed.events if e.session_id):
            self._decide_owner(path, session_id)
        started: set[str] = set()
        covered = 0
        for event in parsed.events:
            assert event.session_id is not None
            owned = self.owner[event.session_id]
            if not owned and event.hook not in TOOL_HOOKS:
                covered += 1  # the hooks sent this prompt / answer under their own eventId
                continue
            body = observe_body(event, event_id(event, fallback_time=0.0))
            outcome = self._observe(body)
            if outcome.status == TRANSIENT:
                raise ImportStopped(f"{path}: the gateway did not take an event ({outcome.reason})")
            self.totals.sent += 1
            status = ACCEPTED if outcome.status == RETRYING else outcome.status
            counts[status] += 1
            if status == REJECTED:
                self.totals.rejections.append(f"{path}: {body['eventId']}: {outcome.reason}")
            elif status == ACCEPTED and owned and event.session_id not in started:
                # Announced only when the session got something new: a re-run of an imported
                # file makes no session calls (which would re-open and re-summarise it).
                info = parsed.sessions[event.session_id]
                self._session(
                    path,
                    self.gateway.start_session(
                        event.session_id,
                        str(info["project"]),
                        host=claude_import.HOST,
                        cwd=info["cwd"],
                        at=_first_time(parsed.events, event.session_id),
                    ),
                )
                started.add(event.session_id)
        for session_id in started:
            self._session(
                path,
                self.gateway.end_session(session_id, at=_last_time(parsed.events, session_id)),
            )
        self.totals.accepted += counts[ACCEPTED]
        self.totals.duplicates += counts[DUPLICATE]
        self.totals.rejected += counts[REJECTED]
        self.totals.covered_by_hooks += covered
        self.ledger[key] = seen
        hooks = f", {covered} covered by hooks" if covered else ""
        torn = f", {parsed.invalid} invalid lines skipped" if parsed.invalid else ""
        print(
            f"[{number}/{total}] {path}: {len(parsed.events)} events: {counts[ACCEPTED]} new, "
            f"{counts[DUPLICATE]} duplicate, {counts[REJECTED]} rejected{hooks}{torn}",
            file=self.out,
        )

    def _observe(self, body: dict[str, Any]) -> Any:
        """Send one event; while the gateway's inbox is full (its workers are behind), wait for
        them with backoff instead of stopping: a bulk import paces itself to what the workers
        store, and never crowds out live capture for long."""
        waited, delay = 0.0, BUSY_FIRST_WAIT_SECONDS
        while True:
            outcome = self.gateway.observe(body)
            if not outcome.busy or waited >= BUSY_MAX_WAIT_SECONDS:
                return outcome
            if waited == 0.0:
                print(
                    f"  gateway busy ({outcome.reason}); waiting for its workers to catch up",
                    file=self.out,
                )
            self.sleep(delay)
            waited += delay
            delay = doubled(delay, BUSY_FIRST_WAIT_SECONDS, BUSY_MAX_DELAY_SECONDS)

    def _decide_owner(self, path: Path, session_id: str) -> None:
        """Whether this importer writes all of the session (prompts, answers, start and end) or
        only its tool calls: a session the gateway already has belongs to whoever created it,
        unless that was this importer."""
        if session_id in self.owner:
            return
        if session_id in self.created:
            self.owner[session_id] = True
            return
        outcome = self.gateway.session_exists(session_id)
        if outcome.status == TRANSIENT:
            raise ImportStopped(
                f"{path}: the gateway did not take a session lookup ({outcome.reason})"
            )
        owned = outcome.status != FOUND
        if owned:
            # Recorded before anything is sent: a run stopped half-way still knows on re-run
            # that the session (created by the gateway from these events) is this importer's.
            self.created.add(session_id)
        self.owner[session_id] = owned

    def _session(self, path: Path, outcome: Any) -> None:
        if outcome.status == TRANSIENT:
            raise ImportStopped(
                f"{path}: the gateway did not take a session call ({outcome.reason})"
            )
        if outcome.status == REJECTED:
            self.totals.rejections.append(f"{path}: session call: {outcome.reason}")


def default_root() -> Path:
    return Path("~/.claude/projects").expanduser()


def elapsed(since: float) -> str:
    return f"{time.monotonic() - since:.1f}s"


def _first_time(events: Any, session_id: str) -> float | None:
    """The host's time of the session's first event (None when no line had one)."""
    times = [e.timestamp for e in events if e.session_id == session_id and e.timestamp]
    return min(times) if times else None


def _last_time(events: Any, session_id: str) -> float | None:
    times = [e.timestamp for e in events if e.session_id == session_id and e.timestamp]
    return max(times) if times else None
