"""The hook's offline spool: requests the gateway could not take, kept on disk until it can.

Layout of ``<data dir>/spool/`` (folder 0700, files 0600):

- ``events.jsonl``: one request per line, ``{"spooledAt", "method", "path", "body"}``, oldest
  first. Bodies are scrubbed of secrets before they are written.
- ``draining-<pid>.jsonl``: a batch a drain took; a drain that died leaves it for the next one
  (replays are safe: every body carries its eventId and the gateway deduplicates).
- ``rejected.jsonl``: requests the gateway refused for good (400/404/413/422), with its answer:
  the spool's dead letters, shown by ``engram capture``.
- ``counters.json``: events dropped because the spool was full or too old, and rejected ones.

Appends take ``lock`` (``flock``) for a few microseconds; only one drain runs at a time
(``drain.lock``), and a drain holds ``lock`` only to take its batch and to put back what it
could not send, never while it talks to the gateway. Standard library only: hooks append.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from agents.transport import PERMANENT, Unreachable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

    from agents.transport import Gateway

try:
    import fcntl
except ImportError:  # Windows: no flock; one writer at a time is then the user's to ensure
    fcntl = None  # type: ignore[assignment]

COUNTERS = ("droppedFull", "droppedExpired", "rejected")


class Spool:
    def __init__(self, directory: Path, max_bytes: int, max_age_seconds: float) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        self.max_age = max_age_seconds
        self.events = directory / "events.jsonl"
        self.rejected = directory / "rejected.jsonl"
        self.counters_file = directory / "counters.json"

    # --- appending (the hook) -----------------------------------------------------------------

    def append(self, requests: list[dict[str, Any]], now: float | None = None) -> int:
        """Spool requests (each ``{"method", "path", "body"}``); returns how many were kept.
        Scrubs secrets first; an event that would pass ``max_bytes`` is dropped and counted."""
        from engram.privacy import scrub  # only on this (rare) path: ~10 ms of regexes

        when = time.time() if now is None else now
        lines = [json.dumps({"spooledAt": when, **scrub(r)}, ensure_ascii=False) + "\n"  # type: ignore[dict-item]
                 for r in requests]
        self._ensure_dir()
        kept = 0
        with self._locked("lock"):
            size = _size(self.events)
            with _open_private(self.events, "a") as out:
                for line in lines:
                    if size + len(line.encode("utf-8")) > self.max_bytes:
                        self._count("droppedFull")
                        continue
                    out.write(line)
                    size += len(line.encode("utf-8"))
                    kept += 1
        return kept

    def has_events(self) -> bool:
        return _size(self.events) > 0 or any(self._leftovers())

    # --- draining (a detached child of a hook, `engram capture --drain`, the server) ------------

    def drain(self, gateway: Gateway, *, timeout: float = 10.0, wait: bool = False,
              progress: Callable[[int, int], None] | None = None) -> dict[str, int] | None:
        """Send spooled requests in order until one fails for a transient reason. Returns counts
        (sent, duplicates, rejected, expired, left), or None when another drain holds the lock
        and ``wait`` is False."""
        self._ensure_dir()
        with self._locked("drain.lock", wait=wait) as locked:
            if not locked:
                return None
            batch = self._take_batch()
            records = [r for path in batch for r in _read_records(path)]
            counts = {"sent": 0, "duplicates": 0, "rejected": 0, "expired": 0, "left": 0}
            now = time.time()
            left: list[dict[str, Any]] = []
            for index, record in enumerate(records):
                if left:
                    left.append(record)
                    continue
                if now - float(record.get("spooledAt", now)) > self.max_age:
                    counts["expired"] += 1
                    self._count("droppedExpired")
                    continue
                try:
                    status, answer = gateway.send(record["method"], record["path"],
                                                  record.get("body"),
                                                  time.monotonic() + timeout)
                except Unreachable:
                    left.append(record)
                    continue
                if status in PERMANENT:
                    counts["rejected"] += 1
                    self.reject(record, status, answer)
                elif 200 <= status < 300:
                    duplicate = isinstance(answer, dict) and answer.get("status") == "duplicate"
                    counts["duplicates" if duplicate else "sent"] += 1
                else:  # 401 (wrong secret), 503 (inbox full), 5xx: keep it, stop here
                    left.append(record)
                if progress:
                    progress(index + 1, len(records))
            counts["left"] = len(left)
            self._put_back(left, batch)
            return counts

    def pending(self) -> list[dict[str, Any]]:
        """Everything waiting to be sent, oldest first (for `engram capture`)."""
        paths = [*self._leftovers(), self.events]
        return [r for path in paths for r in _read_records(path)]

    def counters(self) -> dict[str, int]:
        try:
            data = json.loads(self.counters_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        return {name: int(data.get(name, 0)) for name in COUNTERS}

    def rejected_records(self) -> list[dict[str, Any]]:
        return list(_read_records(self.rejected))

    # --- internals ------------------------------------------------------------------------------

    def _take_batch(self) -> list[Path]:
        """Move events.jsonl aside (under ``lock``) so hooks keep appending to a new one."""
        with self._locked("lock"):
            if _size(self.events) > 0:
                os.replace(self.events, self.dir / f"draining-{os.getpid()}.jsonl")
        return sorted(self._leftovers(), key=lambda p: p.stat().st_mtime)

    def _put_back(self, left: list[dict[str, Any]], batch: list[Path]) -> None:
        """Unsent records go back in front of whatever hooks appended meanwhile."""
        with self._locked("lock"):
            if left:
                newer = self.events.read_bytes() if self.events.exists() else b""
                temp = self.dir / f"events.{os.getpid()}.tmp"
                with _open_private(temp, "w") as out:
                    out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in left)
                    out.flush()
                with open(temp, "ab") as out_bytes:
                    out_bytes.write(newer)
                    out_bytes.flush()
                    os.fsync(out_bytes.fileno())
                os.replace(temp, self.events)
            for path in batch:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _leftovers(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return list(self.dir.glob("draining-*.jsonl"))

    def reject(self, record: dict[str, Any], status: int, answer: Any) -> None:
        """Keep a request the gateway refused for good, with its answer (scrubbed)."""
        from engram.privacy import scrub

        self._ensure_dir()
        self._count("rejected")
        entry = scrub({**record, "rejectedAt": time.time(), "status": status, "answer": answer})
        with self._locked("lock"), _open_private(self.rejected, "a") as out:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def _count(self, name: str) -> None:
        counts = self.counters()
        counts[name] += 1
        temp = self.dir / f"counters.{os.getpid()}.tmp"
        with _open_private(temp, "w") as out:
            json.dump(counts, out)
        os.replace(temp, self.counters_file)

    def _ensure_dir(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    @contextlib.contextmanager
    def _locked(self, name: str, wait: bool = True) -> Iterator[bool]:
        if fcntl is None:
            yield True
            return
        fd = os.open(self.dir / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # closing releases the lock


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _open_private(path: Path, mode: str) -> Any:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    return os.fdopen(os.open(path, flags, 0o600), mode, encoding="utf-8")


def _read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Whole JSON lines; a torn line (a writer killed mid-line) is skipped."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            if not line.endswith("\n"):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "method" in record and "path" in record:
                yield record
