"""The session-start context block: what the next session should know, within a token budget.

Most useful first: the project profile, the memories most relevant to the session's first prompt
or, without one, to the project profile (hybrid search; the newest when nothing matches), the last
session's summary and its open items, then relevant or recent observations. Items are whole or absent, never cut.
Tokens are estimated as ceil(characters / 4), the usual figure for English and code with
BPE tokenizers; the estimate is stated in the block's metadata.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from engram import memories, search, sessions
from engram.observations import scoped
from engram.schema import observations as observations_table
from engram.schema import sessions as sessions_table
from engram.scope import Scope
from engram.store import Store, iso, loads

if TYPE_CHECKING:
    from engram.vectors import Vectors

TOKEN_ESTIMATE = "ceil(chars/4)"
PROFILE_SAMPLE = 500
"""Recent observations read to build the project profile (top files, commands, concepts)."""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def profile(store: Store, scope: Scope) -> dict[str, Any]:
    stmt = select(
        observations_table.c.files_read,
        observations_table.c.files_modified,
        observations_table.c.commands,
        observations_table.c.concepts,
    )
    count_obs = scoped(select(func.count()).select_from(observations_table), scope)
    count_sessions = scoped(select(func.count()).select_from(sessions_table), scope, sessions_table)
    stmt = (
        scoped(stmt, scope).order_by(observations_table.c.created_at.desc()).limit(PROFILE_SAMPLE)
    )
    files: Counter[str] = Counter()
    commands: Counter[str] = Counter()
    concepts: Counter[str] = Counter()
    with store.read() as conn:
        for row in conn.execute(stmt):
            files.update(loads(row.files_modified, []) * 2 + loads(row.files_read, []))
            commands.update(
                c.split(" ", 2)[0] if len(c) > 60 else c for c in loads(row.commands, [])
            )
            concepts.update(loads(row.concepts, []))
        n_obs = int(conn.execute(count_obs).scalar_one())
        n_sessions = int(conn.execute(count_sessions).scalar_one())
    return {
        "project": scope.project,
        "sessions": n_sessions,
        "observations": n_obs,
        "topFiles": [f for f, _ in files.most_common(8)],
        "topCommands": [c for c, _ in commands.most_common(5)],
        "concepts": [c for c, _ in concepts.most_common(8)],
    }


def profile_query(prof: dict[str, Any]) -> str:
    """What the project is about, as a query: its concepts and the names of its top files."""
    names = [f.rsplit("/", 1)[-1] for f in prof["topFiles"]]
    return " ".join([*prof["concepts"], *names])


def build(
    store: Store,
    scope: Scope,
    *,
    query: str | None = None,
    session_id: str | None = None,
    budget_tokens: int = 2000,
    vectors: Vectors | None = None,
    weights: Mapping[str, float] | None = None,
    rrf_k: int = search.RRF_K,
) -> dict[str, Any]:
    """The injection block as markdown plus the structured parts it was built from.

    Memories are found by hybrid search for the session's first prompt (``query``) or, without
    one, for the project profile; the newest memories fill in when search finds none."""
    prof = profile(store, scope)
    wanted = query or profile_query(prof)

    def find(limit: int, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        if not wanted.strip():
            return []
        return list(
            search.search(
                store,
                wanted,
                scope,
                limit=limit,
                mode="hybrid",
                kinds=kinds,
                vectors=vectors,
                weights=weights,
                rrf_k=rrf_k,
            )["items"]
        )

    sections: list[tuple[str, list[str]]] = []
    head = f"# Engram memory: {scope.project}"
    prof_lines = [f"- {prof['sessions']} sessions, {prof['observations']} observations recorded"]
    if prof["topFiles"]:
        prof_lines.append("- Files most worked on: " + ", ".join(prof["topFiles"]))
    if prof["topCommands"]:
        prof_lines.append(
            "- Frequent commands: " + ", ".join(f"`{c}`" for c in prof["topCommands"])
        )
    if prof["concepts"]:
        prof_lines.append("- Concepts: " + ", ".join(prof["concepts"]))
    if prof["observations"]:
        # a project with nothing recorded has no profile worth a line of the agent's context
        sections.append(("## Project profile", prof_lines))

    mem_lines = [f"- {item['text']}" for item in find(8, ("memory",))]
    if not mem_lines:
        recent, _ = memories.list_memories(store, scope, limit=8)
        mem_lines = [f"- {item['content']}" for item in recent]
    if mem_lines:
        sections.append(("## Memories", mem_lines))

    with store.read() as conn:
        last = sessions.last_summarised(conn, scope, exclude=session_id)
    if last is not None:
        when = (iso(last.ended_at) or "")[:10]
        summary = loads(last.summary_json, {}) or {}
        sections.append((f"## Last session ({when})", [last.summary.strip()]))
        open_items = [f"- Unresolved: {error}" for error in summary.get("unresolvedErrors", [])]
        if open_items:
            sections.append(("## Open items", open_items))

    if query:
        rel = [
            f"- [{i['kind']}] {i['title']} ({(i['createdAt'] or '')[:10]})"
            for i in find(10, ("observation", "summary"))
        ]
    else:
        rel = []
        with store.read() as conn:
            stmt = scoped(select(observations_table), scope).order_by(
                observations_table.c.created_at.desc()
            )
            for row in conn.execute(stmt.limit(10)):
                rel.append(f"- [{row.kind}] {row.title} ({(iso(row.created_at) or '')[:10]})")
    if rel:
        sections.append(("## Relevant" if query else "## Recent activity", rel))

    return _fit(head, sections, budget_tokens, prof)


def _fit(
    head: str, sections: list[tuple[str, list[str]]], budget: int, prof: dict[str, Any]
) -> dict[str, Any]:
    """Whole items, in order, while they fit; a section heading only with at least one item."""
    out = [head]
    used = estimate_tokens(head) + 1
    included = omitted = 0
    for heading, lines in sections:
        cost_heading = estimate_tokens(heading) + 2
        block: list[str] = []
        for line in lines:
            cost = estimate_tokens(line) + 1
            extra = cost_heading if not block else 0
            if used + cost + extra > budget:
                omitted += 1
                continue
            used += cost + extra
            block.append(line)
        if block:
            out.append("")
            out.append(heading)
            out.extend(block)
            included += len(block)
    text = "\n".join(out) if included else ""
    return {
        "context": text,
        "tokens": estimate_tokens(text),
        "budgetTokens": budget,
        "tokenEstimate": TOKEN_ESTIMATE,
        "items": included,
        "omitted": omitted,
        "profile": prof,
    }
