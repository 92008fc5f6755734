"""`engram import-jsonl`: send Claude Code transcripts through the capture path, idempotently.

Correctness comes from event ids: a re-run sends the same ids and the gateway answers duplicate.
The ledger (file size and mtime per path, in the data dir) only makes a re-run fast by skipping
files that did not change since they were imported completely.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agents.contract import event_id, observe_body
from watcher import claude_import
from watcher.delivery import (
    ACCEPTED,
    DUPLICATE,
    REJECTED,
    RETRYING,
    TRANSIENT,
    Gateway,
    read_json,
    write_json_atomic,
)

LEDGER_FILE = "transcript-import-ledger.json"
"""Per imported file: size and mtime when it was last imported completely."""


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
    rejections: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.sent} events sent: {self.accepted} new, {self.duplicates} duplicate, "
                f"{self.rejected} rejected; {self.invalid_lines} invalid lines skipped"
                + (f", {self.unusable_lines} lines with unsafe ids skipped"
                   if self.unusable_lines else ""))


class Importer:
    def __init__(self, gateway: Gateway, data_dir: Path, project: str = "",
                 out: TextIO = sys.stderr, use_ledger: bool = True) -> None:
        self.gateway = gateway
        self.project = project
        self.out = out
        self.use_ledger = use_ledger
        self.ledger_path = data_dir / LEDGER_FILE
        self.ledger: dict[str, Any] = read_json(self.ledger_path, {}) if use_ledger else {}
        self.totals = Totals()

    def run(self, files: list[Path]) -> Totals:
        """Import each file; raises ImportStopped (after saving the ledger) on a transient
        failure."""
        try:
            for number, path in enumerate(files, 1):
                self._file(path, number, len(files))
        finally:
            if self.use_ledger:
                write_json_atomic(self.ledger_path, self.ledger)
        return self.totals

    def _file(self, path: Path, number: int, total: int) -> None:
        key = str(path.resolve())
        stat = path.stat()
        seen = {"size": stat.st_size, "mtimeNs": stat.st_mtime_ns}
        self.totals.files += 1
        if self.use_ledger and self.ledger.get(key) == seen:
            self.totals.skipped_unchanged += 1
            print(f"[{number}/{total}] {path}: unchanged since the last import, skipped",
                  file=self.out)
            return
        parsed = claude_import.parse(path, self.project)
        self.totals.invalid_lines += parsed.invalid
        self.totals.unusable_lines += parsed.unusable
        counts = {ACCEPTED: 0, DUPLICATE: 0, REJECTED: 0}
        started: set[str] = set()
        for event in parsed.events:
            body = observe_body(event, event_id(event, fallback_time=0.0))
            outcome = self.gateway.observe(body)
            if outcome.status == TRANSIENT:
                raise ImportStopped(f"{path}: the gateway did not take an event "
                                    f"({outcome.reason})")
            self.totals.sent += 1
            status = ACCEPTED if outcome.status == RETRYING else outcome.status
            counts[status] += 1
            if status == REJECTED:
                self.totals.rejections.append(f"{path}: {body['eventId']}: {outcome.reason}")
            elif status == ACCEPTED and event.session_id not in started:
                # Announced only when the session got something new: a re-run of an imported
                # file makes no session calls (which would re-open and re-summarise it).
                assert event.session_id is not None
                info = parsed.sessions[event.session_id]
                self._session(path, self.gateway.start_session(
                    event.session_id, str(info["project"]), host=claude_import.HOST,
                    cwd=info["cwd"]))
                started.add(event.session_id)
        for session_id in started:
            self._session(path, self.gateway.end_session(session_id))
        self.totals.accepted += counts[ACCEPTED]
        self.totals.duplicates += counts[DUPLICATE]
        self.totals.rejected += counts[REJECTED]
        if self.use_ledger:
            self.ledger[key] = seen
        torn = f", {parsed.invalid} invalid lines skipped" if parsed.invalid else ""
        print(f"[{number}/{total}] {path}: {len(parsed.events)} events: {counts[ACCEPTED]} new, "
              f"{counts[DUPLICATE]} duplicate, {counts[REJECTED]} rejected{torn}", file=self.out)

    def _session(self, path: Path, outcome: Any) -> None:
        if outcome.status == TRANSIENT:
            raise ImportStopped(f"{path}: the gateway did not take a session call "
                                f"({outcome.reason})")
        if outcome.status == REJECTED:
            self.totals.rejections.append(f"{path}: session call: {outcome.reason}")


def default_root() -> Path:
    return Path("~/.claude/projects").expanduser()


def elapsed(since: float) -> str:
    return f"{time.monotonic() - since:.1f}s"
