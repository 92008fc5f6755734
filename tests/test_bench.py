"""The retrieval benchmark harness (engram/bench): metric math by hand, loaders on the real
data (read from ../shared/data beside the repository, never copied), both retrievers end to end,
and the `engram bench` command as a subprocess."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import platform
import sqlite3
import subprocess
from collections import Counter
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from engram.bench import metrics, report
from engram.bench.datasets import (
    Dataset,
    DatasetError,
    Doc,
    Query,
    limit_queries,
    lme_time,
    load,
    normalise_evidence,
    only_categories,
)
from engram.bench.fused import HybridGraphRetriever
from engram.bench.options import DATASETS
from engram.bench.retrievers import (
    RETRIEVERS,
    Bm25Retriever,
    GrepRetriever,
    HybridRetriever,
    RetrieverOptions,
    grep_words,
    support_for,
)
from engram.bench.runner import RetrieverResult, paged, run
from engram.bench.vectors import (
    EmbeddingCache,
    VectorRetriever,
    query_key,
    rrf,
    rrf_scores,
    text_key,
)
from engram.embedders.local import LocalMiniLMEmbedder
from tests.support import ENGRAM, REPO

DATA = REPO.parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"benchmark data not found at {DATA} (../shared/data)"
)


# metrics ------------------------------------------------------------------------------------


def test_recall_ndcg_mrr_by_hand() -> None:
    got = metrics.score(["a", "b", "c", "d"], {"b", "d"})
    assert got["recall_any@1"] == 0.0 and got["recall_any@3"] == 1.0
    assert got["recall_all@3"] == 0.0 and got["recall_all@5"] == 1.0
    assert got["recall@1"] == 0.0 and got["recall@3"] == 0.5 and got["recall@10"] == 1.0
    assert got["mrr"] == 0.5
    # DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3)
    assert got["ndcg@10"] == pytest.approx((0.63093 + 0.43068) / 1.63093, abs=1e-4)


def test_metrics_at_the_top_and_when_nothing_is_found() -> None:
    perfect = metrics.score(["g", "x"], {"g"})
    assert all(perfect[f"recall_any@{k}"] == perfect[f"recall_all@{k}"] == 1.0 for k in metrics.KS)
    assert perfect["ndcg@10"] == 1.0 and perfect["mrr"] == 1.0
    missed = metrics.score(["x", "y"], {"g"})
    assert set(missed.values()) == {0.0}
    assert metrics.score([], {"g"})["mrr"] == 0.0


def test_gold_beyond_ten_counts_for_mrr_only() -> None:
    ranked = [f"u{i}" for i in range(1, 21)]
    got = metrics.score(ranked, {"u12"})
    assert got["recall_any@10"] == 0.0 and got["ndcg@10"] == 0.0
    assert got["mrr"] == pytest.approx(1 / 12)


def test_ndcg_ideal_is_capped_at_ten_gold_units() -> None:
    gold = {f"g{i}" for i in range(12)}
    assert metrics.ndcg(sorted(gold), gold) == pytest.approx(1.0)
    assert metrics.ndcg(["x", "g0"], {"g0", "g1"}) == pytest.approx(
        (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    )


def test_mean_dedupe_and_percentiles() -> None:
    assert metrics.mean([{"m": 1.0}, {"m": 0.0}, {"m": 0.5}]) == {"m": 0.5}
    assert metrics.dedupe(["s1", "s2", "s1", "s3", "s2"]) == ["s1", "s2", "s3"]
    assert metrics.percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert metrics.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert metrics.percentile([7.0], 95) == 7.0 and metrics.percentile([], 50) == 0.0


# retrievers ---------------------------------------------------------------------------------


def _docs() -> list[Doc]:
    return [
        Doc("a/1", "s1", "a", "We moved the Postgres database to a bigger host."),
        Doc("a/2", "s2", "a", "Database backups: database dump runs nightly."),
        Doc("a/3", "s3", "a", "Lunch was good."),
        Doc("b/1", "s1", "b", "The database in project b: postgres too."),
    ]


def test_grep_ranks_by_distinct_words_then_occurrences() -> None:
    assert grep_words("What's the Postgres database, what's it?") == ["postgres", "database"]
    grep = GrepRetriever()
    grep.add(_docs())
    assert grep.search("postgres database", "a", 10) == ["a/1", "a/2"]
    assert grep.search("database", "a", 10) == ["a/2", "a/1"]  # two occurrences beat one
    assert grep.search("database", "a", 1) == ["a/2"]
    assert grep.search("nothing matches", "a", 10) == []


def test_bm25_uses_the_store_and_keeps_haystacks_apart(tmp_path: Path) -> None:
    bm25 = Bm25Retriever(tmp_path)
    try:
        bm25.add(_docs())
        with bm25.store.read() as conn:
            assert bm25.store.keyword.count(conn) == 4
        assert bm25.search("postgres database", "a", 10)[0] == "a/1"
        assert bm25.search("postgres database", "b", 10) == ["b/1"]
        assert bm25.search("lunch", "b", 10) == []
    finally:
        bm25.close()


def test_registry_is_pluggable() -> None:
    assert {"grep", "bm25", "vector", "hybrid"} <= set(RETRIEVERS)


def test_rrf_by_hand() -> None:
    # equal weights renormalise to 0.5 each: b is in both streams and wins
    scores = rrf_scores([["a", "b", "c"], ["b", "d"]], [1.0, 1.0], k=60)
    assert scores["a"] == pytest.approx(0.5 / 61)
    assert scores["b"] == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert scores["c"] == pytest.approx(0.5 / 63) and scores["d"] == pytest.approx(0.5 / 62)
    assert rrf([["a", "b", "c"], ["b", "d"]], [1.0, 1.0], 10) == ["b", "a", "d", "c"]
    assert rrf([["a", "b", "c"], ["b", "d"]], [1.0, 1.0], 2) == ["b", "a"]
    # weights 1.0 / 0.5 -> 2/3 and 1/3
    weighted = rrf_scores([["a", "b"], ["b", "a"]], [1.0, 0.5], k=60)
    assert weighted["a"] == pytest.approx((2 / 3) / 61 + (1 / 3) / 62)
    assert rrf([["a", "b"], ["b", "a"]], [1.0, 0.5], 10) == ["a", "b"]
    # equal scores: the better single rank wins, then the earlier stream
    assert rrf([["a", "b"], ["b", "a"]], [1.0, 1.0], 10) == ["a", "b"]


def test_rrf_renormalises_over_the_streams_that_answered() -> None:
    # the vector stream returned nothing: bm25 alone carries the whole weight
    scores = rrf_scores([["a", "b"], []], [1.0, 3.0], k=60)
    assert scores == {"a": pytest.approx(1 / 61), "b": pytest.approx(1 / 62)}
    assert rrf([[], ["x"]], [1.0, 1.0], 10) == ["x"]
    assert rrf([["a"], ["b"]], [1.0, 0.0], 10) == ["a"]  # weight 0: the stream is ignored
    assert rrf([[], []], [1.0, 1.0], 10) == []
    with pytest.raises(ValueError):
        rrf_scores([["a"]], [1.0, 1.0])


class _CountingEmbedder:
    """The real local MiniLM, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = LocalMiniLMEmbedder()
        self.name = self.inner.name
        self.dim = self.inner.dim
        self.calls = 0
        self.texts = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)


