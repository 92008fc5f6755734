"""Claude Code transcripts (``~/.claude/projects/**/*.jsonl``) as the events its hooks send.

Each line is one JSON object; ``user`` and ``assistant`` lines carry ``message.content`` (a string
or a list of ``text`` / ``tool_use`` / ``tool_result`` / ``thinking`` / ``image`` blocks) and
``sessionId``, ``cwd``, ``timestamp``, ``uuid``. What becomes an event, named as the live hook
names it, so that the gateway recognises a call both paths saw:

- a user prompt -> ``UserPromptSubmit``, turn id = the line's uuid;
- a ``tool_use`` paired with its ``tool_result`` -> ``PostToolUse`` (``PostToolUseFailure`` when
  ``is_error``), tool_use_id = the block id: exactly the id the live hook derives;
- the last assistant text before the next prompt (or the end of the file) -> ``Stop``, turn id =
  that line's uuid.

Not prompts: meta lines (``isMeta``), compaction summaries, slash-command wrappers and their
output, system reminders, subagent (``isSidechain``) chatter. Subagent tool calls are kept: the
live PostToolUse hook sees them too. A line that is not JSON (a torn last line) is skipped and
counted, never fatal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.agents.contract import BadPayload, HookEvent, project_for, valid_id, valid_path
from engram.events import parse_timestamp

HOST = "claude-code"

_WRAPPERS = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_INTERRUPTED = re.compile(r"^\[Request interrupted by user[^\]]*\]\s*")


@dataclass
class Parsed:
    """One transcript file as events, plus what could not be read."""

    events: list[HookEvent] = field(default_factory=list)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """session id -> {"project", "cwd"}, in order of first appearance."""
    lines: int = 0
    invalid: int = 0
    """Lines that are not a JSON object (torn or corrupt), skipped."""
    unusable: int = 0
    """JSON lines whose ids or paths are not safe (see agents.contract.valid_id), skipped."""


def read_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], int, int]:
    """(byte offset, object) for each JSON-object line, the number of lines, and of lines that
    are not a JSON object. A last line without its newline is read too: a file being written
    just ends in a torn line, counted as invalid."""
    records: list[tuple[int, dict[str, Any]]] = []
    lines = invalid = 0
    offset = 0
    with open(path, "rb") as handle:
        for raw in handle:
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            lines += 1
            try:
                value = json.loads(raw)
            except ValueError:
                invalid += 1
                continue
            if isinstance(value, dict):
                records.append((start, value))
            else:
                invalid += 1
    return records, lines, invalid


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def prompt_text(line: dict[str, Any], blocks: list[dict[str, Any]]) -> str | None:
    """What the user typed on this line, or None when the line is not a real prompt."""
    if line.get("isMeta") or line.get("isCompactSummary") or line.get("isSidechain"):
        return None
    parts = [
        b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    text = _INTERRUPTED.sub("", _REMINDER.sub("", "\n".join(parts))).strip()
    if not text or text.startswith(_WRAPPERS) or text.startswith("Caveat: "):
        return None
    return text


def _result_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict)]
        return "\n".join(t for t in texts if isinstance(t, str)) or None
    return None


def _timestamp(line: dict[str, Any]) -> float | None:
    try:
        return parse_timestamp(line.get("timestamp")) if line.get("timestamp") else None
    except ValueError:
        return None


class _Turn:
    """The last assistant text of the current turn: becomes the Stop event when the turn ends.
    Claude Code writes one message over several lines (same ``message.id``): their texts join."""

    def __init__(self) -> None:
        self.uuid: str | None = None
        self.message_id: Any = None
        self.texts: list[str] = []
        self.timestamp: float | None = None
        self.session_id: str | None = None

    def add(self, line: dict[str, Any], session_id: str, texts: list[str]) -> None:
        message_id = (line.get("message") or {}).get("id")
        if message_id is None or message_id != self.message_id or session_id != self.session_id:
            self.texts = []
        self.texts.extend(texts)
        self.uuid, self.message_id = line.get("uuid"), message_id
        self.timestamp, self.session_id = _timestamp(line), session_id

    def close(self, project: str) -> HookEvent | None:
        if not self.texts or self.session_id is None:
            return None
        event = HookEvent(
            HOST,
            "Stop",
            "agent_response",
            session_id=self.session_id,
            turn_id=_safe_id(self.uuid),
            message="\n".join(self.texts),
            timestamp=self.timestamp,
            project=project,
        )
        self.__init__()  # type: ignore[misc]
        return event


def _safe_id(value: Any) -> str | None:
    try:
        return valid_id(value, "id")
    except BadPayload:
        return None


def parse(path: Path, configured_project: str = "") -> Parsed:
    """The events a transcript file stands for, in file order."""
    records, lines, invalid = read_records(path)
    parsed = Parsed(lines=lines, invalid=invalid)
    pending: dict[str, tuple[str | None, Any]] = {}
    turn = _Turn()

    def project_of(session_id: str) -> str:
        return str(parsed.sessions[session_id]["project"])

    for _, line in records:
        kind = line.get("type")
        if kind not in ("user", "assistant"):
            continue  # summary, system, file-history-snapshot, ...
        try:
            session_id = valid_id(line.get("sessionId"), "sessionId")
            cwd = valid_path(line.get("cwd"), "cwd")
        except BadPayload:
            parsed.unusable += 1
            continue
        if session_id is None:
            parsed.unusable += 1
            continue
        if session_id not in parsed.sessions:
            parsed.sessions[session_id] = {
                "cwd": cwd,
                "project": project_for(cwd, configured_project),
            }
        elif cwd and not parsed.sessions[session_id]["cwd"]:
            parsed.sessions[session_id].update(
                cwd=cwd, project=project_for(cwd, configured_project)
            )
        blocks = _blocks(line.get("message"))
        when = _timestamp(line)
        if kind == "assistant":
            for block in blocks:
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    name = block.get("name")
                    pending[block["id"]] = (
                        name if isinstance(name, str) else None,
                        block.get("input"),
                    )
            texts = [
                b["text"]
                for b in blocks
                if b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()
            ]
            if texts and not line.get("isSidechain"):
                turn.add(line, session_id, texts)
            continue
        for block in blocks:
            if block.get("type") != "tool_result":
                continue
            parsed.events.append(
                _tool_event(line, block, pending, session_id, project_of(session_id), when)
            )
        prompt = prompt_text(line, [b for b in blocks if b.get("type") == "text"])
        if prompt is None:
            continue
        stop = turn.close(project_of(turn.session_id) if turn.session_id else "")
        if stop is not None:
            parsed.events.append(stop)
        parsed.events.append(
            HookEvent(
                HOST,
                "UserPromptSubmit",
                "prompt",
                session_id=session_id,
                turn_id=_safe_id(line.get("uuid")),
                prompt=prompt,
                cwd=cwd,
                project=project_of(session_id),
                timestamp=when,
            )
        )
    stop = turn.close(project_of(turn.session_id) if turn.session_id else "")
    if stop is not None:
        parsed.events.append(stop)
    return parsed


def _tool_event(
    line: dict[str, Any],
    block: dict[str, Any],
    pending: dict[str, tuple[str | None, Any]],
    session_id: str,
    project: str,
    when: float | None,
) -> HookEvent:
    tool_use_id = _safe_id(block.get("tool_use_id"))
    name, tool_input = pending.pop(block.get("tool_use_id") or "", (None, None))
    failed = block.get("is_error") is True
    # The line's toolUseResult is what the live hook gets as tool_response; the block's content
    # is the text the model saw.
    response = line.get("toolUseResult")
    output = response if isinstance(response, (dict, list)) else _result_text(block.get("content"))
    if failed:
        return HookEvent(
            HOST,
            "PostToolUseFailure",
            "tool_failure",
            session_id=session_id,
            tool_use_id=tool_use_id,
            tool_name=name,
            tool_input=tool_input,
            error=_result_text(block.get("content")) or "tool call failed",
            project=project,
            timestamp=when,
        )
    return HookEvent(
        HOST,
        "PostToolUse",
        "tool_post",
        session_id=session_id,
        tool_use_id=tool_use_id,
        tool_name=name,
        tool_input=tool_input,
        tool_output=output,
        project=project,
        timestamp=when,
    )


def transcript_files(paths: list[Path]) -> Iterator[Path]:
    """Each path as itself when it is a file, or its ``*.jsonl`` files (recursively, sorted)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        else:
            yield path
