"""Heuristic session summary: what was asked, what changed, what ran, what broke, how it ended.

Built at session end from the session's observation records (the camelCase shape that
``compress.compress`` fills), with no LLM: the summary is what a reader would reconstruct by
skimming the timeline, and it is what the next session's context block starts from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from engram.store import Store

from engram.compress import SESSION_LABELS, command_concepts, event_kind, one_line

MAX_FILES = 30
"""Files listed per section; a session that touched more is a refactor, and the head says so."""
MAX_COMMANDS = 12
"""Commands kept: the relevant ones (tests, builds, git, ...) and the last few; oldest dropped."""
RECENT_COMMANDS = 3
"""The last distinct commands are kept whatever they are: they show where the session ended."""
MAX_ERRORS = 10
MAX_REQUEST_CHARS = 500
"""Bound on ``request``: the first prompt gets most of it, later prompts a short line each."""
RELEVANT_FAMILIES = frozenset({"test", "build", "git", "lint", "docker", "kubernetes", "database"})
"""Command families (see ``compress.command_concepts``) worth keeping in a summary."""


@dataclass(frozen=True)
class SessionSummary:
    """What a session did. ``errors`` holds every distinct error, ``unresolved_errors`` the subset
    that no later successful run of the same command (or tool on the same file) cleared."""

    request: str = ""
    files_read: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    unresolved_errors: tuple[str, ...] = ()
    outcome: str = "unknown"
    observation_count: int = 0

    def is_resolved(self, error: str) -> bool:
        return error in self.errors and error not in self.unresolved_errors

    def to_text(self) -> str:
        """A compact markdown-ish block; sections with nothing to say are left out."""
        errors = [
            f"{e} ({'resolved' if self.is_resolved(e) else 'unresolved'})" for e in self.errors
        ]
        lines = [f"Request: {self.request}" if self.request else ""]
        lines.append(
            f"Files changed: {', '.join(self.files_changed)}" if self.files_changed else ""
        )
        lines.append(f"Files read: {', '.join(self.files_read)}" if self.files_read else "")
        for heading, items in (("Commands", [f"`{c}`" for c in self.commands]), ("Errors", errors)):
            lines.extend([f"{heading}:", *(f"- {item}" for item in items)] if items else [])
        lines.append(f"Outcome: {self.outcome}" if self.outcome else "")
        return "\n".join(line for line in lines if line)

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "filesRead": list(self.files_read),
            "filesChanged": list(self.files_changed),
            "commands": list(self.commands),
            "errors": list(self.errors),
            "unresolvedErrors": list(self.unresolved_errors),
            "outcome": self.outcome,
            "observationCount": self.observation_count,
        }


def summarize(observations: Sequence[Mapping[str, Any]]) -> SessionSummary:
    """Summarise one session from its observation records, oldest first."""
    records = [r for r in observations if isinstance(r, Mapping)]
    if not records:
        return SessionSummary(outcome="empty session", observation_count=len(observations))
    changed = _unique(f for r in records for f in _strings(r.get("filesModified")))
    changed_set = set(changed)  # a file that was changed is listed once, as changed
    read = [
        f
        for f in _unique(f for r in records for f in _strings(r.get("filesRead")))
        if f not in changed_set
    ]
    last_seen: dict[str, int] = {}  # error -> index of its last occurrence, in order of first
    for i, record in enumerate(records):
        last_seen.update(dict.fromkeys(_strings(record.get("errors")), i))
    errors = list(last_seen)[-MAX_ERRORS:]
    # A clean test run or build after the last failure clears the failures of every test run
    # and build before it (the code compiled and passed); a failed lint or deploy stays open.
    clean = _clean_at_end(records)
    unresolved = [
        e
        for e in errors
        if not _resolved(records, last_seen[e])
        and not (clean and _tested_or_built(records[last_seen[e]]))
    ]
    return SessionSummary(
        request=_request(records),
        files_read=tuple(read[:MAX_FILES]),
        files_changed=tuple(changed[:MAX_FILES]),
        commands=_commands(records),
        errors=tuple(errors),
        unresolved_errors=tuple(unresolved),
        outcome=_outcome(records, unresolved),
        observation_count=len(observations),
    )


def _request(records: list[Mapping[str, Any]]) -> str:
    prompts = _unique(one_line(p, MAX_REQUEST_CHARS) for p in map(_prompt, records))
    if len(prompts) < 2:
        return prompts[0] if prompts else ""
    later = "; ".join(one_line(p, 80) for p in prompts[1:])
    return one_line(
        f"{one_line(prompts[0], MAX_REQUEST_CHARS * 3 // 5)} — then: {later}", MAX_REQUEST_CHARS
    )


def _prompt(record: Mapping[str, Any]) -> str:
    prompt = record.get("prompt")
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    if record.get("kind") != "prompt":
        return ""
    text = _str(record.get("text")) or _str(record.get("title"))
    return text.removeprefix("Prompt: ")


def _commands(records: list[Mapping[str, Any]]) -> tuple[str, ...]:
    runs = [one_line(c, 200) for r in records for c in _strings(r.get("commands"))]
    recent = set(_unique(reversed(runs))[:RECENT_COMMANDS])
    relevant = [
        c
        for c in _unique(runs)
        if c in recent or RELEVANT_FAMILIES.intersection(command_concepts(c))
    ]
    return tuple(relevant[-MAX_COMMANDS:])


def _resolved(records: list[Mapping[str, Any]], index: int) -> bool:
    """Whether the failure at ``index`` was followed by a clean run of the same thing.

    The same thing is the same command, or a broader run of the same test runner (`pytest -q`
    after `pytest tests/test_x.py -q`); for a tool call without a command, the same tool on one
    of the same files.
    """
    failed = records[index]
    commands = [" ".join(c.split()) for c in _strings(failed.get("commands"))]
    files = set(_strings(failed.get("filesModified"))) | set(_strings(failed.get("filesRead")))
    for later in records[index + 1 :]:
        if _strings(later.get("errors")) or not _ran(later):
            continue
        reruns = [" ".join(c.split()) for c in _strings(later.get("commands"))]
        if any(_same_run(before, after) for before in commands for after in reruns):
            return True
        later_files = set(_strings(later.get("filesModified"))) | set(
            _strings(later.get("filesRead"))
        )
        same_tool = later.get("toolName") == failed.get("toolName")
        if not commands and same_tool and files & later_files:
            return True
    return False


def _same_run(before: str, after: str) -> bool:
    if before == after:
        return True
    old, new = before.split(), after.split()
    tests = "test" in command_concepts(before) and "test" in command_concepts(after)
    return tests and old[:1] == new[:1] and set(new) <= set(old)


def _failed(record: Mapping[str, Any]) -> bool:
    return bool(_strings(record.get("errors")))


def _test_runs(records: list[Mapping[str, Any]]) -> list[int]:
    return [
        i
        for i, r in enumerate(records)
        if _ran(r) and any("test" in command_concepts(c) for c in _strings(r.get("commands")))
    ]


def _clean_at_end(records: list[Mapping[str, Any]]) -> bool:
    """The session's last test run or build succeeded, and nothing failed after it: the
    failures of the runs and builds before it are fixed (`tsc` failing, then `npm run build`
    passing)."""
    runs = [i for i, r in enumerate(records) if _ran(r) and _tested_or_built(r)]
    last_error = max((i for i, r in enumerate(records) if _failed(r)), default=-1)
    return bool(runs) and not _failed(records[runs[-1]]) and runs[-1] > last_error


def _passing_at_end(records: list[Mapping[str, Any]]) -> bool:
    """The session's last test run passed, and nothing failed after it."""
    tests = _test_runs(records)
    last_error = max((i for i, r in enumerate(records) if _failed(r)), default=-1)
    return bool(tests) and not _failed(records[tests[-1]]) and tests[-1] > last_error


