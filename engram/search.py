"""Search over the store: BM25, vector and graph streams, fused by score or by rank.

Modes are named presets of streams: ``keyword`` (alias ``bm25``), ``semantic`` (alias
``vector``) and ``hybrid`` (all three). Each stream ranks candidates inside the read scope, each
with its own score. ``fuse`` combines them (``ENGRAM_FUSION``): ``score`` scales each stream's
scores over its top ``SCORE_DEPTH`` and weights them by the stream's confidence (how far its best
hit stands out), ``rrf`` sums ``w_s / (RRF_K + rank_s)``; either way the weights are
renormalised over the streams that answered (a stream that is off, failed or found nothing takes
no share), so ``hybrid`` without an embedder is keyword search plus graph. ``tune`` adjusts
the fusion to the query first (a request for advice leans on meaning, not words). A query that
names a time ("on 8 May 2023", "two weeks ago") gets the hits recorded then first
(``times_first``). Results are then diversified: at most ``per_session`` hits from one session.
The benchmark harness tunes, fuses and orders with the same ``tune``, ``fuse`` and
``times_first``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engram import dates, keyword, memories, observations, settings
from engram.keyword import KeywordHit
from engram.rerank import Reranker, depth_within
from engram.schema import sessions
from engram.scope import Scope, Window
from engram.store import Store, iso

if TYPE_CHECKING:
    from engram.vectors import Vectors

log = logging.getLogger("engram.search")

RRF_K: int = settings.default("ENGRAM_RRF_K")
"""Measured on the harness (docs/benchmarks.md): with k = 60 a weaker vector stream outvotes
BM25's top hits and hybrid loses to BM25 alone on LoCoMo; with k = 5 it wins on every benchmark."""
DEFAULT_MODE = "hybrid"
DEFAULT_PER_SESSION = 3
CANDIDATE_FACTOR = 4
"""Candidates fetched per requested hit, so diversification still fills the page."""
MIN_DEPTH = 40
"""Fewest candidates asked of each stream: fusion needs each stream's view beyond the page."""
GRAPH_DEPTH = (2, 20)
"""The graph stream ranks fewer candidates (2 x limit, at least 20): its tail is weak evidence
and it is the costliest stream per candidate."""
DEFAULT_WEIGHTS: dict[str, float] = dict(settings.default("ENGRAM_SEARCH_WEIGHTS"))
FUSIONS = ("score", "rrf")
FUSION: str = settings.default("ENGRAM_FUSION")
SCORE_DEPTH = 20
"""``score`` fusion scales each stream over its top 20: measured against 10, 30 and 100 on
LoCoMo, LongMemEval-S, coding-agent-life and coding-paraphrase (docs/benchmarks.md)."""
MIN_SCORED = 3
"""A stream with fewer hits has no spread to judge by: each of them counts fully."""
RANK_SHARE = 0.25
"""``score`` fusion adds each stream's RRF term, scaled so its first hit adds this share of the
stream's weight: documents several streams agree on rise, and it orders what the scores leave
tied. 0.25 kept the coding-context blocks as good as rank fusion's (0 and 0.1 lost questions
whose answer both streams ranked in their top 5) at a small cost on LoCoMo MRR."""

LEAD_BONUS: dict[str, float] = {"bm25": 0.6, "vector": 0.0}
"""``score`` fusion, a sure first hit: a stream whose first hit leads its second by
``LEAD_FULL`` of its score or more adds this share of its weight to that hit (less for a
smaller lead), unless another stream listed here is as sure of a different first hit (its lead
takes the bonus back in proportion). BM25's first hit standing clear of its second means one
document matches a rare query word the others lack; the scaling over the top 20 cannot see that
when the 20th scores low. The vector stream gains nothing from its own lead (a bonus for it
lost cells everywhere measured), but a clear one is doubt against BM25's: on request-style
questions over whole sessions BM25 can lead on the wrong session. Measured on LoCoMo,
LongMemEval-S (session and turn), coding-agent-life and coding-paraphrase, whole sessions and
best turns (docs/benchmarks.md, "A sure first hit")."""
LEAD_FULL = 0.1
"""The lead (of the first score, over the second) that earns the whole bonus.

Ranked search (``/v1/search``, MCP, the viewer) puts the sure hit first; the context builder
does not (``sure_first=False``): a block fills a budget with several hits, and at 500 tokens
the bonus displaced the hits both streams agree on (coding-context blocks 0.85 -> 0.80, with
no change at 1,000 and 2,000 tokens or from the prompt hook)."""


CONFIDENCE_FLOOR: dict[str, float] = {"vector": 0.3}
"""``score`` fusion judges a stream's confidence by its spread relative to its best score; for
a stream listed here, relative to at least this. A cosine near zero is not a scale: MiniLM's
best hit for a question none of the documents answer scores ~0.2 against ~0.1 at depth 20,
which relative to 0.2 looked as sure as a real match, and outvoted BM25's clear first hit
("Where did I attend for my study abroad program?": BM25 11.8 against 5.7, gold first; fused
second). Measured 0.2-0.6 (docs/benchmarks.md, "Requests for advice, and a floor under the
vector stream's confidence"): 0.3 lost the fewest cells; alone it took LongMemEval-S session
recall_all@5 from 92.1 to 93.3."""

