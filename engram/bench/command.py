"""``engram bench``: load a dataset, run the retrievers, print the table, write JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from engram.bench import report
from engram.bench.datasets import DatasetError, limit_queries, load, only_categories
from engram.bench.options import (
    CONTEXT_DATASETS,
    CONTEXT_ONLY,
    SERVER_NEIGHBOUR_SUPPORT,
    SERVER_SESSION_SUPPORT,
)
from engram.bench.retrievers import RETRIEVERS, RetrieverOptions
from engram.bench.runner import run
from engram.embedders.base import EmbedderError
from engram.embedders.factory import local_embedder

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
REPO_ROOT = Path(__file__).resolve().parents[2]
FUSED_RETRIEVERS = ("hybrid", "hybrid+graph")
"""Retrievers that fuse streams (and rerank with --reranker): the report says how they ranked."""


def default_data_dir() -> Path:
    """ENGRAM_BENCH_DATA, else ``../shared/data`` beside the repository checkout."""
    env = os.environ.get("ENGRAM_BENCH_DATA")
    return Path(env) if env else (REPO_ROOT.parent / "shared" / "data")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"engram bench: {message}", file=sys.stderr)
    return code


def main(args: argparse.Namespace) -> int:
    if args.context or args.dataset in CONTEXT_ONLY:
        return _context(args)
    names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
    unknown = [n for n in names if n not in RETRIEVERS]
    if not names or unknown:
        return _fail(
            f"unknown retriever {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(RETRIEVERS)}"
        )
    if args.limit is not None and args.limit < 1:
        return _fail("--limit must be at least 1")
    if args.bm25_weight < 0 or args.vector_weight < 0 or args.bm25_weight + args.vector_weight <= 0:
        return _fail("--bm25-weight and --vector-weight must be >= 0, not both 0")
    if args.graph_weight < 0:
        return _fail("--graph-weight must be >= 0")
    if args.fusion_depth < 1:
        return _fail("--fusion-depth must be at least 1")
    if args.session_support is not None and not args.session_support >= 0:  # NaN too
        return _fail("--session-support must be >= 0")
    if args.neighbour_support is not None and not args.neighbour_support >= 0:
        return _fail("--neighbour-support must be >= 0")
    beside = _shares(SERVER_NEIGHBOUR_SUPPORT, args.neighbour_support)
    # the server's shares: ranked search, and ranked search the reranker reads; one given sets both
    support = (
        SERVER_SESSION_SUPPORT["search"] if args.session_support is None else args.session_support
    )
    reranked_support = (
        SERVER_SESSION_SUPPORT["reranked"] if args.session_support is None else args.session_support
    )
    if args.rrf_k < 0:
        return _fail("--rrf-k must be >= 0")
    if not args.feedback >= 0:  # NaN too
        return _fail("--feedback must be >= 0")
    if args.per_session < 0:
        return _fail("--per-session must be >= 0")
    if args.rerank_depth < 1:
        return _fail("--rerank-depth must be at least 1")
    reranker = None
    if args.reranker == "local":
        from engram.rerank import LocalCrossEncoder, RerankError

        reranker = LocalCrossEncoder()
        try:
            reranker.load()
        except RerankError as exc:
            return _fail(str(exc))
    cache_dir = Path(args.cache_dir).expanduser() if args.cache_dir else None
    embedder = None
    if any(n in ("vector", "hybrid", "hybrid+graph") for n in names):
        embedder = local_embedder(args.embedder, batch_size=32)
    retriever_options = RetrieverOptions(
        cache_dir=cache_dir,
        bm25_weight=args.bm25_weight,
        vector_weight=args.vector_weight,
        fusion_depth=args.fusion_depth,
        rrf_k=args.rrf_k,
        graph_weight=args.graph_weight,
        fusion=args.fusion,
        session_support=support,
        reranked_support=reranked_support,
        neighbour_support=beside["search"],
        reranked_neighbour_support=beside["reranked"],
        embedder=embedder,
        reranker=reranker,
        rerank_depth=args.rerank_depth,
        feedback=args.feedback,
        per_session=args.per_session,
    )
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    started = time.perf_counter()
    _progress(f"loading {args.dataset} from {data_dir} ...")
    try:
        dataset = load(args.dataset, data_dir, args.level, args.protocol, args.session_docs)
        dataset = only_categories(dataset, args.category)
    except DatasetError as exc:
        return _fail(str(exc))
    except (OSError, ValueError, KeyError) as exc:
        return _fail(f"cannot read {args.dataset} from {data_dir}: {exc!r}", EXIT_FAILURE)
    dataset = limit_queries(dataset, args.limit)
    _progress(
        f"loaded {len(dataset.docs)} documents, {len(dataset.queries)} questions "
        f"({time.perf_counter() - started:.1f}s); {'; '.join(dataset.notes)}"
    )
    if not dataset.queries:
        return _fail("no question can be scored with these options", EXIT_FAILURE)
    try:
        results = run(dataset, names, _progress, max(1, args.progress_every), retriever_options)
    except EmbedderError as exc:
        return _fail(str(exc), EXIT_FAILURE)
    for result in results:
        if result.prepare_seconds:
            _progress(
                f"[{result.name}] embedding/cache lookup took "
                f"{result.prepare_seconds:.1f}s of {result.index_seconds:.1f}s indexing"
            )
    notes = []
    if any(name in FUSED_RETRIEVERS for name in names):
        shown = reranked_support if reranker is not None else support
        notes.append(
            report.fusion_note(args.fusion, shown, args.reranker, args.rerank_depth, args.feedback)
        )
    notes.append(report.page_note(args.per_session))
    print(report.render(dataset, results, args.session_docs, args.markdown, notes))
    if args.json:
        options = {
            "retrievers": names,
            "limit": args.limit,
            "category": args.category,
            "dataDir": str(data_dir),
            "bm25Weight": args.bm25_weight,
            "vectorWeight": args.vector_weight,
            "fusionDepth": args.fusion_depth,
            "rrfK": args.rrf_k,
            "fusion": args.fusion,
            "sessionSupport": support,
            "feedback": args.feedback,
            "perSession": args.per_session,
            "rerankedSupport": reranked_support if reranker is not None else None,
            "neighbourSupport": beside["reranked" if reranker is not None else "search"],
            "reranker": args.reranker,
            "rerankDepth": args.rerank_depth if reranker is not None else None,
            "graphWeight": args.graph_weight,
            "embedder": embedder.name if embedder is not None else None,
        }
        document = report.as_json(dataset, results, args.session_docs, options)
        return _write_json(args.json, document)
    return EXIT_OK


def _shares(server: dict[str, float], given: float | None) -> dict[str, float]:
    """The server's share for each caller, or the one ``given`` for all."""
    return dict(server) if given is None else dict.fromkeys(server, given)


