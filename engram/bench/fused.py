"""Retrievers that use the server's graph stream and the server's fusion (``engram.search.fuse``).

``graph`` ranks by the knowledge graph alone: documents go into a real Store through the keyword
index, whose derive queue feeds ``engram.drains.drain_graph`` exactly as the ``graph_extract`` task
does, and queries go through ``engram.graph.stream`` with one Scope project per haystack.
``hybrid+graph`` fuses bm25, vector and graph rankings with the same weighted RRF the server's
hybrid search uses (weights ``--weights``; the server's default when not given).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.bench.datasets import Doc
from engram.bench.retrievers import (
    Bm25Retriever,
    RetrieverOptions,
    fused_search,
    keep_texts,
    register,
    stream_words,
    with_times_named,
)
from engram.bench.vectors import VectorRetriever
from engram.keyword import KeywordHit


class _StoreStreams(Bm25Retriever):
    """bm25 and graph over one Store: ``add`` indexes the keyword documents, then drains the
    graph queue (the vector queue is dropped: vectors come from the harness's own cache)."""

    def add(self, docs: Sequence[Doc]) -> None:
        from engram import derive
        from engram.drains import drain_graph

        super().add(docs)
        drain_graph(self.store)
        with self.store.write() as conn:
            derive.clear(conn, "vector")

    def graph_search(self, query: str, haystack: str, limit: int) -> list[str]:
        return [h.doc_id for h in self.graph_hits(query, haystack, limit)]

    def graph_hits(self, query: str, haystack: str, limit: int) -> list[KeywordHit]:
        from engram import graph
        from engram.scope import Scope

        return list(graph.stream(self.connection(), query, Scope(project=haystack), limit))


@register("graph")
class GraphRetriever(_StoreStreams):
    """The knowledge graph stream alone."""

    name = "graph"

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        return self.graph_search(query, haystack, limit)


@register("hybrid+graph")
class HybridGraphRetriever:
    """bm25 + vector + graph with their scores, fused by ``engram.search.fuse`` as the server's
    hybrid search fuses them (``--fusion``, weights and k: the server's by default)."""

    name = "hybrid+graph"

    def __init__(self, workdir: Path, options: RetrieverOptions | None = None) -> None:
        from engram.search import DEFAULT_WEIGHTS

        options = options or RetrieverOptions()
        self.options = options
        self.weights = dict(DEFAULT_WEIGHTS)
        self.weights.update({"bm25": options.bm25_weight, "vector": options.vector_weight})
        self.weights["graph"] = options.graph_weight
        self.streams = _StoreStreams(workdir, options)
        try:
            self.vector = VectorRetriever(
                workdir, options.cache_dir, options.embedder, options.progress
            )
        except BaseException:
            self.streams.close()
            raise
        self.vector.name = self.name
        self._texts: dict[str, str] = {}  # for the reranker
        self._created: dict[str, float | None] = {}  # for the times a question names

    def prepare(self, docs: Sequence[Doc], queries: Sequence[str] = ()) -> None:
        self.vector.prepare(docs, queries)

    def add(self, docs: Sequence[Doc]) -> None:
        self.streams.add(docs)
        self.vector.add(docs)
        keep_texts(self.options, self._texts, docs)
        self._created.update((doc.doc_id, doc.created_at) for doc in docs)

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        depth = max(limit, self.options.fusion_depth)
        words = stream_words(query, now)
        rankings: dict[str, Any] = {
            "bm25": self.streams.hits(words, haystack, depth),
            "vector": self.vector.hits(words, haystack, depth),
            "graph": self.streams.graph_hits(words, haystack, depth),
        }
        ask = {"bm25": lambda n: self.streams.hits(words, haystack, n)}  # as the server
        with_times_named(rankings, query, now, self._created, ask, depth)
        ordered = fused_search(
            self.options, self.streams, self.vector, self._texts,
            query, now, rankings, self.weights,
        )  # fmt: skip
        return [hit.doc_id for hit in ordered[:limit]]

    def close(self) -> None:
        try:
            self.streams.close()
        finally:
            self.vector.close()