COVERAGE_MARGIN = 0.15
"""``score`` fusion, when BM25 and the vector stream put different documents first: how much
more of the query's weighted terms (``keyword.coverage``: each term by its IDF) BM25's first hit
must hold than the vector stream's for BM25 to be believed. A lead in BM25's scores can come
from a common word repeated; holding the query's rare words the other lacks cannot. Then BM25's
sure-first bonus stands whatever the vector stream's lead."""
COVERAGE_MIN = 0.25
"""... and how much the vector stream's first hit must hold for the vector stream to be believed
when BM25's does not hold clearly more: its first hit then takes ``COVERED_BONUS`` and BM25's
bonus goes. Below it neither first hit shares much of the question's wording, and fusion decides
as before (a request for "the user's formatting preferences" matched 17% in both streams' first
hits: BM25's was right)."""
COVERED_BONUS = 0.5
"""The share of the vector stream's weight its believed first hit gains (less for a smaller lead
of its own, as ``LEAD_BONUS``). Measured with the margin and the floor above on LongMemEval-S
(sessions, turns), LoCoMo, coding-agent-life and coding-paraphrase (docs/benchmarks.md, "Whose
first hit holds the question's words"): it took the paraphrased coding questions' MRR from .856
to .928 and LongMemEval-S single-session-user's from .977 to .992, the last cells where fusion
ranked below its best stream on those sets."""


WORDS_LEAD = True
"""``fuse``: a session's best-placed hit is the one of its hits BM25 scored highest (the others
follow one place down each); fusion still decides where the session stands. Several turns of one
session match a question alike in meaning, and the one that holds the question's words is the
one that answers it: on LongMemEval-S turns the evidence turn sat behind its sibling turns
where the vector stream led (the cells fusion lost to BM25). Measured offline over the same
streams (docs/benchmarks.md, "A session's first place to the hit that holds the words"): LME-S
turns any@5 / all@5 / MRR 92.6 / 71.8 / .760 -> 93.8 / 72.7 / .770, cells lost to BM25 5 -> 2;
LoCoMo turns recall@10 67.5 unchanged, MRR .485 -> .483. A session's whole order by BM25 gained
the same on LME-S and cost LoCoMo 0.6-2 points (dialogue turns worded unlike the question)."""


ADVICE = re.compile(
    r"\b(any (\w+ )?(tips|suggestions|advice|ideas|recommendations?|thoughts)"
    r"|(can|could|would) you (please )?(suggest|recommend)"
    r"|(recommend|suggest)(ions?)? (for|to) me"
    r"|what should i|what do you think|do you think|should i)\b",
    re.IGNORECASE,
)
"""A request for advice addressed to the assistant ("Can you suggest some accessories for my
camera?", "Any tips?", "What should I serve?"). Its answer is the user's own earlier account
of their situation or taste, worded unlike the request: the words BM25 matches ("suggest",
"tips", "weekend") are the request's, and an MS MARCO cross-encoder reads a statement of taste
as unrelated to a question. Matches 29 of LongMemEval-S's 30 preference questions and none of
its 388 others, of LoCoMo's 1,986 (third-person "what did Evan suggest" is a fact), or of the
coding sets."""
ADVICE_BM25 = 0.5
"""A request for advice keeps this share of BM25's weight, earns no sure-first bonus, and is
not reranked. Measured 0-1 (docs/benchmarks.md): 0.5 was the one share where fusion lost to the
vector stream on none of LongMemEval-S's preference runs (sessions, sessions by best turns,
turns)."""


FEEDBACK: float = settings.default("ENGRAM_SEARCH_FEEDBACK")
"""Pseudo-relevance feedback (Rocchio) for the vector stream: after a first fusion, the query's
vector moves toward the fused first hit's by this share, the vector stream's candidates are
scored again with it, and the streams are fused again (``feedback_ranking``). A question whose answer is spread
over several records ("How many projects have I led?") matches the clearest of them best; the
others are worded like it more than like the question, and rise. Measured 0.2-0.5 and from the
first one or two hits (docs/benchmarks.md, "Feedback from the first hit"): the first hit at
0.3 gained on LongMemEval-S and LoCoMo and kept coding-agent-life; two hits cost first places.
Not for a request for advice (``tune``): its first hit is often BM25's look-alike."""


@dataclasses.dataclass(frozen=True)
class Tuning:
    """How one query is fused: the streams' weights, whether a sure first hit earns its bonus,
    whether the fused first hit feeds back into the vector stream (``FEEDBACK``), and whether
    the reranker reads the fused top."""

    weights: dict[str, float]
    sure_first: bool = True
    rerank: bool = True
    feedback: bool = True


def asks_advice(query: str) -> bool:
    return ADVICE.search(query) is not None


def tune(query: str, weights: Mapping[str, float], sure_first: bool = True) -> Tuning:
    """The fusion for ``query``: as given, or, for a request for advice (``ADVICE``), BM25 at
    ``ADVICE_BM25`` of its weight, no sure-first bonus, no feedback and no reranker."""
    if not asks_advice(query):
        return Tuning(dict(weights), sure_first, True, True)
    adjusted = dict(weights)
    if "bm25" in adjusted:
        adjusted["bm25"] *= ADVICE_BM25
    return Tuning(adjusted, False, False, False)


