"""The vector stream: real ChromaDB (persistent and a real `chroma run` server), the real local
embedder, the derive queue drained by the embed task, fusion, status and degradation."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram import derive, keyword, search
from engram import status as engram_status
from engram.embedders.base import EmbedderError
from engram.keyword import KeywordDoc, KeywordHit
from engram.scope import Scope, Window
from engram.store import Store
from engram.vectors import TARGET, Vectors, VectorsUnavailable, chroma_client
from tests.conftest import api_for, make_settings
from tests.support import Api, free_port, wait_for

try:
    from engram.embedders.local import LocalMiniLMEmbedder

    LocalMiniLMEmbedder().embed(["probe"])
    LOCAL_OK = True
except (ImportError, EmbedderError):
    LOCAL_OK = False

needs_local = pytest.mark.skipif(
    not LOCAL_OK, reason="the local embedder is not installed (pip install 'engram-memory[local]')"
)

DOCS = [
    # (doc_id, project, agent, kind, body)
    (
        "o-db",
        "alpha",
        None,
        "observation",
        "The Postgres connection pool ran out of connections under load; raised max_connections.",
    ),
    (
        "o-css",
        "alpha",
        None,
        "observation",
        "Centered the login button with flexbox and fixed the dark mode colours.",
    ),
    (
        "o-agent",
        "alpha",
        "agent-1",
        "observation",
        "Database connections leaked from the worker; closed them in a finally block.",
    ),
    (
        "m-global",
        "",
        None,
        "memory",
        "Always run the database migrations before starting the API server.",
    ),
    (
        "o-beta",
        "beta",
        None,
        "observation",
        "Database connection pool exhausted in the billing service.",
    ),
]


def _fill(store: Store) -> None:
    with store.write() as conn:
        for doc_id, project, agent, kind, body in DOCS:
            store.keyword.upsert(
                conn,
                KeywordDoc(
                    doc_id=doc_id,
                    kind=kind,
                    project=project,
                    body=body,
                    created_at=1.0,
                    agent_id=agent,
                    session_id=f"s-{doc_id}",
                ),
            )


def _drain(vectors: Vectors, store: Store) -> None:
    index = vectors.index()
    assert index is not None, vectors.problem
    while True:
        with store.write() as conn:
            changes = derive.claim(conn, TARGET, 100, 60)
        if not changes:
            return
        index.apply(changes)
        with store.write() as conn:
            derive.done(conn, TARGET, changes)


@pytest.fixture
def vectors(tmp_path: Path, store: Store) -> Iterator[Vectors]:
    if not LOCAL_OK:
        pytest.skip("the local embedder is not installed")
    settings = make_settings(tmp_path, ENGRAM_EMBEDDER="local")
    settings.data_dir.mkdir(parents=True)
    yield Vectors(settings, store)


@needs_local
def test_scope_is_applied_inside_the_index(vectors: Vectors, store: Store) -> None:
    _fill(store)
    _drain(vectors, store)
    index = vectors.index()
    assert index is not None
    query = "database connection problems"
    alpha = [h.doc_id for h in index.search(query, Scope("alpha"), 10)]
    # the project's documents and global memories; never another project's
    assert set(alpha) == {"o-db", "o-css", "o-agent", "m-global"}
    assert alpha.index("o-db") < alpha.index("o-css")
    assert {h.doc_id for h in index.search(query, Scope("beta"), 10)} == {"o-beta", "m-global"}
    # an agent sees its own and shared documents, not another agent's
    other = {h.doc_id for h in index.search(query, Scope("alpha", "agent-2"), 10)}
    assert other == {"o-db", "o-css", "m-global"}
    mine = {h.doc_id for h in index.search(query, Scope("alpha", "agent-1"), 10)}
    assert "o-agent" in mine
    kinds = {h.doc_id for h in index.search(query, Scope("alpha"), 10, kinds=("memory",))}
    assert kinds == {"m-global"}
    everything = {h.doc_id for h in index.search(query, Scope("*"), 10)}
    assert everything == {d[0] for d in DOCS}
    hit = next(h for h in index.search(query, Scope("alpha"), 10) if h.doc_id == "o-db")
    assert hit.session_id == "s-o-db" and 0 < hit.score <= 1


@needs_local
def test_a_time_window_is_applied_inside_the_index(vectors: Vectors, store: Store) -> None:
    """The nearest documents inside the window, not the window's share of the nearest."""
    with store.write() as conn:
        for n in range(20):
            body = f"The database connection pool ran out of connections, attempt {n}."
            store.keyword.upsert(conn, KeywordDoc(f"old-{n}", "observation", "w", body, 100.0 + n))
        body = "Centered the login button with flexbox."
        store.keyword.upsert(conn, KeywordDoc("new", "observation", "w", body, 5000.0))
    _drain(vectors, store)
    index = vectors.index()
    assert index is not None
    query = "database connection pool exhausted"
    assert index.search(query, Scope("w"), 1)[0].doc_id.startswith("old-")
    assert [h.doc_id for h in index.search(query, Scope("w"), 1, window=Window(4000.0))] == ["new"]
    until = {h.doc_id for h in index.search(query, Scope("w"), 30, window=Window(until=110.0))}
    assert until == {f"old-{n}" for n in range(10)}  # until is exclusive
    assert index.search(query, Scope("w"), 5, window=Window(6000.0, 7000.0)) == []


@needs_local
def test_updates_and_deletes_reach_the_vectors(vectors: Vectors, store: Store) -> None:
    _fill(store)
    _drain(vectors, store)
    index = vectors.index()
    assert index is not None and index.count() == len(DOCS)
    with store.write() as conn:
        store.keyword.delete(conn, "o-db")
        store.keyword.upsert(
            conn,
            KeywordDoc(
                doc_id="o-css",
                kind="observation",
                project="alpha",
                created_at=2.0,
                body="Tuned the Postgres pool size and timeouts.",
            ),
        )
    _drain(vectors, store)
    assert index.count() == len(DOCS) - 1
    top = index.search("postgres pool tuning", Scope("alpha"), 3)
    assert top[0].doc_id == "o-css"
    assert "o-db" not in {h.doc_id for h in index.search("postgres", Scope("*"), 10)}
    with store.read() as conn:
        assert derive.pending(conn, TARGET) == 0


@needs_local
def test_a_new_collection_is_backfilled_once(tmp_path: Path, store: Store) -> None:
    _fill(store)  # documents exist before vectors are turned on
    settings = make_settings(tmp_path, ENGRAM_EMBEDDER="local")
    settings.data_dir.mkdir(parents=True)
    with store.write() as conn:
        derive.clear(conn, TARGET)  # as if they were written while vectors were off
    first = Vectors(settings, store)
    index = first.index()
    assert index is not None
    with store.read() as conn:
        assert derive.pending(conn, TARGET) == len(DOCS)
    status = first.status()
    assert status["ok"] and status["backfill"] == {"done": False, "progress": 0.0}
    _drain(first, store)
    status = first.status()
    assert status["indexed"] == len(DOCS) and status["backfill"]["done"]
    # a restart with the same model queues nothing again
    again = Vectors(settings, store)
    assert again.index() is not None
    with store.read() as conn:
        assert derive.pending(conn, TARGET) == 0


