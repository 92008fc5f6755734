"""Retrievers under test, behind one small interface and a registry.

A retriever indexes documents (each in a haystack) and answers a query within one haystack
with document ids, best first. Register a new one (graph, ...) with ``@register``;
``engram bench --retrievers`` picks them by name. The runner times ``search`` alone. A
retriever may also have ``prepare(docs, queries)``, called once with everything before ``add``
and timed with indexing (the vector retriever embeds there).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from engram.analysis import STOP_WORDS
from engram.bench.datasets import Doc
from engram.bench.options import (
    SERVER_FEEDBACK,
    SERVER_FUSION,
    SERVER_NEIGHBOUR_SUPPORT,
    SERVER_RRF_K,
    SERVER_SESSION_SUPPORT,
    SERVER_WEIGHTS,
)
from engram.bench.vectors import VectorRetriever


class Retriever(Protocol):
    name: str

    def add(self, docs: Sequence[Doc]) -> None:
        """Index a batch of documents (called repeatedly, before any search)."""

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        """Document ids of ``haystack`` best first, at most ``limit``; ``now``: when the
        question was asked (epoch seconds), when the dataset says."""

    def close(self) -> None: ...


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass
class RetrieverOptions:
    """Settings a retriever may use (``engram bench`` options)."""

    cache_dir: Path | None = None  # embedding cache; None = ENGRAM_BENCH_CACHE or ~/.cache/...
    # the fusion's weights and k: the server's defaults (ENGRAM_SEARCH_WEIGHTS, ENGRAM_RRF_K)
    bm25_weight: float = SERVER_WEIGHTS["bm25"]
    vector_weight: float = SERVER_WEIGHTS["vector"]
    fusion_depth: int = 100  # hybrid: documents asked of each stream (at least the limit)
    rrf_k: int = SERVER_RRF_K  # RRF's rank offset; smaller trusts the top ranks more
    graph_weight: float = SERVER_WEIGHTS["graph"]
    fusion: str = SERVER_FUSION  # hybrid: score or rrf (``engram.search.fuse``)
    session_support: float = SERVER_SESSION_SUPPORT["search"]  # hybrid: ENGRAM_SESSION_SUPPORT
    reranked_support: float = SERVER_SESSION_SUPPORT["reranked"]  # the same, when reranked
    # hybrid: ENGRAM_NEIGHBOUR_SUPPORT, ranked and reranked
    neighbour_support: float = SERVER_NEIGHBOUR_SUPPORT["search"]
    reranked_neighbour_support: float = SERVER_NEIGHBOUR_SUPPORT["reranked"]
    embedder: Any = None  # vector: None = the local MiniLM
    reranker: Any = None  # hybrid: an engram.rerank reranker over the fused top; None = off
    rerank_depth: int = 20
    feedback: float = SERVER_FEEDBACK  # hybrid: ENGRAM_SEARCH_FEEDBACK (0 is off)
    per_session: int = 0  # every retriever: at most this many hits of a session first; 0 = off
    progress: Callable[[str], None] = _quiet


RetrieverFactory = Callable[[Path, RetrieverOptions], Retriever]
"""Builds a retriever given a private scratch directory (deleted after the run) and options."""

RETRIEVERS: dict[str, RetrieverFactory] = {}


def register(name: str) -> Callable[[RetrieverFactory], RetrieverFactory]:
    def decorate(factory: RetrieverFactory) -> RetrieverFactory:
        RETRIEVERS[name] = factory
        return factory

    return decorate


_QUERY_WORD = re.compile(r"[a-z0-9]+")


def grep_words(query: str) -> list[str]:
    """Distinct lower-cased query words, stop words and single characters removed (a lone
    letter such as the ``s`` of "what's" is a substring of nearly every document)."""
    words: list[str] = []
    for word in _QUERY_WORD.findall(query.lower()):
        if len(word) > 1 and word not in STOP_WORDS and word not in words:
            words.append(word)
    return words


@register("grep")
class GrepRetriever:
    """Baseline: rank by how many distinct query words occur as substrings (case-insensitive),
    ties by total occurrences, then by document order. Documents matching no word are left out."""

    name = "grep"

    def __init__(
        self, workdir: Path | None = None, options: RetrieverOptions | None = None
    ) -> None:
        self._docs: dict[str, list[tuple[str, str]]] = defaultdict(list)

    def add(self, docs: Sequence[Doc]) -> None:
        for doc in docs:
            self._docs[doc.haystack].append((doc.doc_id, doc.text.lower()))

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        words = grep_words(query)
        scored: list[tuple[int, int, int, str]] = []
        for position, (doc_id, text) in enumerate(self._docs.get(haystack, ())):
            counts = [text.count(word) for word in words]
            distinct = sum(1 for c in counts if c)
            if distinct:
                scored.append((-distinct, -sum(counts), position, doc_id))
        scored.sort()
        return [doc_id for *_, doc_id in scored[:limit]]

    def close(self) -> None:
        self._docs.clear()


@register("bm25")
class Bm25Retriever:
    """The server's keyword search: a real Store (SQLite file in the scratch dir); documents go
    in through ``store.keyword.upsert`` and come back from ``store.keyword.search`` with one
    ``Scope`` project per haystack, so one index serves every question, scoped before ranking.

    One caveat of sharing the index: BM25 statistics (idf, average length) are over every
    haystack, not the question's alone."""

    name = "bm25"

    def __init__(self, workdir: Path, options: RetrieverOptions | None = None) -> None:
        from engram.store import Store

        self.store = Store.open(f"sqlite:///{workdir / 'bench.db'}")
        self._conn: Any = None

    def add(self, docs: Sequence[Doc]) -> None:
        from engram.keyword import KeywordDoc

        with self.store.write() as conn:
            for doc in docs:
                self.store.keyword.upsert(
                    conn,
                    KeywordDoc(
                        doc_id=doc.doc_id,
                        kind="observation",
                        project=doc.haystack,
                        body=doc.text,
                        created_at=doc.created_at or 0.0,
                        session_id=doc.session,
                        speaker=doc.speaker,
                    ),
                )

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        return [hit.doc_id for hit in self.hits(query, haystack, limit)]

    def hits(self, query: str, haystack: str, limit: int) -> list[Any]:
        """The keyword index's hits (``KeywordHit``: id and BM25 score), best first."""
        from engram.scope import Scope

        return list(
            self.store.keyword.search(self.connection(), query, Scope(project=haystack), limit)
        )

    def connection(self) -> Any:
        """One read connection for all queries: no pool checkout per call."""
        if self._conn is None:
            self._conn = self.store.engine.connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self.store.close()