def _toy_dataset() -> Dataset:
    docs = _docs()
    queries = [
        Query("q1", "postgres database host", "a", frozenset({"s1"}), "c"),
        Query("q2", "what did we eat at noon?", "a", frozenset({"s3"}), "c"),
    ]
    return Dataset("toy", "session", "official", docs, queries)


def test_vector_retriever_ranks_by_cosine_and_keeps_haystacks_apart(tmp_path: Path) -> None:
    vector = VectorRetriever(tmp_path, cache_dir=tmp_path / "cache")
    try:
        vector.add(_docs())
        assert vector.search("postgres database host", "a", 10)[0] == "a/1"
        assert vector.search("what did we eat at noon?", "a", 1) == ["a/3"]
        assert vector.search("postgres database", "b", 10) == ["b/1"]
        assert vector.search("anything", "nowhere", 10) == []
        assert len(vector.search("database", "a", 10)) == 3  # every document is ranked
    finally:
        vector.close()


def test_embeddings_are_cached_on_disk_so_a_second_run_embeds_nothing(tmp_path: Path) -> None:
    dataset = _toy_dataset()
    cache_dir = tmp_path / "cache"
    first = _CountingEmbedder()
    (result,) = run(
        dataset, ["vector"], options=RetrieverOptions(cache_dir=cache_dir, embedder=first)
    )
    distinct = len({d.text for d in dataset.docs} | {q.text for q in dataset.queries})
    assert first.calls >= 1 and first.texts == distinct
    assert result.metrics["recall_any@1"] == 1.0
    second = _CountingEmbedder()
    results = run(
        dataset,
        ["vector", "hybrid"],
        options=RetrieverOptions(cache_dir=cache_dir, embedder=second),
    )
    assert second.calls == 0 and second.texts == 0
    assert results[0].metrics == result.metrics
    cache = EmbeddingCache(cache_dir, first.name, first.dim)
    try:
        assert cache.count() == distinct
        assert cache.path.name == "embeddings-all-minilm-l6-v2-q8.sqlite"
    finally:
        cache.close()


