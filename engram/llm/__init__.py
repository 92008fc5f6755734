"""Optional LLM work, under a hard daily cost ceiling.

With no provider set (``ENGRAM_LLM_PROVIDERS`` empty, the default) nothing here is built and no
LLM call is made: every task keeps its heuristic. With one or more, ``llm_from_settings`` builds
the chain (``engram.llm.chain``) over the providers (``engram.llm.providers``: the official
``openai`` and ``anthropic`` packages) and the budget (``engram.llm.budget``).
"""

from engram.llm.budget import Budget, Ledger, Limits, PriceTable
from engram.llm.chain import LLM, LLMConfigError, Outcome, clip, llm_from_settings
from engram.llm.providers import ProviderError, Reply, ReplyError

__all__ = [
    "LLM",
    "Budget",
    "LLMConfigError",
    "Ledger",
    "Limits",
    "Outcome",
    "PriceTable",
    "ProviderError",
    "Reply",
    "ReplyError",
    "clip",
    "llm_from_settings",
]
