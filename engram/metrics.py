"""Prometheus metrics: what ``/v1/status`` reports, as numbers a scraper keeps and alerts on.

The gateway serves them at ``GET /metrics`` (bearer secret, like every other route) in the text
exposition format. Everything that must agree across processes comes from the store of record:
the event ledger's states, the inbox, the derive queues, accept-to-stored latency over the last
``LATENCY_WINDOW_SECONDS``, LLM spend. What only this process sees (the capture requests it
answered) is a counter of this process; Prometheus tells replicas apart by their ``instance``.
Queue lengths are read from the broker (distributed mode); worker memory from the workers'
own answers, as status reads it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from engram.schema import event_ledger

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text exposition format's content type."""
LATENCY_WINDOW_SECONDS = 300.0
"""Accept-to-stored latency is taken over the events stored in the last five minutes."""
LATENCY_QUANTILES = (0.5, 0.95, 0.99)
LATENCY_SAMPLE = 5000
"""At most this many of the newest stored events are read for the quantiles (bounded scrape)."""
CAPTURE_OUTCOMES = ("accepted", "duplicate", "retrying", "rejected", "unavailable")
"""What ``POST /v1/observe`` answered, by outcome (``engram_capture_requests_total``):
201, 200, 202, any 4xx, 503 (inbox full or the store away: the client spools and resends)."""

Sample = tuple[Mapping[str, str], float]


def capture_outcome(status: int) -> str | None:
    """The outcome a ``POST /v1/observe`` answer's status stands for (None: a server error)."""
    if status in (200, 201, 202):
        return {201: "accepted", 200: "duplicate", 202: "retrying"}[status]
    if status == 503:
        return "unavailable"
    return "rejected" if 400 <= status < 500 else None