class _AsymmetricEmbedder:
    """A toy asymmetric model: a query vector is the document vector of "q:" + text, so a
    query and a document with the same text have different vectors."""

    name = "toy-asymmetric"
    dim = 4

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    @staticmethod
    def _vector(text: str) -> list[float]:
        words = set(text.lower().replace("?", "").split())
        raw = [
            1.0 + len(words & {"postgres", "database", "host"}),
            1.0 + len(words & {"lunch", "noon", "eat", "ate"}),
            0.1,
            0.1,
        ]
        norm = math.sqrt(sum(x * x for x in raw))
        return [x / norm for x in raw]

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        self.queries.extend(texts)
        return [self._vector("q: " + t) for t in texts]


def test_queries_go_through_embed_query_under_keys_of_their_own(tmp_path: Path) -> None:
    dataset = _toy_dataset()
    embedder = _AsymmetricEmbedder()
    cache_dir = tmp_path / "cache"
    (result,) = run(
        dataset, ["vector"], options=RetrieverOptions(cache_dir=cache_dir, embedder=embedder)
    )
    assert sorted(embedder.queries) == sorted(q.text for q in dataset.queries)
    assert sorted(embedder.documents) == sorted({d.text for d in dataset.docs})
    assert result.metrics["recall_any@1"] == 1.0
    for text in ("same text", dataset.queries[0].text):
        assert query_key(embedder, text) != text_key(text)
        assert query_key(LocalMiniLMEmbedder(), text) == text_key(text)  # symmetric
    # a query not prepared is embedded (as a query) in search, then cached
    vector = VectorRetriever(tmp_path, cache_dir, embedder)
    try:
        vector.add(dataset.docs)
        assert vector.search("where is the postgres host?", "a", 1) == ["a/1"]
        assert embedder.queries[-1] == "where is the postgres host?"
    finally:
        vector.close()
    again = _AsymmetricEmbedder()
    run(dataset, ["vector"], options=RetrieverOptions(cache_dir=cache_dir, embedder=again))
    assert again.queries == [] and again.documents == []


def test_hybrid_fuses_the_bm25_and_vector_rankings(tmp_path: Path) -> None:
    options = RetrieverOptions(cache_dir=tmp_path / "cache")
    hybrid = HybridRetriever(tmp_path, options)
    try:
        hybrid.add(_docs())
        bm25 = hybrid.bm25.search("lunch", "a", 100)
        vector = hybrid.vector.search("lunch", "a", 100)
        assert bm25 == ["a/3"] and len(vector) == 3
        weights = [options.bm25_weight, options.vector_weight]
        assert hybrid.search("lunch", "a", 10) == rrf([bm25, vector], weights, 10)
        assert hybrid.search("lunch", "a", 10)[0] == "a/3"
        assert hybrid.search("postgres", "b", 10) == ["b/1"]
    finally:
        hybrid.close()


def test_hybrid_rrf_k_and_weights_reach_the_fusion(tmp_path: Path) -> None:
    options = RetrieverOptions(cache_dir=tmp_path / "cache", rrf_k=5, vector_weight=0.5)
    hybrid = HybridRetriever(tmp_path, options)
    try:
        hybrid.add(_docs())
        bm25 = hybrid.bm25.search("database lunch", "a", 100)
        vector = hybrid.vector.search("database lunch", "a", 100)
        assert hybrid.search("database lunch", "a", 10) == rrf([bm25, vector], [1.0, 0.5], 10, k=5)
    finally:
        hybrid.close()


class _ReversingReranker:
    """Scores the passages it is given in reverse order and records how many it read."""

    name = "reversing"
    pair_ms = None

    def load(self) -> None:
        pass

    def __init__(self) -> None:
        self.read: list[int] = []

    def score(self, query: str, passages: list[str]) -> list[float]:
        self.read.append(len(passages))
        return [float(i) for i in range(len(passages))]


@pytest.mark.parametrize("factory", [HybridRetriever, HybridGraphRetriever])
def test_hybrids_rerank_only_the_fused_top_rerank_depth_as_the_server_does(
    tmp_path: Path, factory: Any
) -> None:
    plain = factory(tmp_path / "plain", RetrieverOptions(cache_dir=tmp_path / "cache"))
    reranker = _ReversingReranker()
    options = RetrieverOptions(cache_dir=tmp_path / "cache", reranker=reranker, rerank_depth=2)
    hybrid = factory(tmp_path / "reranked", options)
    try:
        plain.add(_docs())
        hybrid.add(_docs())
        fused = plain.search("database lunch", "a", 10)
        reranked = hybrid.search("database lunch", "a", 10)
    finally:
        plain.close()
        hybrid.close()
    # the runner asks for 100 to score the top 10: the reranker still reads only the top 2
    assert len(fused) == 3 and reranker.read == [2]
    assert reranked == [fused[1], fused[0], fused[2]]


