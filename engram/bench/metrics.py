"""Retrieval metrics over one ranked list of unit ids and its gold set, and their aggregation.

- recall_any@k: 1 when at least one gold unit is in the top k (LongMemEval's ``recall_any``).
- recall_all@k: 1 when every gold unit is in the top k (LongMemEval's ``recall_all``).
- recall@k: the fraction of gold units in the top k (what LoCoMo papers call recall@k).
- ndcg@10: binary relevance, DCG = sum of 1/log2(rank + 1) over gold units in the top 10,
  divided by the ideal DCG of min(|gold|, 10) gold units at the top.
- mrr: 1 / rank of the first gold unit in the retrieved list (0 when none was retrieved).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence, Set

KS = (1, 3, 5, 10)
NDCG_K = 10
TABLE_METRICS = (
    *(f"recall_any@{k}" for k in KS),
    *(f"recall_all@{k}" for k in KS),
    f"ndcg@{NDCG_K}",
    "mrr",
)
ALL_METRICS = (*TABLE_METRICS, *(f"recall@{k}" for k in KS))


def dedupe(units: Iterable[str]) -> list[str]:
    """Unit ids in first-seen order: a session ranks where its best document ranks."""
    seen: set[str] = set()
    out: list[str] = []
    for unit in units:
        if unit not in seen:
            seen.add(unit)
            out.append(unit)
    return out


def ndcg(ranked: Sequence[str], gold: Set[str], k: int = NDCG_K) -> float:
    if not gold:
        return 0.0
    dcg = sum(
        1.0 / math.log2(rank + 1) for rank, unit in enumerate(ranked[:k], start=1) if unit in gold
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[str], gold: Set[str]) -> float:
    for rank, unit in enumerate(ranked, start=1):
        if unit in gold:
            return 1.0 / rank
    return 0.0


def score(ranked: Sequence[str], gold: Set[str]) -> dict[str, float]:
    """Every metric for one query; ``ranked`` must be de-duplicated unit ids, best first."""
    out: dict[str, float] = {}
    for k in KS:
        found = sum(1 for unit in ranked[:k] if unit in gold)
        out[f"recall_any@{k}"] = 1.0 if found else 0.0
        out[f"recall_all@{k}"] = 1.0 if gold and found == len(gold) else 0.0
        out[f"recall@{k}"] = found / len(gold) if gold else 0.0
    out[f"ndcg@{NDCG_K}"] = ndcg(ranked, gold)
    out["mrr"] = reciprocal_rank(ranked, gold)
    return out


def mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {name: sum(row[name] for row in rows) / len(rows) for name in rows[0]}


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * pct / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
