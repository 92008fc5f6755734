"""The transcript watcher: tails JSONL transcripts and sends what a schema maps them to.

Per file the state is one JSON object (``FileState`` below): the byte offset of the next unread
line and the session state the schema built so far (session id, cwd, pending tool calls). A line
is applied to a *copy* of the state; the copy replaces the state, offset included, only once the
gateway took every event of the line (201 / 200 / 202). So offset and session state move together
or not at all:

- transient failure (gateway down, timeout, 5xx, 503): the file stops at that line, nothing
  advances, the next pass resends it (the gateway deduplicates on eventId);
- permanent failure (400 / 422, or a complete line that is not JSON): the line goes to the
  dead-letter file with the reason, is counted, and the watcher moves on;
- a last line without its newline is not read until it is complete.

Event ids: tool events use the host's call id as ``tool_use_id`` (so a hook and the transcript
agree); prompts and answers use ``turn_id = <file key>.L<byte offset>``, stable across re-runs.
"""

from __future__ import annotations

import copy
import glob
import hashlib
import json
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from engram.agents.contract import (
    BadPayload,
    HookEvent,
    event_id,
    maybe_json,
    observe_body,
    project_for,
    text,
    valid_id,
    valid_path,
)
from engram.events import parse_timestamp
from engram.privacy import scrub
from engram.watcher.delivery import (
    REJECTED,
    TRANSIENT,
    Delivery,
    Outcome,
    append_dead_letter,
    read_json,
    write_json_atomic,
)
from engram.watcher.schema import Config, EventRule, Watch

STATE_VERSION = 1
MAX_PENDING = 500
"""Tool calls waiting for their result, per file; the oldest is dropped beyond this."""
READ_CHUNK = 8 * 1024 * 1024
"""Bytes read from a file at a time; a longer line is read whole anyway."""
HOSTS = {"codex": "codex", "claude": "claude-code", "claude-code": "claude-code"}
"""Schema name -> host name, where they differ; any other schema name is its own host."""
_GLOB = re.compile(r"[*?\[]")
_UNSAFE = re.compile(r"[^A-Za-z0-9._:@+=-]+")


def host_for(schema_name: str) -> str:
    return HOSTS.get(schema_name, schema_name)


def file_key(path: Path) -> str:
    """A short, stable identity of a transcript file (its resolved path)."""
    return hashlib.sha1(str(path.resolve()).encode("utf-8")).hexdigest()[:12]


def fallback_session(path: Path, host: str) -> str:
    """The session id of a file whose schema never names one: from its name and identity."""
    stem = _UNSAFE.sub("-", path.stem).strip("-.")[:80] or "transcript"
    return f"{host}-{stem}-{file_key(path)[:8]}"


def subagent_marker(line: Any) -> bool | None:
    """For a Codex ``session_meta`` line: whether the rollout is a subagent's (Codex writes
    ``payload.source`` as ``{"subagent": "review" | "compact" | {"thread_spawn": {...}}}`` for
    those, and a plain string such as ``"cli"``, ``"vscode"``, ``"exec"`` for a main session).
    None for any other line."""
    if not isinstance(line, dict) or line.get("type") != "session_meta":
        return None
    payload = line.get("payload")
    if not isinstance(payload, dict):
        return False
    source = payload.get("source")
    if isinstance(source, dict):
        return any(str(k).lower().replace("_", "") == "subagent" for k in source)
    if isinstance(source, str) and source.lower().replace("_", "").startswith("subagent"):
        return True
    return payload.get("thread_source") == "subagent" or bool(payload.get("parent_thread_id"))


def new_file_state(watch: str, key: str, offset: int = 0) -> dict[str, Any]:
    return {
        "watch": watch,
        "fileKey": key,
        "offset": offset,
        "sessionId": None,
        "cwd": None,
        "pending": {},
        "announced": False,
        "subagent": None,
        "sent": 0,
        "duplicates": 0,
        "deadLetters": 0,
        "coveredByHooks": 0,
        "unmatched": 0,
    }


