"""Dense-vector pieces of the benchmark harness: an on-disk embedding cache, the ``vector``
retriever (brute-force cosine per haystack, numpy) and weighted Reciprocal Rank Fusion.

Embeddings are cached in one SQLite file per embedder under the cache dir
(``--cache-dir``, else ENGRAM_BENCH_CACHE, else ``~/.cache/engram/bench``), keyed by embedder
name + SHA-256 of the text, stored as float32 bytes. Texts shared between haystacks, datasets,
levels and protocols are embedded once; a second run embeds nothing. Truncation (256 tokens
for the local MiniLM) is the embedder's own. Queries go through ``embed_query`` when the
embedder has one (asymmetric models such as e5: "query: " vs "passage: "), cached under a key of
their own (:func:`query_key`).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from engram.bench.datasets import Doc
from engram.bench.options import SERVER_RRF_K
from engram.embedders.base import embed_queries, is_asymmetric

EMBED_CHUNK = 256
"""Texts embedded (sorted by length, so batches pad little) and committed to the cache at once."""
PROGRESS_SECONDS = 10.0
COST_CHARS = 1100
"""Texts are embedded shortest first, so the ETA weighs each by its length in characters,
capped near the 256-token truncation (~4 characters a token), plus a fixed overhead."""
COST_OVERHEAD = 60


def _cost(text: str) -> int:
    return min(len(text), COST_CHARS) + COST_OVERHEAD


Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def default_cache_dir() -> Path:
    """ENGRAM_BENCH_CACHE, else ``~/.cache/engram/bench``."""
    env = os.environ.get("ENGRAM_BENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "engram" / "bench"


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


QUERY_KEY_TAG = "\x00query\x00"


def query_key(embedder: Any, text: str) -> bytes:
    """Cache key of ``text`` embedded as a search query: the document key for a symmetric
    embedder, a distinct one when the embedder has ``embed_query``."""
    return text_key(QUERY_KEY_TAG + text) if is_asymmetric(embedder) else text_key(text)


class EmbeddingCache:
    """Vectors by (embedder name, text hash) in ``<dir>/embeddings-<embedder>.sqlite``."""

    def __init__(self, directory: Path, embedder_name: str, dim: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in embedder_name)
        self.path = directory / f"embeddings-{safe}.sqlite"
        self.model = embedder_name
        self.dim = dim
        self._conn = sqlite3.connect(self.path)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, digest BLOB NOT NULL, "
            "vector BLOB NOT NULL, PRIMARY KEY (model, digest))"
        )
        # a rowid table: WITHOUT ROWID would spill each 1.5 KB vector to overflow pages and
        # take ~3x the space
        self._conn.commit()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, Any]:
        """The cached vectors among ``keys`` (numpy float32 arrays)."""
        import numpy as np

        found: dict[bytes, Any] = {}
        step = 500
        for start in range(0, len(keys), step):
            chunk = list(keys[start : start + step])
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                f"SELECT digest, vector FROM vectors WHERE model = ? AND digest IN ({marks})",
                [self.model, *chunk],
            )
            for digest, blob in rows:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == self.dim:
                    found[bytes(digest)] = vector
        return found

    def put_many(self, items: Iterable[tuple[bytes, Any]]) -> None:
        import numpy as np

        self._conn.executemany(
            "INSERT OR REPLACE INTO vectors (model, digest, vector) VALUES (?, ?, ?)",
            [(self.model, key, np.asarray(vec, dtype=np.float32).tobytes()) for key, vec in items],
        )
        self._conn.commit()

    def count(self) -> int:
        row = self._conn.execute(
            "SELECT count(*) FROM vectors WHERE model = ?", [self.model]
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._conn.close()


def embed_cached(
    embedder: Any,
    cache: EmbeddingCache,
    texts: Sequence[str],
    progress: Progress = _quiet,
    label: str = "vector",
    queries: bool = False,
) -> dict[bytes, Any]:
    """Vectors of ``texts`` by cache key (``text_key``, or ``query_key`` when ``queries``):
    from the cache, embedding (and caching) the missing ones, shortest first, with progress
    (texts done/total, rate, ETA). ``queries`` embeds with ``embed_query`` when there is one."""
    import numpy as np

    if queries:
        keys = {query_key(embedder, t): t for t in texts}
        embed = lambda batch: embed_queries(embedder, batch)  # noqa: E731
    else:
        keys = {text_key(t): t for t in texts}
        embed = embedder.embed
    vectors = cache.get_many(list(keys))
    missing = sorted(
        ((k, t) for k, t in keys.items() if k not in vectors), key=lambda kt: len(kt[1])
    )
    if not missing:
        return vectors
    total = len(missing)
    total_cost = sum(_cost(t) for _, t in missing)
    done_cost = 0
    kind = "queries" if queries else "texts"
    progress(
        f"[{label}] embedding {total} {kind} with {embedder.name} "
        f"({len(vectors)} of {len(keys)} distinct texts cached in {cache.path})"
    )
    started = last = time.perf_counter()
    done = 0
    for start in range(0, total, EMBED_CHUNK):
        chunk = missing[start : start + EMBED_CHUNK]
        embedded = np.asarray(embed([t for _, t in chunk]), dtype=np.float32)
        pairs = [(k, embedded[i]) for i, (k, _) in enumerate(chunk)]
        cache.put_many(pairs)
        vectors.update(pairs)
        done += len(chunk)
        done_cost += sum(_cost(t) for _, t in chunk)
        now = time.perf_counter()
        if now - last >= PROGRESS_SECONDS or done == total:
            last = now
            elapsed = max(now - started, 1e-9)
            rate = done / elapsed
            eta = (total_cost - done_cost) * elapsed / done_cost
            progress(
                f"[{label}] embedded {done}/{total} {kind} ({now - started:.0f}s, "
                f"{rate:.0f} {kind}/s, ETA {eta:.0f}s)"
            )
    return vectors


class VectorRetriever:
    """Documents embedded with the local MiniLM (or the given embedder), ranked by cosine
    similarity to the query within the haystack, brute force. Vectors are L2-normalised, so
    cosine = dot product. Queries are embedded with ``embed_query`` when the embedder has one.
    ``prepare`` embeds every document and query up front (cached), so the timed ``search`` is a
    lookup plus one matrix-vector product; a query not prepared is embedded in ``search``."""

    name = "vector"

    def __init__(
        self,
        workdir: Path | None = None,
        cache_dir: Path | None = None,
        embedder: Any = None,
        progress: Progress = _quiet,
    ) -> None:
        if embedder is None:
            from engram.embedders.local import LocalMiniLMEmbedder

            embedder = LocalMiniLMEmbedder(batch_size=32)
        self.embedder = embedder
        self.cache = EmbeddingCache(cache_dir or default_cache_dir(), embedder.name, embedder.dim)
        self.progress = progress
        self._vectors: dict[bytes, Any] = {}
        self._ids: dict[str, list[str]] = defaultdict(list)
        self._session: dict[str, str] = {}
        self._keys: dict[str, list[bytes]] = defaultdict(list)
        self._key_of: dict[str, bytes] = {}
        self._matrix: dict[str, Any] = {}
        self.embed_seconds = 0.0

    def prepare(self, docs: Sequence[Doc], queries: Sequence[str] = ()) -> None:
        """Embed (or load from the cache) every document and query text in one pass."""
        started = time.perf_counter()
        texts = [d.text for d in docs]
        if not is_asymmetric(self.embedder):  # queries embed like documents: one pass
            texts, queries = texts + list(queries), ()
        self._vectors.update(
            embed_cached(self.embedder, self.cache, texts, self.progress, self.name)
        )
        if queries:
            self._vectors.update(
                embed_cached(
                    self.embedder, self.cache, list(queries), self.progress, self.name, queries=True
                )
            )
        self.embed_seconds += time.perf_counter() - started

    def _vectors_of(self, texts: Sequence[str]) -> list[Any]:
        keys = [text_key(t) for t in texts]
        wanted = [t for k, t in zip(keys, texts, strict=True) if k not in self._vectors]
        if wanted:
            self._vectors.update(embed_cached(self.embedder, self.cache, wanted))
        return [self._vectors[k] for k in keys]

    def add(self, docs: Sequence[Doc]) -> None:
        self._vectors_of([d.text for d in docs])
        for doc in docs:
            self._ids[doc.haystack].append(doc.doc_id)
            self._session[doc.doc_id] = doc.session
            self._keys[doc.haystack].append(text_key(doc.text))
            self._key_of[doc.doc_id] = self._keys[doc.haystack][-1]
            self._matrix.pop(doc.haystack, None)

    def search(self, query: str, haystack: str, limit: int, now: float | None = None) -> list[str]:
        return [doc_id for doc_id, _ in self.scored(query, haystack, limit)]

    def scored(self, query: str, haystack: str, limit: int) -> list[tuple[str, float]]:
        """Document ids of ``haystack`` with their cosine similarity, best first."""
        import numpy as np

        ids = self._ids.get(haystack)
        if not ids or limit <= 0:
            return []
        matrix = self._matrix.get(haystack)
        if matrix is None:
            matrix = self._matrix[haystack] = np.stack(
                [self._vectors[k] for k in self._keys[haystack]]
            )
        scores = matrix @ self.query_vector(query)
        if limit < len(ids):
            top = np.argpartition(-scores, limit - 1)[:limit]
        else:
            top = np.arange(len(ids))
        # best score first; ties by document order (stable, deterministic)
        order = top[np.lexsort((top, -scores[top]))]
        return [(ids[i], float(scores[i])) for i in order]

    def query_vector(self, query: str) -> Any:
        key = query_key(self.embedder, query)
        if key not in self._vectors:
            self._vectors.update(embed_cached(self.embedder, self.cache, [query], queries=True))
        return self._vectors[key]

    def vectors(self, doc_ids: Sequence[str]) -> dict[str, Any]:
        """The vectors of those of ``doc_ids`` that were added (as the server's Chroma query
        returns its hits' vectors, for ``engram.search.feedback_ranking``)."""
        return {d: self._vectors[self._key_of[d]] for d in doc_ids if d in self._key_of}

    def hits(self, query: str, haystack: str, limit: int) -> list[Any]:
        """``scored`` as the hits ``engram.search.fuse`` takes, each with its session."""
        from engram.keyword import KeywordHit

        return [
            KeywordHit(doc_id=d, kind="doc", session_id=self._session.get(d), score=x)
            for d, x in self.scored(query, haystack, limit)
        ]

    def close(self) -> None:
        self._vectors.clear()
        self._key_of.clear()
        self._matrix.clear()
        self.cache.close()


def _fused(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int
) -> list[tuple[Any, dict[str, int]]]:
    """The server's fusion (``engram.search.fuse``) over plain id rankings, stream i named
    ``s<i>``."""
    from engram.keyword import KeywordHit
    from engram.search import fuse

    if len(rankings) != len(weights):
        raise ValueError("one weight per ranking")
    named = {
        f"s{i}": [KeywordHit(doc_id=d, kind="doc", session_id=None, score=0.0) for d in ranking]
        for i, ranking in enumerate(rankings)
    }
    return fuse(named, {f"s{i}": w for i, w in enumerate(weights)}, k=k, method="rrf")


def rrf_scores(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int = SERVER_RRF_K
) -> dict[str, float]:
    """Weighted Reciprocal Rank Fusion: score(d) = sum over streams s that ranked d of
    w_s / (k + rank_s(d)), ranks from 1. Weights are renormalised to sum to 1 over the streams
    that answered (returned at least one document); streams with weight 0 are ignored.
    Computed by the server's ``engram.search.fuse``."""
    return {hit.doc_id: hit.score for hit, _ in _fused(rankings, weights, k)}


def rrf(
    rankings: Sequence[Sequence[str]], weights: Sequence[float], limit: int, k: int = SERVER_RRF_K
) -> list[str]:
    """Fused ranking, best first; ties by best rank in any stream, then stream order (the
    server's ``engram.search.fuse``)."""
    return [hit.doc_id for hit, _ in _fused(rankings, weights, k)[:limit]]