def _write_json(path: str, document: Any) -> int:
    try:
        Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write {path}: {exc.strerror or exc}", EXIT_FAILURE)
    _progress(f"wrote {path}")
    return EXIT_OK


def _context(args: argparse.Namespace) -> int:
    from engram.bench import context

    if args.dataset not in CONTEXT_DATASETS:
        return _fail(f"--context runs on {', '.join(CONTEXT_DATASETS)}, not {args.dataset}")
    if not args.context:
        return _fail(f"{args.dataset} is a context benchmark: add --context")
    if args.limit is not None and args.limit < 1:
        return _fail("--limit must be at least 1")
    if args.category:
        return _fail("--category picks questions of the retrieval benchmarks, not of --context")
    try:
        budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        return _fail(f"--budgets must be integers, got {args.budgets!r}")
    if not budgets or any(b < 50 for b in budgets):
        return _fail("--budgets: at least one budget, each at least 50 tokens")
    _progress(f"context benchmark on {args.dataset}, budgets {budgets} ...")
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    try:
        data = None
        if args.dataset == "longmemeval-s":
            path = data_dir / "longmemeval" / "longmemeval_s_cleaned_498.json.gz"
            data = context.load_longmemeval(path, args.limit if args.limit else 30)
        elif args.dataset == "locomo":
            data = context.load_locomo(data_dir / "locomo" / "locomo10.json", args.limit or 200)
        context_support = (
            SERVER_SESSION_SUPPORT["context"]
            if args.session_support is None
            else args.session_support
        )
        search = {
            "ENGRAM_FUSION": args.fusion,
            "ENGRAM_RRF_K": str(args.rrf_k),
            "ENGRAM_SESSION_SUPPORT": f"search={SERVER_SESSION_SUPPORT['search']},"
            f"reranked={SERVER_SESSION_SUPPORT['reranked']},context={context_support}",
            "ENGRAM_NEIGHBOUR_SUPPORT": ",".join(
                f"{caller}={share}"
                for caller, share in _shares(
                    SERVER_NEIGHBOUR_SUPPORT, args.neighbour_support
                ).items()
            ),
            "ENGRAM_SEARCH_WEIGHTS": f"bm25={args.bm25_weight},vector={args.vector_weight},"
            f"graph={args.graph_weight}",
            "ENGRAM_SEARCH_FEEDBACK": str(args.feedback),
        }
        llm_env = None
        if args.context_llm:
            llm_env = {k: v for k, v in os.environ.items() if k.startswith("ENGRAM_LLM_")}
        result = context.run_coding(
            budgets, args.context_embedder, _progress, data=data, search=search, llm_env=llm_env
        )
    except OSError as exc:
        return _fail(f"cannot read {args.dataset} from {data_dir}: {exc}", EXIT_FAILURE)
    except (context.ContextDataError, EmbedderError) as exc:
        return _fail(str(exc), EXIT_FAILURE)
    result["environment"] = report.environment()
    print(context.render(result))
    return _write_json(args.json, result) if args.json else EXIT_OK
