"""The session summary task (``summarize``, tier ``summary``).

At session end the heuristic summary is stored first (``engram.summary``), and the next
session's context can use it at once; this item is queued in the same transaction
(``engram.llm.work``). The LLM then reads a bounded timeline of the session (each observation's
kind, title and head, the heuristic's files, commands and errors) and answers one JSON object:
``request``, ``done``, ``decisions`` (each with ``why``), ``failed`` and ``open``. The answer is
validated (``parse_summary``); a valid one replaces the session's summary text (what the context
block and search read) and is kept beside the heuristic's fields in ``summary_json["llm"]``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from engram.llm.answers import MAX_ITEM_CHARS, MAX_LIST_ITEMS, exact_keys, json_object, strings
from engram.llm.chain import LLM, clip
from engram.summary import store_summary

if TYPE_CHECKING:
    from engram.store import Store

log = logging.getLogger("engram.llm")

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


def parse_summary(text: str) -> dict[str, Any]:
    """The validated summary object of an answer; ``ValueError`` says what is wrong."""
    value = json_object(text)
    exact_keys(value, {"request", "done", "decisions", "failed", "open"})
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
        "done": strings(value["done"], "done"),
        "decisions": [
            {
                "decision": clip(d["decision"].strip(), MAX_ITEM_CHARS),
                "why": clip(str(d.get("why", "")).strip(), MAX_ITEM_CHARS),
            }
            for d in decisions
            if d["decision"].strip()
        ][:MAX_LIST_ITEMS],
        "failed": strings(value["failed"], "failed"),
        "open": strings(value["open"], "open"),
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
    from engram.schema import sessions
    from engram.store import dumps, loads

    with store.read() as conn:
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is None or not row.summary_json:
            return "missing", False
        records = [observations.to_dict(r) for r in observations.for_session(conn, session_id)]
    heuristic = loads(row.summary_json, {}) or {}
    heuristic.pop("llm", None)
    room = llm.room(SUMMARY_SYSTEM)
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
        store_summary(store, conn, row, text, dumps(stored))
    return "summarized", False
