"""What is wrong and how to fix it: one report shared by /v1/status and `engram status`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from engram import derive, graph, heartbeat, inbox
from engram.db import schema_version
from engram.memory import process_memory
from engram.rerank import Reranker, RerankError, depth_within, local_files
from engram.schema import capture_inbox, memories, observations, sessions
from engram.settings import Settings
from engram.store import Store
from engram.vectors import Vectors

WorkerProbe = Callable[[], dict[str, Any]]
STALE_PENDING_SECONDS = 120.0
"""An inbox entry older than this while workers are up suggests the pools cannot keep pace."""
MEMORY_WARN_SHARE = 0.9
"""A process at this share of ENGRAM_MEMORY_BUDGET_MB is named as a problem."""
DERIVED_LAG_WARN_SECONDS = 900.0
"""A derived index this far behind the store (its oldest queued change) is named as a problem."""
RERANK_OVERRUN = 1.25
"""A reranked search whose passages cost more than this share of ENGRAM_RERANK_BUDGET_MS is
named as a problem: the budget reads at least ``rerank.MIN_DEPTH`` passages, so on a slow CPU
it cannot hold. Below it the overrun is the estimate moving with the machine's load."""


Problems = list[dict[str, str]]


def _problem(problems: Problems, component: str, problem: str, fix: str) -> None:
    problems.append({"component": component, "problem": problem, "fix": fix})


def collect(
    settings: Settings,
    store: Store,
    broker_probe: Callable[[], str | None],
    worker_probe: WorkerProbe,
    vectors: Vectors | None = None,
    reranker: tuple[Reranker | None, str | None] = (None, None),
) -> dict[str, Any]:
    """The status report: each component's state and every problem with its fix.
    ``reranker``: the search reranker and the reason it could not be built, if any."""
    problems: Problems = []
    report: dict[str, Any] = {"mode": "embedded" if settings.embedded else "distributed"}
    try:
        read = _read_store(store)
    except SQLAlchemyError as exc:
        report["store"] = {"ok": False, "error": str(exc).splitlines()[0]}
        _problem(
            problems,
            "store",
            f"store unreachable: {exc}".splitlines()[0],
            "check ENGRAM_DATABASE_URL and that the database server runs",
        )
        return {"ok": False, **report, "problems": problems}
    report["store"] = {
        "ok": True,
        "dialect": store.dialect,
        "schemaVersion": schema_version(store.engine),
        "url": redact_url(settings.database_url),
    }
    _broker(report, problems, settings, broker_probe())
    workers = report["workers"] = worker_probe()
    _workers(problems, settings, workers)
    _sweeper(report, problems, settings, read["sweep"])
    _inbox(report, problems, settings, read, bool(workers.get("alive")))
    _derived(report, problems, settings, store, read["sizes"], bool(workers.get("alive")))
    _memory(report, problems, settings, workers)
    _vectors(report, problems, settings, vectors)
    _reranker(report, problems, settings, *reranker)
    _llm(report, problems, settings, store)
    return {"ok": not problems, **report, "problems": problems}


