"""What the LLM summary task sends, per session, with its default prompt and bounds: the 24
realistic coding sessions of Engram's coding-context set (long test outputs, tracebacks, diffs)
go through the capture path into a temporary store, then each session's summary goes through
the real task (``engram.llm.summaries.summarize_with_llm``, the official ``openai`` client) to a local
server that speaks the chat-completions protocol and records what it received.

No tokenizer of the paid models is available offline, so tokens are given two ways: characters
/ 4 (the usual rule for English and code) and the WordPiece tokens of the local MiniLM
tokenizer (which splits code finer, so it runs higher). The worst case per day is what the
default budget lets through at the default bounds.

    .venv/bin/python tests/benchmarks/bench_llm_cost.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # noqa: E402

from engram.bench.context import fill, load_coding  # noqa: E402
from engram.llm import llm_from_settings  # noqa: E402
from engram.llm.budget import PriceTable  # noqa: E402
from engram.llm.consolidation import consolidate_with_llm  # noqa: E402
from engram.llm.graphing import extract_with_llm  # noqa: E402
from engram.llm.records import compress_with_llm  # noqa: E402
from engram.llm.summaries import SUMMARY_SYSTEM, summarize_with_llm  # noqa: E402
from engram.schema import observations  # noqa: E402
from engram.settings import load_settings  # noqa: E402
from engram.store import Store  # noqa: E402
from tests.fake_llm import FakeLLMServer  # noqa: E402

READING = (
    '{"type": "bugfix", "title": "t", "facts": [], "narrative": "n", "concepts": [], '
    '"files": [], "importance": 3}'
)
ANSWER = (
    '{"request": "Fix the failing ingest job", "done": ["Raised the batch size"], '
    '"decisions": [{"decision": "Keep retries at 3", "why": "the API rate-limits"}], '
    '"failed": [], "open": ["Backfill March"]}'
)


def wordpiece():  # noqa: ANN201 - a tokenizers.Tokenizer
    from engram.embedders.local import default_tokenizer_path, load_tokenizer

    return load_tokenizer(default_tokenizer_path())


def main() -> int:
    fake = FakeLLMServer(default=ANSWER)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            environ={
                "ENGRAM_DATA_DIR": f"{tmp}/data",
                "ENGRAM_CONFIG_DIR": f"{tmp}/config",
                "ENGRAM_EMBEDDER": "none",
                "ENGRAM_LLM_PROVIDERS": "openai",
                "ENGRAM_LLM_OPENAI_BASE_URL": fake.openai_url,
                "ENGRAM_LLM_MAX_RETRIES": "0",
            }
        )
        store = Store.open(f"sqlite:///{tmp}/store.db")
        coding = load_coding()
        observed = fill(store, settings, coding.sessions)
        llm = llm_from_settings(settings, store)
        assert llm is not None
        for session in coding.sessions:
            what, _ = summarize_with_llm(store, llm, session["id"])
            assert what == "summarized", what
        summaries = len(fake.requests)
        fake.default = '{"facts": [{"subject": "ingest", "relation": "uses", "object": "S3", "exclusive": false}]}'
        for session in coding.sessions:
            what, _ = extract_with_llm(store, llm, session["id"])
            assert what.startswith("facts"), what
        graphs = len(fake.requests)
        fake.default = '{"memories": []}'
        for project in sorted({s["project"] for s in coding.sessions}):
            what, _ = consolidate_with_llm(store, llm, project)
            assert what.startswith("consolidated"), what
        consolidations = len(fake.requests)
        fake.default = READING
        with store.read() as conn:
            ids = list(conn.execute(select(observations.c.id)).scalars())
        for observation_id in ids:
            what, _ = compress_with_llm(store, llm, observation_id)
            assert what == "compressed", what
        store.close()
    fake.close()
    compress_requests = fake.requests[consolidations:]
    graph_requests = fake.requests[summaries:graphs]
    consolidate_requests = fake.requests[graphs:consolidations]
    fake.requests = fake.requests[:summaries]
    try:
        count = wordpiece()
    except Exception as exc:  # noqa: BLE001 - the figure is optional
        print(f"(no WordPiece counts: {exc})")
        count = None
    sizes = []
    for request in fake.requests:
        messages = request["body"]["messages"]
        chars = sum(len(m["content"]) for m in messages)
        pieces = (
            sum(len(count.encode(m["content"], add_special_tokens=False).ids) for m in messages)
            if count
            else 0
        )
        sizes.append((chars, pieces))
    chars = [c for c, _ in sizes]
    pieces = [p for _, p in sizes]
    out = settings.llm_max_output_tokens
    print(
        f"{len(coding.sessions)} sessions, {observed} observations; system prompt "
        f"{len(SUMMARY_SYSTEM)} characters; input bound {settings.llm_max_input_tokens} tokens "
        f"({settings.llm_max_input_tokens * 3} characters), output bound {out} tokens"
    )
    print(f"summary prompt characters: median {statistics.median(chars):,.0f}, max {max(chars):,}")
    print(
        f"  tokens (chars/4): median {statistics.median(chars) / 4:,.0f}, max {max(chars) / 4:,.0f}"
    )
    if count:
        print(f"  WordPiece tokens: median {statistics.median(pieces):,.0f}, max {max(pieces):,}")
    per_event = statistics.median(
        c / 4 / max(n, 1) for c, n in zip(chars, _events(coding), strict=True)
    )
    print(f"  per event of a session (chars/4): median {per_event:,.0f} tokens")
    given = [sum(len(m["content"]) for m in r["body"]["messages"]) for r in compress_requests]
    print(
        f"compress prompts ({len(given)} observations): characters median "
        f"{statistics.median(given):,.0f}, p95 {sorted(given)[int(len(given) * 0.95)]:,}, max "
        f"{max(given):,}; tokens (chars/4) median {statistics.median(given) / 4:,.0f}, max "
        f"{max(given) / 4:,.0f}"
    )
    for label, requests in (
        ("graph-extract", graph_requests),
        ("consolidate", consolidate_requests),
    ):
        sent = [sum(len(m["content"]) for m in r["body"]["messages"]) for r in requests]
        print(
            f"{label} prompts ({len(sent)}): characters median {statistics.median(sent):,.0f}, "
            f"max {max(sent):,}; tokens (chars/4) median {statistics.median(sent) / 4:,.0f}"
        )
    for model in ("gpt-4o-mini", "claude-haiku-4-5"):
        each = PriceTable(settings.llm_prices).usd(model, int(statistics.median(given) / 4), 200)
        print(
            f"  {model}: an event ~${each:.5f} (answer ~200 tokens); the default budget "
            f"covers ~{min(settings.llm_daily_tokens / (statistics.median(given) / 4 + 200), settings.llm_daily_usd / each):,.0f} events a day"
        )
    worst = max(chars) / 4 + out
    typical = statistics.median(chars) / 4 + 150  # an answer like ANSWER runs ~100-200 tokens
    tokens_day, usd_day = settings.llm_daily_tokens, settings.llm_daily_usd
    prices = PriceTable(settings.llm_prices)
    print(f"default daily budget: {tokens_day:,} tokens and ${usd_day:.2f}")
    for model in ("gpt-4o-mini", "claude-haiku-4-5", "gpt-4o"):
        cost_typical = prices.usd(model, int(statistics.median(chars) / 4), 150)
        cost_worst = prices.usd(model, int(max(chars) / 4), out)
        sessions_day = min(tokens_day / typical, usd_day / cost_typical)
        print(
            f"  {model}: a typical summary ${cost_typical:.5f}, the largest ${cost_worst:.5f}; "
            f"the budget covers ~{sessions_day:,.0f} typical summaries a day "
            f"(~{min(tokens_day / worst, usd_day / cost_worst):,.0f} of the largest); "
            f"the most a day can cost: ${usd_day:.2f} plus one call in flight per worker"
        )
    return 0


def _events(coding: Any) -> list[int]:
    from engram.bench.context import observe_bodies

    return [len(observe_bodies(session)) for session in coding.sessions]


if __name__ == "__main__":
    sys.exit(main())