@register("vector")
def vector_retriever(workdir: Path, options: RetrieverOptions | None = None) -> VectorRetriever:
    """Cosine similarity over local MiniLM embeddings, cached on disk (see ``vectors``)."""
    options = options or RetrieverOptions()
    return VectorRetriever(workdir, options.cache_dir, options.embedder, options.progress)


def support_for(options: RetrieverOptions, reranked: bool) -> float:
    """The session support a query is fused with: the reranked share when the reranker will
    read enough of its fused top (``engram.search.support_share``, as the server chooses)."""
    from engram.search import support_share

    return support_share(
        options.reranker is not None and reranked,
        options.rerank_depth,
        options.session_support,
        options.reranked_support,
    )


def neighbours_for(options: RetrieverOptions, reranked: bool) -> float:
    """The neighbour support a query is fused with, chosen as ``support_for`` chooses."""
    from engram.search import support_share

    return support_share(
        options.reranker is not None and reranked,
        options.rerank_depth,
        options.neighbour_support,
        options.reranked_neighbour_support,
    )


def keep_texts(options: RetrieverOptions, texts: dict[str, str], docs: Sequence[Doc]) -> None:
    """Remember the documents' texts when a reranker will read them."""
    if options.reranker is not None:
        texts.update((d.doc_id, d.text) for d in docs)


def stream_words(query: str, now: float | None) -> str:
    """What the streams rank by, as ``engram.search.search``: the query without the times it
    counts back (``dates.without_counted_back``) when there is a ``now`` to count them from
    (the question's date), else the query as asked."""
    from engram import dates

    return query if now is None else dates.without_counted_back(query)


def with_times_named(
    rankings: dict[str, Any],
    query: str,
    now: float | None,
    created: dict[str, float | None],
    ask: dict[str, Callable[[int], list[Any]]],
    depth: int,
) -> None:
    """As ``engram.search.search``: for a query that names a time, each stream in ``ask`` (its
    hits for a depth; the server's reads BM25 alone so) is read ``DATED_READ`` times as deep,
    and of the deeper hits those recorded then are kept (``engram.search.keep_dated``;
    ``created``: each document's time)."""
    from engram import dates
    from engram.search import DATED_READ, keep_dated

    spans = dates.named(query, now)
    if not spans:
        return
    times = {doc_id: at for doc_id, at in created.items() if at is not None}
    for name, hits_for in ask.items():
        rankings[name] = keep_dated(hits_for(depth * DATED_READ), depth, times, spans)


def named_times_first(
    conn: Any, query: str, now: float | None, ordered: list[Any]
) -> tuple[list[Any], Callable[[list[Any]], list[Any]]]:
    """``ordered`` with the hits recorded at a time the query names first, as
    ``engram.search.search`` orders them (the documents' times read from the keyword index
    on ``conn``), and the same ordering to apply again after the reranker."""
    from engram import dates, keyword
    from engram.search import times_first

    spans = dates.named(query, now)
    if not spans:
        return ordered, lambda hits: hits
    recorded = keyword.created_at(conn, [hit.doc_id for hit in ordered])
    again = lambda hits: times_first(hits, recorded, spans)  # noqa: E731
    return again(ordered), again


