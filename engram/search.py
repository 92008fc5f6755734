"""Search over the store: keyword (BM25) today, one fused entry point for every stream.

Modes are named presets. Streams that cannot answer (no vector index yet) are left out and the
weights of the rest renormalised, so ``hybrid`` degrades to keyword search instead of failing.
Results are diversified: at most ``per_session`` hits from one session.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engram import memories, observations
from engram.keyword import KeywordHit
from engram.schema import sessions
from engram.scope import Scope
from engram.store import Store, iso

MODES = ("bm25", "vector", "hybrid")
DEFAULT_MODE = "hybrid"
DEFAULT_PER_SESSION = 3
CANDIDATE_FACTOR = 4
"""Candidates fetched per requested hit, so diversification still fills the page."""


class SearchUnavailable(Exception):
    """The requested mode needs a stream this server does not have (e.g. no embedder)."""


@dataclasses.dataclass(frozen=True)
class SearchPreset:
    name: str
    streams: tuple[str, ...]


PRESETS = {
    "bm25": SearchPreset("bm25", ("bm25",)),
    "vector": SearchPreset("vector", ("vector",)),
    "hybrid": SearchPreset("hybrid", ("bm25", "vector")),
}
AVAILABLE_STREAMS = ("bm25",)


def search(store: Store, query: str, scope: Scope, limit: int = 10, mode: str = DEFAULT_MODE,
           kinds: tuple[str, ...] | None = None,
           per_session: int = DEFAULT_PER_SESSION) -> dict[str, Any]:
    preset = PRESETS[mode]
    streams = tuple(s for s in preset.streams if s in AVAILABLE_STREAMS)
    if not streams:
        raise SearchUnavailable(
            f"mode {mode!r} needs a vector index, and this server has none yet; "
            'use "bm25" or "hybrid"'
        )
    with store.read() as conn:
        hits = store.keyword.search(conn, query, scope, limit * CANDIDATE_FACTOR, kinds)
        hits = diversify(hits, limit, per_session)
        items = hydrate(conn, hits)
    return {"items": items, "mode": mode, "streams": list(streams)}


def diversify(hits: list[KeywordHit], limit: int, per_session: int) -> list[KeywordHit]:
    taken: list[KeywordHit] = []
    per: dict[str, int] = {}
    for hit in hits:
        if hit.session_id is not None:
            if per.get(hit.session_id, 0) >= per_session:
                continue
            per[hit.session_id] = per.get(hit.session_id, 0) + 1
        taken.append(hit)
        if len(taken) == limit:
            break
    return taken


def hydrate(conn: Any, hits: list[KeywordHit]) -> list[dict[str, Any]]:
    """Turn index hits into API items, in rank order, from the store of record."""
    obs = observations.get_many(conn, [h.doc_id for h in hits if h.kind == "observation"])
    mems = memories.get_many(conn, [h.doc_id for h in hits if h.kind == "memory"])
    summary_ids = [h.session_id for h in hits if h.kind == "summary" and h.session_id]
    sums = {}
    if summary_ids:
        from sqlalchemy import select

        sums = {r.id: r for r in conn.execute(
            select(sessions).where(sessions.c.id.in_(summary_ids)))}
    items: list[dict[str, Any]] = []
    for hit in hits:
        base = {"id": hit.doc_id, "kind": hit.kind, "sessionId": hit.session_id,
                "score": hit.score}
        if hit.kind == "observation" and hit.doc_id in obs:
            row = obs[hit.doc_id]
            items.append({**base, "text": row.text, "title": row.title, "project": row.project,
                          "createdAt": iso(row.created_at)})
        elif hit.kind == "memory" and hit.doc_id in mems:
            row = mems[hit.doc_id]
            items.append({**base, "text": row.content, "title": row.content.split("\n", 1)[0][:120],
                          "project": row.project, "createdAt": iso(row.updated_at)})
        elif hit.kind == "summary" and hit.session_id in sums:
            row = sums[hit.session_id]
            items.append({**base, "text": row.summary, "title": f"Session summary {row.id}",
                          "project": row.project, "createdAt": iso(row.ended_at)})
    return items
