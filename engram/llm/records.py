"""The compression task (``compress``, tier ``routine``), for projects that opt in
(``ENGRAM_LLM_COMPRESS_PROJECTS``): one call per captured event, queued in the transaction that
stores it. The model reads the event (its kind, tool, heuristic title, files, errors, then its
prompt, input and output, each cut to its share) and answers a record: ``type``, ``title``,
``facts``, ``narrative``, ``concepts``, ``files``, ``importance``. The validated record is kept
beside the heuristic one (the observation's ``llm`` column) and what it says is indexed.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from engram.llm.answers import MAX_LIST_ITEMS, exact_keys, json_object, strings
from engram.llm.chain import LLM, clip

if TYPE_CHECKING:
    from engram.store import Store

log = logging.getLogger("engram.llm")

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


def parse_observation(text: str) -> dict[str, Any]:
    """The validated record of a compress answer; ``ValueError`` says what is wrong."""
    value = json_object(text)
    exact_keys(value, {"type", "title", "facts", "narrative", "concepts", "files", "importance"})
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
        "facts": strings(value["facts"], "facts"),
        "narrative": clip(value["narrative"].strip(), MAX_NARRATIVE_CHARS),
        "concepts": [c.lower() for c in strings(value["concepts"], "concepts")],
        "files": strings(value["files"], "files"),
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
    room = llm.room(COMPRESS_SYSTEM)
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