def feedback_ranking(
    query_vector: Sequence[float],
    ordered: Sequence[KeywordHit],
    vectors: Mapping[str, Sequence[float]],
    share: float = FEEDBACK,
) -> list[KeywordHit]:
    """The vector stream again over the fused candidates ``ordered`` (first the fused first
    hit): each one that has a vector in ``vectors`` scored by its cosine with the query's vector
    plus ``share`` times the first hit's (both unit length), best first. ``[]`` when there is
    nothing to feed back: ``share`` 0, or no vector for the first hit.

    Callers give the vectors of the vector stream's own candidates, which the server's Chroma
    query returns with them: a first hit the vector stream did not rank has nothing to feed back
    (on LoCoMo 370 of 1,982 questions; the figures were the same as reading its vector). Reading
    every fused candidate's vector (~90 at the server's depth) cost 2-3 ms more of Chroma at 50k
    observations and gained LoCoMo recall@10 0.3 points, nothing elsewhere (docs/benchmarks.md)."""
    if share <= 0 or not ordered or ordered[0].doc_id not in vectors:
        return []
    import numpy as np

    def unit(rows: Any) -> Any:
        norms = np.linalg.norm(rows, axis=-1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1.0)

    ids = [hit.doc_id for hit in ordered if hit.doc_id in vectors]
    matrix = unit(np.stack([np.asarray(vectors[d], dtype=np.float32) for d in ids]))
    moved = unit(np.asarray(query_vector, dtype=np.float32)) + share * matrix[0]
    scores = matrix @ unit(moved)
    hit_of = {hit.doc_id: hit for hit in ordered}
    order = np.argsort(-scores, kind="stable")  # ties keep fusion's order
    return [dataclasses.replace(hit_of[ids[i]], score=float(scores[i])) for i in order]


SESSION_SUPPORT: dict[str, float] = dict(settings.default("ENGRAM_SESSION_SUPPORT"))
"""Per caller (``search``, ``reranked``, ``context``): each fused hit gains this share of what
its session's best ``SESSION_TOP`` hits scored (its own included), so a hit whose session
several hits match outranks a lone match elsewhere. Measured (docs/benchmarks.md, "Session
support"): at 0.3, LoCoMo turn recall@10 64.3 -> 70.9 and the coding-context blocks gain, but
on LongMemEval-S turns, whose multi-session answers sit one turn in each of several sessions,
it fills the top with one session (multi-session recall_all@5 55 -> 43): ranked search leaves
it off, the context builder (which fills a budget from the best hits' sessions anyway) uses it.
When the reranker reads the fused top (``reranked``) it sorts what support gathers and the
LongMemEval-S loss is gone: 0.3 there (LoCoMo recall@10 69.2 -> 72.6, LongMemEval-S turns
any@5 94.5 -> 95.0, sessions by best turns all@5 94.0 -> 93.3; "Requests for advice")."""
NEIGHBOUR_SUPPORT: dict[str, float] = dict(settings.default("ENGRAM_NEIGHBOUR_SUPPORT"))
"""Per caller, as ``SESSION_SUPPORT``: each fused hit gains this share of its neighbour's fused
score (``keyword.neighbours``: the other party's turn recorded just before it in its session).
The question's words are often in one turn and its answer in the reply: a question and its
answer, a prompt and the tool output that answers it. At 0.5 LoCoMo turn recall@10 67.5 -> 72.5
with no cell lost; LongMemEval-S's official turns are the user's alone, so none has a
neighbour and nothing changes there. Counted both ways (the turn after as well) it lifted
prompts that merely opened a matching session above the answer on the coding set; counted
between any two turns it cost LongMemEval-S recall_all@5 72.7 -> 67.5 (docs/benchmarks.md,
"Neighbours by speaker")."""
SUPPORTED_DEPTH = 10
"""The reranker sorts what session support gathers only when it reads this deep: reading the
top 5 of a ranking support has crowded with one session left LongMemEval-S turns' recall_all@5
at 64.4 (71.8 without support, BM25's 70.3), reading 10 lifted it to 76.3 (docs/benchmarks.md,
"The reranker within a time budget")."""
SESSION_TOP = 2
"""Hits of a session that make its support: 2 measured as well as 3 and better than 5 (a long
session's many weak matches should not outweigh a short one's two strong ones)."""

DATED_READ = 5
"""A question that names a time (``dates.named``) asks BM25 for this many times its usual depth,
and keeps of the deeper hits those recorded then (``keep_dated``): in a large store its best 40
of everything can hold nothing recorded then, and ``times_first`` had nothing to put first.
FTS5 ranks every match whatever the limit, so the deeper read costs the times of the deeper
hits (~3 ms at 50k observations). Measured there (docs/benchmarks.md, "A time counted back is
not a topic"): each stream asked again inside the window cost a dated search ~35 ms (Chroma's
query filtered on time 41 ms against 5), and the vector stream's 200 nearest with their
vectors ~10 ms; the vector stream keeps its 40."""