@needs_local
def test_a_model_change_opens_a_new_collection(tmp_path: Path, store: Store) -> None:
    _fill(store)
    settings = make_settings(tmp_path, ENGRAM_EMBEDDER="local")
    settings.data_dir.mkdir(parents=True)
    old = Vectors(settings, store)
    _drain(old, store)

    class Truncated:
        """The same model, cut to 128 dimensions: another vector space."""

        name = "all-minilm-l6-v2-int8-first128"
        dim = 128

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [v[:128] for v in LocalMiniLMEmbedder().embed(texts)]

    new = Vectors(settings, store, embedder=Truncated())  # type: ignore[arg-type]
    index = new.index()
    assert index is not None and index.name != old.index().name  # type: ignore[union-attr]
    with store.read() as conn:
        assert derive.pending(conn, TARGET) == len(DOCS)
    _drain(new, store)
    assert index.count() == len(DOCS)
    assert old.index().count() == len(DOCS)  # type: ignore[union-attr]


def test_rrf_fusion_renormalises_over_the_streams_that_answered() -> None:
    def hits(*ids: str) -> list[KeywordHit]:
        return [KeywordHit(doc_id=i, kind="observation", session_id=None, score=0.0) for i in ids]

    fused = search.fuse(
        {"bm25": hits("a", "b", "c"), "vector": hits("c", "d")},
        {"bm25": 1.0, "vector": 1.0, "graph": 0.5},
        k=60,
        method="rrf",
    )
    order = [hit.doc_id for hit, _ in fused]
    assert order[0] == "c"  # in both streams
    assert dict(fused[0][1]) == {"bm25": 3, "vector": 1}
    assert abs(fused[0][0].score - (0.5 / 63 + 0.5 / 61)) < 1e-12
    # a stream that found nothing takes no share: bm25 alone keeps its order, full weight
    alone = search.fuse(
        {"bm25": hits("a", "b"), "vector": [], "graph": []},
        {"bm25": 1.0, "vector": 1.0, "graph": 0.5},
        k=60,
        method="rrf",
    )
    assert [h.doc_id for h, _ in alone] == ["a", "b"]
    assert abs(alone[0][0].score - 1 / 61) < 1e-12
    # weights matter: a heavier stream's first hit wins a first-place tie
    tie = search.fuse(
        {"bm25": hits("a"), "vector": hits("b")}, {"bm25": 1.0, "vector": 2.0}, method="rrf"
    )
    assert [h.doc_id for h, _ in tie] == ["b", "a"]
    # equal weights, equal ranks: the earlier stream's hit first, deterministically
    even = search.fuse(
        {"bm25": hits("a"), "vector": hits("b")}, {"bm25": 1.0, "vector": 1.0}, method="rrf"
    )
    assert [h.doc_id for h, _ in even] == ["a", "b"]
    # k: a document ranked 8th by both streams against one ranked 1st by one stream:
    # k = 60 prefers the agreement (2 x 0.5/68 > 0.5/61), k = 5 the top hit (0.5/6 > 2 x 0.5/13)
    top_only = {"bm25": hits("a", *"pqrstu", "c"), "vector": hits("b", *"jklmno", "c")}
    assert [
        h.doc_id for h, _ in search.fuse(top_only, {"bm25": 1.0, "vector": 1.0}, k=60, method="rrf")
    ][0] == "c"
    assert [
        h.doc_id for h, _ in search.fuse(top_only, {"bm25": 1.0, "vector": 1.0}, k=5, method="rrf")
    ][0] == "a"


def scored(*pairs: tuple[str, float]) -> list[KeywordHit]:
    return [KeywordHit(doc_id=i, kind="observation", session_id=None, score=x) for i, x in pairs]


def test_score_fusion_lets_the_sure_stream_lead() -> None:
    """Each stream's scores are scaled over its top 20 and weighted by its confidence: how far
    its best score stands above its score at that depth, relative to the best, squared."""
    sure_bm25 = scored(("a", 10.0), ("b", 9.8), ("c", 2.0), ("d", 1.0))
    unsure_vector = scored(("e", 0.62), ("b", 0.61), ("f", 0.60))
    weights = {"bm25": 1.0, "vector": 1.0}
    fused = search.fuse({"bm25": sure_bm25, "vector": unsure_vector}, weights, method="score")
    order = [hit.doc_id for hit, _ in fused]
    # bm25's spread is 9 of 10 (confidence 0.81); the vectors' top three are 0.02 apart, so
    # the vector stream adds little but its agreement: b, in both, passes a (whose lead over b
    # is 2 %, a fifth of a full lead); e, the vectors' first, comes after bm25's third
    assert order[:3] == ["b", "a", "c"] and order.index("e") > order.index("c")
    doubt = (0.01 / 0.62) / search.LEAD_FULL  # the vectors' own lead, on another first hit
    lead = search.LEAD_BONUS["bm25"] * 0.5 * (0.02 / search.LEAD_FULL) * (1 - doubt)
    expected_a = 0.5 * 0.81 * 1.0 + search.RANK_SHARE * 0.5 + lead
    assert abs(fused[1][0].score - expected_a) < 1e-9
    # the same vectors, sure of their first hit, while bm25's scores are all alike: e leads
    unsure_bm25 = scored(("a", 5.0), ("b", 4.9), ("c", 4.8))
    sure_vector = scored(("e", 0.9), ("b", 0.3), ("f", 0.2))
    fused = search.fuse({"bm25": unsure_bm25, "vector": sure_vector}, weights, method="score")
    assert [hit.doc_id for hit, _ in fused][0] == "e"
    # rrf, which sees only ranks, puts the document both streams listed first either way
    rrf = search.fuse({"bm25": unsure_bm25, "vector": sure_vector}, weights, method="rrf")
    assert [hit.doc_id for hit, _ in rrf][0] == "b"


def test_a_clear_first_keyword_hit_keeps_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """BM25's first hit leading its second by a tenth or more is a rare word only it matches:
    agreement between the streams on the second does not pass it (without the lead bonus it
    would)."""
    bm25 = scored(("a", 10.0), ("b", 8.0), ("c", 2.0), ("d", 1.0))
    vector = scored(("b", 0.62), ("e", 0.61), ("f", 0.60))
    weights = {"bm25": 1.0, "vector": 1.0}
    streams = {"bm25": bm25, "vector": vector}
    assert [hit.doc_id for hit, _ in search.fuse(streams, weights, method="score")][:2] == [
        "a",
        "b",
    ]
    monkeypatch.setattr(search, "LEAD_BONUS", {})
    assert [hit.doc_id for hit, _ in search.fuse(streams, weights, method="score")][0] == "b"
    monkeypatch.undo()
    # the context builder asks without it: agreement leads there, as before
    plain = search.fuse(streams, weights, method="score", sure_first=False)
    assert [hit.doc_id for hit, _ in plain][0] == "b"
    monkeypatch.undo()
    # the vector stream as sure of another first hit (a lead of a tenth) takes the bonus back
    doubting = scored(("b", 0.70), ("e", 0.61), ("f", 0.60))
    fused = search.fuse({"bm25": bm25, "vector": doubting}, weights, method="score")
    assert [hit.doc_id for hit, _ in fused][0] == "b"
    # both sure of the same first hit: no doubt
    agreeing = scored(("a", 0.70), ("e", 0.61), ("f", 0.60))
    fused = search.fuse({"bm25": bm25, "vector": agreeing}, weights, method="score")
    without = search.fuse({"bm25": bm25, "vector": agreeing}, weights, method="rrf")
    assert [hit.doc_id for hit, _ in fused][0] == "a" == without[0][0].doc_id
    assert fused[0][0].score > 0.5 * 0.81 + search.LEAD_BONUS["bm25"] * 0.5  # the full bonus
    assert search._lead(scored(("x", 1.0))) == 0.0  # one hit has no lead
    assert search._lead(scored(("x", -1.0), ("y", -2.0))) == 0.0  # nor a score below zero