def _llm(report: dict[str, Any], problems: Problems, settings: Settings, store: Store) -> None:
    """LLM work: off (no call is ever made), or today's spend against the budget and the
    backlog."""
    if not settings.llm_providers:
        report["llm"] = {"providers": [], "state": "off: no provider set, heuristics only"}
        return
    from engram.llm.chain import budget_from_settings
    from engram.llm.work import TARGETS, TASK_OF

    spend = budget_from_settings(settings, store).report()
    with store.read() as conn:
        by_task = {TASK_OF[t]: derive.pending(conn, t) for t in TARGETS}
        oldest = min(
            (at for t in TARGETS if (at := derive.oldest_enqueued(conn, t)) is not None),
            default=None,
        )
        error = next((e for t in TARGETS if (e := derive.last_error(conn, t))), None)
    pending = sum(by_task.values())
    report["llm"] = {
        "providers": list(settings.llm_providers),
        "budget": spend,
        "backlog": {
            "pending": pending,
            "byTask": by_task,
            "maxPerTask": settings.llm_backlog_max,
            "oldestSeconds": None if oldest is None else round(time.time() - oldest, 1),
            "lastError": error,
        },
    }
    places = [("total", spend)] + list(spend["providers"].items())
    for name, part in places:
        where = "the daily LLM budget" if name == "total" else f"{name}'s daily LLM budget"
        if part["state"] == "spent":
            _problem(
                problems,
                "llm",
                f"{where} is spent (${part['usd']:.2f}, {part['tokens']:,} tokens): heuristics "
                "stand in for LLM work until 00:00 UTC",
                "raise ENGRAM_LLM_DAILY_USD / ENGRAM_LLM_DAILY_TOKENS (or the provider's pair in "
                "ENGRAM_LLM_PROVIDER_BUDGETS) if that is intended",
            )
        elif part["state"] == "near":
            _problem(
                problems,
                "llm",
                f"{where} is nearly spent (${part['usd']:.2f}, {part['tokens']:,} tokens)",
                "nothing to do unless it should last longer: see `engram usage` for what spent it",
            )
    if error and pending:
        _problem(
            problems,
            "llm",
            f"{pending} LLM work items wait; the last failed: {error}",
            "check the provider settings (docs/providers.md); failed items are tried 3 times, "
            "then their heuristic result stands",
        )


def _read_store(store: Store) -> dict[str, Any]:
    with store.read() as conn:
        conn.execute(text("SELECT 1"))
        return {
            "counts": inbox.counts(conn),
            "oldest": conn.execute(
                select(func.min(capture_inbox.c.created_at)).where(
                    capture_inbox.c.state.in_(inbox.WAITING_STATES)
                )
            ).scalar(),
            "sweep": heartbeat.last(conn, heartbeat.SWEEPER),
            "sizes": {
                "observations": conn.execute(
                    select(func.count()).select_from(observations)
                ).scalar_one(),
                "sessions": conn.execute(select(func.count()).select_from(sessions)).scalar_one(),
                "memories": conn.execute(
                    select(func.count())
                    .select_from(memories)
                    .where(memories.c.forgotten_at.is_(None))
                ).scalar_one(),
                "keywordDocs": store.keyword.count(conn),
            },
        }


def _broker(
    report: dict[str, Any], problems: Problems, settings: Settings, error: str | None
) -> None:
    report["broker"] = {
        "ok": error is None,
        "url": "memory:// (in-process)" if settings.embedded else redact_url(settings.broker_url),
    }
    if error:
        report["broker"]["error"] = error
        _problem(
            problems,
            "broker",
            f"broker unreachable: {error}",
            "start Redis or fix ENGRAM_BROKER_URL; captures are kept in the "
            "inbox meanwhile and dispatched by the sweeper when it is back",
        )


def _workers(problems: Problems, settings: Settings, workers: dict[str, Any]) -> None:
    if not workers.get("alive"):
        _problem(
            problems,
            "workers",
            "no worker is answering: captures wait in the inbox",
            "restart `engram serve`"
            if settings.embedded
            else "start a worker pool: `engram worker` (and one `engram beat`)",
        )


def _sweeper(report: dict[str, Any], problems: Problems, settings: Settings, sweep: Any) -> None:
    sweep_age = time.time() - sweep[0] if sweep else None
    report["sweeper"] = {
        "lastSweepSecondsAgo": None if sweep_age is None else round(sweep_age, 1),
        "intervalSeconds": settings.sweep_interval_seconds,
    }
    if sweep_age is None or sweep_age > max(3 * settings.sweep_interval_seconds, 60.0):
        _problem(
            problems,
            "sweeper",
            "the inbox sweeper has not run "
            + ("yet" if sweep_age is None else f"for {sweep_age:.0f}s")
            + ": captures whose task was lost are not re-sent",
            "restart `engram serve`"
            if settings.embedded
            else "run exactly one scheduler: `engram beat`",
        )


