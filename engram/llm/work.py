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
TARGETS = (SUMMARY_TARGET,)
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
    if derive.pending(conn, SUMMARY_TARGET) >= settings.llm_backlog_max:
        return False
    derive.enqueue(conn, summary_doc_id(session_id), derive.UPSERT, targets=(SUMMARY_TARGET,))
    return True


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return [clip(item.strip(), MAX_ITEM_CHARS) for item in value if item.strip()][:MAX_LIST_ITEMS]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


def parse_summary(text: str) -> dict[str, Any]:
    """The validated summary object of an answer; ``ValueError`` says what is wrong."""
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
    expected = {"request", "done", "decisions", "failed", "open"}
    if set(value) != expected:
        missing, extra = expected - set(value), set(value) - expected
        raise ValueError(
            "the object's keys are wrong"
            + (f"; missing {sorted(missing)}" if missing else "")
            + (f"; unexpected {sorted(extra)}" if extra else "")
        )
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


def drain(store: Store, llm: LLM, settings: Settings, limit: int = 1) -> int:
    """Do up to ``limit`` queued LLM work items; returns how many were claimed (0: none left
    that is due)."""
    with store.write(background=True) as conn:
        changes = derive.claim(conn, SUMMARY_TARGET, limit, LEASE_SECONDS)
    for change in changes:
        age_hours = (time.time() - change.enqueued_at) / 3600
        session_id = change.doc.session_id if change.doc is not None else None
        if session_id is None or age_hours > settings.llm_max_age_hours:
            if session_id is not None:
                llm.ledger.add("", "", "summarize", dropped=1)
                log.info("LLM summary of session %s dropped: %.1f h old", session_id, age_hours)
            with store.write(background=True) as conn:
                derive.done(conn, SUMMARY_TARGET, [change])
            continue
        what, retry = summarize_with_llm(store, llm, session_id)
        with store.write(background=True) as conn:
            if retry and change.attempts < MAX_ATTEMPTS:
                wait = backoff_seconds(change.attempts, RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS)
                derive.failed(conn, SUMMARY_TARGET, [change], what, wait)
            else:
                derive.done(conn, SUMMARY_TARGET, [change])
    return len(changes)