RERANK_DEPTH: int = settings.default("ENGRAM_RERANK_DEPTH")
RERANK_BUDGET_MS: float = settings.default("ENGRAM_RERANK_BUDGET_MS")
RERANK_CHARS = 2000
"""A passage's characters handed to the reranker; the local model reads the window of them
that holds the query (``rerank.focus``, ~500 characters of its 128 tokens)."""


class SearchUnavailable(Exception):
    """The requested mode needs a stream this server does not have (e.g. no embedder)."""


@dataclasses.dataclass(frozen=True)
class SearchPreset:
    name: str
    streams: tuple[str, ...]


PRESETS = {
    "keyword": SearchPreset("keyword", ("bm25",)),
    "semantic": SearchPreset("semantic", ("vector",)),
    "hybrid": SearchPreset("hybrid", ("bm25", "vector", "graph")),
}
ALIASES = {"bm25": "keyword", "vector": "semantic"}
MODES = ("hybrid", "keyword", "semantic", "bm25", "vector")

_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="engram-search")
"""Runs the vector and graph streams while BM25 runs: two jobs per search, so four concurrent
searches run all their streams at once; more wait their turn (2 cores gain nothing beyond)."""


def fuse(
    rankings: Mapping[str, Sequence[KeywordHit]],
    weights: Mapping[str, float],
    limit: int | None = None,
    k: int = RRF_K,
    method: str | None = None,
    sure_first: bool = True,
    session_support: float = 0.0,
    coverage: Mapping[str, float] | None = None,
    neighbours: Mapping[str, Sequence[str]] | None = None,
    neighbour_support: float = 0.0,
) -> list[tuple[KeywordHit, dict[str, int]]]:
    """The streams that answered, fused (``method``: ``score`` or ``rrf``, the server's
    ``ENGRAM_FUSION`` when not given); each hit with its rank in every stream that ranked it.

    ``rrf``: sum of w_s / (k + rank_s). ``score``: each stream's scores scaled to [0, 1] over its
    top ``SCORE_DEPTH`` (its best hit 1, the hit at that depth and below 0), times the stream's
    weight and its confidence squared: how far its best score stands above the one at that depth,
    relative to the best (a stream whose top hits all score alike knows little). A stream that is
    sure leads; one that is not still adds its agreement. Each stream's RRF term is added too,
    scaled by ``RANK_SHARE`` (what several streams agree on rises; it orders everything below
    every stream's depth); with ``sure_first``, a stream in ``LEAD_BONUS`` whose first hit
    leads its second adds a share of its weight to that hit, unless another is as sure of a
    different one; with the ``coverage`` of BM25's and the vector stream's first hits
    (``keyword.coverage``) when they differ, the one that holds more of the query's words is
    believed instead (``COVERAGE_MARGIN``, ``COVERAGE_MIN``, ``COVERED_BONUS``). Then each hit
    gains ``neighbour_support`` times the best fused score among its ``neighbours`` (doc id ->
    ids; the server's are the other party's turn just before it, ``keyword.neighbours``), and
    every hit with a session ``session_support`` times the sum of its session's best
    ``SESSION_TOP`` fused scores. Ties go to the better best rank, then the earlier stream.
    Weights are renormalised over the streams that answered."""
    method = method or FUSION
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; choose from {', '.join(FUSIONS)}")
    answered = [name for name, hits in rankings.items() if hits and weights.get(name, 0) > 0]
    total = sum(weights[name] for name in answered)
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    hits_by_id: dict[str, KeywordHit] = {}
    ranks: dict[str, dict[str, int]] = {}
    sure: dict[str, tuple[str, float, float]] = {}  # stream: (its first hit, its lead, weight)
    for order, name in enumerate(answered):
        weight = weights[name] / total
        first: list[KeywordHit] = []
        for hit in rankings[name]:
            if hit.doc_id in ranks and name in ranks[hit.doc_id]:
                continue  # a stream listing a document twice counts its first rank
            ranks.setdefault(hit.doc_id, {})[name] = len(first) + 1
            first.append(hit)
        scale = _scaled(first, CONFIDENCE_FLOOR.get(name, 0.0)) if method == "score" else None
        if scale is not None and sure_first and name in LEAD_BONUS:
            sure[name] = (first[0].doc_id, min(1.0, _lead(first) / LEAD_FULL), weight)
        for rank, hit in enumerate(first, start=1):
            value = weight / (k + rank)
            if scale is not None:
                value = weight * scale(hit.score) + RANK_SHARE * value * (k + 1)
            scores[hit.doc_id] = scores.get(hit.doc_id, 0.0) + value
            best[hit.doc_id] = min(best.get(hit.doc_id, (rank, order)), (rank, order))
            known = hits_by_id.get(hit.doc_id)
            if known is None or (known.session_id is None and hit.session_id is not None):
                hits_by_id[hit.doc_id] = hit
    believed = _believed(sure, coverage) if coverage else None
    for name, (top, lead, weight) in sure.items():
        # another stream sure of a different first hit takes the bonus back
        doubt = max((o[1] for other, o in sure.items() if other != name and o[0] != top), default=0)
        if believed is not None and name == "bm25":
            doubt = 0.0 if believed == "bm25" else 1.0
        scores[top] += LEAD_BONUS[name] * weight * lead * (1.0 - doubt)
    if believed == "vector":
        top, lead, weight = sure["vector"]
        scores[top] += COVERED_BONUS * weight * lead
    if neighbour_support > 0 and neighbours:
        _support_neighbours(scores, neighbours, neighbour_support)
    if session_support > 0:
        _support_sessions(scores, hits_by_id, session_support)
    ordered = sorted(scores, key=lambda d: (-scores[d], best[d]))
    if WORDS_LEAD and "bm25" in answered:
        keyword_scores: dict[str, float] = {}
        for hit in rankings["bm25"]:
            keyword_scores.setdefault(hit.doc_id, hit.score)
        _words_lead(ordered, scores, hits_by_id, keyword_scores)
    if limit is not None:
        ordered = ordered[:limit]
    return [(dataclasses.replace(hits_by_id[d], score=scores[d]), ranks[d]) for d in ordered]


