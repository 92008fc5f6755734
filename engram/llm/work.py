"""LLM work on the store: a bounded, durable backlog and the session summary task.

The backlog is the derive queue's ``llm_summary`` target (one row per session summary document,
written when the heuristic summary is stored, so a crash loses nothing), bounded twice: at most
``ENGRAM_LLM_BACKLOG_MAX`` rows (past it new work is dropped, counted, and its heuristic result
stands) and at most ``ENGRAM_LLM_MAX_AGE_HOURS`` old (older rows are dropped when reached). Work
a spent budget refused is not kept for tomorrow: the heuristic result stands and the row goes.
Only work that failed because the providers did (down, rate-limited, circuit open) is kept and
tried again, ``MAX_ATTEMPTS`` times at most, backing off.

**summarize**: at session end the heuristic summary is stored first (``engram.summary``), and
the next session's context can use it at once. The LLM then reads a bounded timeline of the
session (each observation's kind, title and head, the heuristic's files, commands and errors) and
answers one JSON object: ``request``, ``done``, ``decisions`` (each with ``why``), ``failed`` and
``open``. The answer is validated (``parse_summary``: the object, its keys, their types, bounded
lengths); an answer that fails is asked once more, then the heuristic summary stands. A valid
one replaces the session's summary text (what the context block and search read) and is kept
beside the heuristic's fields in ``summary_json["llm"]``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from engram import derive
from engram.backoff import backoff_seconds
from engram.llm.chain import LLM, clip

if TYPE_CHECKING:
    from engram.settings import Settings
    from engram.store import Store

log = logging.getLogger("engram.llm")

SUMMARY_TARGET = "llm_summary"
COMPRESS_TARGET = "llm_compress"
TARGETS = (SUMMARY_TARGET, COMPRESS_TARGET)
"""In the order they are served: a session summary before an observation's rewrite."""
TASK_OF = {SUMMARY_TARGET: "summarize", COMPRESS_TARGET: "compress"}
LEASE_SECONDS = 600.0
"""A claimed row is someone's for this long: longer than one call with every retry."""
MAX_ATTEMPTS = 3
RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS = 60.0, 1800.0
MAX_LIST_ITEMS = 8
MAX_ITEM_CHARS = 300
TIMELINE_LINE_CHARS = 240

SUMMARY_SYSTEM = (
    "You summarise one coding-agent session for the agent that works on the project next. "
    "Answer with one JSON object and nothing else, with exactly these keys: "
    '"request" (string: what the user asked for, one sentence), '
    '"done" (list of strings: what was done), '
    '"decisions" (list of objects {"decision": string, "why": string}), '
    '"failed" (list of strings: what failed or was abandoned), '
    '"open" (list of strings: what is left to do). '
    f"At most {MAX_LIST_ITEMS} items a list, each under {MAX_ITEM_CHARS} characters. Use only "
    "facts in the timeline; name files, commands and errors exactly as written there; an empty "
    "list when there is nothing to say."
)


def summary_doc_id(session_id: str) -> str:
    """The keyword document of a session's summary (as ``engram.summary`` indexes it)."""
    return f"sum_{session_id}"[:64]


def queue_summary(conn: Any, session_id: str, settings: Settings) -> bool:
    """Ask for the LLM summary of a session whose heuristic summary was just stored (call in
    its write transaction). False when the backlog is full: the heuristic summary stands."""
    return _queue(conn, SUMMARY_TARGET, summary_doc_id(session_id), settings)


def compresses(settings: Settings, project: str) -> bool:
    """The project opted in to LLM compression (ENGRAM_LLM_COMPRESS_PROJECTS)."""
    chosen = settings.llm_compress_projects
    return bool(settings.llm_providers) and ("*" in chosen or project in chosen)


def queue_compress(conn: Any, observation_id: str, settings: Settings) -> bool:
    """Ask for the LLM's reading of an observation just stored (call in its write transaction).
    False when the backlog is full: the heuristic record stands."""
    return _queue(conn, COMPRESS_TARGET, observation_id, settings)


def _queue(conn: Any, target: str, doc_id: str, settings: Settings) -> bool:
    if derive.pending(conn, target) >= settings.llm_backlog_max:
        return False
    derive.enqueue(conn, doc_id, derive.UPSERT, targets=(target,))
    return True


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return [clip(item.strip(), MAX_ITEM_CHARS) for item in value if item.strip()][:MAX_LIST_ITEMS]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


