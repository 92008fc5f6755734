#!/usr/bin/env python3
"""Benchmark: in-process search latency with BM25 + vectors + graph, at 10k and 50k observations.

Standalone measurement script, not a pytest test. Target: search p50 under 20 ms at 50k
observations with BM25 + vectors on, on a 2-core machine.

One store (SQLite in the work dir, or a fresh PostgreSQL database) is grown to each of --sizes in
turn (cumulative: the same store grows), then measured:

  build   observe bodies of bench_spine's realistic corpus (Claude Code hooks over real stdlib
          sources, 5 projects with skewed weights) become observations through the worker's code:
          validate_event (as POST /v1/observe) -> inbox payload -> privacy scrub -> compress ->
          observations.store, --insert-batch per write transaction. The keyword index queues
          every document on the derive queue; the ``vector`` target is drained through
          VectorIndex.apply (ChromaDB PersistentClient under the work dir, one collection per
          project, the real collection name) and the ``graph`` target through
          engram.drains.drain_graph. Embeddings come from the local MiniLM through an on-disk cache
          (--cache-dir, keyed by model + text hash; same model name and dim, so the collection is
          the real one): a second run embeds nothing. Progress with rate and ETA every ~10 s.
  search  --queries project-scoped queries (bench_spine.pick_query: identifiers, module and
          test names, error messages from the project's files, and code-ish phrases; projects as
          the factory weights them), limit 10, after --warmup untimed ones, each block in turn:
            hybrid        search.search(mode="hybrid", vectors=...) end to end (bm25 + vector +
                          graph, vector stream in the search thread pool, fuse, hydrate)
            hybrid-dated  hybrid with " two weeks ago" appended to the query: the candidates'
                          times read and those of that time put first (search.times_first)
            hybrid-rerank with --reranker local only: hybrid, then the local cross-encoder
                          over the fused top --rerank-depth (hydrated title + text) or as
                          many of them as fit in --rerank-budget ms, as POST /v1/search
                          does with ENGRAM_RERANKER=local; hits: how many it read
            hybrid-novec  the same without the vector index (bm25 + graph)
            keyword       search.search(mode="keyword"): bm25 + hydrate
            bm25          the keyword index's stream alone (store.keyword.search)
            graph         graph.stream alone
            coverage      search.first_coverage alone, over the bm25 and vector streams' top
                          hits (hits: 2 when their first hits differ and it was read, else 0):
                          what ranked hybrid search adds to weigh the two first hits
            neighbours    keyword.neighbours alone over every candidate of the bm25, vector
                          and graph streams (hits: candidates with a neighbour): what hybrid
                          search adds to fuse with ENGRAM_NEIGHBOUR_SUPPORT
            vec-embed     query embedding alone (VectorIndex.embed_query, the real model)
            vec-chroma    Chroma query alone (VectorIndex.search with the vector given)
            vec-pool      VectorIndex.search (embedding + Chroma) submitted to search's pool,
                          waited for: vec-embed + vec-chroma + the thread handoff
            pool-noop     an empty function through search's pool: the bare handoff
          p50/p95/p99/mean in ms and mean hits; load average before and after each size's block.
  memory  ru_maxrss and VmRSS of this process after each build and after each size's queries.

Query embeddings are never cached: the cache is off while measuring.

  .venv/bin/python tests/benchmarks/bench_search.py --sizes 2000            # quick check
  .venv/bin/python tests/benchmarks/bench_search.py --sizes 10000,50000 --queries 300
  .venv/bin/python tests/benchmarks/bench_search.py --embed-threads 2 --sizes 50000 --keep --workdir W
  .venv/bin/python tests/benchmarks/bench_search.py --store postgresql --sizes 10000
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shlex
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench_spine  # this folder is sys.path[0] when run as a script
from bench_spine import Dist, Stopwatch, log, machine_lines, pick_query
from sqlalchemy import text

from engram import derive, graph, keyword, observations, search
from engram.bench.vectors import EmbeddingCache, embed_cached, text_key
from engram.compress import compress
from engram.embedders.local import LocalMiniLMEmbedder
from engram.events import Event, validate_event
from engram.privacy import scrub
from engram.scope import Scope
from engram.settings import Settings, load_settings
from engram.store import Store, dumps, loads
from engram.vectors import TARGET as VECTOR_TARGET
from engram.vectors import VectorIndex, Vectors

DEFAULT_POSTGRES_URL = os.environ.get(
    "ENGRAM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres:postgres@127.0.0.1:5432/postgres"
)
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "engram" / "bench-search"
PROGRESS_SECONDS = 10.0
LIMIT = 10
DEPTH = max(LIMIT * search.CANDIDATE_FACTOR, search.MIN_DEPTH)
"""Candidates each stream is asked for, as search.search asks them for a page of LIMIT."""
GRAPH_BATCH = 500
FACTORY_SEED, FACTORY_PREFIX = 42, "bs"
QUERY_SEED, WARMUP_SEED = 1234, 999
DATED = " two weeks ago"
"""Appended to each query of the ``hybrid-dated`` block: a time the query names."""
BLOCKS = (
    "hybrid",
    "hybrid-dated",
    "hybrid-rerank",
    "hybrid-novec",
    "keyword",
    "bm25",
    "graph",
    "coverage",
    "neighbours",
    "vec-embed",
    "vec-chroma",
    "vec-pool",
    "pool-noop",
)


# --------------------------------------------------------------------------------------------
# Memory and load
# --------------------------------------------------------------------------------------------


def rss_mb() -> tuple[float, float]:
    """(current VmRSS, peak ru_maxrss) of this process in MB."""
    current = 0.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    except OSError:
        pass
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_line() -> str:
    current, peak = rss_mb()
    return f"RSS {current:.0f} MB (peak ru_maxrss {peak:.0f} MB)"


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------------------------
# The embedder: local MiniLM behind the on-disk cache
# --------------------------------------------------------------------------------------------


class _Counting:
    """The inner embedder as embed_cached sees it; counts the texts it really embeds."""

    def __init__(self, inner: LocalMiniLMEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.inner.embed(texts)


class CachedEmbedder:
    """LocalMiniLMEmbedder with the benchmark's embedding cache; same ``name`` and ``dim``, so
    VectorIndex uses the real collection name. ``use_cache = False`` (while measuring) embeds
    with the model, as a server would embed a query. Symmetric, like the model: no
    ``embed_query``."""

    def __init__(self, inner: LocalMiniLMEmbedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache = cache
        self.counting = _Counting(inner)
        self.use_cache = True
        self.requested = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def embedded(self) -> int:
        return self.counting.texts

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.use_cache:
            return self.inner.embed(texts)
        self.requested += len(texts)
        found = embed_cached(self.counting, self.cache, list(texts))
        return [found[text_key(t)].tolist() for t in texts]


# --------------------------------------------------------------------------------------------
# Building the corpus
# --------------------------------------------------------------------------------------------


def stored_event(body: dict[str, Any], settings: Settings) -> tuple[Event, Any]:
    """What the worker stores for one observe body: the gateway's validated event, through the
    inbox payload (JSON), scrubbed again and compressed (tasks/capture.py observe)."""
    accepted = validate_event(
        body, max_field_chars=settings.max_field_chars, received_at=time.time()
    )
    event = Event.from_payload(loads(dumps(accepted.to_payload())))
    payload: dict[str, Any] = scrub(event.to_payload())  # type: ignore[assignment]
    return event, compress(payload)


@dataclass
class Build:
    size: int
    insert_s: float = 0.0
    vector_s: float = 0.0
    vector_docs: int = 0
    embedded: int = 0
    graph_s: float = 0.0
    graph_docs: int = 0
    rss: tuple[float, float] = (0.0, 0.0)
    chroma_docs: int = 0


def insert(store: Store, settings: Settings, factory: Any, count: int, batch: int) -> float:
    watch, done, last = Stopwatch(), 0, time.perf_counter()
    while done < count:
        items = [stored_event(factory.next(), settings) for _ in range(min(batch, count - done))]
        with store.write() as conn:
            for event, compressed in items:
                observations.store(conn, store.keyword, event, compressed)
        done += len(items)
        now = time.perf_counter()
        if now - last >= PROGRESS_SECONDS or done == count:
            last = now
            rate = done / max(watch.elapsed(), 1e-9)
            log(
                f"  [insert] {done}/{count} observations ({watch.elapsed():.0f}s, "
                f"{rate:.0f}/s, ETA {(count - done) / rate:.0f}s)"
            )
    return watch.elapsed()


def drain_vectors(
    store: Store, index: VectorIndex, embedder: CachedEmbedder, batch: int
) -> tuple[float, int]:
    """The embed task's loop (engram/drains.py drain_vectors): claim a batch in one transaction,
    VectorIndex.apply outside it, mark done; until the queue is empty."""
    with store.read() as conn:
        total = derive.pending(conn, VECTOR_TARGET)
    watch, done, last = Stopwatch(), 0, time.perf_counter()
    done_last = 0
    requested0, embedded0 = embedder.requested, embedder.embedded
    log(f"  [vector] draining {total} queued changes into Chroma ({index.name})")
    while True:
        with store.write() as conn:
            changes = derive.claim(conn, VECTOR_TARGET, batch, 300.0)
        if not changes:
            break
        index.apply(changes)
        with store.write() as conn:
            derive.done(conn, VECTOR_TARGET, changes)
        done += len(changes)
        now = time.perf_counter()
        if now - last >= PROGRESS_SECONDS:
            # the ETA goes by the rate of the last window: cached texts come first, fast
            recent = (done - done_last) / (now - last)
            last, done_last = now, done
            elapsed = watch.elapsed()
            embedded = embedder.embedded - embedded0
            cached = embedder.requested - requested0 - embedded
            log(
                f"  [vector] {done}/{total} documents ({elapsed:.0f}s, now {recent:.1f} docs/s; "
                f"{embedded} embedded, {embedded / elapsed:.1f}/s; {cached} from cache; "
                f"ETA {(total - done) / max(recent, 1e-9):.0f}s; load {load_avg()})"
            )
    embedded = embedder.embedded - embedded0
    log(
        f"  [vector] {done} documents in {watch.elapsed():.1f}s ({embedded} embedded, "
        f"{embedder.requested - requested0 - embedded} from cache)"
    )
    return watch.elapsed(), done


def drain_graph_progress(store: Store) -> tuple[float, int]:
    from engram.drains import drain_graph

    with store.read() as conn:
        total = derive.pending(conn, "graph")
    watch, done, last = Stopwatch(), 0, time.perf_counter()
    while True:
        applied = drain_graph(store, batch=GRAPH_BATCH, max_batches=4)
        if not applied:
            break
        done += applied
        now = time.perf_counter()
        if now - last >= PROGRESS_SECONDS:
            last = now
            rate = done / watch.elapsed()
            log(
                f"  [graph] {done}/{total} documents ({watch.elapsed():.0f}s, {rate:.0f}/s, "
                f"ETA {max(total - done, 0) / rate:.0f}s)"
            )
    log(f"  [graph] {done} documents in {watch.elapsed():.1f}s")
    return watch.elapsed(), done


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


@dataclass
class Block:
    seconds: list[float] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)

    def dist(self) -> Dist:
        return Dist.of(self.seconds)

    def mean_hits(self) -> float:
        return sum(self.hits) / len(self.hits) if self.hits else float("nan")


@dataclass
class Measured:
    size: int
    blocks: dict[str, Block]
    load_before: str
    load_after: str
    rss: tuple[float, float]
    empty_hybrid: int


Query = tuple[str, str, str]  # (query, project, source)


def make_queries(n: int, seed: int) -> list[Query]:
    rng = random.Random(seed)
    return [pick_query(rng) for _ in range(n)]


def runners(
    store: Store,
    vectors: Vectors,
    index: VectorIndex,
    weights: dict[str, float],
    reranker: Any = None,
    rerank_depth: int = search.RERANK_DEPTH,
    rerank_budget: float = search.RERANK_BUDGET_MS,
) -> dict[str, Callable[[str, Scope], int]]:
    """One callable per block: runs one query, returns its hit count (timed by the caller).
    ``hybrid-rerank`` only when a reranker is given (--reranker)."""

    def hybrid(q: str, scope: Scope) -> int:
        return len(
            search.search(store, q, scope, LIMIT, "hybrid", vectors=vectors, weights=weights)[
                "items"
            ]
        )

    def hybrid_dated(q: str, scope: Scope) -> int:
        return hybrid(q + DATED, scope)

    def hybrid_novec(q: str, scope: Scope) -> int:
        return len(
            search.search(store, q, scope, LIMIT, "hybrid", vectors=None, weights=weights)["items"]
        )

    def keyword(q: str, scope: Scope) -> int:
        return len(search.search(store, q, scope, LIMIT, "keyword", weights=weights)["items"])

    def vec_pool(q: str, scope: Scope) -> int:
        return len(search._pool.submit(index.search, q, scope, DEPTH, None).result())

    def pool_noop(q: str, scope: Scope) -> int:
        return search._pool.submit(len, q).result() * 0

    def hybrid_rerank(q: str, scope: Scope) -> int:
        result = search.search(
            store,
            q,
            scope,
            LIMIT,
            "hybrid",
            vectors=vectors,
            weights=weights,
            reranker=reranker,
            rerank_depth=rerank_depth,
            rerank_budget_ms=rerank_budget,
        )
        if "rerank" in result.get("degraded", {}):
            raise RuntimeError(f"the reranker failed: {result['degraded']['rerank']}")
        return int(result.get("reranked", 0))

    return {
        "hybrid": hybrid,
        "hybrid-dated": hybrid_dated,
        **({"hybrid-rerank": hybrid_rerank} if reranker is not None else {}),
        "hybrid-novec": hybrid_novec,
        "keyword": keyword,
        "vec-pool": vec_pool,
        "pool-noop": pool_noop,
    }


def run_block(
    name: str,
    queries: list[Query],
    warmup: list[Query],
    store: Store,
    index: VectorIndex,
    run: dict[str, Callable[[str, Scope], int]],
    blocks: dict[str, Block],
) -> None:
    """Time ``queries`` in block ``name`` (after ``warmup`` untimed) into ``blocks``."""
    if name == "hybrid-rerank" and name not in run:
        return  # no --reranker
    if name in run:
        fn = run[name]
        for q, project, _ in warmup:
            fn(q, Scope(project))
        block = blocks.setdefault(name, Block())
        for q, project, _ in queries:
            scope = Scope(project)
            t0 = time.perf_counter()
            hits = fn(q, scope)
            block.seconds.append(time.perf_counter() - t0)
            block.hits.append(hits)
        return
    if name in ("bm25", "graph"):

        def stream(conn: Any, q: str, scope: Scope) -> int:
            if name == "bm25":
                return len(store.keyword.search(conn, q, scope, DEPTH, None))
            return len(graph.stream(conn, q, scope, DEPTH, None))

        with store.read() as conn:
            for q, project, _ in warmup:
                stream(conn, q, Scope(project))
            block = blocks.setdefault(name, Block())
            for q, project, _ in queries:
                scope = Scope(project)
                t0 = time.perf_counter()
                hits = stream(conn, q, scope)
                block.seconds.append(time.perf_counter() - t0)
                block.hits.append(hits)
        return
    if name == "coverage":
        with store.read() as conn:

            def streams(q: str, scope: Scope) -> dict[str, Any]:
                return {
                    "bm25": store.keyword.search(conn, q, scope, DEPTH, None),
                    "vector": index.search(q, scope, DEPTH, None),
                }

            for q, project, _ in warmup:
                search.first_coverage(conn, store.keyword, q, streams(q, Scope(project)))
            block = blocks.setdefault(name, Block())
            for q, project, _ in queries:
                rankings = streams(q, Scope(project))
                t0 = time.perf_counter()
                covered = search.first_coverage(conn, store.keyword, q, rankings)
                block.seconds.append(time.perf_counter() - t0)
                block.hits.append(len(covered or {}))
        return
    if name == "neighbours":
        with store.read() as conn:

            def candidates(q: str, scope: Scope) -> list[str]:
                return search.candidates(
                    {
                        "bm25": store.keyword.search(conn, q, scope, DEPTH, None),
                        "vector": index.search(q, scope, DEPTH, None),
                        "graph": graph.stream(conn, q, scope, search.graph_depth(LIMIT), None),
                    }
                )

            for q, project, _ in warmup:
                keyword.neighbours(conn, candidates(q, Scope(project)))
            block = blocks.setdefault(name, Block())
            for q, project, _ in queries:
                ids = candidates(q, Scope(project))
                t0 = time.perf_counter()
                beside = keyword.neighbours(conn, ids)
                block.seconds.append(time.perf_counter() - t0)
                block.hits.append(sum(1 for found in beside.values() if found))
        return
    if name == "vec-embed":  # vec-embed and vec-chroma from one loop
        for q, project, _ in warmup:
            index.search(q, Scope(project), DEPTH, None, vector=index.embed_query(q))
        embed_block = blocks.setdefault("vec-embed", Block())
        chroma_block = blocks.setdefault("vec-chroma", Block())
        for q, project, _ in queries:
            scope = Scope(project)
            t0 = time.perf_counter()
            vector = index.embed_query(q)
            t1 = time.perf_counter()
            hits = index.search(q, scope, DEPTH, None, vector=vector)
            t2 = time.perf_counter()
            embed_block.seconds.append(t1 - t0)
            embed_block.hits.append(len(vector) and 1)
            chroma_block.seconds.append(t2 - t1)
            chroma_block.hits.append(len(hits))
        return
    if name == "vec-chroma":
        return  # measured with vec-embed
    raise ValueError(name)


def measure(
    size: int,
    store: Store,
    vectors: Vectors,
    index: VectorIndex,
    settings: Settings,
    args: argparse.Namespace,
) -> Measured:
    queries = make_queries(args.queries, QUERY_SEED)
    warmup = make_queries(args.warmup, WARMUP_SEED)
    reranker = None
    if args.reranker == "local":
        from engram.rerank import LocalCrossEncoder

        reranker = LocalCrossEncoder(
            threads=args.rerank_threads, max_tokens=args.rerank_tokens, batch=args.rerank_batch
        )
        reranker.load()
    budget = search.RERANK_BUDGET_MS if args.rerank_budget is None else args.rerank_budget
    run = runners(
        store, vectors, index, dict(settings.search_weights), reranker, args.rerank_depth, budget
    )
    blocks: dict[str, Block] = {}
    before = load_avg()
    log(
        f"[{size}] measuring {len(queries)} queries per block ({args.warmup} warm-up); "
        f"load {before}"
    )
    for name in BLOCKS:
        watch = Stopwatch()
        run_block(name, queries, warmup, store, index, run, blocks)
        if name in blocks:
            b = blocks[name]
            log(
                f"  {name:<13} {b.dist().line()}; mean hits {b.mean_hits():.1f} "
                f"({watch.elapsed():.1f}s, load {load_avg()})"
            )
    empty = blocks["hybrid"].hits.count(0)
    return Measured(size, blocks, before, load_avg(), rss_mb(), empty)


# --------------------------------------------------------------------------------------------
# Stores
# --------------------------------------------------------------------------------------------


def create_postgres(admin_url: str) -> tuple[str, Callable[[], None]]:
    """A fresh database on the server of ``admin_url``: its URL and a function dropping it."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"engram_bench_search_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(admin_url).set(database=name).render_as_string(hide_password=False), drop


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def print_table(
    builds: list[Build],
    results: list[Measured],
    args: argparse.Namespace,
    command: str,
    store_line: str,
    total_s: float,
) -> None:
    print()
    print("=" * 100)
    print("Engram search latency, in process: BM25 + vectors (local MiniLM, Chroma) + graph")
    for line in machine_lines():
        print(line)
    print(
        f"store: {store_line}; corpus {args.corpus} (bench_spine), limit {LIMIT}, stream depth "
        f"{DEPTH}; {args.queries} queries per block after {args.warmup} warm-up"
    )
    print()
    print(
        f"{'size':>7} {'block':<13} {'p50':>8} {'p95':>8} {'p99':>8} {'mean':>8} {'hits':>6}   (ms)"
    )
    for m in results:
        for name in BLOCKS:
            b = m.blocks.get(name)
            if b is None:
                continue
            d = b.dist()
            print(
                f"{m.size:>7} {name:<13} {d.p50:>8.2f} {d.p95:>8.2f} {d.p99:>8.2f} "
                f"{d.mean:>8.2f} {b.mean_hits():>6.1f}"
            )
        hybrid = m.blocks["hybrid"].dist().p50
        verdict = "MET" if hybrid < 20.0 else "MISSED"
        if "hybrid-rerank" in m.blocks:
            reranked = m.blocks["hybrid-rerank"].dist().p50
            print(
                f"{'':>7} target hybrid-rerank p50 <= 80 ms: "
                f"{'MET' if reranked <= 80.0 else 'MISSED'} ({reranked:.2f} ms)"
            )
        print(
            f"{'':>7} target hybrid p50 < 20 ms: {verdict} ({hybrid:.2f} ms); hybrid queries "
            f"with 0 hits {m.empty_hybrid}/{len(m.blocks['hybrid'].hits)}; load "
            f"{m.load_before} -> {m.load_after}; RSS after queries {m.rss[0]:.0f} MB "
            f"(peak {m.rss[1]:.0f} MB)"
        )
    print()
    print(
        f"{'size':>7} {'insert s':>9} {'vector s':>9} {'embedded':>9} {'graph s':>8} "
        f"{'chroma':>7} {'RSS MB':>7} {'peak MB':>8}"
    )
    for b in builds:
        print(
            f"{b.size:>7} {b.insert_s:>9.1f} {b.vector_s:>9.1f} {b.embedded:>9} "
            f"{b.graph_s:>8.1f} {b.chroma_docs:>7} {b.rss[0]:>7.0f} {b.rss[1]:>8.0f}"
        )
    print(
        "(build rows are per growth step; embedded = texts the model embedded, the rest came "
        "from the cache; RSS after the build)"
    )
    print(f"\nload average at the end: {load_avg()}; total {total_s:.0f}s")
    print(f"command: {command}")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(doc.split("\n\n")[1:]),
    )
    p.add_argument(
        "--sizes",
        default="10000,50000",
        help="comma-separated corpus sizes, cumulative: the same store grows to each "
        "and is measured there (default 10000,50000)",
    )
    p.add_argument("--queries", type=int, default=300, help="timed queries per block (default 300)")
    p.add_argument(
        "--warmup", type=int, default=20, help="untimed queries before each block (default 20)"
    )
    p.add_argument(
        "--store",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="sqlite: a file in the work dir; postgresql: a fresh database on the "
        "server of --postgres-url, dropped at the end unless --keep "
        "(default sqlite)",
    )
    p.add_argument(
        "--postgres-url",
        default=DEFAULT_POSTGRES_URL,
        help="admin URL of the PostgreSQL server (default ENGRAM_TEST_POSTGRES_URL or "
        f"{DEFAULT_POSTGRES_URL})",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="data dir of the run (SQLite store, Chroma); must be empty or absent; "
        "default a temp dir, removed at the end unless --keep",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the work dir (and the PostgreSQL database) for later inspection",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="measure the store a kept run left in --workdir (SQLite), adding nothing: "
        "re-measure after a code change without rebuilding",
    )
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE_DIR,
        help=f"embedding cache (default {DEFAULT_CACHE_DIR})",
    )
    p.add_argument(
        "--corpus",
        choices=("realistic", "dense"),
        default="realistic",
        help="bench_spine corpus (default realistic)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=bench_spine.DEFAULT_DATA_DIR,
        help="folder with longmemeval/ for the realistic corpus's prose (optional)",
    )
    p.add_argument(
        "--insert-batch",
        type=int,
        default=500,
        help="observations per write transaction while building (default 500)",
    )
    p.add_argument(
        "--embed-batch",
        type=int,
        default=128,
        help="derive-queue changes claimed and applied to Chroma at once (default 128)",
    )
    p.add_argument(
        "--embed-threads",
        type=int,
        default=1,
        help="onnxruntime threads of the embedder, building and querying "
        "(ENGRAM_EMBEDDING_THREADS; default 1, the server's): 2 builds a store faster on "
        "2 cores, but time the queries with the server's",
    )
    p.add_argument(
        "--reranker",
        choices=("off", "local"),
        default="off",
        help="local: also time the hybrid-rerank block, hybrid search with the local "
        "cross-encoder over the fused top --rerank-depth (ENGRAM_RERANKER=local; default off)",
    )
    p.add_argument(
        "--rerank-depth",
        type=int,
        default=search.RERANK_DEPTH,
        help=f"fused hits the reranker reads (default {search.RERANK_DEPTH}, ENGRAM_RERANK_DEPTH)",
    )
    p.add_argument(
        "--rerank-tokens",
        type=int,
        default=None,
        help="tokens of query + passage the cross-encoder reads (default the server's)",
    )
    p.add_argument(
        "--rerank-budget",
        type=float,
        default=None,
        help="ms the cross-encoder may take a search (ENGRAM_RERANK_BUDGET_MS; default the "
        "server's; 0: always read --rerank-depth)",
    )
    p.add_argument(
        "--rerank-batch",
        type=int,
        default=None,
        help="pairs per run of the cross-encoder (default the server's)",
    )
    p.add_argument(
        "--rerank-threads",
        type=int,
        default=1,
        help="onnxruntime threads of the cross-encoder (default 1, the server's)",
    )
    args = p.parse_args(argv)
    args.sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    for line in machine_lines():
        log(line)
    log(f"load average {load_avg()}")

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    if args.reuse:
        if args.workdir is None or not (args.workdir / "data" / "engram.db").is_file():
            log("--reuse needs --workdir of a kept run (with data/engram.db)")
            return 2
        workdir, remove = args.workdir, False
    elif args.workdir is not None:
        if args.workdir.exists() and any(args.workdir.iterdir()):
            log(f"--workdir {args.workdir} is not empty: give an empty or new folder")
            return 2
        args.workdir.mkdir(parents=True, exist_ok=True)
        workdir, remove = args.workdir, False
    else:
        workdir, remove = Path(tempfile.mkdtemp(prefix="engram-bench-search-")), not args.keep
    drop: Callable[[], None] | None = None
    builds: list[Build] = []
    results: list[Measured] = []
    watch = Stopwatch()
    store: Store | None = None
    try:
        if args.store == "postgresql":
            url, drop = create_postgres(args.postgres_url)
            store_line = f"postgresql {url.rsplit('/', 1)[-1]} (fresh database)"
        else:
            url = f"sqlite:///{workdir / 'data' / 'engram.db'}"
            store_line = f"sqlite {workdir / 'data' / 'engram.db'}"
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        settings = load_settings(
            environ={
                "ENGRAM_DATA_DIR": str(workdir / "data"),
                "ENGRAM_CONFIG_DIR": str(workdir / "config"),
                "ENGRAM_DATABASE_URL": url,
                "ENGRAM_EMBEDDER": "local",
                "ENGRAM_LOCAL_MODEL": "minilm",
                "ENGRAM_LOG_LEVEL": "WARNING",
                "ENGRAM_EMBEDDING_THREADS": str(args.embed_threads),
            }
        )
        log(f"work dir {workdir}; store {store_line}; embedding cache {args.cache_dir}")
        if args.corpus == "realistic":
            log("reading the realistic corpus sources")
            bench_spine.CORPUS = bench_spine.RealisticCorpus(args.data_dir)
            log(f"corpus: {bench_spine.CORPUS.describe()}")
        rng = random.Random(0)
        log(
            "example queries: "
            + "; ".join(f"{q!r} in {p}" for q, p, _ in (pick_query(rng) for _ in range(6)))
        )

        store = Store.open(url)
        inner = LocalMiniLMEmbedder(  # as the server's (ENGRAM_EMBEDDING_*)
            batch_size=settings.embedding_batch,
            batch_tokens=settings.embedding_batch_tokens,
            threads=settings.embedding_threads,
        )
        cache = EmbeddingCache(args.cache_dir, inner.name, inner.dim)
        log(f"embedding cache {cache.path}: {cache.count()} vectors")
        embedder = CachedEmbedder(inner, cache)
        vectors = Vectors(settings, store, embedder=embedder)  # type: ignore[arg-type]
        index = vectors.index()
        if index is None:
            log(f"vector index unavailable: {vectors.problem}")
            return 1
        inner.load()
        log(f"after opening store, Chroma and the model: {rss_line()}")

        factory = bench_spine.new_factory(FACTORY_SEED, FACTORY_PREFIX)
        have = 0
        if args.reuse:  # measure the kept store as it is: no observation is added
            with store.read() as conn:
                have = int(conn.execute(text("SELECT count(*) FROM observations")).scalar_one())
            args.sizes = [have]
            log(f"reusing {workdir}: {have} observations")
        for size in args.sizes:
            build = Build(size)
            log(f"[{size}] growing the store {have} -> {size} observations; load {load_avg()}")
            build.insert_s = (
                insert(store, settings, factory, size - have, args.insert_batch)
                if size > have
                else 0.0
            )
            have = size
            embedded0 = embedder.embedded
            build.vector_s, build.vector_docs = drain_vectors(
                store, index, embedder, args.embed_batch
            )
            build.embedded = embedder.embedded - embedded0
            build.graph_s, build.graph_docs = drain_graph_progress(store)
            build.chroma_docs = index.count()
            build.rss = rss_mb()
            builds.append(build)
            with store.read() as conn:
                docs = store.keyword.count(conn)
            log(
                f"[{size}] built: {docs} keyword documents, {build.chroma_docs} vectors; "
                f"{rss_line()}"
            )
            embedder.use_cache = False
            results.append(measure(size, store, vectors, index, settings, args))
            embedder.use_cache = True
            log(f"[{size}] after queries: {rss_line()}")
        cache.close()
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        if store is not None:
            store.close()
        if drop is not None and not args.keep:
            drop()
        if remove:
            shutil.rmtree(workdir, ignore_errors=True)
        elif results or builds:
            log(f"kept {workdir}")
    print_table(builds, results, args, command, store_line, watch.elapsed())
    return 0


if __name__ == "__main__":
    sys.exit(main())
