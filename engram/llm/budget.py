"""The daily cost ceiling: tokens and money per UTC day, in total and per provider, counted from
each response's ``usage`` with a price table you can override.

Before a call the chain asks ``Budget.allows`` with the call's worst case (its prompt's estimated
tokens plus the output cap, priced): a call that could cross a hard limit is not made and is
counted as ``refused``; the task's heuristic result stands. Past ``ENGRAM_LLM_SOFT_FRACTION`` of
a limit the status warns. Every process reads the same ledger (the ``llm_usage`` table), so the
limit holds across a team's workers; concurrent calls can overshoot it by at most one call's
worst case each (the ledger is read, then written after the answer).

Prices are USD per million tokens, input/output, as the providers published them in 2025; a model
is priced by the longest entry its name starts with (``gpt-4o-mini-2024-07-18`` by
``gpt-4o-mini``), and a model no entry names by ``*``, which is deliberately dear so an unknown
paid model cannot slip under the money limit. A local server (Ollama, vLLM) costs nothing:
``ENGRAM_LLM_PRICES=*=0/0``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from engram import schema
from engram.sql import dialect_insert
from engram.store import Store

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o4-mini": (1.10, 4.40),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "*": (15.00, 75.00),
}

COUNTERS = (
    "calls",
    "failures",
    "invalid",
    "refused",
    "dropped",
    "input_tokens",
    "output_tokens",
    "usd",
)


class PriceTable:
    def __init__(self, overrides: Iterable[tuple[str, float, float]] = ()) -> None:
        self.prices = dict(DEFAULT_PRICES)
        self.prices.update({model: (cost_in, cost_out) for model, cost_in, cost_out in overrides})

    def per_million(self, model: str) -> tuple[float, float]:
        name = model.lower()
        best = max(
            (key for key in self.prices if key != "*" and name.startswith(key)),
            key=len,
            default="*",
        )
        return self.prices[best]

    def usd(self, model: str, input_tokens: int, output_tokens: int) -> float:
        cost_in, cost_out = self.per_million(model)
        return (input_tokens * cost_in + output_tokens * cost_out) / 1_000_000


def today(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if at is None else at))


@dataclass
class Spend:
    tokens: int = 0
    usd: float = 0.0


@dataclass
class Limits:
    """Hard daily limits: ``tokens`` and ``usd`` in total, and per provider where set (a 0 in a
    provider's pair leaves that measure to the total)."""

    tokens: int
    usd: float
    per_provider: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    soft_fraction: float = 0.8


class Ledger:
    """The ``llm_usage`` table: counted by day, provider, model and task."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(
        self, provider: str, model: str, task: str, at: float | None = None, **counts: Any
    ) -> None:
        unknown = set(counts) - set(COUNTERS)
        if unknown:
            raise ValueError(f"unknown counters: {', '.join(sorted(unknown))}")
        table = schema.llm_usage
        key = {"day": today(at), "provider": provider, "model": model[:200], "task": task}
        row = {name: counts.get(name, 0) for name in COUNTERS}
        stmt = dialect_insert(self.store.dialect)(table).values(**key, **row)
        stmt = (
            stmt.on_conflict_do_update(
                index_elements=list(key),
                set_={
                    name: table.c[name] + stmt.excluded[name]
                    for name in COUNTERS
                    if counts.get(name)
                },
            )
            if any(counts.values())
            else stmt.on_conflict_do_nothing()
        )
        with self.store.write(background=True) as conn:  # never a live request's write
            conn.execute(stmt)

    def spent(self, day: str | None = None) -> tuple[Spend, dict[str, Spend]]:
        """Today's (or ``day``'s) tokens and money: in total, and by provider."""
        with self.store.read() as conn:
            return self._spent(conn, day or today())

    @staticmethod
    def _spent(conn: Connection, day: str) -> tuple[Spend, dict[str, Spend]]:
        table = schema.llm_usage
        total, by_provider = Spend(), dict[str, Spend]()
        rows = conn.execute(
            select(
                table.c.provider, table.c.input_tokens, table.c.output_tokens, table.c.usd
            ).where(table.c.day == day)
        )
        for provider, tokens_in, tokens_out, usd in rows:
            spend = by_provider.setdefault(provider, Spend())
            for into in (spend, total):
                into.tokens += int(tokens_in) + int(tokens_out)
                into.usd += float(usd)
        return total, {name: spend for name, spend in by_provider.items() if name}

    def rows(self, since_day: str) -> list[dict[str, Any]]:
        """Every counted row from ``since_day`` on, newest day first."""
        table = schema.llm_usage
        with self.store.read() as conn:
            result = conn.execute(
                select(table)
                .where(table.c.day >= since_day)
                .order_by(table.c.day.desc(), table.c.task, table.c.provider, table.c.model)
            )
            return [dict(row._mapping) for row in result]


class Budget:
    """Today's spend against the limits."""

    def __init__(self, ledger: Ledger, limits: Limits, prices: PriceTable) -> None:
        self.ledger, self.limits, self.prices = ledger, limits, prices

    def blocked(self, provider: str, worst_tokens: int, worst_usd: float) -> str:
        """Why a call to ``provider`` costing at most this must not be made ("" when it may)."""
        total, by_provider = self.ledger.spent()
        if total.tokens + worst_tokens > self.limits.tokens:
            return f"the daily token budget ({self.limits.tokens:,}) is spent"
        if total.usd + worst_usd > self.limits.usd:
            return f"the daily budget of ${self.limits.usd:.2f} is spent"
        own_tokens, own_usd = self.limits.per_provider.get(provider, (0, 0.0))
        spend = by_provider.get(provider, Spend())
        if own_tokens and spend.tokens + worst_tokens > own_tokens:
            return f"{provider}'s daily token budget ({own_tokens:,}) is spent"
        if own_usd and spend.usd + worst_usd > own_usd:
            return f"{provider}'s daily budget of ${own_usd:.2f} is spent"
        return ""

    def report(self) -> dict[str, Any]:
        """Today's spend, the limits and where each stands: what status shows."""
        total, by_provider = self.ledger.spent()
        limits = self.limits

        def state(spent: float, limit: float) -> str:
            if not limit:
                return "ok"
            if spent >= limit:
                return "spent"
            return "near" if spent >= limits.soft_fraction * limit else "ok"

        providers = {}
        for name, (own_tokens, own_usd) in limits.per_provider.items():
            spend = by_provider.get(name, Spend())
            providers[name] = {
                "tokens": spend.tokens,
                "usd": round(spend.usd, 6),
                "limitTokens": own_tokens or None,
                "limitUsd": own_usd or None,
                "state": max(
                    state(spend.tokens, own_tokens), state(spend.usd, own_usd), key=_SEVERITY.index
                ),
            }
        for name, spend in by_provider.items():
            providers.setdefault(
                name, {"tokens": spend.tokens, "usd": round(spend.usd, 6), "state": "ok"}
            )
        return {
            "day": today(),
            "tokens": total.tokens,
            "usd": round(total.usd, 6),
            "limitTokens": limits.tokens,
            "limitUsd": limits.usd,
            "state": max(
                state(total.tokens, limits.tokens),
                state(total.usd, limits.usd),
                key=_SEVERITY.index,
            ),
            "providers": providers,
        }


_SEVERITY = ("ok", "near", "spent")