def _tested_or_built(record: Mapping[str, Any]) -> bool:
    """A test run or a compile (`go build`, `cargo build`, `tsc`, `make`): what a later
    passing test run proves fixed."""
    commands = _strings(record.get("commands"))
    words = {w for c in commands for w in c.split()[:3]}
    if words & _NOT_BUILDS:
        return False
    families = {f for c in commands for f in command_concepts(c)}
    return bool(families & {"test", "build"} or words & {"build", "compile", "tsc", "vet"})


_NOT_BUILDS = frozenset({"lint", "deploy", "publish", "release", "docs", "fmt", "format", "push"})
"""Targets (`make lint`, `make deploy`) whose failure a passing test run says nothing about."""


def _outcome(records: list[Mapping[str, Any]], unresolved: list[str]) -> str:
    tests = _test_runs(records)
    tests_pass = bool(tests) and not _failed(records[tests[-1]])
    if _passing_at_end(records):
        if unresolved:  # never "completed" beside an open error
            return one_line("tests passing; unresolved errors: " + "; ".join(unresolved[-2:]), 300)
        return "completed: tests passing"
    if unresolved:
        return one_line("unresolved errors: " + "; ".join(unresolved[-2:]), 300)
    if tests_pass:
        return "completed: tests passing"
    stops = [r for r in records if _str(r.get("title")).startswith(AGENT_FINISHED)]
    message = _stop_message(stops[-1]) if stops else ""
    return one_line(message, 300) if message else "unknown"