def _believed(
    sure: Mapping[str, tuple[str, float, float]], coverage: Mapping[str, float]
) -> str | None:
    """Which of BM25 and the vector stream to believe when their first hits differ, by how much
    of the query each first hit holds: ``bm25``, ``vector``, or None (no verdict)."""
    if "bm25" not in sure or "vector" not in sure:
        return None
    first, other = sure["bm25"][0], sure["vector"][0]
    if first == other or first not in coverage or other not in coverage:
        return None
    if coverage[first] - coverage[other] >= COVERAGE_MARGIN:
        return "bm25"
    return "vector" if coverage[other] >= COVERAGE_MIN else None


def candidates(rankings: Mapping[str, Sequence[KeywordHit]]) -> list[str]:
    """Every document some stream ranked, once each (sorted)."""
    return sorted({hit.doc_id for hits in rankings.values() for hit in hits})


def support_share(
    reranked: bool, depth: int, session_support: float, reranked_support: float
) -> float:
    """The session (or neighbour) support a search is fused with: ``reranked_support`` when the
    reranker reads at least ``SUPPORTED_DEPTH`` of the fused top (it sorts what support
    gathers), else ``session_support``."""
    return reranked_support if reranked and depth >= SUPPORTED_DEPTH else session_support


def weighs_firsts(sure_first: bool, fusion: str | None, streams: int) -> bool:
    """Whether a search weighs the streams' first hits by coverage (``first_coverage``): ranked
    search (``sure_first``) fused by score, over more than one stream."""
    return sure_first and (fusion or FUSION) == "score" and streams > 1


def first_coverage(
    conn: Any,
    index: keyword.KeywordIndex,
    query: str,
    rankings: Mapping[str, Sequence[KeywordHit]],
    weights: Mapping[str, float] | None = None,
) -> dict[str, float] | None:
    """``keyword.coverage`` of BM25's and the vector stream's first hits when they differ (what
    ``fuse`` weighs them by), else None: nothing to decide, and no read. ``weights``: the query's
    ``keyword.term_weights`` when already read."""
    firsts = {rankings[name][0].doc_id for name in ("bm25", "vector") if rankings.get(name)}
    if len(firsts) < 2:
        return None
    if weights is None:
        weights = keyword.term_weights(conn, index, query)
    return keyword.coverage(conn, weights, sorted(firsts))


def _support_sessions(
    scores: dict[str, float], hits: Mapping[str, KeywordHit], share: float
) -> None:
    """Add to each hit ``share`` of the sum of its session's best ``SESSION_TOP`` scores (as
    they were before any support)."""
    best: dict[str, list[float]] = {}
    for doc_id, value in scores.items():
        session = hits[doc_id].session_id
        if session is not None:
            best.setdefault(session, []).append(value)
    support = {s: sum(sorted(v, reverse=True)[:SESSION_TOP]) for s, v in best.items()}
    for doc_id in scores:
        session = hits[doc_id].session_id
        if session is not None:
            scores[doc_id] += share * support[session]


def _support_neighbours(
    scores: dict[str, float], neighbours: Mapping[str, Sequence[str]], share: float
) -> None:
    """Add to each hit ``share`` of the best fused score among its ``neighbours`` (on the server
    the other party's turn just before it), as the scores were before any support."""
    before = dict(scores)
    for doc_id in scores:
        beside = [before[n] for n in neighbours.get(doc_id, ()) if n in before]
        if beside:
            scores[doc_id] += share * max(beside)


def _words_lead(
    ordered: list[str],
    scores: dict[str, float],
    hits: Mapping[str, KeywordHit],
    keyword_scores: Mapping[str, float],
) -> None:
    """``WORDS_LEAD``: in ``ordered`` (best first), each session's first place goes to its hit
    BM25 scored highest, the session's other hits one place down each, in their order; the
    places keep their scores, so the sessions stand where fusion put them."""
    places: dict[str, list[int]] = {}
    for position, doc_id in enumerate(ordered):
        session = hits[doc_id].session_id
        if session is not None:
            places.setdefault(session, []).append(position)
    for positions in places.values():
        held = [p for p in positions if ordered[p] in keyword_scores]
        if len(positions) < 2 or not held:
            continue
        lead = max(held, key=lambda p: keyword_scores[ordered[p]])  # ties: the better placed
        if lead == positions[0]:
            continue
        moved = [ordered[lead], *(ordered[p] for p in positions if p != lead)]
        values = [scores[ordered[p]] for p in positions]
        for position, doc_id, value in zip(positions, moved, values, strict=True):
            ordered[position] = doc_id
            scores[doc_id] = value


