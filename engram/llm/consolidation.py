"""The consolidation task's LLM pass (``consolidate``, tier ``summary``): one call per project
and consolidation run (``engram.consolidate`` queues it), so its cost per run is bounded by the
projects a run takes.

The model reads the project's recent session summaries (what was asked, done, decided and why,
what failed, what is open, how it ended) and the memories consolidated so far, and answers the
durable ones: facts, preferences, lessons and procedures, each naming the sessions it came from
and, when it supersedes a memory listed, that memory's id. The answer is validated
(``parse_consolidation``: kinds, bounded text, sources among the sessions shown, replaced ids
among the memories shown) and written by ``engram.consolidate.apply``: a new memory, or a new
version of the one it supersedes, never an edit in place.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from engram import consolidate
from engram.llm.answers import MAX_ITEM_CHARS, exact_keys, json_object
from engram.llm.chain import LLM, clip

if TYPE_CHECKING:
    from engram.store import Store

log = logging.getLogger("engram.llm")

MAX_MEMORIES = 12
SUMMARY_LINE_CHARS = 600

CONSOLIDATE_SYSTEM = (
    "You keep the long-term memory of a software project that coding agents work on. From the "
    "session summaries and the memories kept so far, say what is worth remembering for future "
    "sessions: durable facts about the project, the user's preferences, lessons (what broke and "
    "what fixed it), and procedures (how to build, test, release). Answer with one JSON object "
    'and nothing else: {"memories": [{"kind": one of "fact", "preference", "lesson", '
    '"procedure"; "text": one sentence; "sources": [ids of the sessions it comes from]; '
    '"replaces": the id of a kept memory it corrects or updates, or null}]}. '
    f"At most {MAX_MEMORIES} memories, each under {MAX_ITEM_CHARS} characters. Leave out what "
    "a kept memory already says, one-off details and anything not in the summaries."
)


def consolidation_prompt(
    summaries: list[dict[str, Any]], kept: list[dict[str, Any]], max_chars: int
) -> str:
    lines = ["Kept memories:"]
    for memory in kept:
        kind = ((memory.get("meta") or {}).get("consolidated") or {}).get("kind", "fact")
        lines.append(f"- [{memory['id']}] ({kind}) {memory['content']}")
    if not kept:
        lines.append("(none)")
    lines.append("")
    lines.append("Session summaries, newest first:")
    for summary in summaries:
        made = summary.get("llm") or {}
        parts = [f"request: {made.get('request') or summary.get('request') or ''}"]
        for key in ("done", "failed", "open"):
            if made.get(key):
                parts.append(f"{key}: " + "; ".join(made[key]))
        if made.get("decisions"):
            parts.append(
                "decisions: "
                + "; ".join(f"{d['decision']} (why: {d.get('why', '')})" for d in made["decisions"])
            )
        if summary.get("filesChanged"):
            parts.append("files changed: " + ", ".join(summary["filesChanged"][:10]))
        if summary.get("unresolvedErrors"):
            parts.append("unresolved: " + "; ".join(summary["unresolvedErrors"][:5]))
        if summary.get("outcome"):
            parts.append(f"outcome: {summary['outcome']}")
        line = f"- [{summary['id']}] ({(summary.get('ended') or '')[:10]}) " + " | ".join(parts)
        lines.append(clip(line, SUMMARY_LINE_CHARS))
    return clip("\n".join(lines), max_chars)


def parse_consolidation(
    text: str, session_ids: set[str], memory_ids: set[str]
) -> list[consolidate.Candidate]:
    value = json_object(text)
    exact_keys(value, {"memories"})
    items = value["memories"]
    if not isinstance(items, list):
        raise ValueError("'memories' must be a list")
    out = []
    for item in items[:MAX_MEMORIES]:
        if not isinstance(item, dict):
            raise ValueError("each memory must be an object")
        kind, body = item.get("kind"), item.get("text")
        if kind not in consolidate.KINDS:
            raise ValueError(f"a memory's kind must be one of {', '.join(consolidate.KINDS)}")
        if not isinstance(body, str) or not body.strip():
            raise ValueError("a memory's text must be a non-empty string")
        sources = item.get("sources") or []
        if not isinstance(sources, list):
            raise ValueError("a memory's sources must be a list of session ids")
        known = tuple(s for s in sources if isinstance(s, str) and s in session_ids)
        if not known:
            continue  # nothing shown supports it: not kept
        replaces = item.get("replaces")
        out.append(
            consolidate.Candidate(
                kind,
                clip(" ".join(body.split()), MAX_ITEM_CHARS),
                known,
                replaces=replaces if isinstance(replaces, str) and replaces in memory_ids else "",
            )
        )
    return out


def consolidate_with_llm(store: Store, llm: LLM, project: str) -> tuple[str, bool]:
    """The LLM's consolidation pass over one project. Returns (what happened, whether to try
    again later)."""
    with store.read() as conn:
        summaries = consolidate.recent_summaries(conn, project)
        kept = consolidate.consolidated(conn, project)
    if not summaries:
        return "nothing to consolidate", False
    session_ids = {s["id"] for s in summaries}
    memory_ids = {m["id"] for m in kept}
    room = llm.room(CONSOLIDATE_SYSTEM)
    outcome = llm.complete(
        "consolidate",
        CONSOLIDATE_SYSTEM,
        consolidation_prompt(summaries, kept, room),
        tier="summary",
        parse=lambda answer: parse_consolidation(answer, session_ids, memory_ids),
    )
    if not outcome.ok or outcome.reply is None:
        log.info("LLM consolidation of %s: heuristics stand (%s)", project, outcome.reason)
        return outcome.reason, outcome.retry
    by = f"{outcome.reply.provider}:{outcome.reply.model}"
    counts = consolidate.apply(store, project, outcome.value, by=by)
    return f"consolidated: {counts}", False
