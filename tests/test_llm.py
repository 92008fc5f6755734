"""The LLM providers, chain and budget, with the official ``openai`` and ``anthropic`` packages
talking HTTP to a local server that speaks their protocols (tests/fake_llm.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.llm import LLM, Ledger, clip, llm_from_settings
from engram.llm.budget import PriceTable
from engram.settings import Settings, SettingsError
from engram.store import Store
from tests.conftest import make_settings
from tests.fake_llm import DROP, Answer, FakeLLMServer, anthropic_message, openai_completion

pytest.importorskip("openai")
pytest.importorskip("anthropic")

KEY_OPENAI = "sk-proj-FAKEopenaiKEY0123456789abcdefXYZ"
KEY_ANTHROPIC = "sk-ant-api03-FAKEanthropicKEY0123456789abcdef"


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer()
    yield server
    server.close()


def llm_settings(tmp_path: Path, fake: FakeLLMServer, **env: str) -> Settings:
    values = {
        "ENGRAM_LLM_PROVIDERS": env.pop("providers", "openai"),
        "ENGRAM_LLM_OPENAI_BASE_URL": fake.openai_url,
        "ENGRAM_LLM_OPENAI_API_KEY": KEY_OPENAI,
        "ENGRAM_LLM_OPENAI_MODEL": "gpt-4o-mini",
        "ENGRAM_LLM_ANTHROPIC_BASE_URL": fake.anthropic_url,
        "ENGRAM_LLM_ANTHROPIC_API_KEY": KEY_ANTHROPIC,
        "ENGRAM_LLM_ANTHROPIC_MODEL": "claude-haiku-4-5",
        "ENGRAM_LLM_TIMEOUT_SECONDS": env.pop("timeout", "5"),
        "ENGRAM_LLM_MAX_RETRIES": env.pop("retries", "0"),
    }
    return make_settings(tmp_path, **{**values, **env})


def chain(tmp_path: Path, fake: FakeLLMServer, store: Store, **env: str) -> LLM:
    llm = llm_from_settings(llm_settings(tmp_path, fake, **env), store)
    assert llm is not None
    return llm


def totals(store: Store) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in Ledger(store).rows("0000"):
        for name in (
            "calls",
            "failures",
            "invalid",
            "refused",
            "input_tokens",
            "output_tokens",
            "usd",
        ):
            out[name] = out.get(name, 0) + row[name]
    return out


def parse_json(text: str) -> Any:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("expected an object")
    return value


def test_no_provider_builds_nothing(settings: Settings, store: Store) -> None:
    assert settings.llm_providers == ()
    assert llm_from_settings(settings, store) is None


def test_openai_call_sends_a_bounded_stateless_request_and_counts_its_usage(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.default = '{"title": "pytest fails on import"}'
    llm = chain(tmp_path, fake, store, ENGRAM_LLM_MAX_INPUT_TOKENS="500")
    long_input = "HEAD " + "x" * 10_000 + " TAIL"
    outcome = llm.complete("compress", "You compress.", long_input, parse=parse_json)
    assert outcome.ok and outcome.value == {"title": "pytest fails on import"}
    (request,) = fake.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {KEY_OPENAI}"
    body = request["body"]
    assert body["model"] == "gpt-4o-mini" and body["max_tokens"] == 800
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    sent = body["messages"][1]["content"]
    assert len(sent) <= 500 * 3 and sent.startswith("HEAD ") and sent.endswith(" TAIL")
    assert "characters cut" in sent
    counted = totals(store)
    assert (counted["calls"], counted["input_tokens"], counted["output_tokens"]) == (1, 100, 20)
    assert counted["usd"] == pytest.approx((100 * 0.15 + 20 * 0.60) / 1e6)


def test_a_server_without_json_mode_is_asked_again_without_it(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    def no_json_mode(request: dict[str, Any]) -> str | Answer:
        if "response_format" in request["body"]:
            return Answer(400, {"error": {"message": "response_format is not supported"}})
        return '{"a": 1}'

    fake.default = no_json_mode
    llm = chain(tmp_path, fake, store)
    assert llm.complete("compress", "s", "p", parse=parse_json).value == {"a": 1}
    assert llm.complete("compress", "s", "p", parse=parse_json).value == {"a": 1}
    sent = ["response_format" in r["body"] for r in fake.requests]
    assert sent == [True, False, False]  # remembered: the second call asks without it


def test_retry_after_is_honoured_by_the_client(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.script = [Answer(429, headers={"Retry-After": "1"})]
    llm = chain(tmp_path, fake, store, retries="1")
    assert llm.complete("compress", "s", "p").ok
    first, second = fake.requests
    assert second["at"] - first["at"] >= 0.95
    assert totals(store)["calls"] == 1 and totals(store).get("failures", 0) == 0


def test_a_rejected_key_opens_the_breaker_and_the_chain_falls_back(
    tmp_path: Path, fake: FakeLLMServer, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script = [Answer(401)]
    fake.default = lambda request: (
        '{"from": "anthropic"}' if request["path"] == "/v1/messages" else '{"from": "openai"}'
    )
    llm = chain(tmp_path, fake, store, providers="openai,anthropic")
    with caplog.at_level(logging.WARNING, logger="engram.llm"):
        outcome = llm.complete("summarize", "s", "p", tier="summary", parse=parse_json)
    assert outcome.value == {"from": "anthropic"} and outcome.reply is not None
    assert outcome.reply.provider == "anthropic"
    openai_request, anthropic_request = fake.requests
    assert anthropic_request["path"] == "/v1/messages"
    headers = anthropic_request["headers"]  # the client's version decides which header
    assert KEY_ANTHROPIC in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert anthropic_request["headers"]["anthropic-version"]
    assert anthropic_request["body"]["system"] == "s"
    assert anthropic_request["body"]["messages"] == [{"role": "user", "content": "p"}]
    state = llm.state()["openai"]
    assert state["breaker"] == "open" and state["reopensInSeconds"] > 500
    assert "ENGRAM_LLM_OPENAI_API_KEY" in state["lastError"]
    # the open breaker: the next call goes straight to the fallback
    assert llm.complete("summarize", "s", "p", parse=parse_json).value == {"from": "anthropic"}
    assert fake.paths()[2:] == ["/v1/messages"]
    logged = caplog.text + repr(llm.links) + json.dumps(llm.state())
    assert "ENGRAM_LLM_OPENAI_API_KEY" in caplog.text
    assert KEY_OPENAI not in logged and KEY_ANTHROPIC not in logged


def test_anthropic_overloaded_is_retried_by_its_client(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.script = [Answer(529, headers={"Retry-After": "0"})]
    llm = chain(tmp_path, fake, store, providers="anthropic", retries="1")
    outcome = llm.complete("compress", "s", "p")
    assert outcome.ok and fake.paths() == ["/v1/messages", "/v1/messages"]


def test_failures_in_a_row_open_the_breaker(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.default = Answer(500)
    llm = chain(tmp_path, fake, store)
    for _ in range(3):
        outcome = llm.complete("compress", "s", "p")
        assert not outcome.ok and "HTTP 500" in outcome.reason
    assert llm.state()["openai"]["breaker"] == "open"
    outcome = llm.complete("compress", "s", "p")
    assert "circuit open" in outcome.reason and outcome.calls == 0
    assert len(fake.requests) == 3 and totals(store)["failures"] == 3


def test_slow_and_dropped_answers_are_transient_failures(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.script = [Answer(200, openai_completion("late"), delay=2.0), DROP]
    llm = chain(tmp_path, fake, store, timeout="0.5")
    slow = llm.complete("compress", "s", "p")
    assert not slow.ok and "timed out" in slow.reason
    dropped = llm.complete("compress", "s", "p")
    assert not dropped.ok and ("connect" in dropped.reason or "malformed" in dropped.reason)
    assert llm.complete("compress", "s", "p").ok  # two failures: the breaker is still closed
    assert totals(store)["failures"] == 2


@pytest.mark.parametrize(
    "bad",
    [
        openai_completion(None, reasoning="Let me think about the build log..."),
        openai_completion("", finish_reason="length"),
        openai_completion("not json at all"),
        openai_completion('["a list"]'),
        {"choices": []},
    ],
    ids=["reasoning-only", "cut-off", "not-json", "wrong-shape", "no-choice"],
)
def test_a_bad_answer_is_asked_once_more_then_the_heuristic_stands(
    tmp_path: Path, fake: FakeLLMServer, store: Store, bad: dict[str, Any]
) -> None:
    fake.default = Answer(200, bad)
    llm = chain(tmp_path, fake, store)
    outcome = llm.complete("compress", "s", "p", parse=parse_json)
    assert not outcome.ok and outcome.value is None and outcome.calls == 2
    assert len(fake.requests) == 2
    counted = totals(store)
    assert counted["invalid"] == 2 and counted["calls"] == 2
    fake.script = [Answer(200, bad)]
    fake.default = '{"ok": true}'
    assert llm.complete("compress", "s", "p", parse=parse_json).value == {"ok": True}
    assert totals(store)["invalid"] == 3


def test_anthropic_thinking_only_is_a_bad_answer(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.script = [Answer(200, anthropic_message(None, thinking="hmm", stop_reason="max_tokens"))]
    fake.default = '{"ok": true}'
    llm = chain(tmp_path, fake, store, providers="anthropic")
    outcome = llm.complete("summarize", "s", "p", parse=parse_json)
    assert outcome.value == {"ok": True} and outcome.calls == 2
    assert totals(store)["invalid"] == 1


def test_the_token_budget_is_a_hard_stop(tmp_path: Path, fake: FakeLLMServer, store: Store) -> None:
    fake.usage = (1500, 300)  # each answer reports 1,800 tokens
    llm = chain(
        tmp_path, fake, store, ENGRAM_LLM_DAILY_TOKENS="10000", ENGRAM_LLM_MAX_OUTPUT_TOKENS="500"
    )
    answered = 0
    for _ in range(20):
        if llm.complete("compress", "s", "p" * 4500).ok:
            answered += 1
    counted = totals(store)
    # a call's worst case: 4,501 characters / 3 + 1 = 1,501 input tokens + 500 output; the
    # sixth would make 9,000 + 2,001 > 10,000
    assert answered == len(fake.requests) == 5
    assert counted["input_tokens"] + counted["output_tokens"] == 9000 <= 10_000
    assert counted["refused"] == 15
    report = llm.budget.report()
    assert report["tokens"] == 9000 and report["state"] == "near"


def test_the_money_budget_stops_at_its_limit_and_the_chain_moves_on_per_provider(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.usage = (1000, 100)
    llm = chain(
        tmp_path,
        fake,
        store,
        providers="openai,anthropic",
        ENGRAM_LLM_PRICES="gpt-4o-mini=1000/1000,claude-haiku=0/0",  # $1.10 an answer on openai
        ENGRAM_LLM_DAILY_USD="100",
        ENGRAM_LLM_PROVIDER_BUDGETS="openai=0/5",
        ENGRAM_LLM_MAX_OUTPUT_TOKENS="100",
    )
    providers = []
    for _ in range(6):
        outcome = llm.complete("compress", "s", "p" * 3000)
        assert outcome.ok and outcome.reply is not None
        providers.append(outcome.reply.provider)
    # worst case $1.101 a call: four fit under openai's $5, the fifth would not
    assert providers == ["openai"] * 4 + ["anthropic"] * 2
    report = llm.budget.report()
    assert report["providers"]["openai"]["usd"] == pytest.approx(4.4)
    assert report["providers"]["openai"]["state"] == "near"
    assert totals(store)["refused"] == 2


def test_the_total_money_budget_refuses_every_provider(
    tmp_path: Path, fake: FakeLLMServer, store: Store
) -> None:
    fake.usage = (1000, 100)
    llm = chain(
        tmp_path,
        fake,
        store,
        providers="openai,anthropic",
        ENGRAM_LLM_PRICES="gpt-4o-mini=1000/1000,claude-haiku=1000/1000",
        ENGRAM_LLM_DAILY_USD="2.7",
        ENGRAM_LLM_MAX_OUTPUT_TOKENS="100",
    )
    assert llm.complete("compress", "s", "p" * 3000).ok
    assert llm.complete("compress", "s", "p" * 3000).ok
    refused = llm.complete("compress", "s", "p" * 3000)
    assert not refused.ok and "daily budget of $2.70 is spent" in refused.reason
    assert len(fake.requests) == 2
    report = llm.budget.report()  # $2.20 of $2.70: past the soft share (0.8)
    assert report["usd"] == pytest.approx(2.2) and report["state"] == "near"
    assert totals(store)["refused"] == 1  # the chain stopped: anthropic was not asked either


def test_prices_match_the_longest_prefix_and_unknown_models_are_dear() -> None:
    prices = PriceTable((("gpt-4o-mini", 0.1, 0.2),))
    assert prices.per_million("gpt-4o-mini-2024-07-18") == (0.1, 0.2)
    assert prices.per_million("gpt-4o-2024-08-06") == (2.5, 10.0)
    assert prices.per_million("claude-haiku-4-5-20251001") == (1.0, 5.0)
    assert prices.per_million("llama3.1:8b") == (15.0, 75.0)
    assert PriceTable((("*", 0, 0),)).usd("llama3.1:8b", 10**6, 10**6) == 0


def test_clip_keeps_head_and_tail_within_the_bound() -> None:
    text = "A" * 1000 + "B" * 1000
    clipped = clip(text, 300)
    assert len(clipped) <= 300 and clipped.startswith("A") and clipped.endswith("B")
    assert "characters cut" in clipped
    assert clip("short", 300) == "short"


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("ENGRAM_LLM_PROVIDERS", "openai,gemini", "expected none or providers"),
        ("ENGRAM_LLM_PROVIDERS", "openai,openai", "named twice"),
        ("ENGRAM_LLM_PRICES", "gpt-4o=cheap", "model=input/output"),
        ("ENGRAM_LLM_PROVIDER_BUDGETS", "openai=100", "provider=tokens/usd"),
        ("ENGRAM_LLM_SOFT_FRACTION", "1.5", "at most 1"),
    ],
)
def test_bad_llm_settings_are_named(tmp_path: Path, name: str, value: str, words: str) -> None:
    with pytest.raises(SettingsError) as caught:
        make_settings(tmp_path, **{name: value})
    assert name in str(caught.value) and words in str(caught.value)