def parse_summary(text: str) -> dict[str, Any]:
    """The validated summary object of an answer; ``ValueError`` says what is wrong."""
    value = _json_object(text)
    _exact_keys(value, {"request", "done", "decisions", "failed", "open"})
    if not isinstance(value["request"], str) or not value["request"].strip():
        raise ValueError("'request' must be a non-empty string")
    decisions = value["decisions"]
    if not isinstance(decisions, list) or not all(
        isinstance(d, dict)
        and isinstance(d.get("decision"), str)
        and isinstance(d.get("why", ""), str)
        for d in decisions
    ):
        raise ValueError("'decisions' must be a list of {decision, why} objects")
    return {
        "request": clip(value["request"].strip(), MAX_ITEM_CHARS),
        "done": _strings(value["done"], "done"),
        "decisions": [
            {
                "decision": clip(d["decision"].strip(), MAX_ITEM_CHARS),
                "why": clip(str(d.get("why", "")).strip(), MAX_ITEM_CHARS),
            }
            for d in decisions
            if d["decision"].strip()
        ][:MAX_LIST_ITEMS],
        "failed": _strings(value["failed"], "failed"),
        "open": _strings(value["open"], "open"),
    }


def render_summary(llm: dict[str, Any], heuristic: dict[str, Any]) -> str:
    """The summary text sessions show and search reads: the LLM's sections, then the heuristic's
    exact files and outcome (what the model may paraphrase, the record keeps verbatim)."""
    lines = [f"Request: {llm['request']}"]
    for heading, items in (("Done", llm["done"]), ("Failed", llm["failed"]), ("Open", llm["open"])):
        if items:
            lines += [f"{heading}:", *(f"- {item}" for item in items)]
    if llm["decisions"]:
        lines.append("Decisions:")
        lines += [
            f"- {d['decision']}" + (f" (why: {d['why']})" if d["why"] else "")
            for d in llm["decisions"]
        ]
    if heuristic.get("filesChanged"):
        lines.append(f"Files changed: {', '.join(heuristic['filesChanged'])}")
    if heuristic.get("outcome"):
        lines.append(f"Outcome: {heuristic['outcome']}")
    return "\n".join(lines)


def summary_prompt(records: list[dict[str, Any]], heuristic: dict[str, Any], max_chars: int) -> str:
    """The session as the model reads it: the heuristic's facts, then the timeline (head and
    tail kept when it is long)."""
    facts = []
    for label, key in (
        ("Files changed", "filesChanged"),
        ("Files read", "filesRead"),
        ("Commands", "commands"),
        ("Errors", "errors"),
        ("Unresolved errors", "unresolvedErrors"),
    ):
        if heuristic.get(key):
            facts.append(f"{label}: " + "; ".join(str(item) for item in heuristic[key]))
    if heuristic.get("outcome"):
        facts.append(f"Outcome (heuristic): {heuristic['outcome']}")
    timeline = []
    for number, record in enumerate(records, 1):
        head = " ".join(str(record.get("text") or "").split())
        line = f"{number}. [{record.get('kind')}] {record.get('title') or ''}: {head}"
        timeline.append(clip(line, TIMELINE_LINE_CHARS))
    head = "Facts:\n" + "\n".join(facts) + "\n\nTimeline:\n"
    return head + clip("\n".join(timeline), max(max_chars - len(head), 500))