class Counts:
    """This process's counters, safe across the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, key: str) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class Family:
    """One metric family: its help, its type and its samples (labels, value)."""

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.samples: list[Sample] = []

    def add(self, value: float | None, **labels: str) -> Family:
        if value is not None:
            self.samples.append((labels, float(value)))
        return self

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        for labels, value in self.samples:
            out.append(f"{self.name}{_labels(labels)} {_number(value)}")
        return out


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escape(str(value))}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render(families: Iterable[Family]) -> str:
    """The text exposition format (version 0.0.4), one family after another."""
    return "\n".join(line for family in families for line in family.lines()) + "\n"


def ledger_states(conn: Connection) -> dict[str, int]:
    """Captured events by ledger state (accepted, stored, dead, forgotten)."""
    rows = conn.execute(
        select(event_ledger.c.state, func.count()).group_by(event_ledger.c.state)
    ).all()
    return {str(state): int(count) for state, count in rows}


def recent_latencies(conn: Connection, now: float | None = None) -> list[float]:
    """Accept-to-stored seconds of the events stored in the last ``LATENCY_WINDOW_SECONDS``
    (the newest ``LATENCY_SAMPLE`` of them), read through the ledger's stored-time index."""
    since = (now if now is not None else time.time()) - LATENCY_WINDOW_SECONDS
    c = event_ledger.c
    rows = conn.execute(
        select(c.stored_at - c.accepted_at)
        .where(c.stored_at >= since)
        .order_by(c.stored_at.desc())
        .limit(LATENCY_SAMPLE)
    ).scalars()
    return [max(float(seconds), 0.0) for seconds in rows if seconds is not None]


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def families(
    report: Mapping[str, Any],
    ledger: Mapping[str, int],
    latencies: Sequence[float],
    queues: Mapping[str, int],
    requests: Mapping[str, int],
) -> list[Family]:
    """Every family, from a status ``report`` (engram.status.collect), the ledger's states,
    recent latencies, broker queue lengths and this process's capture request counts."""
    out: list[Family] = []
    up = Family("engram_up", "gauge", "1 when status finds no problem, 0 otherwise")
    out.append(up.add(1 if report.get("ok") else 0))
    problems = Family(
        "engram_problems", "gauge", "Problems /v1/status names, by component (its fix is there)"
    )
    by_component: dict[str, int] = {}
    for problem in report.get("problems", []):
        component = str(problem.get("component", "unknown"))
        by_component[component] = by_component.get(component, 0) + 1
    for component, count in sorted(by_component.items()):
        problems.add(count, component=component)
    out.append(problems)
    store = report.get("store", {})
    out.append(
        Family("engram_store_up", "gauge", "1 when the store of record answers").add(
            1 if store.get("ok") else 0
        )
    )
    out.append(
        Family("engram_schema_version", "gauge", "The store's last applied migration").add(
            store.get("schemaVersion")
        )
    )
    broker = report.get("broker", {})
    out.append(
        Family("engram_broker_up", "gauge", "1 when the broker answers").add(
            1 if broker.get("ok") else 0 if broker else None
        )
    )
    workers = report.get("workers", {})
    out.append(
        Family("engram_workers", "gauge", "Worker pools that answered (embedded: 1)").add(
            workers.get("alive")
        )
    )
    events = Family(
        "engram_capture_events",
        "gauge",
        "Captured events by state in the event ledger (stored exactly once, dead letters, "
        "forgotten; accepted = not yet stored), across every process",
    )
    for state in ("accepted", "stored", "dead", "forgotten"):
        events.add(ledger.get(state, 0), state=state)
    out.append(events)
    answered = Family(
        "engram_capture_requests_total",
        "counter",
        "POST /v1/observe answers of this gateway process since it started, by outcome",
    )
    for outcome in CAPTURE_OUTCOMES:
        answered.add(requests.get(outcome, 0), outcome=outcome)
    out.append(answered)
    inbox = report.get("inbox", {})
    waiting = Family("engram_inbox_events", "gauge", "Captured events in the inbox, by state")
    for state in ("pending", "processing", "retrying", "dead"):
        waiting.add(inbox.get(state), state=state)
    out.append(waiting)
    out.append(
        Family("engram_inbox_capacity", "gauge", "ENGRAM_INBOX_MAX: past it captures get 503").add(
            inbox.get("capacity")
        )
    )
    out.append(
        Family(
            "engram_inbox_oldest_waiting_seconds",
            "gauge",
            "Age of the oldest capture not yet stored (0 when none waits)",
        ).add(inbox.get("oldestWaitingSeconds"))
    )
    latency = Family(
        "engram_capture_latency_seconds",
        "gauge",
        f"Accept-to-stored seconds of the events stored in the last "
        f"{LATENCY_WINDOW_SECONDS:.0f} s, by quantile (NaN when none was stored)",
    )
    for q in LATENCY_QUANTILES:
        latency.add(quantile(latencies, q), quantile=str(q))
    out.append(latency)
    out.append(
        Family(
            "engram_capture_stored_recent",
            "gauge",
            f"Events stored in the last {LATENCY_WINDOW_SECONDS:.0f} s (at most {LATENCY_SAMPLE})",
        ).add(len(latencies))
    )
    pending = Family("engram_derived_pending", "gauge", "Changes queued for a derived index")
    lag = Family(
        "engram_derived_lag_seconds",
        "gauge",
        "How far a derived index is behind the store: age of its oldest queued change",
    )
    for index, state in sorted(report.get("derived", {}).items()):
        pending.add(state.get("pending"), index=index)
        lag.add(state.get("lagSeconds"), index=index)
    out += [pending, lag]
    docs = Family("engram_documents", "gauge", "Stored documents by kind")
    for kind, key in (
        ("observation", "observations"),
        ("session", "sessions"),
        ("memory", "memories"),
        ("keyword", "keywordDocs"),
    ):
        docs.add(report.get("indexes", {}).get("keyword", {}).get(key), kind=kind)
    out.append(docs)
    queue = Family("engram_queue_length", "gauge", "Tasks waiting in the broker, by queue")
    for name, length in sorted(queues.items()):
        queue.add(length, queue=name)
    out.append(queue)
    memory = report.get("memory", {})
    rss = Family(
        "engram_process_resident_bytes",
        "gauge",
        "Resident memory of each Engram process that answered (the gateway, worker processes)",
    )
    peak = Family("engram_process_peak_resident_bytes", "gauge", "Peak resident memory")
    for who, mem in sorted(memory.get("processes", {}).items()):
        rss.add(mem.get("rssMb", 0) * 1e6, process=who)
        peak.add(mem.get("peakRssMb", 0) * 1e6, process=who)
    out += [rss, peak]
    out.append(
        Family("engram_memory_budget_bytes", "gauge", "ENGRAM_MEMORY_BUDGET_MB, per process").add(
            memory.get("budgetMb", 0) * 1e6 if memory else None
        )
    )
    out += _llm(report.get("llm", {}))
    return out


def _llm(llm: Mapping[str, Any]) -> list[Family]:
    """Today's LLM spend (UTC day) and its backlog; nothing when no provider is set."""
    budget = llm.get("budget")
    if not budget:
        return []
    tokens = Family("engram_llm_tokens_today", "gauge", "LLM tokens spent today (UTC), by provider")
    usd = Family("engram_llm_usd_today", "gauge", "LLM spend today (UTC) in USD, by provider")
    tokens.add(budget.get("tokens"), provider="total")
    usd.add(budget.get("usd"), provider="total")
    for name, part in sorted(budget.get("providers", {}).items()):
        tokens.add(part.get("tokens"), provider=name)
        usd.add(part.get("usd"), provider=name)
    backlog = Family("engram_llm_backlog", "gauge", "LLM work items waiting, by task")
    for task, count in sorted(llm.get("backlog", {}).get("byTask", {}).items()):
        backlog.add(count, task=task)
    return [tokens, usd, backlog]