def _lead(hits: Sequence[KeywordHit]) -> float:
    """How far a stream's first score stands above its second, relative to the first (0 with
    fewer than two hits or a first score that is not positive)."""
    if len(hits) < 2 or hits[0].score <= 0:
        return 0.0
    return max(0.0, (hits[0].score - hits[1].score) / hits[0].score)


def _scaled(hits: Sequence[KeywordHit], floor: float = 0.0) -> Callable[[float], float]:
    """A stream's score as its share of [0, 1] (``fuse``'s ``score`` method), confidence
    applied: (x - low) / (top - low), clipped, times ((top - low) / max(|top|, floor)) squared,
    where top is its best score and low its score at ``SCORE_DEPTH`` (or its last)."""
    values = [hit.score for hit in hits[:SCORE_DEPTH]]
    top, low = values[0], values[-1]
    spread = top - low
    if len(values) < MIN_SCORED or spread <= 1e-12:
        return lambda _x: 1.0 if len(values) < MIN_SCORED else 0.0
    confidence = min(1.0, spread / (max(abs(top), floor) + 1e-12)) ** 2
    return lambda x: confidence * min(1.0, max(0.0, (x - low) / spread))


def _graph_stream(
    store: Store,
    query: str,
    scope: Scope,
    limit: int,
    kinds: tuple[str, ...] | None,
    window: Window | None,
) -> list[KeywordHit]:
    from engram import graph as graph_mod

    with store.read() as conn:
        return graph_mod.stream(conn, query, scope, limit, kinds, window)


def _vector_stream(
    index: Any,
    query: str,
    scope: Scope,
    limit: int,
    kinds: tuple[str, ...] | None,
    window: Window | None,
    stored: dict[str, Sequence[float]] | None,
) -> tuple[list[float], list[KeywordHit]]:
    """The query's vector (kept for ``feedback_ranking``) and the vector stream's hits, without
    their kinds and sessions (``keyword.described`` reads them); their stored vectors into
    ``stored`` when given."""
    vector = index.embed_query(query)
    hits = index.search(
        query, scope, limit, kinds, vector=vector, window=window, vectors_out=stored,
        described=False,
    )  # fmt: skip
    return vector, hits


def keep_dated(
    hits: Sequence[KeywordHit],
    depth: int,
    recorded: Mapping[str, float],
    spans: Sequence[tuple[float, float]],
) -> list[KeywordHit]:
    """A stream's ``depth`` best ``hits``, then those of its deeper ones (``DATED_READ``) that
    were recorded inside ``spans`` (``recorded``: their times), in the stream's order."""
    deeper = [
        hit
        for hit in hits[depth:]
        if (at := recorded.get(hit.doc_id)) is not None and any(a <= at < b for a, b in spans)
    ]
    return [*hits[:depth], *deeper]


def graph_depth(limit: int) -> int:
    return max(limit * GRAPH_DEPTH[0], GRAPH_DEPTH[1])


def resolve_mode(mode: str) -> SearchPreset:
    return PRESETS[ALIASES.get(mode, mode)]