def _inbox(
    report: dict[str, Any],
    problems: Problems,
    settings: Settings,
    read: dict[str, Any],
    workers_alive: bool,
) -> None:
    counts, oldest = read["counts"], read["oldest"]
    age = time.time() - oldest if oldest else 0.0
    waiting = sum(counts[s] for s in inbox.WAITING_STATES)
    report["inbox"] = {
        **counts,
        "waiting": waiting,
        "capacity": settings.inbox_max,
        "oldestWaitingSeconds": round(age, 1),
    }
    report["deadLetters"] = counts[inbox.DEAD]
    if counts[inbox.DEAD]:
        _problem(
            problems,
            "capture",
            f"{counts[inbox.DEAD]} captured "
            "events are dead letters (processing failed on every attempt)",
            "see GET /v1/capture?state=dead for the errors, fix the cause, "
            'then POST /v1/capture/retry {"all": true}',
        )
    if waiting >= settings.inbox_max * 0.8:
        _problem(
            problems,
            "capture",
            f"inbox {waiting}/{settings.inbox_max} full: new captures will be refused with 503",
            "raise ENGRAM_WORKER_CONCURRENCY or ENGRAM_INBOX_MAX"
            if settings.embedded
            else "add workers (`engram worker`) or raise ENGRAM_INBOX_MAX",
        )
    elif waiting and age > STALE_PENDING_SECONDS and workers_alive:
        _problem(
            problems,
            "capture",
            f"oldest waiting capture is {age:.0f}s old",
            "check the worker logs; add workers if they are busy",
        )


def _derived(
    report: dict[str, Any],
    problems: Problems,
    settings: Settings,
    store: Store,
    sizes: dict[str, int],
    workers_alive: bool,
) -> None:
    report["indexes"] = {"keyword": {"backend": store.keyword.name, **sizes}}
    with store.read() as conn:
        report["indexes"]["graph"] = {**graph.stats(conn), "pending": derive.pending(conn, "graph")}
        report["derived"] = derived_lag(conn, settings)
    if settings.embedded and store.bulk_running():
        for lag in report["derived"].values():
            lag["waitingFor"] = "import"  # the embedded lanes wait for it by design (engram.lane)
    for target, lag in report["derived"].items():
        if (
            lag["lagSeconds"] > DERIVED_LAG_WARN_SECONDS
            and workers_alive
            and not lag.get("waitingFor")
        ):
            _problem(
                problems,
                target,
                f"the {target} index is {lag['lagSeconds']:.0f}s behind the store "
                f"({lag['pending']} changes queued)",
                "it catches up when capture pauses; if it keeps growing, run an embed/graph "
                "worker pool (`engram worker -Q embed,graph`) or ENGRAM_EMBEDDER=none",
            )


def _memory(
    report: dict[str, Any], problems: Problems, settings: Settings, workers: dict[str, Any]
) -> None:
    report["memory"] = memory_report(settings, workers)
    for who, mem in report["memory"]["processes"].items():
        if max(mem["rssMb"], mem["peakRssMb"]) >= MEMORY_WARN_SHARE * settings.memory_budget_mb:
            _problem(
                problems,
                "memory",
                f"{who} holds {mem['rssMb']:.0f} MB (peak {mem['peakRssMb']:.0f} MB) of a "
                f"{settings.memory_budget_mb} MB budget",
                "lower ENGRAM_EMBEDDING_BATCH_TOKENS or ENGRAM_WORKER_CONCURRENCY, or "
                "raise ENGRAM_MEMORY_BUDGET_MB if the machine has room",
            )


def _vectors(
    report: dict[str, Any], problems: Problems, settings: Settings, vectors: Vectors | None
) -> None:
    vector_report = vectors.status() if vectors is not None else {"enabled": False}
    report["embedder"] = {"name": settings.embedder, "vectorSearch": bool(vector_report.get("ok"))}
    report["indexes"]["vector"] = vector_report
    if vector_report.get("enabled") and not vector_report.get("ok"):
        _problem(
            problems,
            "vectors",
            f"vector search is off: {vector_report.get('problem')}",
            "fix the cause named; hybrid search answers with keyword and graph meanwhile",
        )
    elif vector_report.get("lastError") and vector_report.get("pending"):
        _problem(
            problems,
            "vectors",
            f"{vector_report['pending']} documents wait for embedding; last error: "
            f"{vector_report['lastError']}",
            "check the embedder and Chroma; the embed task retries with backoff",
        )