# --- turning a line into operations ------------------------------------------------------------

Op = tuple[str, Any]
"""("start", None) | ("observe", body) | ("end", {"timestamp": the host's time or None})."""


def _safe(value: Any, check: Callable[[Any, str], str | None]) -> str | None:
    try:
        return check(value, "value")
    except BadPayload:
        return None


def _when(fields: dict[str, Any], line: Any) -> float | None:
    raw = fields.get("timestamp", line.get("timestamp") if isinstance(line, dict) else None)
    try:
        return parse_timestamp(raw) if raw is not None else None
    except ValueError:
        return None


def apply_line(
    rule: EventRule | None,
    line: Any,
    state: dict[str, Any],
    *,
    host: str,
    path: Path,
    offset: int,
    project: str = "",
) -> list[Op]:
    """Apply one parsed line to ``state`` (mutated: session context, pending calls) and return
    what to send for it. The caller owns the copy-and-commit."""
    marker = subagent_marker(line)
    if marker is not None:
        state["subagent"] = marker
    if rule is None:
        state["unmatched"] = state.get("unmatched", 0) + 1
        return []
    fields = rule.extract(line)
    action = rule.action
    if action == "session_context":
        session = _safe(fields.get("sessionId"), valid_id)
        if session and session != state.get("sessionId"):
            state["sessionId"], state["announced"] = session, False
        cwd = _safe(fields.get("cwd"), valid_path)
        if cwd:
            state["cwd"] = cwd
        return []
    if action == "tool_use":
        tool_id = str(fields["toolId"]) if fields.get("toolId") is not None else None
        if tool_id:
            pending = state.setdefault("pending", {})
            pending[tool_id] = {
                "toolName": fields.get("toolName"),
                # scrubbed: the state file is on disk until the result comes
                "toolInput": scrub(maybe_json(fields.get("toolInput"))),
                "offset": offset,
            }
            while len(pending) > MAX_PENDING:
                pending.pop(next(iter(pending)))
        return []
    session = state.get("sessionId") or fallback_session(path, host)
    ops: list[Op] = [] if state.get("announced") else [("start", None)]
    if action == "session_end":
        return [*ops, ("end", {"timestamp": _when(fields, line)})]
    common: dict[str, Any] = {
        "session_id": session,
        "project": project_for(state.get("cwd"), project),
        "cwd": state.get("cwd"),
        "timestamp": _when(fields, line),
    }
    own_id = f"{state.get('fileKey', file_key(path))}.L{offset}"
    event: HookEvent | None = None
    if action in ("session_init", "user_message"):
        prompt = text(fields.get("prompt", fields.get("message")))
        if prompt and prompt.strip():
            event = HookEvent(
                host, "UserPromptSubmit", "prompt", turn_id=own_id, prompt=prompt, **common
            )
    elif action == "assistant_message":
        message = text(fields.get("message", fields.get("prompt")))
        if message and message.strip():
            event = HookEvent(
                host, "Stop", "agent_response", turn_id=own_id, message=message, **common
            )
    else:  # tool_result, observation, file_edit
        raw_id = fields.get("toolId")
        tool_id = str(raw_id) if raw_id is not None and raw_id != "" else None
        call = state.setdefault("pending", {}).pop(tool_id, None) if tool_id else None
        call = call or {}
        name = fields.get("toolName") or call.get("toolName")
        tool_input = (
            maybe_json(fields["toolInput"]) if "toolInput" in fields else call.get("toolInput")
        )
        if action == "file_edit" and tool_input is None and fields.get("filePath"):
            tool_input = {"file_path": fields["filePath"]}
        failed = fields.get("isError") is True or bool(fields.get("error"))
        hook, kind = (
            ("afterFileEdit", "file_edit")
            if action == "file_edit"
            else ("PostToolUseFailure", "tool_failure")
            if failed
            else ("PostToolUse", "tool_post")
        )
        event = HookEvent(
            host,
            hook,
            kind,
            tool_use_id=_safe(tool_id, valid_id) or own_id,
            tool_name=str(name)
            if name is not None
            else ("Edit" if action == "file_edit" else None),
            tool_input=tool_input,
            tool_output=maybe_json(fields.get("toolOutput")),
            error=text(fields.get("error")) if failed else None,
            **common,
        )
    if event is None:
        return []
    return [*ops, ("observe", observe_body(event, event_id(event, fallback_time=float(offset))))]