AGENT_FINISHED = SESSION_LABELS["agent_response"]
"""How compression titles the agent's answer at the end of a turn, whatever the host's hook."""


def _ran(record: Mapping[str, Any]) -> bool:
    """False for PreToolUse-style records: a call about to run proves nothing about success."""
    return event_kind(record) != "tool_pre"


def _stop_message(record: Mapping[str, Any]) -> str:
    """The agent's last message: the text under the title, or what follows "Agent finished: "."""
    first, _, rest = _str(record.get("text")).partition("\n")
    if rest.strip():
        return rest.strip()
    return (first or _str(record.get("title"))).partition(": ")[2].strip()


def _strings(value: Any) -> list[str]:
    """A record's list field as strings; tolerates None, a bare string and stray non-strings."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str) and v.strip()]
    return []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(item for item in items if item))


def summary_doc_id(session_id: str) -> str:
    """The keyword document of a session's summary."""
    return f"sum_{session_id}"[:64]


def store_summary(store: Store, conn: Connection, session: Any, text: str, data: str) -> None:
    """Save a session's summary (``text``, and ``data`` as JSON text) and index it for search:
    the one way a summary is written, heuristic or not (call in a write transaction)."""
    from engram.keyword import KeywordDoc
    from engram.sessions import save_summary
    from engram.store import now

    save_summary(conn, session.id, text, data)
    store.keyword.upsert(
        conn,
        KeywordDoc(
            doc_id=summary_doc_id(session.id),
            kind="summary",
            project=session.project,
            body=text,
            created_at=session.ended_at or now(),
            agent_id=session.agent_id,
            session_id=session.id,
        ),
    )


def summarize_session(
    store: Store, session_id: str, then: Callable[[Connection], None] | None = None
) -> dict[str, Any] | None:
    """Build the heuristic summary of a session from its observations, store and index it;
    ``then`` runs in the same transaction (the LLM summary is queued there, so a crash cannot
    store one without the other).

    Idempotent: running it again rebuilds the same summary (and re-indexes it in place).
    """
    from sqlalchemy import select

    from engram import observations
    from engram.schema import sessions
    from engram.store import dumps

    with store.write() as conn:
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is None:
            return None
        records = [
            observations.to_dict(r, detail=True) for r in observations.for_session(conn, session_id)
        ]
        summary = summarize(records)
        text = summary.to_text()
        store_summary(store, conn, row, text, dumps(summary.to_dict()))
        if then is not None:
            then(conn)
    return summary.to_dict()
