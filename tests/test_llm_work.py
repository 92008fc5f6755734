"""LLM session summaries through a real embedded gateway (worker thread, derived lanes, SQLite),
with the official clients talking to the local fake provider (tests/fake_llm.py); and the
promise that with no provider set no LLM request is ever made."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engram.llm import Ledger
from engram.llm.summaries import parse_summary, render_summary
from tests.conftest import api_for, make_settings
from tests.fake_llm import Answer, FakeLLMServer
from tests.support import Api, wait_for

pytest.importorskip("openai")

GOOD = {
    "request": "Fix the flaky checkout test",
    "done": ["Made pay() idempotent in src/checkout.py"],
    "decisions": [{"decision": "Retry the payment call once", "why": "the gateway times out"}],
    "failed": ["The first pytest run: AssertionError in test_pay"],
    "open": ["Add a test for the refund path"],
}


FACTS = {
    "facts": [
        {"subject": "checkout", "relation": "uses", "object": "Stripe", "exclusive": True},
        {
            "subject": "checkout",
            "relation": "depends on",
            "object": "payments-api",
            "exclusive": False,
        },
    ]
}


def task_of(request: dict[str, Any]) -> str:
    system = request["body"]["messages"][0]["content"]
    if "extract facts" in system:
        return "graph"
    if "one event" in system:
        return "compress"
    return "summary"


def by_task(request: dict[str, Any]) -> str:
    return json.dumps({"graph": FACTS, "compress": READING, "summary": GOOD}[task_of(request)])


def asked(fake: FakeLLMServer, task: str) -> list[dict[str, Any]]:
    return [r for r in fake.requests if task_of(r) == task]


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    server = FakeLLMServer(default=by_task)
    yield server
    server.close()


@contextmanager
def gateway_api(tmp_path: Path, **env: str) -> Iterator[Api]:
    from engram.cli.server import build_gateway

    built = build_gateway(make_settings(tmp_path / "gw", **env))
    try:
        yield api_for(built)
    finally:
        built.close()


def run_session(api: Api, project: str, session: str) -> None:
    assert api.post("/v1/sessions", {"sessionId": session, "project": project})[0] in (200, 201)
    events: list[dict[str, Any]] = [
        {"hookType": "UserPromptSubmit", "prompt": "fix the flaky checkout test"},
        {
            "hookType": "PostToolUse",
            "toolName": "Bash",
            "toolInput": {"command": "pytest tests/test_checkout.py"},
            "toolOutput": {"stdout": "FAILED test_pay - AssertionError", "exit_code": 1},
        },
        {
            "hookType": "PostToolUse",
            "toolName": "Edit",
            "toolInput": {"file_path": "src/checkout.py", "old_string": "a", "new_string": "b"},
            "toolOutput": "ok",
        },
    ]
    for n, event in enumerate(events):
        body = {"eventId": f"{session}:{n}", "sessionId": session, "project": project}
        assert api.post("/v1/observe", {**body, "host": "claude-code", **event})[0] in (201, 202)
    api.wait_drained()
    assert api.post(f"/v1/sessions/{session}/end")[0] == 200


def llm_env(fake: FakeLLMServer, **extra: str) -> dict[str, str]:
    return {
        "ENGRAM_LLM_PROVIDERS": "openai",
        "ENGRAM_LLM_OPENAI_BASE_URL": fake.openai_url,
        "ENGRAM_LLM_OPENAI_API_KEY": "sk-test-fake",
        "ENGRAM_LLM_OPENAI_SUMMARY_MODEL": "gpt-4o",
        "ENGRAM_LLM_MAX_RETRIES": "0",
        **extra,
    }


def test_with_no_provider_set_no_llm_request_is_ever_made(
    tmp_path: Path, fake: FakeLLMServer, project: str
) -> None:
    # the provider's address and key are set, the provider list is not: nothing may call it
    env = llm_env(fake)
    env.pop("ENGRAM_LLM_PROVIDERS")
    with gateway_api(tmp_path, **env) as api:
        run_session(api, project, "s-none")
        wait_for(lambda: api.get("/v1/sessions/s-none")[1]["summary"], 15, message="summary")
        status = api.get("/v1/status")[1]
        assert status["llm"]["providers"] == [] and "off" in status["llm"]["state"]
        session = api.get("/v1/sessions/s-none")[1]
        assert "llm" not in session["summaryData"]
        assert Ledger(api.store).rows("0000") == []
    assert fake.requests == []


def test_a_session_summary_is_rewritten_by_the_llm_and_the_next_context_uses_it(
    tmp_path: Path, fake: FakeLLMServer, project: str
) -> None:
    with gateway_api(tmp_path, **llm_env(fake)) as api:
        run_session(api, project, "s-llm")
        session = wait_for(
            lambda: ((s := api.get("/v1/sessions/s-llm")[1])["summaryData"] or {}).get("llm") and s,
            20,
            message="the LLM summary",
        )
        made = session["summaryData"]["llm"]
        assert made["provider"] == "openai" and made["model"] == "gpt-4o"
        assert made["decisions"] == GOOD["decisions"]
        assert "Retry the payment call once (why: the gateway times out)" in session["summary"]
        assert "src/checkout.py" in session["summaryData"]["filesChanged"]  # the heuristic's kept
        (request,) = asked(fake, "summary")
        body = request["body"]
        assert body["model"] == "gpt-4o" and body["response_format"] == {"type": "json_object"}
        prompt = body["messages"][1]["content"]
        assert "pytest tests/test_checkout.py" in prompt and "FAILED test_pay" in prompt
        hits = api.post("/v1/search", {"query": "refund path", "project": project})[1]["items"]
        assert hits and hits[0]["kind"] == "summary"
        started = api.post("/v1/sessions", {"sessionId": "s-after", "project": project})[1]
        assert "Add a test for the refund path" in started["context"]
        wait_for(lambda: asked(fake, "graph"), 10, message="the facts asked for")
        facts = wait_for(
            lambda: api.get(f"/v1/graph/facts?project={project}")[1]["items"], 10, message="facts"
        )
        assert {(f["subject"], f["relation"], f["object"]) for f in facts} == {
            ("checkout", "uses", "Stripe"),
            ("checkout", "depends_on", "payments-api"),
        }
        status = api.get("/v1/status")[1]
        assert status["llm"]["budget"]["tokens"] == 240 and status["llm"]["backlog"]["pending"] == 0


def test_a_bad_answer_twice_leaves_the_heuristic_summary(
    tmp_path: Path, fake: FakeLLMServer, project: str
) -> None:
    wrong_root = json.dumps({"summary": {"request": "x"}})  # the wrong root, as anchors saw
    fake.default = Answer(
        200,
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": wrong_root},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5},
            "model": "gpt-4o",
            "id": "x",
            "object": "chat.completion",
            "created": 0,
        },
    )
    with gateway_api(tmp_path, **llm_env(fake)) as api:
        run_session(api, project, "s-bad")
        wait_for(lambda: len(fake.requests) == 4, 20, message="two asks of each task")
        wait_for(
            lambda: api.get("/v1/status")[1]["llm"]["backlog"]["pending"] == 0, 10, message="done"
        )
        session = api.get("/v1/sessions/s-bad")[1]
        assert "llm" not in session["summaryData"] and session["summary"].startswith("Request:")
        rows = {r["task"]: r for r in Ledger(api.store).rows("0000")}
        assert (rows["summarize"]["calls"], rows["summarize"]["invalid"]) == (2, 2)
        assert (rows["graph-extract"]["calls"], rows["graph-extract"]["invalid"]) == (2, 2)


def test_a_provider_that_is_down_keeps_the_work_for_later(
    tmp_path: Path, fake: FakeLLMServer, project: str
) -> None:
    fake.default = Answer(503)
    with gateway_api(tmp_path, **llm_env(fake)) as api:
        run_session(api, project, "s-down")
        wait_for(lambda: fake.requests, 20, message="a call")
        status = wait_for(
            lambda: (s := api.get("/v1/status")[1])["llm"]["backlog"]["lastError"] and s,
            10,
            message="the failure recorded",
        )
        wait_for(lambda: len(fake.requests) >= 2, 10, message="both tasks tried")
        status = api.get("/v1/status")[1]
        backlog = status["llm"]["backlog"]  # kept, leased for their backoff
        assert backlog["byTask"]["summarize"] == 1 and backlog["byTask"]["graph-extract"] == 1
        assert "HTTP 503" in status["llm"]["backlog"]["lastError"]
        assert any(p["component"] == "llm" for p in status["problems"])


def test_a_full_backlog_drops_new_work_and_counts_it(
    tmp_path: Path, fake: FakeLLMServer, project: str
) -> None:
    fake.default = Answer(503)  # the first item stays queued
    with gateway_api(tmp_path, **llm_env(fake, ENGRAM_LLM_BACKLOG_MAX="1")) as api:
        run_session(api, project, "s-one")
        wait_for(lambda: len(fake.requests) >= 2, 20, message="a call of each task")
        run_session(api, project, "s-two")
        wait_for(lambda: api.get("/v1/sessions/s-two")[1]["summary"], 15, message="summary")
        rows = wait_for(
            lambda: [r for r in Ledger(api.store).rows("0000") if r["dropped"]], 10, message="drop"
        )
        assert {(r["task"], r["dropped"]) for r in rows} == {("summarize", 1), ("graph-extract", 1)}
        assert api.get("/v1/status")[1]["llm"]["backlog"]["pending"] == 2


def test_parse_summary_validates_shape_types_and_bounds() -> None:
    fenced = "```json\n" + json.dumps({**GOOD, "done": ["x" * 5000]}) + "\n```"
    parsed = parse_summary(fenced)
    assert len(parsed["done"][0]) <= 300 and parsed["decisions"] == GOOD["decisions"]
    assert parse_summary("Here it is: " + json.dumps(GOOD) + " Done.")["request"] == GOOD["request"]
    for bad, words in (
        ("no json", "no JSON object"),
        (json.dumps([GOOD]), "not a JSON object"),
        (json.dumps({**GOOD, "extra": 1}), "unexpected ['extra']"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "open"}), "missing ['open']"),
        (json.dumps({**GOOD, "done": "one string"}), "'done' must be a list"),
        (json.dumps({**GOOD, "decisions": ["why"]}), "'decisions' must be"),
        (json.dumps({**GOOD, "request": " "}), "'request' must be"),
    ):
        with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
            parse_summary(bad)
    text = render_summary(
        parse_summary(json.dumps(GOOD)), {"filesChanged": ["a.py"], "outcome": "ok"}
    )
    assert text.splitlines()[0] == "Request: Fix the flaky checkout test"
    assert "Files changed: a.py" in text and "Outcome: ok" in text


@pytest.mark.slow
def test_distributed_summaries_go_through_the_llm_queue(
    tmp_path: Path, fake: FakeLLMServer, redis_url: str, project: str
) -> None:
    """Real processes on a real Redis: the gateway, a capture pool that does not take LLM work
    and an `llm`-only pool; the LLM summary arrives through the llm queue, once."""
    from tests.conftest import POSTGRES_URL
    from tests.support import Cluster, postgres_database

    with contextlib.ExitStack() as stack:
        env = {**llm_env(fake), "ENGRAM_BROKER_URL": redis_url}
        if POSTGRES_URL:
            env["ENGRAM_DATABASE_URL"] = stack.enter_context(postgres_database(POSTGRES_URL))
        cluster = Cluster(tmp_path, **env)
        stack.callback(cluster.stop_all)
        cluster.serve()
        cluster.start("worker", "-Q", "capture,maintenance,embed,graph", "-c", "1")
        llm_pool = cluster.start("worker", "-Q", "llm")  # ENGRAM_LLM_CONCURRENCY threads
        assert (
            cluster.request("POST", "/v1/sessions", {"sessionId": "s-d", "project": project})[0]
            == 201
        )
        for n, command in enumerate(("pytest tests/test_orders.py", "git diff")):
            status, _ = cluster.request(
                "POST",
                "/v1/observe",
                {
                    "eventId": f"s-d:{n}",
                    "sessionId": "s-d",
                    "project": project,
                    "host": "claude-code",
                    "hookType": "PostToolUse",
                    "toolName": "Bash",
                    "toolInput": {"command": command},
                    "toolOutput": {"stdout": "1 failed", "exit_code": 1},
                },
            )
            assert status == 201
        wait_for(
            lambda: not cluster.request("GET", "/v1/capture?limit=1")[1]["counts"]["pending"],
            30,
            message="capture",
        )
        assert cluster.request("POST", "/v1/sessions/s-d/end")[0] == 200
        session = wait_for(
            lambda: (
                ((s := cluster.request("GET", "/v1/sessions/s-d")[1])["summaryData"] or {}).get(
                    "llm"
                )
                and s
            ),
            45,
            message=f"the LLM summary\n{llm_pool.output()[-3000:]}",
        )
        assert session["summaryData"]["llm"]["open"] == GOOD["open"]
        assert len(asked(fake, "summary")) == 1
        assert "engram.llm" in llm_pool.output()  # the llm pool ran it
        assert "concurrency: 2 (thread)" in llm_pool.output()
        facts = wait_for(
            lambda: cluster.request("GET", f"/v1/graph/facts?project={project}")[1]["items"],
            20,
            message="the session's facts",
        )
        assert len(facts) == 2 and len(asked(fake, "graph")) == 1
        status = cluster.request("GET", "/v1/status")[1]
        assert status["llm"]["budget"]["tokens"] == 240 and status["llm"]["backlog"]["pending"] == 0


READING = {
    "type": "bugfix",
    "title": "test_pay fails: the payment mock returns None",
    "facts": ["pytest tests/test_checkout.py fails in test_pay"],
    "narrative": "The payment gateway mock returns None, so pay() raises; idempotency keys fix it.",
    "concepts": ["Payments", "mocks"],
    "files": ["src/checkout.py"],
    "importance": 4,
}


def test_opted_in_projects_get_the_llm_reading_of_each_observation(
    tmp_path: Path, fake: FakeLLMServer, project: str
) -> None:
    env = llm_env(fake, ENGRAM_LLM_COMPRESS_PROJECTS=project)
    with gateway_api(tmp_path, **env) as api:
        run_session(api, "not-opted-in", "s-other")  # summaries only for this one
        run_session(api, project, "s-read")

        def read_all() -> list[dict[str, Any]]:
            found = api.get("/v1/sessions/s-read/observations")[1]["items"]
            return found if found and all("llm" in o for o in found) else []

        items = wait_for(read_all, 30, message="the LLM reading of every observation")
        assert [o["llm"]["type"] for o in items] == ["bugfix"] * 3
        assert items[0]["llm"]["concepts"] == ["payments", "mocks"]
        assert items[0]["llm"]["provider"] == "openai"
        assert all("llm" not in o for o in api.get("/v1/sessions/s-other/observations")[1]["items"])
        compress_prompts = [r["body"]["messages"][1]["content"] for r in asked(fake, "compress")]
        assert len(compress_prompts) == 3  # the opted-in project's three events, nothing else
        assert any("FAILED test_pay" in p and "Output:" in p for p in compress_prompts)
        hits = api.post("/v1/search", {"query": "idempotency keys", "project": project})[1]["items"]
        assert hits and hits[0]["kind"] == "observation" and hits[0]["sessionId"] == "s-read"
        rows = {r["task"]: r for r in Ledger(api.store).rows("0000")}
        assert rows["compress"]["calls"] == 3 and rows["summarize"]["calls"] == 2


def test_parse_observation_validates_type_bounds_and_importance() -> None:
    from engram.llm.records import observation_prompt, parse_observation

    parsed = parse_observation(json.dumps({**READING, "title": "t " * 200}))
    assert len(parsed["title"]) <= 120 and parsed["concepts"] == ["payments", "mocks"]
    for bad, words in (
        ({**READING, "type": "story"}, "'type' must be one of"),
        ({**READING, "importance": 9}, "'importance' must be"),
        ({**READING, "importance": "4"}, "'importance' must be"),
        ({**READING, "narrative": ""}, "'narrative' must be"),
        ({k: v for k, v in READING.items() if k != "files"}, "missing"),
    ):
        with pytest.raises(ValueError, match=words):
            parse_observation(json.dumps(bad))
    long_output = "START " + "x" * 50_000 + " END"
    prompt = observation_prompt(
        {
            "kind": "command",
            "toolName": "Bash",
            "title": "pytest",
            "filesRead": [],
            "filesModified": [],
            "errors": [],
            "toolInput": {"command": "pytest"},
            "toolOutput": long_output,
        },
        6000,
    )
    assert (
        len(prompt) <= 6000 and "START" in prompt and "END" in prompt and "characters cut" in prompt
    )


def test_engram_usage_reports_the_days_and_today_against_the_budget(tmp_path: Path) -> None:
    import subprocess

    from engram.store import Store
    from tests.support import ENGRAM

    env = {
        **make_env(tmp_path),
        "ENGRAM_LLM_PROVIDERS": "openai",
        "ENGRAM_LLM_DAILY_USD": "0.01",
        "ENGRAM_LLM_PROVIDER_BUDGETS": "openai=1000/0",
    }
    settings = make_settings(
        tmp_path, **{k: v for k, v in env.items() if k.startswith("ENGRAM_LLM")}
    )
    store = Store.open(settings.database_url)
    ledger = Ledger(store)
    ledger.add(
        "openai", "gpt-4o-mini", "summarize", calls=2, input_tokens=900, output_tokens=60, usd=0.009
    )
    ledger.add(
        "openai",
        "gpt-4o-mini",
        "compress",
        invalid=1,
        calls=1,
        input_tokens=40,
        output_tokens=5,
        usd=0.0001,
    )
    ledger.add("", "", "compress", dropped=3)
    ledger.add("openai", "gpt-4o-mini", "summarize", at=0.0, calls=1)  # 1970: outside --days
    store.close()

    def usage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ENGRAM, "usage", *args], capture_output=True, text=True, timeout=60, env=env
        )

    shown = usage()
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:4] == ["day", "task", "provider", "model"]
    assert len([line for line in lines if line.startswith("20")]) == 3  # today's three rows
    assert "1970" not in shown.stdout
    assert "$0.0091 of $0.01" in shown.stdout and "1,005 of 2,000,000 tokens (near)" in shown.stdout
    assert "openai: $0.0091, 1,005 tokens of 1,000 tokens (spent)" in shown.stdout
    data = json.loads(usage("--json", "--days", "1").stdout)
    assert (
        data["today"]["state"] == "near"
        and data["today"]["providers"]["openai"]["state"] == "spent"
    )
    assert {(r["task"], r["dropped"]) for r in data["rows"]} >= {("compress", 3)}
    bad = usage("--days", "0")
    assert bad.returncode == 2 and "--days must be at least 1" in bad.stderr


def make_env(tmp_path: Path) -> dict[str, str]:
    import os

    return {
        **os.environ,
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_CONFIG_DIR": str(tmp_path / "config"),
        "ENGRAM_LOG_LEVEL": "WARNING",
    }


def test_engram_status_prints_the_llm_line() -> None:
    from engram.cli.main import render_status

    off = render_status(
        {"ok": True, "llm": {"providers": [], "state": "off: no provider set"}}, "u"
    )
    assert "llm:          off: no provider set" in off
    on = render_status(
        {
            "ok": False,
            "llm": {
                "providers": ["openai", "anthropic"],
                "budget": {
                    "usd": 0.85,
                    "limitUsd": 1.0,
                    "tokens": 12345,
                    "limitTokens": 2000000,
                    "state": "near",
                },
                "backlog": {"pending": 7},
            },
        },
        "u",
    )
    assert (
        "llm:          openai, anthropic; today $0.85 of $1.00, 12,345 of 2,000,000 tokens "
        "(near); 7 waiting" in on
    )


def test_the_context_benchmark_can_run_the_llm_pass(fake: FakeLLMServer) -> None:
    import dataclasses

    from engram.bench.context import load_coding, run_coding

    data = load_coding()
    sessions = [s for s in data.sessions if s["project"] == "ledger-api"][:3]
    questions = [q for q in data.questions if q.project == "ledger-api"][:2]
    small = dataclasses.replace(data, sessions=sessions, questions=questions)
    plain = run_coding([1000], "none", data=small)
    assert plain["llm"] is None and fake.requests == []
    result = run_coding([1000], "none", data=small, llm_env=llm_env(fake))
    assert result["llm"]["summaries ok"] == 3 and result["llm"]["facts ok"] == 3
    assert result["llm"]["calls"] == 6 == len(fake.requests)