def _reranker(
    report: dict[str, Any],
    problems: Problems,
    settings: Settings,
    chosen: Reranker | None,
    problem: str | None,
) -> None:
    """What reranks POST /v1/search: its kind and depth; for the local model its time budget,
    and once a search has measured it, its cost per passage and how many passages that budget
    reads (never loads the model)."""
    if settings.reranker == "off":
        report["reranker"] = {"kind": "off"}
        return
    entry: dict[str, Any] = {"kind": settings.reranker, "depth": settings.rerank_depth}
    budget = 0.0
    if settings.reranker == "local":
        budget = entry["budgetMs"] = settings.rerank_budget_ms
        try:
            local_files()
        except RerankError as exc:
            problem = problem or str(exc)
    if chosen is not None:
        entry["name"] = chosen.name
        if chosen.pair_ms is not None:
            entry["passageMs"] = round(chosen.pair_ms, 1)
            reads = entry["reads"] = depth_within(chosen, budget, settings.rerank_depth)
            _rerank_overrun(problems, budget, reads, chosen.pair_ms)
    if problem:
        entry["problem"] = problem
        _problem(
            problems,
            "reranker",
            f"search is not reranked: {problem}",
            "install it (pip install 'engram-memory[rerank]') or fix ENGRAM_RERANKER_URL, or "
            "set ENGRAM_RERANKER=off; search answers in fusion's order meanwhile",
        )
    report["reranker"] = entry


def _rerank_overrun(problems: Problems, budget: float, reads: int, passage_ms: float) -> None:
    """Name a budget the local reranker cannot keep on this machine (``RERANK_OVERRUN``)."""
    spent = reads * passage_ms
    if budget <= 0 or spent <= budget * RERANK_OVERRUN:
        return
    _problem(
        problems,
        "reranker",
        f"reranking takes ~{spent:.0f} ms a search here, over its {budget:.0f} ms budget: it "
        f"reads at least {reads} passages and one costs {passage_ms:.1f} ms on this CPU",
        f"set ENGRAM_RERANK_BUDGET_MS={math.ceil(spent)} to accept that, "
        "ENGRAM_RERANK_THREADS=2 if a core is free, or ENGRAM_RERANKER=off (fusion's order, "
        "no model)",
    )


def derived_lag(conn: Any, settings: Settings) -> dict[str, dict[str, Any]]:
    """How far each derived index is behind the store: changes queued and the age of the
    oldest (0 when caught up)."""
    at = time.time()
    targets = ["graph"] + ([] if settings.embedder == "none" else ["vector"])
    lags: dict[str, dict[str, Any]] = {}
    for target in targets:
        oldest = derive.oldest_enqueued(conn, target)
        lags[target] = {
            "pending": derive.pending(conn, target),
            "lagSeconds": 0.0 if oldest is None else round(max(at - oldest, 0.0), 1),
        }
    return lags


def memory_report(settings: Settings, workers: dict[str, Any]) -> dict[str, Any]:
    """Resident memory of this process (the gateway, and in embedded mode its worker) and of
    every worker process that answered, against ENGRAM_MEMORY_BUDGET_MB."""
    processes: dict[str, dict[str, float]] = {}
    own = process_memory()
    if own is not None:
        processes["gateway" if not settings.embedded else "server"] = own
    for name, pids in (workers.get("memory") or {}).items():
        for pid, mem in pids.items():
            processes[f"worker {name} pid {pid}"] = mem
    return {"budgetMb": settings.memory_budget_mb, "processes": processes}


def redact_url(url: str) -> str:
    """A URL with its password hidden, for display."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:  # SQLAlchemy parses any scheme://user:password@host URL, redis:// included
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        head, sep, tail = url.partition("@")
        return f"{head.split(':')[0]}://***@{tail}" if sep else url
