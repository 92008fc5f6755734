"""Run retrievers over a dataset: index, query, score, aggregate.

Each retriever gets a fresh scratch directory and the options, is given every document and
query text once if it has ``prepare`` (the vector retriever embeds there, timed as indexing),
indexes every document of the dataset (one
index for all haystacks), then answers each query in its haystack. Only the ``search`` call is
timed. Retrieved document ids become unit ids (a session ranks where its best document ranks)
before scoring.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engram.bench import metrics
from engram.bench.datasets import Dataset
from engram.bench.retrievers import RETRIEVERS, RetrieverOptions

SEARCH_DEPTH = 100
"""Documents asked per query; enough for @10 metrics and for MRR in practice."""
BEST_TURN_DEPTH = 400
"""When documents are finer than units (best-turn sessions), ask more to fill the top 10 units."""
INDEX_BATCH = 2000
PROGRESS_DOCS = 20000

Progress = Callable[[str], None]


@dataclasses.dataclass
class RetrieverResult:
    name: str
    metrics: dict[str, float]
    by_category: dict[str, dict[str, float]]
    category_counts: dict[str, int]
    latency_ms: dict[str, float]
    index_seconds: float
    queries: int
    prepare_seconds: float = 0.0  # part of index_seconds spent in ``prepare`` (embedding)
    rows: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Every metric of every query, in the dataset's query order (for paired comparisons)."""

    def as_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["rows"]  # thousands of rows; the paired counts are in the report
        return out


def _quiet(_: str) -> None:
    pass


def run_retriever(
    name: str,
    dataset: Dataset,
    progress: Progress = _quiet,
    progress_every: int = 50,
    options: RetrieverOptions | None = None,
) -> RetrieverResult:
    if name not in RETRIEVERS:
        raise KeyError(name)
    options = dataclasses.replace(options or RetrieverOptions(), progress=progress)
    unit_of = {doc.doc_id: doc.unit_id for doc in dataset.docs}
    finer = len(unit_of) > len({(d.haystack, d.unit_id) for d in dataset.docs})
    depth = BEST_TURN_DEPTH if finer else SEARCH_DEPTH
    with tempfile.TemporaryDirectory(prefix=f"engram-bench-{name}-") as workdir:
        retriever = RETRIEVERS[name](Path(workdir), options)
        try:
            prepare_seconds = _prepare(retriever, dataset, progress)
            index_seconds = prepare_seconds + _index(retriever, dataset, progress)
            session_of = {doc.doc_id: doc.session for doc in dataset.docs}
            rows, latencies = _query(
                retriever, dataset, unit_of, depth, progress, progress_every,
                lambda ids: paged(ids, session_of, options.per_session),
            )  # fmt: skip
        finally:
            retriever.close()
    by_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    for query, row in zip(dataset.queries, rows, strict=True):
        by_cat[query.category].append(row)
    return RetrieverResult(
        name=name,
        metrics=metrics.mean(rows),
        by_category={cat: metrics.mean(r) for cat, r in sorted(by_cat.items())},
        category_counts={cat: len(r) for cat, r in sorted(by_cat.items())},
        latency_ms={
            "p50": metrics.percentile(latencies, 50),
            "p95": metrics.percentile(latencies, 95),
        },
        index_seconds=index_seconds,
        queries=len(rows),
        prepare_seconds=prepare_seconds,
        rows=rows,
    )


def _prepare(retriever: Any, dataset: Dataset, progress: Progress) -> float:
    prepare = getattr(retriever, "prepare", None)
    if prepare is None:
        return 0.0
    started = time.perf_counter()
    prepare(dataset.docs, [q.text for q in dataset.queries])
    seconds = time.perf_counter() - started
    progress(
        f"[{retriever.name}] prepared {len(dataset.docs)} documents and "
        f"{len(dataset.queries)} questions ({seconds:.1f}s)"
    )
    return seconds


def _index(retriever: Any, dataset: Dataset, progress: Progress) -> float:
    started = time.perf_counter()
    total = len(dataset.docs)
    next_report = PROGRESS_DOCS
    for start in range(0, total, INDEX_BATCH):
        retriever.add(dataset.docs[start : start + INDEX_BATCH])
        done = min(start + INDEX_BATCH, total)
        if done >= next_report or done == total:
            progress(
                f"[{retriever.name}] indexed {done}/{total} documents "
                f"({time.perf_counter() - started:.1f}s)"
            )
            next_report = done + PROGRESS_DOCS
    return time.perf_counter() - started


def paged(doc_ids: Sequence[str], session_of: dict[str, str], per_session: int) -> list[str]:
    """``doc_ids`` as POST /v1/search pages them (``engram.search.diversify``): at most
    ``per_session`` of one session first, then the rest in their order (the page ends at
    ``limit``; the rest still count for the metrics past it). ``per_session`` 0: unchanged."""
    if per_session <= 0:
        return list(doc_ids)
    from engram.keyword import KeywordHit
    from engram.search import diversify

    hits = [KeywordHit(d, "doc", session_of.get(d), 0.0) for d in doc_ids]
    page = [hit.doc_id for hit in diversify(hits, len(hits), per_session)]
    kept = set(page)
    return [*page, *(d for d in doc_ids if d not in kept)]


def _query(
    retriever: Any,
    dataset: Dataset,
    unit_of: dict[str, str],
    depth: int,
    progress: Progress,
    every: int,
    page: Callable[[list[str]], list[str]] = list,
) -> tuple[list[dict[str, float]], list[float]]:
    rows: list[dict[str, float]] = []
    latencies: list[float] = []
    total = len(dataset.queries)
    for n, query in enumerate(dataset.queries, start=1):
        started = time.perf_counter()
        doc_ids = retriever.search(query.text, query.haystack, depth, now=query.now)
        latencies.append((time.perf_counter() - started) * 1000.0)
        ranked = metrics.dedupe(unit_of[d] for d in page(list(doc_ids)))
        rows.append(metrics.score(ranked, query.gold))
        if n % every == 0 or n == total:
            so_far = metrics.mean(rows)
            progress(
                f"[{retriever.name}] {n}/{total} questions "
                f"(recall_any@5 so far {so_far['recall_any@5']:.3f})"
            )
    return rows, latencies


def run(
    dataset: Dataset,
    names: Sequence[str],
    progress: Progress = _quiet,
    progress_every: int = 50,
    options: RetrieverOptions | None = None,
) -> list[RetrieverResult]:
    return [run_retriever(name, dataset, progress, progress_every, options) for name in names]