def summarize_with_llm(store: Store, llm: LLM, session_id: str) -> tuple[str, bool]:
    """Replace a session's heuristic summary with the LLM's. Returns (what happened, whether
    to try again later)."""
    from engram import observations
    from engram.keyword import KeywordDoc
    from engram.schema import sessions
    from engram.sessions import save_summary
    from engram.store import dumps, loads, now

    with store.read() as conn:
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is None or not row.summary_json:
            return "missing", False
        records = [observations.to_dict(r) for r in observations.for_session(conn, session_id)]
    heuristic = loads(row.summary_json, {}) or {}
    heuristic.pop("llm", None)
    room = llm.max_input_tokens * 3 - len(SUMMARY_SYSTEM)
    outcome = llm.complete(
        "summarize",
        SUMMARY_SYSTEM,
        summary_prompt(records, heuristic, room),
        tier="summary",
        parse=parse_summary,
    )
    if not outcome.ok or outcome.reply is None:
        log.info("LLM summary of session %s: heuristic stands (%s)", session_id, outcome.reason)
        return outcome.reason, outcome.retry
    made = outcome.value
    text = render_summary(made, heuristic)
    stored = {
        **heuristic,
        "llm": {**made, "provider": outcome.reply.provider, "model": outcome.reply.model},
    }
    with store.write(background=True) as conn:
        current = conn.execute(
            select(sessions.c.summary_json).where(sessions.c.id == session_id)
        ).scalar()
        if current != row.summary_json:  # summarised again meanwhile: its own row follows
            return "the session changed meanwhile", False
        save_summary(conn, session_id, text, dumps(stored))
        store.keyword.upsert(
            conn,
            KeywordDoc(
                doc_id=summary_doc_id(session_id),
                kind="summary",
                project=row.project,
                body=text,
                created_at=row.ended_at or now(),
                agent_id=row.agent_id,
                session_id=session_id,
            ),
        )
    return "summarized", False


OBSERVATION_TYPES = (
    "bugfix",
    "feature",
    "refactor",
    "change",
    "discovery",
    "decision",
    "error",
    "test",
    "config",
    "other",
)
MAX_TITLE_CHARS = 120
MAX_NARRATIVE_CHARS = 600
INPUT_SHARE = 0.3
"""Of the prompt's room, what a tool's input may take; its output gets the rest (head and tail)."""

COMPRESS_SYSTEM = (
    "You turn one event of a coding-agent session (a prompt, a tool call with its input and "
    "output, an edit, an error) into a record a developer can read later. Answer with one JSON "
    "object and nothing else, with exactly these keys: "
    f'"type" (one of {", ".join(OBSERVATION_TYPES)}), '
    f'"title" (string, under {MAX_TITLE_CHARS} characters: what happened), '
    '"facts" (list of strings: concrete facts worth remembering), '
    f'"narrative" (string, under {MAX_NARRATIVE_CHARS} characters: what happened and why it '
    "matters), "
    '"concepts" (list of short lowercase keywords), '
    '"files" (list of file paths the event touched or names), '
    '"importance" (integer 1-5: 5 = a decision or root cause to remember, 1 = routine). '
    f"At most {MAX_LIST_ITEMS} items a list. Use only what the event shows; parts marked as cut "
    "are missing, do not guess them."
)