def rerank_top(
    options: RetrieverOptions,
    texts: dict[str, str],
    query: str,
    ordered: list[Any],
    wanted: bool = True,
) -> list[Any]:
    """``ordered`` (fused hits) with its top ``rerank_depth`` reordered by the reranker through
    the server's ``engram.search.rerank``; as the server, it reads that many and no more, and
    none when the query's tuning says not to (``wanted``, ``engram.search.tune``)."""
    if options.reranker is None or not wanted:
        return ordered
    from engram.search import rerank

    top = options.rerank_depth
    head = [{"id": hit.doc_id, "text": texts[hit.doc_id]} for hit in ordered[:top]]
    return rerank(options.reranker, query, ordered, head, top)


def fused_search(
    options: RetrieverOptions,
    keyword_store: Bm25Retriever,
    vector: Any,
    texts: dict[str, str],
    query: str,
    now: float | None,
    rankings: dict[str, Any],
    weights: dict[str, float],
) -> list[Any]:
    """The hybrid retrievers' search over their streams' ``rankings``, as the server's
    ``engram.search.search``: tuned to the query, fused (every candidate; the streams' first
    hits weighed by how much of the query each holds, ``first_coverage``), the hits of a time the
    query names first, fused again with the vector stream's feedback from the first hit
    (``vector``: a ``VectorRetriever``), and the top reranked when a reranker is set.
    ``keyword_store``: the retriever whose store holds the keyword index (times, coverage);
    ``rankings``: the streams' for ``stream_words(query, now)``, which the coverage, the
    feedback and the reranker read too."""
    from engram import keyword
    from engram.search import (
        candidates,
        feedback_ranking,
        first_coverage,
        fuse,
        tune,
        weighs_firsts,
    )

    conn = keyword_store.connection()
    tuning = tune(query, weights)
    words = stream_words(query, now)
    covered = (
        first_coverage(conn, keyword_store.store.keyword, words, rankings)
        if weighs_firsts(tuning.sure_first, options.fusion, len(rankings))
        else None
    )
    share = neighbours_for(options, tuning.rerank)
    beside = keyword.neighbours(conn, candidates(rankings)) if share > 0 else None

    def fused() -> list[Any]:
        return [
            hit
            for hit, _ in fuse(
                rankings,
                tuning.weights,
                None,  # every candidate, as the server: a time the query names can lift any
                k=options.rrf_k,
                method=options.fusion,
                sure_first=tuning.sure_first,
                session_support=support_for(options, tuning.rerank),
                coverage=covered,
                neighbours=beside,
                neighbour_support=share,
            )
        ]

    hits, again = named_times_first(conn, query, now, fused())
    if tuning.feedback and options.feedback > 0 and hits:
        ranked = [hit.doc_id for hit in rankings["vector"]]  # as the server's Chroma query
        moved = feedback_ranking(
            vector.query_vector(words), hits, vector.vectors(ranked), options.feedback
        )
        if moved:
            rankings["vector"] = moved
            hits = again(fused())
    return again(rerank_top(options, texts, words, hits, tuning.rerank))


@register("hybrid")
class HybridRetriever:
    """The bm25 and vector retrievers' rankings, each asked for the top ``fusion_depth`` (at
    least ``limit``) of the haystack, fused by the server's ``fuse`` (method, weights and k the
    server's by default); weights are renormalised over the streams that answered."""

    name = "hybrid"

    def __init__(self, workdir: Path, options: RetrieverOptions | None = None) -> None:
        options = options or RetrieverOptions()
        self.options = options
        self.bm25 = Bm25Retriever(workdir, options)
        try:
            self.vector = VectorRetriever(
                workdir, options.cache_dir, options.embedder, options.progress
            )
        except BaseException:
            self.bm25.close()
            raise
        self.vector.name = self.name  # progress lines say [hybrid]
        self._texts: dict[str, str] = {}  # for the reranker
        self._created: dict[str, float | None] = {}  # for the times a question names

    def prepare(self, docs: Sequence[Doc], queries: Sequence[str] = ()) -> None:
        self.vector.prepare(docs, queries)

    def add(self, docs: Sequence[Doc]) -> None:
        self.bm25.add(docs)
        self.vector.add(docs)
        keep_texts(self.options, self._texts, docs)
        self._created.update((doc.doc_id, doc.created_at) for doc in docs)

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        depth = max(limit, self.options.fusion_depth)
        words = stream_words(query, now)
        rankings = {
            "bm25": self.bm25.hits(words, haystack, depth),
            "vector": self.vector.hits(words, haystack, depth),
        }
        ask = {"bm25": lambda n: self.bm25.hits(words, haystack, n)}  # as the server
        with_times_named(rankings, query, now, self._created, ask, depth)
        weights = {"bm25": self.options.bm25_weight, "vector": self.options.vector_weight}
        ordered = fused_search(
            self.options, self.bm25, self.vector, self._texts,
            query, now, rankings, weights,
        )  # fmt: skip
        return [hit.doc_id for hit in ordered[:limit]]

    def close(self) -> None:
        try:
            self.bm25.close()
        finally:
            self.vector.close()