# --- the watcher -------------------------------------------------------------------------------


class TranscriptWatcher:
    def __init__(
        self,
        config: Config,
        gateway: Delivery,
        *,
        state_path: Path,
        dead_letter_path: Path,
        project: str = "",
        hooks_connected: frozenset[str] = frozenset(),
        out: TextIO = sys.stderr,
    ) -> None:
        self.config = config
        self.gateway = gateway
        self.state_path = state_path
        self.dead_letter_path = dead_letter_path
        self.project = project
        self.hooks_connected = hooks_connected
        self.out = out
        self.state: dict[str, Any] = read_state(state_path)
        self._complained: set[str] = set()

    # files

    def files_for(self, watch: Watch) -> list[Path]:
        pattern = str(Path(watch.path).expanduser())
        if _GLOB.search(pattern):
            found = [Path(p) for p in glob.glob(pattern, recursive=True)]
        elif Path(pattern).is_dir():
            found = list(Path(pattern).rglob("*.jsonl"))
        else:
            found = [Path(pattern)]
        return sorted(p for p in found if p.is_file())

    # one pass

    def pass_once(self) -> dict[str, int]:
        """Read every matching file up to its last complete line (or to the first line the
        gateway could not take for now). Returns counters of this pass."""
        totals = {"files": 0, "lines": 0, "stalled": 0}
        for watch in self.config.watches:
            initialised = self.state["watches"].get(watch.name, {}).get("initialised", False)
            for path in self.files_for(watch):
                key = str(path.resolve())
                files = self.state["files"]
                if key not in files:
                    files[key] = self._first_state(
                        watch, path, at_end=watch.start_at_end and not initialised
                    )
                done, stalled = self.read_file(watch, path, key)
                totals["files"] += 1
                totals["lines"] += done
                totals["stalled"] += stalled
                self.save()
            self.state["watches"][watch.name] = {"initialised": True}
        self.save()
        return totals

    def _first_state(self, watch: Watch, path: Path, *, at_end: bool) -> dict[str, Any]:
        state = new_file_state(watch.name, file_key(path))
        if not at_end:
            return state
        # Start after the last complete line, but learn the session context of what is skipped
        # (the session id and cwd live in the first lines) without sending anything.
        with open(path, "rb") as handle:
            data = handle.read()
        end = data.rfind(b"\n") + 1
        host = host_for(watch.schema.name)
        for offset, raw in _lines(data[:end], 0):
            line = _json(raw)
            if line is None:
                continue
            rule = watch.schema.rule_for(line)
            if rule is not None and rule.action == "session_context":
                apply_line(rule, line, state, host=host, path=path, offset=offset)
            elif subagent_marker(line) is not None:
                state["subagent"] = subagent_marker(line)
        state["offset"] = end
        return state

    def read_file(self, watch: Watch, path: Path, key: str) -> tuple[int, int]:
        """(lines consumed, 1 when the file stopped on a transient failure)."""
        state = self.state["files"][key]
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below; stat and read one file
        except FileNotFoundError:
            return 0, 0
        with handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            why = self._replaced(handle, stat, state)
            if why:  # truncated, rotated or rewritten: a new file, read from the start
                print(f"engram: {path} {why}; reading it from the start", file=self.out)
                carried = {k: state.get(k, 0) for k in ("deadLetters",)}
                state = self.state["files"][key] = {
                    **new_file_state(watch.name, file_key(path)),
                    **carried,
                }
            return self._read(watch, path, key, handle, size, state)

    @staticmethod
    def _replaced(handle: BinaryIO, stat: os.stat_result, state: dict[str, Any]) -> str | None:
        """Why the file at this path is not the one the state was read from, or None. Checks the
        inode and device, and the bytes just before the offset (a rewrite in place, or a copy
        over the old file, keeps the inode)."""
        if stat.st_size < state["offset"]:
            return "shrank below its read offset"
        identity = state.get("identity")
        if identity is None:
            return None  # state from before identities were kept: adopt this file
        if identity.get("ino") != stat.st_ino or identity.get("dev") != stat.st_dev:
            return "was replaced by another file"
        if identity.get("tail") != _tail_hash(handle, state["offset"]):
            return "was rewritten before its read offset"
        return None

    def _read(
        self, watch: Watch, path: Path, key: str, handle: BinaryIO, size: int, state: dict[str, Any]
    ) -> tuple[int, int]:
        stat = os.fstat(handle.fileno())
        consumed = stalled = 0
        while state["offset"] < size and not stalled:
            handle.seek(state["offset"])
            data = handle.read(max(READ_CHUNK, 0))
            if b"\n" not in data:
                more = handle.read()  # a line longer than a chunk: read it whole
                data += more
                if b"\n" not in data:
                    break  # a partial last line waits for its newline
            progressed = False
            for offset, raw in _lines(data, state["offset"]):
                new = self.process_line(watch, path, state, offset, raw)
                if new is None:
                    stalled = 1
                    break
                new["offset"] = offset + len(raw)
                state = self.state["files"][key] = new
                consumed += 1
                progressed = True
            if not progressed:
                break
        # What the file is up to the offset: a later pass notices when another file took its
        # place (see _replaced).
        state["identity"] = _identity(handle, stat, state["offset"])
        self.state["files"][key] = state
        if not stalled:
            self._complained.discard(key)
        return consumed, stalled

    def process_line(
        self, watch: Watch, path: Path, state: dict[str, Any], offset: int, raw: bytes
    ) -> dict[str, Any] | None:
        """The state after this line, or None when the gateway could not take it for now."""
        new = copy.deepcopy(state)
        if not raw.strip():
            return new
        line = _json(raw)
        if line is None:
            self._dead_letter(watch, path, new, offset, raw, "not a JSON line")
            return new
        host = host_for(watch.schema.name)
        ops = apply_line(
            watch.schema.rule_for(line),
            line,
            new,
            host=host,
            path=path,
            offset=offset,
            project=self.project,
        )
        if not ops:
            return new
        if host in self.hooks_connected and new.get("subagent") is not True:
            # One writer per host: its hooks already capture the main session.
            new["coveredByHooks"] = new.get("coveredByHooks", 0) + 1
            return new
        session = new.get("sessionId") or fallback_session(path, host)
        project = project_for(new.get("cwd"), self.project)
        for op, body in ops:
            if op == "start":
                outcome = self.gateway.start_session(
                    session, project, host=host, cwd=new.get("cwd")
                )
            elif op == "end":
                outcome = self.gateway.end_session(session, at=(body or {}).get("timestamp"))
            else:
                outcome = self.gateway.observe(body)
            if outcome.status == TRANSIENT:
                self._stalled(path, offset, outcome)
                return None
            if outcome.status == REJECTED:
                self._dead_letter(watch, path, new, offset, raw, outcome.reason)
                return new
            if op == "start":
                new["announced"] = True
            elif op == "end":
                # Codex ends a "session" at every task_complete: the next turn announces it
                # again (POST /v1/sessions reopens an ended session).
                new["announced"] = False
            elif op == "observe":
                new["sent"] = new.get("sent", 0) + 1
                if outcome.status == "duplicate":
                    new["duplicates"] = new.get("duplicates", 0) + 1
        return new

    def _dead_letter(
        self, watch: Watch, path: Path, state: dict[str, Any], offset: int, raw: bytes, reason: str
    ) -> None:
        append_dead_letter(
            self.dead_letter_path,
            source=str(path),
            offset=offset,
            reason=reason,
            line=raw.decode("utf-8", "replace").rstrip("\n"),
            watch=watch.name,
        )
        state["deadLetters"] = state.get("deadLetters", 0) + 1
        print(f"engram: {path} line at byte {offset} dead-lettered: {reason}", file=self.out)

    def _stalled(self, path: Path, offset: int, outcome: Outcome) -> None:
        key = str(path.resolve())
        if key not in self._complained:  # say it once per outage, not every poll
            self._complained.add(key)
            print(
                f"engram: the gateway did not take {path} at byte {offset} "
                f"({outcome.reason}); will retry from there",
                file=self.out,
            )

    def save(self) -> None:
        write_json_atomic(self.state_path, self.state)