def test_the_first_hit_that_holds_the_question_is_believed() -> None:
    """BM25 and the vector stream put different documents first: the one whose first hit holds
    clearly more of the question's (IDF-weighted) words is believed. The streams' heads of two
    real questions, as the server ranked them."""
    weights = search.DEFAULT_WEIGHTS

    def first(streams: dict[str, list[KeywordHit]], **kwargs: object) -> str:
        return search.fuse(streams, weights, method="score", **kwargs)[0][0].doc_id  # type: ignore[arg-type]

    # coding-paraphrase "How did we add the money-type field to bills without breaking the rows
    # already stored?": BM25's first matches common words (field, rows, stored) many times
    paraphrase = {
        "bm25": scored(
            ("etl-07", 4.819),
            ("ledger-01", 3.577),
            ("etl-08", 3.082),
            ("ledger-07", 3.0),
            ("shop-07", 2.684),
            ("etl-03", 2.1),
            ("shop-02", 1.5),
        ),  # fmt: skip
        "vector": scored(
            ("ledger-02", 0.30),
            ("etl-07", 0.19),
            ("ledger-01", 0.16),
            ("ledger-07", 0.152),
            ("etl-04", 0.147),
            ("shop-01", 0.12),
        ),  # fmt: skip
    }
    assert first(paraphrase) == "etl-07"  # agreement on BM25's first carries it
    # the vector stream's first holds as much of the question: it is believed
    assert first(paraphrase, coverage={"etl-07": 0.39, "ledger-02": 0.42}) == "ledger-02"
    # ... unless it holds too little of it to judge by (below COVERAGE_MIN)
    assert first(paraphrase, coverage={"etl-07": 0.15, "ledger-02": 0.20}) == "etl-07"
    # the context builder (no sure-first bonus) orders as before
    assert first(paraphrase, coverage={"etl-07": 0.39, "ledger-02": 0.42}, sure_first=False) == (
        "etl-07"
    )
    # LongMemEval-S "Who gave me a new stand mixer as a birthday gift?": both streams sure of
    # different sessions, so neither bonus counted and agreement on BM25's second won
    mixer = {
        "bm25": scored(
            ("gold", 15.388),
            ("s1", 7.176),
            ("s2", 6.126),
            ("s3", 1.093),
            ("s4", 0.9),
        ),  # fmt: skip
        "vector": scored(("s1", 0.301), ("s3", 0.164), ("s5", 0.149), ("s2", 0.146)),
    }
    assert first(mixer) == "s1"
    # BM25's first holds the rare words (stand, mixer, birthday) the vectors' first lacks
    covered = {"gold": 0.64, "s1": 0.12}
    assert first(mixer, coverage=covered) == "gold"
    fused = search.fuse(mixer, weights, method="score", coverage=covered)
    plain = search.fuse(mixer, weights, method="score", coverage={"gold": 0.2, "s1": 0.12})
    bonus = search.LEAD_BONUS["bm25"] * weights["bm25"] / sum(weights[n] for n in mixer)
    # believed: BM25's whole bonus, whatever the vectors' own lead
    assert fused[0][0].score - {h.doc_id: h.score for h, _ in plain}["gold"] == pytest.approx(bonus)
    # no verdict when the first hits agree, or one of them has no coverage
    assert search._believed({"bm25": ("a", 1, 1), "vector": ("a", 1, 1)}, {"a": 1.0}) is None
    assert search._believed({"bm25": ("a", 1, 1), "vector": ("b", 1, 1)}, {"a": 1.0}) is None


def test_low_cosines_do_not_make_the_vector_stream_sure(monkeypatch: pytest.MonkeyPatch) -> None:
    """LongMemEval-S "Where did I attend for my study abroad program?" (the two streams' top 20
    as the server ranked them): BM25's first hit, the answer, scores twice its second; the
    vectors' best is a cosine of 0.23 for a session that does not answer. Relative to 0.23 the
    vectors' spread looked as sure as a real match, and BM25's second, which the vectors list
    second, passed the answer; measured against ``CONFIDENCE_FLOOR`` it does not."""
    bm25 = scored(
        *[("gold", 11.789), ("s0", 5.677), ("s1", 5.606), ("s2", 4.257), ("s3", 3.819)],
        *[("s4", 3.719), ("s5", 2.691), ("s6", 2.013)],
    )
    vector = scored(
        *[("s7", 0.227), ("s0", 0.162), ("s5", 0.156), ("s8", 0.101), ("s9", 0.097)],
        *[("s10", 0.097), ("gold", 0.087), ("s11", 0.084), ("s12", 0.084), ("s13", 0.077)],
        *[("s14", 0.063), ("s15", 0.06), ("s16", 0.054), ("s17", 0.053), ("s18", 0.053)],
        *[("s19", 0.05), ("s20", 0.05), ("s1", 0.044), ("s21", 0.043), ("s3", 0.037)],
    )
    streams = {"bm25": bm25, "vector": vector}
    weights = search.DEFAULT_WEIGHTS
    assert [hit.doc_id for hit, _ in search.fuse(streams, weights, method="score")][0] == "gold"
    monkeypatch.setattr(search, "CONFIDENCE_FLOOR", {})
    assert [hit.doc_id for hit, _ in search.fuse(streams, weights, method="score")][0] == "s0"
    # above the floor a stream's confidence is its own spread, as before
    high = scored(("x", 0.9), ("y", 0.5), ("z", 0.45))
    assert search._scaled(high, 0.3)(0.9) == search._scaled(high)(0.9)
    assert search._scaled(high)(0.9) == pytest.approx((0.45 / 0.9) ** 2)
    assert search._scaled(vector, 0.3)(0.227) == pytest.approx(((0.227 - 0.037) / 0.3) ** 2)


@pytest.mark.parametrize(
    ("query", "advice"),
    [
        ("Can you suggest some accessories that would complement my photography setup?", True),
        ("I've been having trouble with the battery life on my phone lately. Any tips?", True),
        ("I've got some free time tonight, any documentary recommendations?", True),
        ("What should I serve for dinner this weekend?", True),
        ("I'm trying to decide whether to buy a NAS now or wait. What do you think?", True),
        ("What did Evan suggest Sam try as a calming hobby?", False),  # a fact about others
        ("Which async runtime does the team prefer for new code?", False),
        ("Can you help me fix the failing login test?", False),  # a task, not advice
        ("Where did we consolidate the retry logic?", False),
    ],
)
def test_a_request_for_advice_is_fused_for_meaning(query: str, advice: bool) -> None:
    """A request for advice is answered by what the user said of their situation, in other
    words: BM25 keeps ``ADVICE_BM25`` of its weight, no sure-first bonus, no feedback from the
    first hit (often BM25's look-alike), no reranker."""
    weights = {"bm25": 1.0, "vector": 1.3, "graph": 0.15}
    tuning = search.tune(query, weights)
    assert search.asks_advice(query) is advice
    if advice:
        assert tuning == search.Tuning(
            {"bm25": search.ADVICE_BM25, "vector": 1.3, "graph": 0.15}, False, False, False
        )
    else:
        assert tuning == search.Tuning(weights, True, True, True)
    assert search.tune(query, weights, sure_first=False).sure_first is False
    assert weights["bm25"] == 1.0  # the caller's weights are not changed


