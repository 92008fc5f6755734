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

from engram.wire import PERMANENT, Unreachable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

    from engram.agents.transport import GatewayLink

try:
    import fcntl
except ImportError:  # Windows: no flock; one writer at a time is then the user's to ensure
    fcntl = None  # type: ignore[assignment]

COUNTERS = ("droppedFull", "droppedExpired", "rejected", "unreadable")


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
        lines = [
            (
                json.dumps({"spooledAt": when, **scrub(r)}, ensure_ascii=False)  # type: ignore[dict-item]
                + "\n"
            ).encode("utf-8")
            for r in requests
        ]
        self._ensure_dir()
        kept = 0
        with self._locked("lock"):
            size = _size(self.events)
            # A drain's batch (moved aside, put back if the gateway is still down) counts
            # too, or hooks appending while a drain holds it would pass the bound.
            total = size + sum(_size(path) for path in self._leftovers())
            fd = os.open(self.events, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "r+b") as out:
                if size and _last_byte(out, size) != b"\n":
                    # A writer killed mid-line: end its fragment so this event is not glued
                    # onto it (the fragment is counted as unreadable when a drain meets it).
                    out.write(b"\n")
                    total += 1
                for line in lines:
                    if total + len(line) > self.max_bytes:
                        self._count_locked("droppedFull")
                        continue
                    out.write(line)
                    total += len(line)
                    kept += 1
        return kept

    def has_events(self) -> bool:
        return _size(self.events) > 0 or any(self._leftovers())

    # --- draining (a detached child of a hook, `engram capture --drain`, the server) ------------

    def drain(
        self,
        gateway: GatewayLink,
        *,
        timeout: float = 10.0,
        wait: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, int] | None:
        """Send spooled requests in order until one fails for a transient reason; batch after
        batch, so what hooks append meanwhile goes too. Returns counts (sent, duplicates,
        rejected, expired, unreadable, left), or None when another drain holds the lock and
        ``wait`` is False."""
        self._ensure_dir()
        with self._locked("drain.lock", wait=wait) as locked:
            if not locked:
                return None
            counts = dict.fromkeys(
                ("sent", "duplicates", "rejected", "expired", "unreadable", "left"), 0
            )
            while True:
                batch = self._take_batch()
                if not batch:
                    return counts
                left = self._send_batch(batch, gateway, timeout, counts, progress)
                self._put_back(left, batch)
                if left:
                    counts["left"] = len(left)
                    return counts

    def _send_batch(
        self,
        batch: list[Path],
        gateway: GatewayLink,
        timeout: float,
        counts: dict[str, int],
        progress: Callable[[int, int], None] | None,
    ) -> list[dict[str, Any]]:
        """Send one batch; returns the records still to send (from the first transient
        failure on, in order)."""
        unreadable: list[int] = []
        records = [r for path in batch for r in _read_records(path, unreadable)]
        if unreadable:
            counts["unreadable"] += len(unreadable)
            self._count("unreadable", len(unreadable))
        now = time.time()
        for index, record in enumerate(records):
            if now - float(record.get("spooledAt", now)) > self.max_age:
                counts["expired"] += 1
                self._count("droppedExpired")
                continue
            try:
                status, answer = gateway.send(
                    record["method"], record["path"], record.get("body"), time.monotonic() + timeout
                )
            except Unreachable:
                return records[index:]
            if status in PERMANENT:
                counts["rejected"] += 1
                self.reject(record, status, answer)
            elif 200 <= status < 300:
                duplicate = isinstance(answer, dict) and answer.get("status") == "duplicate"
                counts["duplicates" if duplicate else "sent"] += 1
            else:  # 401 (wrong secret), 503 (inbox full), 5xx: keep it, stop here
                return records[index:]
            if progress:
                progress(index + 1, len(records))
        return []

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
        entry = scrub({**record, "rejectedAt": time.time(), "status": status, "answer": answer})
        with self._locked("lock"):
            with _open_private(self.rejected, "a") as out:
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self._count_locked("rejected")

    def _count(self, name: str, n: int = 1) -> None:
        with self._locked("lock"):
            self._count_locked(name, n)

    def _count_locked(self, name: str, n: int = 1) -> None:
        """Add to a counter; the caller holds ``lock`` (counts are read-modify-write)."""
        counts = self.counters()
        counts[name] += n
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


def _last_byte(handle: Any, size: int) -> bytes:
    handle.seek(size - 1)
    return bytes(handle.read(1))


def _read_records(path: Path, unreadable: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """Whole JSON lines, in order. A torn line (a writer killed mid-line) or one that is not a
    request is skipped; its line number goes to ``unreadable`` when given (the drain passes it,
    reading batches no writer appends to any more, so a last line without its newline is a dead
    writer's fragment too). Without it, such a last line may still be being written: skipped."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith("\n"):
                if unreadable is not None and line.strip():
                    unreadable.append(number)
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and "method" in record and "path" in record:
                yield record
            elif unreadable is not None and line.strip():
                unreadable.append(number)
