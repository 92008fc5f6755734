"""Talking to the gateway for the transcript paths: every answer sorted into an ``Outcome``.

The split that matters is permanent versus transient: a rejected event (400/422) will never be
accepted and is counted or dead-lettered, a transient failure (gateway down, timeout, 5xx, 503
inbox full) is retried later from the same place. Auth failures are neither: they stop the run.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram.client import Client, GatewayError, Unreachable
from engram.wire import AUTH, BUSY, error_message, is_permanent

ACCEPTED, DUPLICATE, RETRYING, REJECTED, TRANSIENT = (
    "accepted",
    "duplicate",
    "retrying",
    "rejected",
    "transient",
)
FOUND, MISSING = "found", "missing"
"""Answers of a session lookup (``Gateway.session_exists``)."""
DELIVERED = frozenset({ACCEPTED, DUPLICATE, RETRYING})
"""Outcomes after which the gateway owns the event: the reader may move past it."""

DEAD_LETTER_FILE = "transcript-dead-letters.jsonl"
"""Lines the watcher could never deliver, one JSON object each, in the data dir."""


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str = ""
    busy: bool = False
    """A transient refusal because the gateway's inbox is full (503): workers are behind, and a
    bulk sender should wait for them rather than stop."""

    @property
    def delivered(self) -> bool:
        return self.status in DELIVERED


def classify(status: int, payload: Any) -> Outcome:
    if status == 201:
        return Outcome(ACCEPTED)
    if status == 200:
        return Outcome(DUPLICATE)
    if status == 202:
        return Outcome(RETRYING)
    if is_permanent(status):
        return Outcome(REJECTED, error_message(status, payload))
    if status in AUTH:
        # A wrong secret or origin is a setup problem no retry fixes: stop and say so.
        raise GatewayError(status, payload)
    return Outcome(TRANSIENT, error_message(status, payload), busy=status == BUSY)


class Delivery:
    """The three calls the transcript paths make, never raising for a down gateway."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def _send(self, method: str, path: str, body: Any = None) -> Outcome:
        try:
            status, payload = self.client.request(method, path, body)
        except Unreachable as exc:
            return Outcome(TRANSIENT, str(exc))
        return classify(status, payload)

    def observe(self, body: dict[str, Any]) -> Outcome:
        return self._send("POST", "/v1/observe", body)

    def start_session(
        self,
        session_id: str,
        project: str,
        *,
        host: str,
        cwd: str | None,
        at: float | None = None,
    ) -> Outcome:
        """``at``: when the session started by the host's clock (a transcript's first line)."""
        body: dict[str, Any] = {"sessionId": session_id, "project": project, "host": host}
        if cwd:
            body["cwd"] = cwd
        if at is not None:
            body["timestamp"] = at
        outcome = self._send("POST", "/v1/sessions", body)
        # A session start answers 201 (new) or 200 (known): both mean it is there.
        return Outcome(ACCEPTED) if outcome.status == DUPLICATE else outcome

    def session_exists(self, session_id: str) -> Outcome:
        """FOUND when the gateway has the session (hooks or an import created it), MISSING when
        it does not, TRANSIENT when it could not say."""
        from urllib.parse import quote

        try:
            status, payload = self.client.request(
                "GET", f"/v1/sessions/{quote(session_id, safe='')}"
            )
        except Unreachable as exc:
            return Outcome(TRANSIENT, str(exc))
        if status == 200:
            return Outcome(FOUND)
        if status == 404:
            return Outcome(MISSING)
        if status in AUTH:
            raise GatewayError(status, payload)
        return Outcome(TRANSIENT, error_message(status, payload))

    def end_session(self, session_id: str, at: float | None = None) -> Outcome:
        """``at``: when the session ended by the host's clock (a transcript's last line), so an
        import made weeks later still dates it right."""
        from urllib.parse import quote

        body = {} if at is None else {"timestamp": at}
        outcome = self._send("POST", f"/v1/sessions/{quote(session_id, safe='')}/end", body)
        return Outcome(ACCEPTED) if outcome.status == DUPLICATE else outcome


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file in the same folder, fsync, then rename over ``path``: a reader
    (or a crash) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path, default: Any) -> Any:
    """A JSON file written by ``write_json_atomic``, or ``default`` when it does not exist."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default


def append_dead_letter(
    path: Path, *, source: str, offset: int, reason: str, line: str, watch: str | None = None
) -> None:
    """One undeliverable line, with why; `engram watch-transcripts --status` counts them. The
    line is scrubbed of secrets (transcripts hold whatever the agent saw) and the file is 0600."""
    from engram.privacy import scrub_text

    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "at": time.time(),
        "file": source,
        "offset": offset,
        "reason": scrub_text(reason),
        "line": scrub_text(line),
        **({"watch": watch} if watch else {}),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