def _lines(data: bytes, base: int) -> list[tuple[int, bytes]]:
    """Complete lines (with their newline) and their absolute offsets; a tail without newline is
    left out."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end == -1:
            return out
        out.append((base + pos, data[pos : end + 1]))
        pos = end + 1


TAIL_BYTES = 64
"""How many bytes before the read offset identify a file's content (see _tail_hash)."""


def _tail_hash(handle: BinaryIO, offset: int) -> str:
    """A short hash of the bytes just before ``offset``: differs when the file at the path is
    not the one read up to there."""
    start = max(0, offset - TAIL_BYTES)
    handle.seek(start)
    return hashlib.sha1(handle.read(offset - start)).hexdigest()[:16]


def _identity(handle: BinaryIO, stat: os.stat_result, offset: int) -> dict[str, Any]:
    return {"ino": stat.st_ino, "dev": stat.st_dev, "tail": _tail_hash(handle, offset)}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def read_state(path: Path) -> dict[str, Any]:
    state = read_json(path, None)
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        state = {"version": STATE_VERSION, "files": {}, "watches": {}}
    state.setdefault("files", {})
    state.setdefault("watches", {})
    return state


def base_dirs(config: Config) -> list[Path]:
    """The folders to watch for file events: each watch path up to its first glob segment."""
    dirs = []
    for watch in config.watches:
        pattern = Path(watch.path).expanduser()
        parts = pattern.parts
        cut = next((i for i, p in enumerate(parts) if _GLOB.search(p)), len(parts))
        base = Path(*parts[:cut]) if cut else Path(".")
        if cut == len(parts) and not base.is_dir():
            base = base.parent
        dirs.append(base)
    return sorted(set(dirs))


def run_forever(watcher: TranscriptWatcher, poll_seconds: float, stop: threading.Event) -> None:
    """Pass over all files on every file event and at least every ``poll_seconds``, until
    ``stop`` is set. Without watchdog installed it only polls."""
    wake = threading.Event()
    observer = _observer(base_dirs(watcher.config), wake, watcher.out)
    try:
        while not stop.is_set():
            watcher.pass_once()
            wake.wait(poll_seconds)
            wake.clear()
    finally:
        if observer is not None:
            observer.stop()
            observer.join(5)


def _observer(dirs: list[Path], wake: threading.Event, out: TextIO) -> Any:
    try:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
    except ImportError:
        print("engram: watchdog is not installed; polling only", file=out)
        return None

    class Wake(FileSystemEventHandler):
        def on_any_event(self, event: Any) -> None:
            # created, modified, moved onto the target (editor saves), overflow: all mean
            # "look again"; the pass itself decides what is new.
            wake.set()

    observer = Observer()
    watched = 0
    for folder in dirs:
        if folder.is_dir():
            observer.schedule(Wake(), str(folder), recursive=True)
            watched += 1
    if not watched:
        return None
    observer.start()
    return observer