def _json_object(text: str) -> dict[str, Any]:
    body = _FENCE.sub("", text.strip())
    try:
        value = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("the answer holds no JSON object") from None
        try:
            value = json.loads(body[start : end + 1])
        except ValueError as exc:
            raise ValueError(f"the answer's JSON does not parse: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("the answer is not a JSON object")
    return value


def _exact_keys(value: dict[str, Any], expected: set[str]) -> None:
    if set(value) != expected:
        missing, extra = expected - set(value), set(value) - expected
        raise ValueError(
            "the object's keys are wrong"
            + (f"; missing {sorted(missing)}" if missing else "")
            + (f"; unexpected {sorted(extra)}" if extra else "")
        )


def parse_observation(text: str) -> dict[str, Any]:
    """The validated record of a compress answer; ``ValueError`` says what is wrong."""
    value = _json_object(text)
    _exact_keys(value, {"type", "title", "facts", "narrative", "concepts", "files", "importance"})
    kind = str(value["type"]).strip().lower()
    if kind not in OBSERVATION_TYPES:
        raise ValueError(f"'type' must be one of {', '.join(OBSERVATION_TYPES)}, got {kind!r}")
    for key in ("title", "narrative"):
        if not isinstance(value[key], str) or not value[key].strip():
            raise ValueError(f"{key!r} must be a non-empty string")
    importance = value["importance"]
    if isinstance(importance, bool) or not isinstance(importance, int) or not 1 <= importance <= 5:
        raise ValueError("'importance' must be an integer from 1 to 5")
    return {
        "type": kind,
        "title": clip(" ".join(value["title"].split()), MAX_TITLE_CHARS),
        "facts": _strings(value["facts"], "facts"),
        "narrative": clip(value["narrative"].strip(), MAX_NARRATIVE_CHARS),
        "concepts": [c.lower() for c in _strings(value["concepts"], "concepts")],
        "files": _strings(value["files"], "files"),
        "importance": importance,
    }


def observation_prompt(record: dict[str, Any], max_chars: int) -> str:
    """One event as the model reads it: what it is, the heuristic's reading, then its input and
    output, each cut to its share of the room (head and tail, the cut marked)."""

    def text_of(value: Any) -> str:
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    head = [
        f"Kind: {record.get('kind')}",
        f"Tool: {record.get('toolName') or '-'}",
        f"Heuristic title: {record.get('title') or ''}",
    ]
    files = [*record.get("filesRead", []), *record.get("filesModified", [])]
    if files:
        head.append("Files: " + ", ".join(files))
    if record.get("errors"):
        head.append("Errors: " + "; ".join(record["errors"]))
    top = "\n".join(head) + "\n"
    room = max(max_chars - len(top), 600)
    prompt = text_of(record.get("prompt"))
    given = text_of(record.get("toolInput"))
    taken = text_of(record.get("toolOutput"))
    parts = [top]
    if prompt:
        parts.append("Prompt:\n" + clip(prompt, room if not (given or taken) else room // 3))
    if given:
        parts.append("Input:\n" + clip(given, int(room * INPUT_SHARE)))
    if taken or not (prompt or given):
        used = sum(len(p) for p in parts)
        parts.append(
            "Output:\n" + clip(taken or str(record.get("text") or ""), max(room - used, 300))
        )
    return "\n".join(parts)


def compress_with_llm(store: Store, llm: LLM, observation_id: str) -> tuple[str, bool]:
    """Add the LLM's reading to an observation and index it. Returns (what happened, whether to
    try again later)."""
    from engram import observations
    from engram.keyword import KeywordDoc
    from engram.schema import observations as table
    from engram.store import dumps

    with store.read() as conn:
        row = conn.execute(select(table).where(table.c.id == observation_id)).first()
    if row is None:
        return "missing", False
    record = observations.to_dict(row, detail=True)
    room = llm.max_input_tokens * 3 - len(COMPRESS_SYSTEM)
    outcome = llm.complete(
        "compress", COMPRESS_SYSTEM, observation_prompt(record, room), parse=parse_observation
    )
    if not outcome.ok or outcome.reply is None:
        log.info("LLM reading of %s: heuristic stands (%s)", observation_id, outcome.reason)
        return outcome.reason, outcome.retry
    made = outcome.value
    body = "\n".join(
        [
            row.text,
            made["title"],
            made["narrative"],
            *made["facts"],
            " ".join([*record["filesRead"], *record["filesModified"], *made["files"]]),
        ]
    )
    stored = {**made, "provider": outcome.reply.provider, "model": outcome.reply.model}
    with store.write(background=True) as conn:
        conn.execute(table.update().where(table.c.id == observation_id).values(llm=dumps(stored)))
        store.keyword.upsert(
            conn,
            KeywordDoc(
                doc_id=observation_id,
                kind="observation",
                project=row.project,
                body=body.strip(),
                created_at=row.created_at,
                agent_id=row.agent_id,
                session_id=row.session_id,
            ),
        )
    return "compressed", False


def drain(store: Store, llm: LLM, settings: Settings, limit: int = 1) -> int:
    """Do up to ``limit`` queued LLM work items, summaries first; returns how many were claimed
    (0: none left that is due)."""
    for target in TARGETS:
        with store.write(background=True) as conn:
            changes = derive.claim(conn, target, limit, LEASE_SECONDS)
        if changes:
            break
    else:
        return 0
    task = TASK_OF[target]
    for change in changes:
        age_hours = (time.time() - change.enqueued_at) / 3600
        if change.doc is None or age_hours > settings.llm_max_age_hours:
            if change.doc is not None:
                llm.ledger.add("", "", task, dropped=1)
                log.info("LLM %s of %s dropped: %.1f h old", task, change.doc_id, age_hours)
            with store.write(background=True) as conn:
                derive.done(conn, target, [change])
            continue
        if target == SUMMARY_TARGET:
            session_id = change.doc.session_id or ""
            what, retry = summarize_with_llm(store, llm, session_id)
        else:
            what, retry = compress_with_llm(store, llm, change.doc_id)
        with store.write(background=True) as conn:
            if retry and change.attempts < MAX_ATTEMPTS:
                wait = backoff_seconds(change.attempts, RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS)
                derive.failed(conn, target, [change], what, wait)
            else:
                derive.done(conn, target, [change])
    return len(changes)
