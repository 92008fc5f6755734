"""The harness's graph and hybrid+graph retrievers: the server's graph stream and fusion."""

from __future__ import annotations

from pathlib import Path

from engram.bench.datasets import Dataset, Doc, Query
from engram.bench.retrievers import RETRIEVERS, RetrieverOptions
from engram.bench.runner import run

DOCS = [
    Doc("h1/a", "s-a", "h1", "Edited src/billing/invoice_total.py to round amounts half-even"),
    Doc("h1/b", "s-b", "h1", "Ran pytest tests/test_cart.py and everything passed"),
    Doc("h1/c", "s-c", "h1", "Talked about the weather and lunch plans"),
    Doc("h2/a", "s-x", "h2", "Edited src/billing/invoice_total.py in another haystack"),
]


def test_graph_finds_documents_by_the_entities_a_query_names(tmp_path: Path) -> None:
    retriever = RETRIEVERS["graph"](tmp_path, RetrieverOptions())
    try:
        retriever.add(DOCS)
        found = retriever.search("what changed in invoice_total.py?", "h1", 10)
        assert found[0] == "h1/a" and "h2/a" not in found  # haystacks stay apart
        assert "h1/a" not in retriever.search("lunch and the weather", "h1", 10)
    finally:
        retriever.close()


def test_hybrid_graph_fuses_with_the_servers_rrf(tmp_path: Path) -> None:
    queries = [
        Query("q1", "invoice_total.py rounding", "h1", frozenset({"s-a"}), "code"),
        Query("q2", "cart tests", "h1", frozenset({"s-b"}), "code"),
    ]
    dataset = Dataset("toy", "session", "official", DOCS, queries)
    options = RetrieverOptions(cache_dir=tmp_path / "cache")
    [bm25, fused] = run(dataset, ["bm25", "hybrid+graph"], options=options)
    assert fused.metrics["recall_any@1"] == 1.0
    assert fused.metrics["mrr"] >= bm25.metrics["mrr"]


def test_hybrids_put_what_was_recorded_at_the_time_a_question_names_first(
    tmp_path: Path,
) -> None:
    """As the server: "two weeks ago", counted back from when the question was asked, lifts
    the session of that time over a better keyword match; the single streams keep their
    order, and a question without a date is not moved."""
    asked = 1_700_000_000.0
    docs = [
        Doc("t/then", "s-then", "t", "upload test flaky", created_at=asked - 15 * 86400),
        Doc("t/now", "s-now", "t", "fixed the flaky upload test", created_at=asked - 3600),
    ]
    text = "how did we fix the flaky upload test two weeks ago"
    queries = [
        Query("dated", text, "t", frozenset({"s-then"}), "time", now=asked),
        Query("undated", text, "t", frozenset({"s-then"}), "time"),
    ]
    dataset = Dataset("toy", "session", "official", docs, queries)
    options = RetrieverOptions(cache_dir=tmp_path / "cache")
    results = run(dataset, ["bm25", "hybrid", "hybrid+graph"], options=options)
    by_name = {r.name: r for r in results}
    first = {name: [row["recall_any@1"] for row in r.rows] for name, r in by_name.items()}
    assert first == {"bm25": [0.0, 0.0], "hybrid": [1.0, 0.0], "hybrid+graph": [1.0, 0.0]}


FOUND_BY_FUSION = {"bm25": 0.0, "hybrid": 1.0, "hybrid+graph": 1.0}
"""First places when fusion finds what BM25 over the whole question does not."""


def first_places(
    tmp_path: Path, docs: list[Doc], text: str, gold: str, asked: float
) -> dict[str, float]:
    """recall_any@1 of BM25 and both hybrids for one question asked at ``asked``."""
    queries = [Query("q", text, "t", frozenset({gold}), "time", now=asked)]
    dataset = Dataset("toy", "session", "official", docs, queries)
    options = RetrieverOptions(cache_dir=tmp_path / "cache")
    results = run(dataset, ["bm25", "hybrid", "hybrid+graph"], options=options)
    return {r.name: r.rows[0]["recall_any@1"] for r in results}


def test_hybrids_rank_a_dated_question_by_its_words_without_the_time_it_counts_back(
    tmp_path: Path,
) -> None:
    """As the server: of two sessions recorded two weeks before the question, the one about its
    subject comes first, not the one that repeats "two weeks"; BM25 alone, which ranks by the
    whole question, puts that one first."""
    asked = 1_700_000_000.0
    then = asked - 14 * 86400
    docs = [
        Doc("t/standup", "s-standup", "t", "two weeks ago we said two more weeks", created_at=then),
        Doc("t/fryer", "s-fryer", "t", "unboxed the new kitchen air fryer", created_at=then),
    ]
    text = "which kitchen appliance did we buy two weeks ago"
    assert first_places(tmp_path, docs, text, "s-fryer", asked) == FOUND_BY_FUSION


def test_hybrids_read_deeper_for_the_time_a_question_names(
    tmp_path: Path,
) -> None:
    """As the server: with 300 better matches from today, the one of two weeks ago is not in
    BM25's best 100; named in the question, that time makes BM25 read deeper and keep it."""
    asked = 1_700_000_000.0
    docs = [Doc("t/then", "s-then", "t", "retried the upload job", created_at=asked - 15 * 86400)]
    docs += [
        Doc(f"t/now{n}", f"s-now{n}", "t", f"fixed the flaky upload test, attempt {n}", "", asked)
        for n in range(300)
    ]
    text = "how did we fix the flaky upload test two weeks ago"
    assert first_places(tmp_path, docs, text, "s-then", asked) == FOUND_BY_FUSION