def search(
    store: Store,
    query: str,
    scope: Scope,
    limit: int = 10,
    mode: str = DEFAULT_MODE,
    kinds: tuple[str, ...] | None = None,
    per_session: int = DEFAULT_PER_SESSION,
    *,
    vectors: Vectors | None = None,
    weights: Mapping[str, float] | None = None,
    graph: bool = True,
    rrf_k: int = RRF_K,
    fusion: str | None = None,
    reranker: Reranker | None = None,
    rerank_depth: int = RERANK_DEPTH,
    rerank_budget_ms: float = RERANK_BUDGET_MS,
    window: Window | None = None,
    sure_first: bool = True,
    session_support: float = SESSION_SUPPORT["search"],
    reranked_support: float = SESSION_SUPPORT["reranked"],
    neighbour_support: float = NEIGHBOUR_SUPPORT["search"],
    reranked_neighbour_support: float = NEIGHBOUR_SUPPORT["reranked"],
    now: float | None = None,
    feedback: float = FEEDBACK,
) -> dict[str, Any]:
    """The ``limit`` best hits in ``scope`` (and ``window``: every stream is narrowed before it
    ranks, so the page is the best inside the window, not the window's share of the best).
    Fused with ``session_support`` and ``neighbour_support``, or ``reranked_support`` and
    ``reranked_neighbour_support`` when the reranker reads the top;
    in hybrid, fused again with the vector stream's ``feedback`` from the first hit
    (``feedback_ranking``; 0 is off).
    Without a ``window``, the times the query names (``dates.named``, counted back from
    ``now``, default the clock) put the hits recorded then first (``times_first``); BM25 reads
    deeper for those times' documents (``keep_dated``), and the streams and the reranker read
    the query without the times it counts back and the stretches it names ("10 days ago", "in
    the past two weeks"; ``dates.without_counted_back``).
    """
    preset = resolve_mode(mode)
    weights = dict(weights or DEFAULT_WEIGHTS)
    if len(preset.streams) == 1:  # a one-stream mode ranks by that stream, whatever its weight
        weights = {preset.streams[0]: 1.0}
    tuning = tune(query, weights, sure_first)
    words = query if window else dates.without_counted_back(query)  # what the streams rank by
    spans = [] if window else dates.named(query, time.time() if now is None else now)
    if len(preset.streams) > 1:
        weights, sure_first = tuning.weights, tuning.sure_first
    if len(preset.streams) == 1 or not tuning.feedback:
        feedback = 0.0
    if not tuning.rerank:
        reranker = None
    problems: dict[str, str] = {}
    if reranker is not None:
        try:  # a local model loads (and measures its cost) before its budget is spent
            reranker.load()
        except Exception as exc:  # noqa: BLE001 - a failing reranker leaves fusion's order
            problems["rerank"] = f"{type(exc).__name__}: {exc}"
            log.warning("reranker failed, answering in fusion's order: %s", exc)
            reranker = None
        else:
            rerank_depth = depth_within(reranker, rerank_budget_ms, rerank_depth)
    session_support = support_share(
        reranker is not None, rerank_depth, session_support, reranked_support
    )
    neighbour_support = support_share(
        reranker is not None, rerank_depth, neighbour_support, reranked_neighbour_support
    )
    if len(preset.streams) == 1:  # one stream's own order stays its own (the "parts")
        session_support = neighbour_support = 0.0
    wants_vectors = (
        vectors is not None
        and vectors.enabled
        and "vector" in preset.streams
        and weights.get("vector", 0) > 0
    )
    # hybrid does not wait for a model that is still loading; semantic has nothing else
    index = (
        vectors.index(wait=preset.streams == ("vector",))
        if vectors is not None and wants_vectors
        else None
    )
    if preset.streams == ("vector",) and index is None:
        why = (
            vectors.problem
            if vectors is not None and vectors.problem
            else "no embedder is configured (ENGRAM_EMBEDDER=none)"
        )
        raise SearchUnavailable(
            f"mode {mode!r} needs the vector index, and it is off: {why}; "
            'use "keyword" or "hybrid", or see GET /v1/status'
        )
    depth = max(limit * CANDIDATE_FACTOR, MIN_DEPTH)
    read = depth * DATED_READ if spans else depth  # BM25's; see keep_dated
    future = None
    stored: dict[str, Sequence[float]] | None = None
    if index is not None:
        stored = {} if feedback > 0 else None
        future = _pool.submit(_vector_stream, index, words, scope, depth, kinds, window, stored)
    rankings: dict[str, list[KeywordHit]] = {}
    if wants_vectors and index is None:
        problems["vector"] = (
            vectors.problem
            if vectors is not None and vectors.problem
            else "the vector index is still loading"
        )
    graph_future = None
    if "graph" in preset.streams and graph and weights.get("graph", 0) > 0:
        graph_future = _pool.submit(
            _graph_stream, store, words, scope, graph_depth(limit), kinds, window
        )
    weigh_firsts = weighs_firsts(sure_first, fusion, len(preset.streams))
    term_weights: dict[str, float] | None = None
    with store.read() as conn:
        if "bm25" in preset.streams:
            rankings["bm25"] = store.keyword.search(conn, words, scope, read, kinds, window)
            if weigh_firsts and rankings["bm25"] and future is not None:
                # while the vector stream runs: what the first hits are weighed by (fuse)
                term_weights = keyword.term_weights(conn, store.keyword, words)
        if graph_future is not None:
            rankings["graph"] = graph_future.result()
        query_vector: Sequence[float] | None = None
        if future is not None:
            try:
                query_vector, nearest = future.result()
            except Exception as exc:  # noqa: BLE001 - a failing stream degrades, never fails
                problems["vector"] = f"{type(exc).__name__}: {exc}"
                log.warning("vector stream failed, answering without it: %s", exc)
            else:  # kinds and sessions from the keyword index: Chroma's metadata costs more
                rankings["vector"] = keyword.described(conn, nearest)
        recorded: dict[str, float] = {}  # the candidates' times, for a query that names one
        if read > depth and "bm25" in rankings:
            recorded = keyword.created_at(conn, [h.doc_id for h in rankings["bm25"][depth:]])
            rankings["bm25"] = keep_dated(rankings["bm25"], depth, recorded, spans)

        covered = (
            first_coverage(conn, store.keyword, words, rankings, term_weights)
            if weigh_firsts
            else None
        )
        beside = keyword.neighbours(conn, candidates(rankings)) if neighbour_support > 0 else None

        def fused_order() -> tuple[list[KeywordHit], dict[str, dict[str, int]]]:
            fused = fuse(
                rankings,
                weights,
                k=rrf_k,
                method=fusion,
                sure_first=sure_first,
                coverage=covered,
                session_support=session_support,
                neighbours=beside,
                neighbour_support=neighbour_support,
            )
            return [hit for hit, _ in fused], {hit.doc_id: dict(ranks) for hit, ranks in fused}

        ordered, rank_of = fused_order()
        if spans:  # before the reranker, so that it reads the hits of that time
            unread = [hit.doc_id for hit in ordered if hit.doc_id not in recorded]
            recorded.update(keyword.created_at(conn, unread))
            ordered = times_first(ordered, recorded, spans)
        if stored and query_vector is not None and ordered:
            # the candidates are the same: ``recorded`` still holds every one's time
            again = feedback_ranking(query_vector, ordered, stored, feedback)
            if again:
                rankings["vector"] = again
                first_ranks = rank_of
                ordered, rank_of = fused_order()
                ordered = times_first(ordered, recorded, spans) if spans else ordered
                for doc_id, ranks in rank_of.items():  # each stream's own rank, and the 2nd pass
                    if "vector" in ranks:
                        ranks["feedback"] = ranks.pop("vector")
                    if "vector" in first_ranks.get(doc_id, {}):
                        ranks["vector"] = first_ranks[doc_id]["vector"]
        head = hydrate(conn, ordered[:rerank_depth]) if reranker is not None else []
    if reranker is not None and head:
        try:  # outside the read: a cross-encoder takes a while, and holds no connection
            ordered = rerank(reranker, words, ordered, head, rerank_depth)
        except Exception as exc:  # noqa: BLE001 - a failing reranker leaves fusion's order
            problems["rerank"] = f"{type(exc).__name__}: {exc}"
            log.warning("reranker failed, answering in fusion's order: %s", exc)
        else:
            for position, hit in enumerate(ordered[:rerank_depth], 1):
                rank_of.setdefault(hit.doc_id, {})["rerank"] = position
            ordered = times_first(ordered, recorded, spans)
    chosen = diversify(ordered, limit, per_session)
    with store.read() as conn:
        items = hydrate(conn, chosen)
    for item in items:
        item["ranks"] = rank_of.get(item["id"], {})
    result: dict[str, Any] = {
        "items": items,
        "mode": preset.name,
        "streams": [name for name in preset.streams if name in rankings],
    }
    if reranker is not None and "rerank" not in problems and head:
        result["reranker"] = reranker.name
        result["reranked"] = len(head)
    if spans:
        result["times"] = [{"since": iso(start), "until": iso(end)} for start, end in spans]
    if problems:
        result["degraded"] = problems
    return result