def test_a_hit_gains_a_share_of_its_best_scored_neighbour() -> None:
    """Neighbour support: each hit gains the share of the best fused score among the hits
    recorded just before and after it; a neighbour no stream ranked adds nothing."""

    def hit(doc_id: str, score: float) -> KeywordHit:
        return KeywordHit(doc_id=doc_id, kind="observation", session_id=None, score=score)

    rankings = {
        "bm25": [hit("ask", 9.0), hit("other", 6.0), hit("far", 5.0), hit("x", 1.0)],
        "vector": [hit("other", 0.9), hit("ask", 0.8), hit("answer", 0.5), hit("x", 0.1)],
    }
    weights = {"bm25": 1.0, "vector": 1.0}
    neighbours = {
        "answer": ("ask", "x"),  # the question's words sit in the turn before the answer
        "ask": ("answer",),
        "far": ("unranked",),
        "x": ("answer",),
    }
    before = {h.doc_id: h.score for h, _ in search.fuse(rankings, weights)}
    after = {
        h.doc_id: h.score
        for h, _ in search.fuse(rankings, weights, neighbours=neighbours, neighbour_support=0.5)
    }
    assert after["answer"] == pytest.approx(before["answer"] + 0.5 * before["ask"])
    assert after["ask"] == pytest.approx(before["ask"] + 0.5 * before["answer"])
    assert after["x"] == pytest.approx(before["x"] + 0.5 * before["answer"])
    assert after["far"] == before["far"] and after["other"] == before["other"]
    ordered = [h.doc_id for h, _ in search.fuse(rankings, weights)]
    lifted = [
        h.doc_id
        for h, _ in search.fuse(rankings, weights, neighbours=neighbours, neighbour_support=0.5)
    ]
    assert ordered.index("answer") > ordered.index("far")
    assert lifted.index("answer") < lifted.index("far")  # the answer rises with its question
    unchanged = search.fuse(rankings, weights, neighbours=neighbours, neighbour_support=0.0)
    assert [h.doc_id for h, _ in unchanged] == ordered


def test_a_sessions_first_place_goes_to_its_hit_that_holds_the_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turns of one session alike in meaning: the vector stream puts a sibling first, BM25 the
    turn with the question's words. Fusion keeps where each session's places are and what they
    score; the session's first place goes to BM25's best of its hits, the rest follow in order."""

    def hit(doc_id: str, session: str | None, score: float) -> KeywordHit:
        return KeywordHit(doc_id=doc_id, kind="observation", session_id=session, score=score)

    rankings = {
        "bm25": [
            hit("b1", "B", 5.0),
            hit("a2", "A", 4.9),
            hit("m1", None, 4.8),
            hit("a1", "A", 4.5),
            hit("a3", "A", 4.4),
        ],
        "vector": [
            hit("a1", "A", 0.90),
            hit("a3", "A", 0.85),
            hit("b1", "B", 0.30),
            hit("m1", None, 0.20),
            hit("a2", "A", 0.10),
        ],
    }
    weights = {"bm25": 1.0, "vector": 1.0}
    monkeypatch.setattr(search, "WORDS_LEAD", False)
    before = [(h.doc_id, h.score) for h, _ in search.fuse(rankings, weights)]
    a_places = [n for n, (doc_id, _) in enumerate(before) if doc_id.startswith("a")]
    assert before[a_places[0]][0] != "a2"  # fusion alone puts a sibling first
    monkeypatch.setattr(search, "WORDS_LEAD", True)
    after = [(h.doc_id, h.score) for h, _ in search.fuse(rankings, weights)]
    assert [score for _, score in after] == [score for _, score in before]
    siblings = [before[n][0] for n in a_places if before[n][0] != "a2"]
    assert [after[n][0] for n in a_places] == ["a2", *siblings]
    for n, (doc_id, _) in enumerate(before):  # every other hit keeps its place
        if n not in a_places:
            assert after[n][0] == doc_id


def test_feedback_moves_the_query_toward_the_first_hit() -> None:
    """The vector stream again over the fused candidates: each scored by its cosine with the
    query's vector plus ``share`` times the first hit's. A record worded like the first hit rises
    past one that only resembles the question, more with a larger share."""
    query = [0.0, 1.0, 0.0]
    vectors = {
        "first": [1.0, 1.0, 0.0],  # unit length not required: both sides are normalised
        "like-first": [1.0, 0.6, 0.0],
        "like-query": [0.0, 0.7, 0.714],
    }
    ordered = [
        KeywordHit(doc_id="first", kind="observation", session_id="s1", score=3.0),
        KeywordHit(doc_id="like-query", kind="memory", session_id=None, score=2.0),
        KeywordHit(doc_id="unembedded", kind="observation", session_id="s2", score=1.5),
        KeywordHit(doc_id="like-first", kind="observation", session_id="s3", score=1.0),
    ]
    # cosines with the query alone: first .71, like-query .70, like-first .51
    small = search.feedback_ranking(query, ordered, vectors, 0.3)
    assert [h.doc_id for h in small] == ["first", "like-query", "like-first"]
    large = search.feedback_ranking(query, ordered, vectors, 1.0)
    assert [h.doc_id for h in large] == ["first", "like-first", "like-query"]
    # scores are cosines with the moved query; kinds and sessions stay the candidates'
    moved = [0.0 + 1.0 / 2**0.5, 1.0 + 1.0 / 2**0.5, 0.0]
    norm = sum(x * x for x in moved) ** 0.5
    assert abs(large[1].score - (0.857 * moved[0] + 0.514 * moved[1]) / norm) < 2e-3
    assert (large[2].kind, large[2].session_id) == ("memory", None)
    assert "unembedded" not in {h.doc_id for h in large}  # no vector: not the stream's to rank
    # nothing to feed back: share 0, or a first hit without a vector
    assert search.feedback_ranking(query, ordered, vectors, 0.0) == []
    assert search.feedback_ranking(query, ordered[2:], vectors, 0.3) == []
    assert search.feedback_ranking(query, [], vectors, 0.3) == []


@needs_local
def test_hybrid_search_fuses_again_with_the_first_hits_feedback(
    vectors: Vectors, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hybrid search hands ``feedback_ranking`` the fused order (its first hit first), the
    query's own vector and the stored vectors Chroma returned with the vector stream's hits, and
    fuses its ranking as the vector stream; not with ``feedback=0``, for a request for advice or
    in semantic mode."""
    _fill(store)
    _drain(vectors, store)
    calls: list[tuple[list[str], dict[str, list[float]]]] = []
    real = search.feedback_ranking

    def spy(query_vector: Any, ordered: Any, found: Any, share: float) -> Any:
        assert len(query_vector) == 384 and share == 0.3
        calls.append(([h.doc_id for h in ordered], {d: list(v) for d, v in found.items()}))
        return real(query_vector, ordered, found, share)

    monkeypatch.setattr(search, "feedback_ranking", spy)
    # this test's store of record is empty: items are the hits as they are
    monkeypatch.setattr(
        search, "hydrate", lambda _conn, hits: [{"id": h.doc_id, "kind": h.kind} for h in hits]
    )
    scope = Scope("alpha")
    plain = search.search(store, "database connections", scope, vectors=vectors, feedback=0.0)
    result = search.search(store, "database connections", scope, vectors=vectors, feedback=0.3)
    assert result["streams"] == ["bm25", "vector", "graph"] and "degraded" not in result
    assert len(calls) == 1
    # each hit reports the vector stream's own rank, and the second pass's as ``feedback``
    own = {item["id"]: item["ranks"].get("vector") for item in plain["items"]}
    assert {item["id"]: item["ranks"].get("vector") for item in result["items"]} == own
    assert sum(1 for rank in own.values() if rank) >= 2  # the vector stream ranked them
    assert all("feedback" in item["ranks"] for item in result["items"] if own[item["id"]])
    assert not any("feedback" in item["ranks"] for item in plain["items"])
    candidates, found = calls[0]
    # every candidate in scope (alpha's three and the global memory) came with its vector
    assert sorted(candidates) == sorted(found) == ["m-global", "o-agent", "o-css", "o-db"]
    assert candidates[0] in {"o-db", "o-agent"}  # the fused first: a database connection record
    index = vectors.index()
    assert index is not None
    alone = index.embedder.embed([DOCS[0][4]])[0]  # o-db's text, embedded again
    cosine = sum(a * b for a, b in zip(alone, found["o-db"], strict=True))
    assert cosine > 0.99  # the vector Chroma stored for it
    search.search(store, "database connections", scope, vectors=vectors, mode="semantic")
    search.search(store, "any tips for database connections?", scope, vectors=vectors)
    assert len(calls) == 1