@pytest.mark.parametrize("factory", [HybridRetriever, HybridGraphRetriever])
def test_hybrids_tune_each_question_as_the_server_does(
    tmp_path: Path, factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reranked question is fused with the reranked session support, twice (again with the
    vector stream's feedback from the first hit); a request for advice is neither reranked nor
    given that support nor fed back (``engram.search.tune``, ``search.search``)."""
    import engram.search

    seen: list[tuple[float, dict[str, float]]] = []
    shares: list[float] = []
    real = engram.search.fuse

    def spy(rankings: Any, weights: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append((kwargs["session_support"], {k: weights[k] for k in ("bm25", "vector")}))
        shares.append(kwargs["neighbour_support"])
        return real(rankings, weights, *args, **kwargs)

    monkeypatch.setattr(engram.search, "fuse", spy)
    reranker = _ReversingReranker()
    options = RetrieverOptions(
        cache_dir=tmp_path / "cache",
        reranker=reranker,
        rerank_depth=engram.search.SUPPORTED_DEPTH,
        session_support=0.1,
        reranked_support=0.7,
        neighbour_support=0.2,
        reranked_neighbour_support=0.4,
    )
    hybrid = factory(tmp_path / "h", options)
    try:
        hybrid.add(_docs())
        hybrid.search("database lunch", "a", 10)
        hybrid.search("any tips for the database lunch?", "a", 10)
    finally:
        hybrid.close()
    bm25, vector = options.bm25_weight, options.vector_weight
    assert seen == [
        (0.7, {"bm25": bm25, "vector": vector}),
        (0.7, {"bm25": bm25, "vector": vector}),
        (0.1, {"bm25": bm25 * engram.search.ADVICE_BM25, "vector": vector}),
    ]
    assert shares == [0.4, 0.4, 0.2]  # the neighbour share is chosen the same way
    assert reranker.read == [3]  # haystack a, whole; the request for advice was not reranked
    # a reranker that reads fewer than 10 cannot sort what support gathers: none, as the server
    assert support_for(dataclasses.replace(options, rerank_depth=5), True) == 0.1
    assert support_for(options, True) == 0.7 and support_for(options, False) == 0.1


# loaders on the real data -------------------------------------------------------------------


def test_locomo_evidence_ids_are_repaired_or_dropped() -> None:
    known = {"D8:6", "D9:17", "D30:5", "D11:26", "D9:1", "D4:4"}
    ids, repaired, dropped = normalise_evidence(
        ["D8:6; D9:17", "D30:05", "D:11:26", "D", "D4:36", "D9:1 D4:4", "D8:6"], known
    )
    assert ids == ["D8:6", "D9:17", "D30:5", "D11:26", "D9:1", "D4:4"]
    assert dropped == 2 and repaired == 4


@needs_data
def test_locomo_loader_turn_and_session_level() -> None:
    turn = load("locomo", DATA, "turn")
    assert len(turn.docs) == 5882 and len(turn.queries) == 1982
    assert turn.skipped == {"no usable evidence": 4}
    assert "1982 QAs scored; 4 dropped" in turn.notes[0]
    assert {q.category for q in turn.queries} == {
        "1 multi-hop",
        "2 temporal",
        "3 open-domain",
        "4 single-hop",
        "5 adversarial",
    }
    first = turn.queries[0]
    assert first.gold == {"D1:3"} and first.haystack == "conv-26"
    assert any(d.unit_id == "D1:3" and "Caroline:" in d.text for d in turn.docs)
    # each turn filed under its speaker, as search's neighbours tell the two apart
    assert all(d.speaker and d.text.startswith(f"{d.speaker}: ") for d in turn.docs)
    assert {d.speaker for d in turn.docs if d.haystack == "conv-26"} == {"Caroline", "Melanie"}
    # "1:56 pm on 8 May, 2023", the date of conv-26's first session; questions carry no date
    said = next(d for d in turn.docs if d.unit_id == "D1:3").created_at
    assert said == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp()
    assert all(d.created_at for d in turn.docs) and first.now is None
    session = load("locomo", DATA, "session")
    assert len(session.docs) == 272 and session.queries[0].gold == {"S1"}
    best_turn = load("locomo", DATA, "session", session_docs="best-turn")
    assert len(best_turn.docs) == 5882 and best_turn.docs[0].unit_id == "S1"


@needs_data
def test_longmemeval_loader_protocols_on_a_slice(tmp_path: Path) -> None:
    with gzip.open(DATA / "longmemeval" / "longmemeval_oracle.json.gz", "rt") as handle:
        items = json.load(handle)
    picked = [i for i in items if i["question_id"].endswith("_abs")][:2]
    picked += [i for i in items if i["question_type"] == "single-session-assistant"][:3]
    picked += [i for i in items if i["question_type"] == "multi-session"][:5]
    sliced = tmp_path / "longmemeval" / "longmemeval_oracle.json.gz"
    sliced.parent.mkdir()
    with gzip.open(sliced, "wt") as handle:
        json.dump(picked, handle)
    official = load("longmemeval-oracle", tmp_path, "session", "official")
    assert [q.query_id for q in official.queries] == [i["question_id"] for i in picked[5:]]
    assert official.skipped == {"abstention": 2, "no evidence": 3}
    assert all(not d.text.startswith("{") for d in official.docs)
    turn = load("longmemeval-oracle", tmp_path, "turn", "official")
    item = picked[5]
    user_gold = {
        f"{sid}_{n}"
        for sid, session in zip(
            item["haystack_session_ids"], item["haystack_sessions"], strict=True
        )
        for n, t in enumerate(session, start=1)
        if t.get("has_answer") and t["role"] == "user"
    }
    assert turn.queries[0].gold == user_gold
    assert {d.unit_id for d in turn.docs} >= user_gold
    # each document at its session's date, each question at the date it was asked
    stamp = dict(zip(item["haystack_session_ids"], item["haystack_dates"], strict=True))
    for doc in turn.docs:
        if doc.haystack == item["question_id"]:
            assert doc.created_at == lme_time(stamp[doc.session_id]).timestamp()
    assert turn.queries[0].now == lme_time(item["question_date"]).timestamp()
    assert lme_time("2023/05/20 (Sat) 07:47") == datetime(2023, 5, 20, 7, 47, tzinfo=timezone.utc)
    all_turns = load("longmemeval-oracle", tmp_path, "turn", "all-turns")
    assert len(all_turns.docs) > len(turn.docs)
    # the official protocol stores the user's turns alone: no two of them are neighbours
    assert {d.speaker for d in turn.docs} == {"user"}
    assert {d.speaker for d in all_turns.docs} == {"user", "assistant"}
    assert len(all_turns.queries) >= 8  # assistant-side evidence counts, _abs is not skipped


@needs_data
def test_longmemeval_s_official_protocol_scores_418_questions() -> None:
    dataset = load("longmemeval-s", DATA, "session", "official")
    assert len(dataset.queries) == 418
    assert dataset.skipped == {"abstention": 30, "no evidence": 50}
    assert len({d.haystack for d in dataset.docs}) == 418
    limited = limit_queries(dataset, 3)
    assert len(limited.queries) == 3 and {d.haystack for d in limited.docs} == {
        q.query_id for q in limited.queries
    }


@needs_data
def test_coding_agent_life_loader_and_load_errors(tmp_path: Path) -> None:
    dataset = load("coding-agent-life", DATA)
    assert len(dataset.docs) == 15 and len(dataset.queries) == 15
    assert all(q.gold for q in dataset.queries)
    with pytest.raises(DatasetError, match="session-level"):
        load("coding-agent-life", DATA, "turn")
    with pytest.raises(DatasetError, match="data dir not found"):
        load("locomo", tmp_path / "missing")
    with pytest.raises(DatasetError, match="is missing"):
        load("locomo", tmp_path)
    with pytest.raises(DatasetError, match="unknown dataset"):
        load("nope", DATA)


def test_cli_dataset_names_match_the_loaders() -> None:
    from engram.bench.datasets import LOADERS
    from engram.bench.options import CONTEXT_ONLY

    assert set(DATASETS) == set(LOADERS) | set(CONTEXT_ONLY)


# end to end ---------------------------------------------------------------------------------


@needs_data
def test_both_retrievers_find_every_coding_agent_life_session_in_the_top_5() -> None:
    results = {r.name: r for r in run(load("coding-agent-life", DATA), ["grep", "bm25"])}
    for name in ("grep", "bm25"):
        result = results[name]
        assert result.queries == 15
        assert result.metrics["recall_any@5"] == 1.0, name
        assert result.metrics["mrr"] > 0.8
        assert 0.0 < result.latency_ms["p50"] <= result.latency_ms["p95"]


@needs_data
def test_vector_and_hybrid_find_every_coding_agent_life_session_in_the_top_5(
    tmp_path: Path,
) -> None:
    options = RetrieverOptions(cache_dir=tmp_path / "cache")
    results = {
        r.name: r
        for r in run(load("coding-agent-life", DATA), ["vector", "hybrid"], options=options)
    }
    for name in ("vector", "hybrid"):
        assert results[name].queries == 15
        assert results[name].metrics["recall_any@5"] == 1.0, name
    assert results["vector"].prepare_seconds > 0.0


@needs_data
def test_bm25_beats_nothing_on_a_locomo_slice() -> None:
    dataset = limit_queries(load("locomo", DATA, "turn"), 60)
    results = {r.name: r for r in run(dataset, ["grep", "bm25"])}
    assert results["bm25"].metrics["recall_any@10"] > 0.4
    assert results["grep"].metrics["recall_any@10"] > 0.3


def test_session_units_rank_by_their_best_document() -> None:
    docs = [
        Doc("h/0/t1", "s0", "h", "alpha"),
        Doc("h/0/t2", "s0", "h", "alpha beta"),
        Doc("h/1/t1", "s1", "h", "gamma alpha"),
    ]
    dataset = Dataset(
        "toy", "session", "official", docs, [Query("q", "alpha beta", "h", frozenset({"s1"}), "c")]
    )
    (result,) = run(dataset, ["grep"])
    # ranked docs: h/0/t2, h/0/t1, h/1/t1 -> sessions s0, s1: the gold session is second
    assert result.metrics["recall_any@1"] == 0.0 and result.metrics["mrr"] == 0.5


def test_per_session_scores_the_page_the_server_returns() -> None:
    """--per-session N: at most N hits of one session first, as POST /v1/search pages them
    (``search.diversify``), the rest after them in order; 0 leaves each retriever's order."""
    docs = [
        *(Doc(f"h/0/t{n}", f"t0{n}", "h", "alpha beta gamma", session_id="s0") for n in range(4)),
        Doc("h/1/t1", "t11", "h", "alpha beta", session_id="s1"),
        Doc("h/2/t1", "t21", "h", "alpha", session_id="s2"),
    ]
    dataset = Dataset(
        "toy",
        "turn",
        "official",
        docs,
        [Query("q", "alpha beta gamma", "h", frozenset({"t11"}), "c")],
    )
    (own,) = run(dataset, ["grep"])
    (page,) = run(dataset, ["grep"], options=RetrieverOptions(per_session=3))
    (one,) = run(dataset, ["grep"], options=RetrieverOptions(per_session=1))
    # own order: four turns of s0, then the gold turn of s1 (5th); the server's page keeps 3
    # of s0, so the gold turn is 4th; one a session puts it 2nd
    assert [r.metrics["mrr"] for r in (own, page, one)] == [0.2, 0.25, 0.5]
    assert paged(["a", "b", "c", "d"], {"a": "x", "b": "x", "c": "y"}, 1) == ["a", "c", "d", "b"]
    assert paged(["a", "b"], {"a": "x", "b": "x"}, 0) == ["a", "b"]


# the command --------------------------------------------------------------------------------


def _bench(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENGRAM, "bench", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        cwd=REPO,
    )


@needs_data
def test_cli_runs_vector_and_hybrid_with_a_cache_dir(tmp_path: Path) -> None:
    args = (
        "coding-agent-life",
        "--retrievers",
        "vector,hybrid",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--vector-weight",
        "0.5",
        "--data-dir",
        str(DATA),
    )
    first = _bench(*args)
    assert first.returncode == 0, first.stderr
    assert "embedding 30 texts" in first.stderr and "texts/s, ETA" in first.stderr
    assert any(line.startswith("hybrid ") for line in first.stdout.splitlines())
    # the report says how the fused retriever ranked (the server's defaults here)
    assert (
        "fused retrievers: score fusion, session support 0, feedback 0.3, no reranker"
        in first.stdout
    )
    second = _bench(*args)
    assert second.returncode == 0 and "embedding" not in second.stderr.replace(
        "embedding/cache", ""
    )
    assert (tmp_path / "cache" / "embeddings-all-minilm-l6-v2-q8.sqlite").is_file()


@needs_data
def test_cli_runs_coding_agent_life_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    result = _bench("coding-agent-life", "--json", str(out), "--data-dir", str(DATA))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("retriever") and "any@5" in line for line in lines)
    assert any(line.startswith("grep ") for line in lines)
    assert any(line.startswith("bm25 ") for line in lines)
    assert "indexed 15/15 documents" in result.stderr
    document = json.loads(out.read_text())
    assert document["questionsScored"] == 15
    # the figures say what they were measured with: the embedder's runtime moves narrow margins
    installed = metadata.version("onnxruntime")
    assert document["environment"]["onnxruntime"] == installed
    assert document["environment"]["sqlite"] == sqlite3.sqlite_version
    assert f"onnxruntime {installed}" in result.stdout
    assert document["retrievers"]["bm25"]["metrics"]["recall_any@5"] == 1.0
    markdown = _bench(
        "coding-agent-life", "--markdown", "--retrievers", "bm25", ENGRAM_BENCH_DATA=str(DATA)
    )
    assert markdown.returncode == 0 and "| bm25 |" in markdown.stdout
    assert "fused retrievers" not in result.stdout + markdown.stdout  # nothing was fused


def test_the_environment_names_each_package_or_says_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(report, "MEASURED_WITH", ("numpy", "no-such-package-engram-test"))
    found = report.environment()
    assert found["numpy"] == metadata.version("numpy")
    assert found["no-such-package-engram-test"] == "not installed"
    assert found["python"] == platform.python_version()
    assert report.environment_note(found).startswith(f"measured with python {found['python']}")


def test_the_cpu_is_named_with_the_instructions_int8_products_depend_on(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n\nflags\t: avx512_vnni\n")
    assert report.cpu(info) == f"{platform.machine()} avx2"  # the first CPU's flags only
    info.write_text("flags\t: avx2 avx512f avx512_vnni\n")
    assert report.cpu(info).endswith(" avx2 avx512f avx512_vnni")
    assert report.cpu(tmp_path / "missing") == platform.machine()


def _result(name: str, mrrs: list[float]) -> RetrieverResult:
    rows = [{"mrr": m, "recall@10": float(m > 0)} for m in mrrs]
    return RetrieverResult(
        name, metrics.mean(rows), {}, {}, {"p50": 0, "p95": 0}, 0, len(rows), rows=rows
    )


def test_fusion_is_compared_question_by_question_with_the_best_stream_of_each_category() -> None:
    queries = [
        Query(f"q{n}", "text", "h", frozenset({"u"}), category)
        for n, category in enumerate(["a", "a", "b", "b"])
    ]
    dataset = Dataset("locomo", "turn", "all-turns", [], queries)
    bm25 = _result("bm25", [1.0, 0.5, 0.0, 0.0])
    vector = _result("vector", [0.0, 0.0, 1.0, 1.0])
    hybrid = _result("hybrid", [1.0, 1.0, 0.5, 1.0])
    rows = {r["category"]: r for r in report.paired(dataset, [bm25, vector, hybrid], "mrr")}
    # over all questions vector and bm25 tie at 0.5 (the first listed is best); per category
    # the best stream differs, and hybrid loses to vector in b on one question
    assert (rows["a"]["best"], rows["a"]["wins"], rows["a"]["ties"], rows["a"]["losses"]) == (
        "bm25",
        1,
        1,
        0,
    )
    assert (rows["b"]["best"], rows["b"]["wins"], rows["b"]["ties"], rows["b"]["losses"]) == (
        "vector",
        0,
        1,
        1,
    )
    assert rows["all"]["n"] == 4 and rows["b"]["fusionMean"] == 0.75
    table = report.paired_table(list(rows.values()))
    losing = [line for line in table.splitlines() if "LOSES" in line]
    assert len(losing) == 1 and losing[0].split()[:2] == ["hybrid", "b"]
    # the text report states the dataset's headline metric and MRR
    text = report.render(dataset, [bm25, vector, hybrid], "whole")
    assert "Fusion against the best single stream" in text
    assert " recall@10 " in text and " mrr " in text


def test_cli_rejects_bad_input_without_a_traceback(tmp_path: Path) -> None:
    bad = _bench("no-such-dataset")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    assert "Traceback" not in bad.stderr + bad.stdout
    missing = _bench("locomo", "--data-dir", str(tmp_path / "absent"))
    assert missing.returncode == 2 and "data dir not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    retriever = _bench("locomo", "--retrievers", "grep,telepathy")
    assert retriever.returncode == 2 and "telepathy" in retriever.stderr
    weights = _bench(
        "locomo", "--retrievers", "hybrid", "--bm25-weight", "0", "--vector-weight", "0"
    )
    assert weights.returncode == 2 and "--vector-weight" in weights.stderr
    depth = _bench("locomo", "--retrievers", "hybrid", "--fusion-depth", "0")
    assert depth.returncode == 2 and "--fusion-depth" in depth.stderr
    rrf_k = _bench("locomo", "--retrievers", "hybrid", "--rrf-k", "-1")
    assert rrf_k.returncode == 2 and "--rrf-k" in rrf_k.stderr
    for share in ("-0.1", "nan"):
        feedback = _bench("locomo", "--retrievers", "hybrid", "--feedback", share)
        assert feedback.returncode == 2 and "--feedback must be >= 0" in feedback.stderr
        for option in ("--session-support", "--neighbour-support"):
            support = _bench("locomo", "--retrievers", "hybrid", option, share)
            assert support.returncode == 2 and f"{option} must be >= 0" in support.stderr
    page = _bench("locomo", "--retrievers", "bm25", "--per-session", "-1")
    assert page.returncode == 2 and "--per-session must be >= 0" in page.stderr
    model = _bench("locomo", "--retrievers", "vector", "--embedder", "word2vec")
    assert model.returncode == 2 and "invalid choice" in model.stderr
    category = _bench("coding-paraphrase", "--retrievers", "bm25", "--category", "nope")
    assert category.returncode == 2
    assert "no category 'nope'; its categories: fix, how, what, where, why" in category.stderr
    context = _bench("coding-context", "--context", "--category", "how")
    assert context.returncode == 2 and "not of --context" in context.stderr


@needs_data
def test_category_keeps_its_questions_and_their_haystacks() -> None:
    dataset = load("longmemeval-s", DATA, "session", "official")
    chosen = only_categories(dataset, ["single-session-preference", "single-session-assistant"])
    assert Counter(q.category for q in chosen.queries) == {
        "single-session-preference": 30,
        "single-session-assistant": 5,
    }
    assert {d.haystack for d in chosen.docs} == {q.haystack for q in chosen.queries}
    assert chosen.notes[-1].startswith("--category: only single-session-preference")
    assert only_categories(dataset, []) is dataset


@needs_data
def test_cli_runs_the_e5_embedder_with_query_prefixes(tmp_path: Path) -> None:
    out = tmp_path / "e5.json"
    result = _bench(
        "coding-agent-life",
        "--retrievers",
        "vector,hybrid",
        "--embedder",
        "e5-small",
        "--fusion-depth",
        "20",
        "--rrf-k",
        "10",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--data-dir",
        str(DATA),
        "--json",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert "embedding 15 texts with multilingual-e5-small-q4" in result.stderr
    assert "embedding 15 queries" in result.stderr
    document = json.loads(out.read_text())
    assert document["options"]["embedder"] == "multilingual-e5-small-q4"
    assert document["options"]["fusionDepth"] == 20 and document["options"]["rrfK"] == 10
    assert document["retrievers"]["vector"]["metrics"]["recall_any@5"] == 1.0
    assert (tmp_path / "cache" / "embeddings-multilingual-e5-small-q4.sqlite").is_file()


def test_cli_help_explains_datasets_and_protocols() -> None:
    result = _bench("--help")
    assert result.returncode == 0 and "usage: engram bench" in result.stdout
    for word in (
        *DATASETS,
        "official",
        "all-turns",
        "abstention",
        "recall_all",
        "grep",
        "vector",
        "hybrid",
        "--cache-dir",
        "--vector-weight",
        "--embedder",
        "e5-small",
        "--fusion-depth",
        "--rrf-k",
        "--feedback",
    ):
        assert word in result.stdout


# the context benchmark ---------------------------------------------------------------------


def test_an_evidence_turn_counts_by_a_whole_sentence_a_phrase_verbatim() -> None:
    from engram.bench.context import _present, normalise

    turn = normalise("Caroline: I went to a LGBTQ support group yesterday. It was so powerful.")
    block = normalise("- [prompt] Caroline: I went to a LGBTQ support group yesterday. (obs_1)")
    assert _present(turn, block, turn=True)
    assert not _present(turn, normalise("lgbtq support group"), turn=True)  # words, not a sentence
    assert _present("sqlc", "we chose sqlc", turn=False)


@needs_data
def test_public_sets_become_dated_sessions_with_evidence_turns() -> None:
    from engram.bench.context import load_locomo, load_longmemeval

    locomo = load_locomo(DATA / "locomo" / "locomo10.json", 20)
    assert len(locomo.questions) == 20 and len({q.project for q in locomo.questions}) > 1
    assert all(q.turns and q.answers for q in locomo.questions)
    assert locomo.sessions[0]["started"].startswith("2023-")
    lme = load_longmemeval(DATA / "longmemeval" / "longmemeval_s_cleaned_498.json.gz", 2)
    assert len(lme.questions) == 2
    assert {s["project"] for s in lme.sessions} == {q.project for q in lme.questions}
    assert all(s["started"][4] == "-" for s in lme.sessions)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["coding-context"], "add --context"),
        (["coding-agent-life", "--context"], "--context runs on"),
        (["coding-context", "--context", "--budgets", "10"], "at least 50 tokens"),
        (["coding-context", "--context", "--budgets", "x"], "must be integers"),
    ],
)
def test_context_benchmark_arguments_are_checked(argv: list[str], message: str) -> None:
    result = subprocess.run([ENGRAM, "bench", *argv], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_a_context_table_says_what_it_was_measured_with() -> None:
    from engram.bench.context import render

    result = {
        "dataset": "coding-context",
        "sessions": 1,
        "observations": 2,
        "questions": 0,
        "embedder": "none",
        "cells": [],
        "environment": {"python": "3.11.7", "onnxruntime": "1.32.0"},
    }
    assert "measured with python 3.11.7, onnxruntime 1.32.0" in render(result)
    del result["environment"]
    assert "measured with" not in render(result)