def times_first(
    hits: list[KeywordHit],
    recorded: Mapping[str, float],
    spans: Sequence[tuple[float, float]],
) -> list[KeywordHit]:
    """``hits`` with those recorded inside one of ``spans`` (``recorded``: epoch seconds by doc
    id) first, each part in its own order: a question about a time is answered by what was
    recorded then, and by the rest after it (a time told loosely can miss)."""
    inside = {
        hit.doc_id
        for hit in hits
        if (at := recorded.get(hit.doc_id)) is not None and any(a <= at < b for a, b in spans)
    }
    if not inside:
        return hits
    return [h for h in hits if h.doc_id in inside] + [h for h in hits if h.doc_id not in inside]


def rerank(
    reranker: Reranker,
    query: str,
    ordered: list[KeywordHit],
    head: list[dict[str, Any]],
    depth: int,
) -> list[KeywordHit]:
    """``ordered`` with its first ``depth`` hits sorted by the reranker's score of each one's
    text (``head``: those hits hydrated); ties and hits the store no longer has keep fusion's
    order, and everything past ``depth`` follows unchanged."""
    texts = {item["id"]: f"{item.get('title') or ''}\n{item.get('text') or ''}" for item in head}
    top = ordered[:depth]
    scored = [hit for hit in top if hit.doc_id in texts]
    scores = reranker.score(query, [texts[hit.doc_id][:RERANK_CHARS] for hit in scored])
    score_of = {hit.doc_id: score for hit, score in zip(scored, scores, strict=True)}
    floor = min(scores, default=0.0) - 1.0
    position = {hit.doc_id: i for i, hit in enumerate(top)}
    top.sort(key=lambda hit: (-score_of.get(hit.doc_id, floor), position[hit.doc_id]))
    return top + ordered[depth:]


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

        sums = {
            r.id: r for r in conn.execute(select(sessions).where(sessions.c.id.in_(summary_ids)))
        }
    items: list[dict[str, Any]] = []
    for hit in hits:
        base = {"id": hit.doc_id, "kind": hit.kind, "sessionId": hit.session_id, "score": hit.score}
        if hit.kind == "observation" and hit.doc_id in obs:
            row = obs[hit.doc_id]
            items.append(
                {
                    **base,
                    "text": row.text,
                    "title": row.title,
                    "project": row.project,
                    "createdAt": iso(row.created_at),
                }
            )
        elif hit.kind == "memory" and hit.doc_id in mems:
            row = mems[hit.doc_id]
            items.append(
                {
                    **base,
                    "text": row.content,
                    "title": row.content.split("\n", 1)[0][:120],
                    "project": row.project,
                    "createdAt": iso(row.updated_at),
                }
            )
        elif hit.kind == "summary" and hit.session_id in sums:
            row = sums[hit.session_id]
            items.append(
                {
                    **base,
                    "text": row.summary,
                    "title": f"Session summary {row.id}",
                    "project": row.project,
                    "createdAt": iso(row.ended_at),
                }
            )
    return items