def test_ranked_search_weighs_the_streams_first_hits_by_coverage(
    vectors: Vectors, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranked hybrid search reads the coverage of BM25's and the vector stream's first hits when
    they differ and hands it to ``fuse``; the context builder's search (no sure-first bonus) and
    rank fusion read none."""
    _fill(store)
    _drain(vectors, store)
    given: list[Any] = []
    real_fuse = search.fuse

    def spy(*args: Any, **kwargs: Any) -> Any:
        given.append(kwargs.get("coverage"))
        return real_fuse(*args, **kwargs)

    monkeypatch.setattr(search, "fuse", spy)
    scope = Scope("alpha")
    with store.read() as conn:
        bm25 = store.keyword.search(conn, "database connections", scope, 40)
    # make the streams disagree on their first hit: the vector stream answers in reverse
    index = vectors.index()
    assert index is not None and len(bm25) >= 2
    real_search = index.search

    def reversed_search(*args: Any, **kwargs: Any) -> Any:
        return list(reversed(real_search(*args, **kwargs)))

    monkeypatch.setattr(index, "search", reversed_search)
    search.search(store, "database connections", scope, vectors=vectors, feedback=0.0)
    assert len(given) == 1 and given[0] is not None
    with store.read() as conn:
        vector_first = reversed_search("database connections", scope, 40)[0].doc_id
        weights = keyword.term_weights(conn, store.keyword, "database connections")
        expected = keyword.coverage(conn, weights, [bm25[0].doc_id, vector_first])
    assert bm25[0].doc_id != vector_first and given[0] == expected and len(expected) == 2
    given.clear()
    search.search(store, "database connections", scope, vectors=vectors, sure_first=False)
    search.search(store, "database connections", scope, vectors=vectors, fusion="rrf")
    assert given and all(coverage is None for coverage in given)
    # first hits that agree need no verdict, and no read
    with store.read() as conn:
        same = {"bm25": bm25[:1], "vector": bm25[:1]}
        assert search.first_coverage(conn, store.keyword, "database", same) is None


@needs_local
def test_search_reads_the_vector_hits_kinds_and_sessions_from_the_keyword_index(
    vectors: Vectors, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chroma reads no metadata for search (``described=False``): the vector stream's kinds and
    sessions come from the keyword index, and a document deleted there whose vector has not
    yet gone (the derived index lags) is not a candidate."""
    _fill(store)
    _drain(vectors, store)
    with store.write() as conn:
        store.keyword.delete(conn, "o-db")  # not drained: Chroma still holds its vector
    index = vectors.index()
    assert index is not None
    query = "database connection problems"
    bare = index.search(query, Scope("alpha"), 10, described=False)
    assert "o-db" in {h.doc_id for h in bare}
    assert {(h.kind, h.session_id) for h in bare} == {("", None)}
    given: list[Any] = []
    real_fuse = search.fuse

    def spy(rankings: Any, *args: Any, **kwargs: Any) -> Any:
        given.append(rankings["vector"])
        return real_fuse(rankings, *args, **kwargs)

    monkeypatch.setattr(search, "fuse", spy)
    search.search(store, query, Scope("alpha"), mode="semantic", vectors=vectors)
    kinds = {doc_id: kind for doc_id, _, _, kind, _ in DOCS}
    assert given and [h.doc_id for h in given[0]] == [h.doc_id for h in bare if h.doc_id != "o-db"]
    assert all(h.kind == kinds[h.doc_id] and h.session_id == f"s-{h.doc_id}" for h in given[0])


def test_hybrid_search_lifts_the_turn_after_the_one_that_holds_the_words(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hybrid search reads the candidates' neighbours (``keyword.neighbours``: the other party's
    turn just before) and fuses with the neighbour share: the reply to the turn that holds the
    question's words rises above a lone match elsewhere. Keyword mode, and a share of 0, read
    none."""
    turns = [
        ("ask", "s1", 1.0, "user", "Which port does the billing service listen on after the move?"),
        ("reply", "s1", 2.0, "agent", "It listens on 8443 now; the old service port is closed."),
        ("later", "s1", 3.0, "user", "Thanks, deploying it."),
        ("lone", "s2", 1.0, "user", "The search service listens on the port its config names."),
    ]
    with store.write() as conn:
        for doc_id, session, at, speaker, body in turns:
            doc = KeywordDoc(doc_id, "observation", "p", body, at, session_id=session)
            store.keyword.upsert(conn, dataclasses.replace(doc, speaker=speaker))
    given: list[tuple[Any, float]] = []
    real_fuse = search.fuse

    def spy(*args: Any, **kwargs: Any) -> Any:
        given.append((kwargs.get("neighbours"), kwargs.get("neighbour_support", 0.0)))
        return real_fuse(*args, **kwargs)

    monkeypatch.setattr(search, "fuse", spy)
    monkeypatch.setattr(
        search, "hydrate", lambda _conn, hits: [{"id": h.doc_id, "kind": h.kind} for h in hits]
    )
    query = "which port does the billing service listen on"

    def order(**kwargs: Any) -> list[str]:
        found = search.search(store, query, Scope("p"), per_session=5, **kwargs)
        return [item["id"] for item in found["items"]]

    plain = order(neighbour_support=0.0)
    assert given == [(None, 0.0)]  # no share, no read
    lifted = order(neighbour_support=1.0)
    with store.read() as conn:
        ranked = store.keyword.search(conn, query, Scope("p"), 40)
        expected = keyword.neighbours(conn, sorted(h.doc_id for h in ranked))
    assert given[1] == (expected, 1.0) and expected["reply"] == ("ask",)
    assert plain.index("reply") > plain.index("lone")
    assert lifted[:2] == ["ask", "reply"]  # the reply rises with the turn it answers
    given.clear()
    order(neighbour_support=1.0, mode="keyword")
    assert given == [(None, 0.0)]


def test_session_support_lifts_a_hit_by_its_sessions_best_hits() -> None:
    """Each hit gains ``session_support`` times the sum of its session's two best fused scores
    (its own included, taken before any support); a hit without a session gains nothing."""

    def hit(doc_id: str, session: str | None) -> KeywordHit:
        return KeywordHit(doc_id=doc_id, kind="observation", session_id=session, score=0.0)

    ranking = [hit("lone", "s1"), hit("a", "s2"), hit("b", "s2"), hit("free", None)]
    ranking += [hit(f"w{n}", "s3") for n in range(4)]
    streams = {"bm25": ranking}
    plain = search.fuse(streams, {"bm25": 1.0}, k=5, method="rrf", session_support=0)
    assert [h.doc_id for h, _ in plain][:3] == ["lone", "a", "b"]
    base = {h.doc_id: h.score for h, _ in plain}
    fused = search.fuse(streams, {"bm25": 1.0}, k=5, method="rrf", session_support=0.3)
    score = {h.doc_id: h.score for h, _ in fused}
    s2 = base["a"] + base["b"]
    assert abs(score["a"] - (base["a"] + 0.3 * s2)) < 1e-12
    assert abs(score["b"] - (base["b"] + 0.3 * s2)) < 1e-12
    assert abs(score["lone"] - 1.3 * base["lone"]) < 1e-12
    assert score["free"] == base["free"]
    # only a session's best two count: s3's four weak hits add two of them, not four
    s3 = base["w0"] + base["w1"]
    assert abs(score["w3"] - (base["w3"] + 0.3 * s3)) < 1e-12
    assert [h.doc_id for h, _ in fused][:2] == ["a", "lone"]


def test_score_fusion_of_one_stream_keeps_its_order_below_the_depth() -> None:
    """Below a stream's 20th hit every scaled score is 0: the RRF term keeps its order."""
    hits = scored(*((f"d{n:02}", 100.0 - n) for n in range(45)))
    fused = search.fuse({"bm25": hits, "vector": []}, {"bm25": 1.0, "vector": 1.0})
    assert [hit.doc_id for hit, _ in fused] == [h.doc_id for h in hits]
    with pytest.raises(ValueError, match="unknown fusion"):
        search.fuse({"bm25": hits}, {"bm25": 1.0}, method="borda")


def test_opening_chroma_does_not_load_grpc(tmp_path: Path) -> None:
    """chromadb's tracing imports OpenTelemetry's gRPC exporter (18 MB of grpc) for a feature
    Engram never turns on; the client still stores and finds vectors without it."""
    probe = (
        "import sys\n"
        "from engram.vectors import chroma_client\n"
        "from tests.conftest import make_settings\n"
        f"client = chroma_client(make_settings(__import__('pathlib').Path({str(tmp_path)!r})))\n"
        "col = client.get_or_create_collection('probe-grpc')\n"
        "col.add(ids=['a', 'b'], embeddings=[[1.0, 0.0], [0.0, 1.0]])\n"
        "hit = col.query(query_embeddings=[[0.9, 0.1]], n_results=1)['ids'][0]\n"
        "print(hit, 'grpc' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['a']", "False"]


def test_distributed_without_a_chroma_server_says_what_to_do(tmp_path: Path, store: Store) -> None:
    settings = make_settings(
        tmp_path, ENGRAM_EMBEDDER="local", ENGRAM_BROKER_URL="redis://127.0.0.1:6379/14"
    )
    vectors = Vectors(settings, store)
    assert vectors.index() is None
    report = vectors.status()
    assert report["enabled"] and not report["ok"]
    assert "ENGRAM_CHROMA_URL" in report["problem"]


def test_an_unreachable_chroma_server_is_a_clear_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, ENGRAM_CHROMA_URL=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(VectorsUnavailable, match="cannot reach the Chroma server"):
        chroma_client(settings)


@contextlib.contextmanager
def chroma_server(path: Path) -> Iterator[str]:
    port = free_port()
    chroma = Path(sys.executable).parent / "chroma"
    log = open(path.parent / "chroma.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        def up() -> bool:
            try:
                with urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=1) as resp:
                    return resp.status == 200
            except OSError:
                return False

        wait_for(up, 60, message=f"chroma run\n{(path.parent / 'chroma.log').read_text()}")
        yield url
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


@needs_local
@pytest.mark.slow
def test_a_real_chroma_server(tmp_path: Path, store: Store) -> None:
    """ENGRAM_CHROMA_URL: the same index through a real `chroma run`, shared by two processes'
    worth of clients, and the data outlives the client."""
    with chroma_server(tmp_path / "chroma") as url:
        settings = make_settings(
            tmp_path,
            ENGRAM_EMBEDDER="local",
            ENGRAM_CHROMA_URL=url,
            ENGRAM_BROKER_URL="redis://127.0.0.1:6379/14",
        )
        writer = Vectors(settings, store)
        _fill(store)
        _drain(writer, store)
        reader = Vectors(settings, store)  # another client, as the gateway would have
        index = reader.index()
        assert index is not None, reader.problem
        top = index.search("running out of database connections", Scope("alpha"), 2)
        assert top[0].doc_id in {"o-db", "o-agent"}
        assert {h.doc_id for h in index.search("css", Scope("beta"), 10)} == {"o-beta", "m-global"}
        assert reader.status()["indexed"] == len(DOCS)
        # closed, a client lets go of its connections (left open, they outlived the server)
        for vectors in (writer, reader):
            vectors.close()
            assert vectors.index() is None and vectors.problem == "the vector index is closed"


# -- through the gateway, with the in-process worker draining -----------------------------


@pytest.fixture(scope="module")
def vector_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not LOCAL_OK:
        pytest.skip("the local embedder is not installed")
    from engram.cli.server import build_gateway

    built = build_gateway(make_settings(tmp_path_factory.mktemp("vgw"), ENGRAM_EMBEDDER="local"))
    yield built
    built.close()


@pytest.fixture
def vapi(vector_gateway: Any) -> Api:
    return api_for(vector_gateway)


def _observe(api: Api, project: str, text: str, **extra: Any) -> str:
    status, body = api.post(
        "/v1/observe",
        {
            "eventId": uuid.uuid4().hex,
            "sessionId": f"s-{uuid.uuid4().hex[:6]}",
            "project": project,
            "host": "test",
            "hookType": "UserPromptSubmit",
            "prompt": text,
            **extra,
        },
    )
    assert status == 201, body
    return str(body["observationId"])


def _wait_until_stored(api: Api, project: str, words: str) -> None:
    wait_for(
        lambda: api.post("/v1/search", {"query": words, "project": project, "mode": "keyword"})[1][
            "items"
        ],
        30,
        message="stored",
    )


def _vector_ids(api: Api, project: str, query: str) -> list[str]:
    status, body = api.post("/v1/search", {"query": query, "project": project, "mode": "semantic"})
    assert status == 200, body
    return [item["id"] for item in body["items"]]


@needs_local
def test_capture_to_semantic_search_and_forget(vapi: Api) -> None:
    project = f"vec-{uuid.uuid4().hex[:6]}"
    cache = _observe(vapi, project, "Redis evictions made the session cache drop users' carts")
    _observe(vapi, project, "Renamed the CSV export column headers to snake case")
    # no word in common with the cache observation: only the vector stream can find it
    wait_for(
        lambda: cache in _vector_ids(vapi, project, "key-value store losing shopping baskets"),
        60,
        message="embedded",
    )
    status, body = vapi.post(
        "/v1/search", {"query": "key-value store losing shopping baskets", "project": project}
    )
    assert status == 200 and "vector" in body["streams"]
    assert body["items"][0]["id"] == cache and body["items"][0]["ranks"].get("vector") == 1
    report = wait_for(
        lambda: (lambda r: r if r["indexes"]["vector"]["pending"] == 0 else None)(
            vapi.get("/v1/status")[1]
        ),
        60,
        message="queue drained",
    )
    vec = report["indexes"]["vector"]
    assert report["embedder"]["vectorSearch"] and vec["ok"] and vec["indexed"] >= 2
    assert vec["backfill"]["done"] and vec["indexed"] == vec["documents"]
    assert vapi.call("DELETE", f"/v1/observations/{cache}")[0] in (200, 204)
    wait_for(
        lambda: cache not in _vector_ids(vapi, project, "key-value store losing shopping baskets"),
        60,
        message="forgotten",
    )


@needs_local
def test_semantic_search_in_a_time_window_through_the_gateway(vapi: Api) -> None:
    project = f"vec-{uuid.uuid4().hex[:6]}"
    old = _observe(vapi, project, "Redis evictions dropped carts", timestamp="2026-01-05T10:00:00Z")
    new = _observe(vapi, project, "Renamed CSV export headers", timestamp="2026-05-05T10:00:00Z")
    wait_for(lambda: {old, new} <= set(_vector_ids(vapi, project, "cache")), 60, message="embedded")
    query = {"query": "key-value store losing shopping baskets", "project": project}
    status, body = vapi.post("/v1/search", {**query, "mode": "semantic", "since": "2026-03-01"})
    assert status == 200 and [item["id"] for item in body["items"]] == [new], body
    status, body = vapi.post("/v1/search", {**query, "until": "2026-03-01T00:00:00Z"})
    assert status == 200 and [item["id"] for item in body["items"]] == [old], body
    assert body["items"][0]["ranks"].get("vector") == 1


@needs_local
def test_embedding_waits_while_an_import_runs_then_catches_up(
    vapi: Api, vector_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded server's derived lanes wait for bulk work (an import holds the mark while
    its requests run): a capture in the meantime is stored and found by keyword at once, and by
    meaning once the import is over."""
    project = f"vec-{uuid.uuid4().hex[:6]}"
    query = "key-value store losing shopping baskets"
    with vector_gateway.store.bulk():
        cache = _observe(vapi, project, "Redis evictions made the session cache drop users' carts")
        _wait_until_stored(vapi, project, "redis evictions")
        time.sleep(2.0)
        assert cache not in _vector_ids(vapi, project, query)
        # a lag that would be listed as a problem: not while it is the import's doing
        monkeypatch.setattr(engram_status, "DERIVED_LAG_WARN_SECONDS", 0.5)
        report = vapi.get("/v1/status")[1]
        assert report["derived"]["vector"]["waitingFor"] == "import"
        assert report["derived"]["graph"]["waitingFor"] == "import"
        assert not [p for p in report["problems"] if p["component"] in ("vector", "graph")]
    wait_for(lambda: cache in _vector_ids(vapi, project, query), 60, message="embedded after")
    assert "waitingFor" not in vapi.get("/v1/status")[1]["derived"]["vector"]


@needs_local
def test_a_failing_vector_stream_degrades_to_the_others(
    vapi: Api, vector_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = f"vec-{uuid.uuid4().hex[:6]}"
    _observe(vapi, project, "flaky integration test on the payments service")
    _wait_until_stored(vapi, project, "flaky payments test")
    index = vector_gateway.vectors.index()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("chroma went away")

    monkeypatch.setattr(index, "search", broken)
    status, body = vapi.post("/v1/search", {"query": "flaky payments test", "project": project})
    assert status == 200 and body["items"], body
    assert body["streams"] == ["bm25", "graph"]
    assert "chroma went away" in body["degraded"]["vector"]


@needs_local
def test_session_context_picks_memories_by_meaning(vapi: Api) -> None:
    """The context block's memories come from hybrid search for the first prompt: a memory that
    shares no word with the prompt is found through its vector, ahead of unrelated ones."""
    project = f"ctx-{uuid.uuid4().hex[:6]}"
    relevant = "Staging deploys need the VPN up, or the helm upgrade hangs forever."
    for content in (
        "Use tabs in the Makefile, never spaces.",
        relevant,
        "The CSV export keeps column order stable for finance.",
    ):
        assert vapi.post("/v1/memories", {"content": content, "project": project})[0] == 201
    prompt = "why does shipping the release to the test cluster get stuck"
    wait_for(
        lambda: vapi.post("/v1/search", {"query": prompt, "project": project, "mode": "semantic"})[
            1
        ]["items"],
        60,
        message="memories embedded",
    )
    status, body = vapi.post(
        "/v1/sessions",
        {"sessionId": f"s-{uuid.uuid4().hex[:6]}", "project": project, "query": prompt},
    )
    assert status == 201, body
    memories_section = body["context"].split("## Memories", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in memories_section.splitlines() if line.startswith("- ")]
    assert lines[0] == f"- {relevant}"
    # the budget holds whole items only
    status, small = vapi.post(
        "/v1/context", {"project": project, "query": prompt, "budgetTokens": 60}
    )
    assert status == 200 and small["tokens"] <= 60
    assert all(line in body["context"].splitlines() for line in small["context"].splitlines())


@needs_local
def test_hybrid_does_not_wait_for_a_loading_model(vectors: Vectors, store: Store) -> None:
    _fill(store)
    vectors._lock.acquire()  # another thread is loading the model and opening Chroma
    try:
        result = search.search(store, "database connections", Scope("alpha"), vectors=vectors)
    finally:
        vectors._lock.release()
    # (items are read back from the store of record, which this test leaves empty)
    assert result["streams"] == ["bm25", "graph"]
    assert result["degraded"] == {"vector": "the vector index is still loading"}
    _drain(vectors, store)
    result = search.search(store, "database connections", Scope("alpha"), vectors=vectors)
    assert "vector" in result["streams"] and "degraded" not in result


@needs_local
def test_a_superseded_memory_version_leaves_the_vectors(vapi: Api, vector_gateway: Any) -> None:
    project = f"ver-{uuid.uuid4().hex[:6]}"
    status, memory = vapi.post(
        "/v1/memories", {"content": "Deploys run through Jenkins.", "project": project}
    )
    assert status == 201
    new = "Deploys run through GitHub Actions workflows."
    assert vapi.call("PATCH", f"/v1/memories/{memory['id']}", {"content": new})[0] == 200
    index = vector_gateway.vectors.index()
    expected = index.embedder.embed([new])[0]

    def current() -> bool:
        with vector_gateway.store.read() as conn:
            if derive.pending(conn, TARGET):
                return False
        got = index._collection(project, create=False).get(
            ids=[memory["id"]], include=["embeddings"]
        )
        vector = got["embeddings"][0] if len(got["embeddings"]) else None
        return (
            vector is not None and sum(a * b for a, b in zip(vector, expected, strict=True)) > 0.999
        )

    wait_for(current, 60, message="the vector of the new version")
    status, body = vapi.post(
        "/v1/search", {"query": "Jenkins", "project": project, "mode": "semantic"}
    )
    assert [item["text"] for item in body["items"]] == [new]


def test_a_broken_embedder_is_reported_and_retried_at_most_every_30s(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[float] = []

    class Broken:
        name = "broken-model"

        @property
        def dim(self) -> int:
            opened.append(1.0)
            raise EmbedderError("local embedder: package x is not installed; run `pip install x`")

        def embed(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("never called")

    settings = make_settings(tmp_path, ENGRAM_EMBEDDER="local")
    settings.data_dir.mkdir(parents=True)
    vectors = Vectors(settings, store, embedder=Broken())  # type: ignore[arg-type]
    assert vectors.index() is None and "pip install x" in (vectors.problem or "")
    report = vectors.status()
    assert report["enabled"] and not report["ok"] and "pip install x" in report["problem"]
    vectors.retry()  # too soon: nothing is tried again
    assert vectors.index() is None and len(opened) == 1
    from engram import vectors as vectors_module

    monkeypatch.setattr(vectors_module, "RETRY_OPEN_SECONDS", 0.0)
    vectors.retry()
    assert vectors.index() is None and len(opened) == 2


def test_document_writes_kick_the_derived_indexes_and_reads_do_not(
    tmp_path: Path, store: Store
) -> None:
    from engram.api import create_app

    kicks: list[str] = []
    app = create_app(
        make_settings(tmp_path),
        store,
        secret="s3cret",
        dispatch=lambda _event_id: None,
        enqueue_summary=lambda _sid: None,
        broker_probe=lambda: None,
        worker_probe=lambda: {"alive": 1, "names": []},
        derived_changed=lambda: kicks.append("kick"),
    )
    api = Api(app.test_client(), "s3cret", store)
    assert api.post("/v1/search", {"query": "x", "project": "p"})[0] == 200
    assert api.post("/v1/context", {"project": "p"})[0] == 200
    assert kicks == []
    status, memory = api.post("/v1/memories", {"content": "use uv, not pip", "project": "p"})
    assert status == 201 and kicks == ["kick"]
    assert api.call("DELETE", f"/v1/memories/{memory['id']}")[0] in (200, 204)
    assert kicks == ["kick", "kick"]
    assert api.post("/v1/memories", {"project": "p"})[0] == 422 and len(kicks) == 2


@needs_local
def test_weights_shape_hybrid_only(vapi: Api, vector_gateway: Any) -> None:
    """A one-stream mode ranks by its stream even when hybrid gives it no weight, and hybrid
    does not run a stream weighted 0."""
    project = f"w-{uuid.uuid4().hex[:6]}"
    oid = _observe(vapi, project, "Redis evictions made the session cache drop users' carts")
    wait_for(
        lambda: oid in _vector_ids(vapi, project, "key-value store losing baskets"),
        60,
        message="embedded",
    )
    store, vectors = vector_gateway.store, vector_gateway.vectors
    no_vector = {"bm25": 1.0, "vector": 0.0, "graph": 0.3}
    semantic = search.search(
        store,
        "key-value store losing baskets",
        Scope(project),
        mode="semantic",
        vectors=vectors,
        weights=no_vector,
    )
    assert [item["id"] for item in semantic["items"]] == [oid]
    hybrid = search.search(
        store, "redis evictions", Scope(project), vectors=vectors, weights=no_vector
    )
    assert hybrid["streams"] == ["bm25", "graph"] and "degraded" not in hybrid


def test_the_index_keeps_the_newest_observations(vectors: Vectors, store: Store) -> None:
    """ENGRAM_VECTOR_MAX_OBSERVATIONS: over all projects, older observations are not embedded,
    and leave the index as newer ones arrive; memories stay whatever their age."""
    from engram import drains

    def add(doc_id: str, kind: str, at: float, project: str = "keep") -> None:
        with store.write() as conn:
            store.keyword.upsert(
                conn,
                KeywordDoc(
                    doc_id=doc_id,
                    kind=kind,
                    project=project,
                    body=f"{doc_id}: the build failed on ARM",
                    created_at=at,
                ),
            )

    def indexed(project: str = "keep") -> set[str]:
        index = vectors.index()
        assert index is not None
        found = index.search("build failed", Scope(project), 50)
        return {hit.doc_id for hit in found}

    add("mem-old", "memory", 1.0)
    for n in range(6):
        add(f"obs-{n}", "observation", 10.0 + n)
    add("other-old", "observation", 1.0, project="other")
    add("other-new", "observation", 100.0, project="other")
    drains.drain_vectors(store, vectors, batch=100, keep_observations=3)
    # the newest 3 of all projects: other-new, obs-5, obs-4; the older ones never embedded
    assert indexed() == {"mem-old", "obs-4", "obs-5"}
    assert indexed("other") == {"other-new"}
    for n in range(6, 10):
        add(f"obs-{n}", "observation", 110.0 + n)
    drains.drain_vectors(store, vectors, batch=2, batches=10, keep_observations=3)
    # the oldest kept ones went as new ones came (pruned once the index passed its cap)
    assert {"obs-8", "obs-9"} <= indexed() and not {"obs-4", "obs-5"} & indexed()
    assert "mem-old" in indexed() and indexed("other") <= {"other-new"}
    with store.read() as conn:
        assert derive.pending(conn, TARGET) == 0


def test_file_reads_and_listings_get_no_vector(vectors: Vectors, store: Store) -> None:
    from engram import drains
    from tests.test_graph import observe

    read = observe(
        store,
        "kinds",
        "s1",
        "Read",
        {"file_path": "src/billing/invoice.py"},
        {"content": "def total(items):\n    return sum(i.price for i in items)\n"},
    )
    grep = observe(
        store,
        "kinds",
        "s1",
        "Grep",
        {"pattern": "price"},
        {"output": "src/billing/invoice.py:2: return sum(i.price for i in items)"},
    )
    ran = observe(
        store,
        "kinds",
        "s1",
        "Bash",
        {"command": "pytest tests/test_invoice.py"},
        {"stdout": "FAILED test_total - TypeError: unsupported operand", "exit_code": 1},
    )
    drains.drain_vectors(store, vectors, batch=50)
    index = vectors.index()
    assert index is not None
    found = {hit.doc_id for hit in index.search("invoice total price", Scope("kinds"), 10)}
    assert found == {ran} and read not in found and grep not in found
    with store.read() as conn:
        assert derive.pending(conn, TARGET) == 0  # handled, not left queued
