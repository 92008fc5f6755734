"""Graph extraction by the LLM (``graph-extract``, tier ``routine``): one call per ended session,
queued with its summary and served after it.

The model reads the session as the summary task does (the heuristic's facts and a bounded
timeline), its summary when there is one, and the names the project already has
(``engram.graph.facts.known_names``), and answers the facts between named things that the
session establishes: ``subject``, ``relation``, ``object`` and ``exclusive`` (the relation
holds one object at a time). The answer is validated (``parse_facts``), names are merged with
the known ones, and ``engram.graph.facts.record`` keeps them with when they held, ending what an
exclusive fact contradicts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from engram.graph import facts as graph_facts
from engram.llm.answers import exact_keys, json_object
from engram.llm.chain import LLM, clip
from engram.llm.summaries import summary_prompt
from engram.summary import summary_doc_id

if TYPE_CHECKING:
    from engram.store import Store

log = logging.getLogger("engram.llm")

MAX_FACTS = 15

GRAPH_SYSTEM = (
    "You extract facts between named things from one coding-agent session: services, "
    "databases, libraries, tools, environments, people, teams, settings, decisions. Answer with "
    'one JSON object and nothing else: {"facts": [{"subject": string, "relation": short '
    "lowercase verb phrase (uses, depends on, deployed on, owned by, replaced by, version is, "
    'prefers, ...), "object": string, "exclusive": true when the subject has one such object at a '
    "time (deployed on, version is, uses database), else false}]}. "
    f"At most {MAX_FACTS} facts. Use the known names when they mean the same thing. Only "
    "facts the session states or establishes; no file paths or code symbols (they are tracked "
    "already); an empty list when there are none."
)


def parse_facts(text: str) -> list[graph_facts.Fact]:
    value = json_object(text)
    exact_keys(value, {"facts"})
    items = value["facts"]
    if not isinstance(items, list):
        raise ValueError("'facts' must be a list")
    out = []
    for item in items[:MAX_FACTS]:
        if not isinstance(item, dict):
            raise ValueError("each fact must be an object")
        subject, relation, obj = item.get("subject"), item.get("relation"), item.get("object")
        if not all(isinstance(v, str) and v.strip() for v in (subject, relation, obj)):
            raise ValueError("a fact needs a non-empty subject, relation and object")
        assert isinstance(subject, str) and isinstance(relation, str) and isinstance(obj, str)
        key = graph_facts.relation_key(relation)
        if not graph_facts.RELATION.match(key.replace("_", " ")):
            raise ValueError(f"a relation must be a short verb phrase, got {relation[:40]!r}")
        exclusive = item.get("exclusive", False)
        if not isinstance(exclusive, bool):
            raise ValueError("'exclusive' must be true or false")
        out.append(
            graph_facts.Fact(
                clip(subject.strip(), graph_facts.MAX_NAME_CHARS),
                key,
                clip(obj.strip(), graph_facts.MAX_NAME_CHARS),
                exclusive,
            )
        )
    return out


def extract_with_llm(store: Store, llm: LLM, session_id: str) -> tuple[str, bool]:
    """The LLM's facts of one ended session. Returns (what happened, whether to try again)."""
    from engram import observations
    from engram.schema import sessions
    from engram.store import loads

    with store.read() as conn:
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is None or not row.summary_json:
            return "missing", False
        records = [observations.to_dict(r) for r in observations.for_session(conn, session_id)]
        known = graph_facts.known_names(conn, row.project)
    heuristic: dict[str, Any] = loads(row.summary_json, {}) or {}
    head = "Known names: " + ("; ".join(known) if known else "(none)") + "\n"
    if row.summary:
        head += "Summary:\n" + clip(row.summary, 3000) + "\n"
    room = llm.room(GRAPH_SYSTEM, head)
    outcome = llm.complete(
        "graph-extract",
        GRAPH_SYSTEM,
        head + summary_prompt(records, {k: v for k, v in heuristic.items() if k != "llm"}, room),
        parse=parse_facts,
    )
    if not outcome.ok or outcome.reply is None:
        log.info("LLM facts of session %s: none kept (%s)", session_id, outcome.reason)
        return outcome.reason, outcome.retry
    with store.write(background=True) as conn:
        counts = graph_facts.record(
            conn,
            row.project,
            outcome.value,
            known,
            by=f"{outcome.reply.provider}:{outcome.reply.model}",
            session_id=session_id,
            source_doc=summary_doc_id(session_id),
        )
    return f"facts: {counts}", False
