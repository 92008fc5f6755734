"""One call through the ordered chain of providers, under the budget, behind circuit breakers.

``LLM.complete(task, system, prompt, tier=..., parse=...)`` tries each configured provider in
order (``ENGRAM_LLM_PROVIDERS``), each with its own model for the tier (``routine`` for work on
every event, ``summary`` for session summaries). For each provider:

- an open breaker skips it; a breaker opens after ``BREAKER_FAILURES`` failures in a row (for
  ``BREAKER_FIRST_SECONDS``, doubling while it keeps failing, at most ``BREAKER_MAX_SECONDS``),
  at once on a rejected key or an unknown model (401/403/404), and for as long as a server's ``Retry-After`` asks;
- a call whose worst case (the prompt's estimated tokens, the output cap, priced) would cross a
  daily limit is not made (``refused``); the next provider may still have its own budget, the
  total budget stops the chain;
- a failure (after the client's own retries) moves to the next provider;
- an answer ``parse`` rejects (``ValueError``) or that holds no text is asked once more of the
  same provider; a second bad answer ends the chain: the caller's heuristic result stands.

Every call is stateless: one system message and one user message, the prompt cut to
``ENGRAM_LLM_MAX_INPUT_TOKENS`` (head and tail kept, the cut marked), the answer to
``ENGRAM_LLM_MAX_OUTPUT_TOKENS``. Usage, failures, bad answers and refusals are counted in the
ledger by day, provider, model and task.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.llm.budget import Budget, Ledger, Limits, PriceTable
from engram.llm.providers import (
    INSTALL_EXTRA,
    PROVIDERS,
    AnthropicProvider,
    OpenAIProvider,
    Provider,
    ProviderError,
    Reply,
    ReplyError,
    available,
)

if TYPE_CHECKING:
    from engram.settings import Settings
    from engram.store import Store

log = logging.getLogger("engram.llm")

TIERS = ("routine", "summary")
CHARS_PER_TOKEN = 3
"""For the worst-case estimate before a call: code and logs run at ~3 characters a token, prose
at ~4; the lower figure errs toward refusing."""
BREAKER_FAILURES = 3
BREAKER_FIRST_SECONDS = 30.0
BREAKER_MAX_SECONDS = 600.0


class LLMConfigError(ValueError):
    """The provider settings cannot work (a package missing, no model); the message says how to fix it."""


def clip(text: str, max_chars: int) -> str:
    """``text`` within ``max_chars``: its head and tail, the cut marked with its size."""
    if len(text) <= max_chars:
        return text
    marker = "\n[... {} characters cut ...]\n"
    keep = max(max_chars - len(marker.format(len(text))), 0)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker.format(len(text) - keep) + (text[-tail:] if tail else "")


class Breaker:
    """A provider's circuit breaker, per process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.failures = 0
        self.open_until = 0.0
        self.cool = 0.0
        self.last_error = ""
        self._lock = threading.Lock()

    def closed(self) -> bool:
        with self._lock:
            return self.clock() >= self.open_until

    def success(self) -> None:
        with self._lock:
            self.failures, self.cool, self.open_until = 0, 0.0, 0.0

    def failure(self, error: ProviderError) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = str(error)
            wait = 0.0
            if error.status in (401, 403, 404):  # a key or a model name that cannot work
                wait = BREAKER_MAX_SECONDS
            elif self.failures >= BREAKER_FAILURES:
                self.cool = min(BREAKER_MAX_SECONDS, self.cool * 2 or BREAKER_FIRST_SECONDS)
                wait = self.cool
            if error.retry_after:
                wait = max(wait, min(error.retry_after, BREAKER_MAX_SECONDS))
            if wait:
                self.open_until = self.clock() + wait

    def state(self) -> dict[str, Any]:
        with self._lock:
            left = self.open_until - self.clock()
            return {
                "breaker": "open" if left > 0 else "closed",
                "reopensInSeconds": round(left, 1) if left > 0 else None,
                "failuresInARow": self.failures,
                "lastError": self.last_error or None,
            }


@dataclass
class Link:
    """A provider in the chain with its model for each tier."""

    provider: Provider
    models: dict[str, str]
    breaker: Breaker = field(default_factory=Breaker)


@dataclass
class Outcome:
    """What a task gets back: ``value`` (parsed, or the text) when a provider answered well,
    else ``None`` and ``reason`` (the caller's heuristic result stands)."""

    value: Any = None
    reply: Reply | None = None
    reason: str = ""
    calls: int = 0
    retry: bool = False
    """No answer only because providers failed or were cut off (not a budget, not a bad
    answer): the same work may succeed later."""

    @property
    def ok(self) -> bool:
        return self.reply is not None and not self.reason


class LLM:
    def __init__(
        self,
        links: Sequence[Link],
        budget: Budget,
        max_input_tokens: int,
        max_output_tokens: int,
    ) -> None:
        self.links = list(links)
        self.budget = budget
        self.ledger: Ledger = budget.ledger
        self.max_input_tokens, self.max_output_tokens = max_input_tokens, max_output_tokens

    def room(self, *parts: str) -> int:
        """Characters a prompt may hold beside ``parts`` (its system message, a fixed head)
        within ENGRAM_LLM_MAX_INPUT_TOKENS."""
        return self.max_input_tokens * CHARS_PER_TOKEN - sum(len(p) for p in parts)

    def complete(
        self,
        task: str,
        system: str,
        prompt: str,
        *,
        tier: str = "routine",
        json_output: bool = True,
        parse: Callable[[str], Any] | None = None,
    ) -> Outcome:
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
        room = max(self.room(system), 200)
        prompt = clip(prompt, room)
        worst_tokens = (len(system) + len(prompt)) // CHARS_PER_TOKEN + 1 + self.max_output_tokens
        outcome = Outcome()
        reasons = []
        refused = failed = False
        for link in self.links:
            name, model = link.provider.name, link.models[tier]
            if not link.breaker.closed():
                reasons.append(f"{name}: circuit open ({link.breaker.last_error})")
                failed = True
                continue
            in_per_m, out_per_m = self.budget.prices.per_million(model)
            worst_usd = (
                (worst_tokens - self.max_output_tokens) * in_per_m
                + self.max_output_tokens * out_per_m
            ) / 1_000_000
            blocked = self.budget.blocked(name, worst_tokens, worst_usd)
            if blocked:
                refused = True
                self.ledger.add(name, model, task, refused=1)
                reasons.append(f"{name}: {blocked}")
                if not blocked.startswith(name):  # the total budget: no provider may go on
                    break
                continue
            for attempt in (1, 2):
                outcome.calls += 1
                try:
                    reply = link.provider.complete(
                        model, system, prompt, self.max_output_tokens, json_output
                    )
                except ProviderError as exc:
                    link.breaker.failure(exc)
                    self.ledger.add(name, model, task, failures=1)
                    log.warning("LLM %s call for %s failed: %s", name, task, exc)
                    reasons.append(str(exc))
                    failed = True
                    break
                except ReplyError as exc:
                    link.breaker.success()
                    self._count(exc.reply, task, invalid=1)
                    reasons.append(str(exc))
                    if attempt == 2:
                        outcome.reason = "; ".join(reasons)
                        return outcome
                    continue
                link.breaker.success()
                try:
                    value = parse(reply.text) if parse is not None else reply.text
                except ValueError as exc:
                    self._count(reply, task, invalid=1)
                    reasons.append(f"{name}: the answer did not validate: {exc}")
                    if attempt == 2:
                        outcome.reason = "; ".join(reasons)
                        return outcome
                    continue
                self._count(reply, task)
                outcome.value, outcome.reply = value, reply
                return outcome
        outcome.reason = "; ".join(reasons) or "no provider is configured"
        outcome.retry = failed and not refused
        return outcome

    def _count(self, reply: Reply, task: str, invalid: int = 0) -> None:
        usd = self.budget.prices.usd(reply.model, reply.input_tokens, reply.output_tokens)
        self.ledger.add(
            reply.provider,
            reply.model,
            task,
            calls=1,
            invalid=invalid,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            usd=usd,
        )

    def state(self) -> dict[str, Any]:
        return {
            link.provider.name: {"models": dict(link.models), **link.breaker.state()}
            for link in self.links
        }


def llm_from_settings(settings: Settings, store: Store) -> LLM | None:
    """The configured chain, or ``None`` when no provider is set: then nothing here is built and
    no LLM call can be made."""
    if not settings.llm_providers:
        return None
    links = []
    for name in settings.llm_providers:
        if name not in PROVIDERS:
            raise LLMConfigError(f"ENGRAM_LLM_PROVIDERS: unknown provider {name!r}")
        if not available(name):
            raise LLMConfigError(
                f"ENGRAM_LLM_PROVIDERS names {name}, but the {name!r} package is not installed: "
                f"{INSTALL_EXTRA}"
            )
        prefix = f"llm_{name}_"
        model = getattr(settings, prefix + "model")  # never empty: an empty value is the default
        kind = OpenAIProvider if name == "openai" else AnthropicProvider
        provider = kind(
            getattr(settings, prefix + "base_url"),
            getattr(settings, prefix + "api_key"),
            settings.llm_timeout_seconds,
            settings.llm_max_retries,
        )
        summary_model = getattr(settings, prefix + "summary_model") or model
        links.append(Link(provider, {"routine": model, "summary": summary_model}))
    return LLM(
        links,
        budget_from_settings(settings, store),
        settings.llm_max_input_tokens,
        settings.llm_max_output_tokens,
    )


def budget_from_settings(settings: Settings, store: Store) -> Budget:
    """The daily limits and prices as set, over the store's ledger (status reads it too)."""
    limits = Limits(
        tokens=settings.llm_daily_tokens,
        usd=settings.llm_daily_usd,
        per_provider={name: (tokens, usd) for name, tokens, usd in settings.llm_provider_budgets},
        soft_fraction=settings.llm_soft_fraction,
    )
    return Budget(Ledger(store), limits, PriceTable(settings.llm_prices))
