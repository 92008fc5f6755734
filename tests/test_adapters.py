"""Host adapters: every real host payload through its adapter, what each host is answered, bad
payloads, event ids, the docs and the hot-path import rule."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engram.agents import registry
from engram.agents.adapters import copilot_cli, raw
from engram.agents.adapters._common import epoch_seconds
from engram.agents.contract import KINDS, BadPayload, HookEvent, event_id, observe_body

ROOT = Path(__file__).resolve().parents[1]
HOST_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hosts"
FIXTURES = sorted(HOST_FIXTURES.glob("*.json"))
HOSTS_DOC = ROOT / "docs" / "hosts.md"
CTX = "## Engram context\n- retries use jittered backoff"
HOOK_HOSTS = registry.with_hooks()

ACME = "/home/dev/src/acme-api"
CLAUDE_SID = "7f3c2a91-5b64-4e0d-9c1a-2d8e4f6b1a37"
CLAUDE_TRANSCRIPT = f"/home/dev/.claude/projects/-home-dev-src-acme-api/{CLAUDE_SID}.jsonl"
CODEX_SID = "019a3f5e-8c21-7d40-b6e2-4f9a1c0d7e55"
CODEX_TRANSCRIPT = (
    f"/home/dev/.codex/sessions/2026/08/20/rollout-2026-08-20T10-15-03-{CODEX_SID}.jsonl"
)
CURSOR_SID, CURSOR_GEN = (
    "c5e8a1f2-3b7d-4c9e-8a0f-6d2b1e4c7a93",
    "g-4f1a9c2e-7b3d-48e6-a5c0-9d2e1f8b6a74",
)
GEMINI_SID = "b7d2e9f4-1a3c-4e5b-8d6f-0c9a2b4e7f11"
GEMINI_TRANSCRIPT = "/home/dev/.gemini/tmp/3f9c.../chats/session-2026-08-20T10-20-b7d2e9f4.json"
GEMINI_TS = 1787221231.412  # 2026-08-20T10:20:31.412Z
WINDSURF_SID, WINDSURF_EXEC, WINDSURF_TS = "traj_5c1e9a2f7b3d", "exec_8a4f2c6e1d9b", 1787221500.0


def split_name(path: Path) -> tuple[str, str]:
    """``<host>-<event>[-<variant>].json`` -> (host, event); the longest host name wins."""
    host = max((h for h in HOOK_HOSTS if path.stem.startswith(h + "-")), key=len, default=None)
    assert host is not None, f"{path.name}: no adapter for this host (agents/registry.py)"
    return host, path.stem[len(host) + 1 :].split("-")[0]


def load(name: str) -> HookEvent:
    path = HOST_FIXTURES / name
    host, hook = split_name(path)
    return registry.load(host).normalise(hook, json.loads(path.read_text()))


# Every fixture, every field: what the adapter must make of it (None: must stay unset).
EXPECTED: dict[str, dict[str, Any]] = {
    "claude-code-PostToolUse-Edit.json": dict(
        kind="tool_post",
        session_id=CLAUDE_SID,
        tool_use_id="toolu_01Kq7tL3rS9uV2wX5yZ8aB1c",
        cwd=ACME,
        transcript_path=CLAUDE_TRANSCRIPT,
        tool_name="Edit",
        tool_input={
            "file_path": f"{ACME}/acme/client.py",
            "old_string": "backoff = 0.1",
            "new_string": "backoff = 0.5",
            "replace_all": False,
        },
        prompt=None,
        message=None,
        error=None,
        timestamp=None,
    ),
    "claude-code-PostToolUse.json": dict(
        kind="tool_post",
        tool_use_id="toolu_01Jm5sK2pQ8rT1vW4xY7zA9b",
        tool_name="Bash",
        tool_input={"command": "pytest tests/test_client.py -q", "description": "Run client tests"},
        tool_output={
            "stdout": "..F.\n1 failed, 3 passed in 0.84s\n",
            "stderr": "",
            "interrupted": False,
            "isImage": False,
        },
    ),
    "claude-code-PostToolUseFailure.json": dict(
        kind="tool_failure",
        tool_name="Bash",
        tool_input={"command": "make lint"},
        error="Command failed with exit code 2: make: *** No rule to make target 'lint'.",
        tool_use_id="toolu_01Lr8uM4sT0vW3xY6zA9bC2d",
        tool_output=None,
    ),
    "claude-code-PreCompact.json": dict(kind="compact", session_id=CLAUDE_SID, tool_name=None),
    "claude-code-PreToolUse.json": dict(
        kind="tool_pre",
        tool_name="Read",
        tool_use_id="toolu_01HxQ2vN8mR4kLp7sT9wYb3c",
        tool_input={"file_path": f"{ACME}/tests/test_client.py"},
        tool_output=None,
    ),
    "claude-code-SessionEnd.json": dict(kind="session_end", session_id=CLAUDE_SID, cwd=ACME),
    "claude-code-SessionStart.json": dict(
        kind="session_start", session_id=CLAUDE_SID, cwd=ACME, transcript_path=CLAUDE_TRANSCRIPT
    ),
    "claude-code-Stop.json": dict(
        kind="agent_response",
        message="The retry test was flaky because backoff jitter could "
        "exceed the 1s timeout. I raised the base backoff and seeded the jitter in the test.",
    ),
    "claude-code-SubagentStop.json": dict(
        kind="subagent_stop",
        subagent_id="a1b2c3d4",
        tool_input={"agentId": "a1b2c3d4", "agentType": "Explore"},
        message="Found 3 call sites of RetryPolicy in acme/client.py and acme/jobs.py.",
    ),
    "claude-code-UserPromptSubmit.json": dict(
        kind="prompt",
        session_id=CLAUDE_SID,
        tool_name=None,
        prompt="Fix the flaky retry test in tests/test_client.py and explain the root cause",
    ),
    "codex-PostToolUse.json": dict(
        kind="tool_post",
        session_id=CODEX_SID,
        turn_id="turn_0001",
        tool_use_id="call_9eL3nR5wY2qM8sT4",
        cwd=ACME,
        transcript_path=CODEX_TRANSCRIPT,
        tool_name="Bash",
        tool_input={"command": "python scripts/migrate.py --help"},
        tool_output="usage: migrate.py [-h] [--dry-run] target\n",
    ),
    "codex-PreToolUse.json": dict(
        kind="tool_pre",
        turn_id="turn_0001",
        tool_use_id="call_8dK2mQ4vX1pL7rS3",
        tool_name="Bash",
        tool_input={"command": "cat scripts/migrate.py"},
        tool_output=None,
    ),
    "codex-SessionStart.json": dict(
        kind="session_start",
        session_id=CODEX_SID,
        turn_id=None,
        cwd=ACME,
        transcript_path=CODEX_TRANSCRIPT,
    ),
    "codex-Stop.json": dict(
        kind="agent_response",
        turn_id="turn_0001",
        message="Added --dry-run; it prints the SQL plan without executing it.",
    ),
    "codex-UserPromptSubmit.json": dict(
        kind="prompt", turn_id="turn_0001", prompt="Add a --dry-run flag to scripts/migrate.py"
    ),
    "cursor-afterAgentResponse.json": dict(
        kind="agent_response",
        session_id=CURSOR_SID,
        turn_id=CURSOR_GEN,
        cwd=ACME,
        message="I switched pagination to keyset cursors; offset paging is removed.",
        tool_name=None,
        transcript_path=None,
        timestamp=None,
    ),
    "cursor-afterFileEdit.json": dict(
        kind="file_edit",
        session_id=CURSOR_SID,
        turn_id=CURSOR_GEN,
        cwd=ACME,
        tool_name="Edit",
        tool_input={
            "file_path": f"{ACME}/acme/pagination.py",
            "edits": [{"old_string": "offset += limit", "new_string": "cursor = rows[-1].id"}],
        },
    ),
    "cursor-afterMCPExecution.json": dict(
        kind="tool_post",
        tool_name="mcp__github__get_issue",
        tool_input={"owner": "acme", "repo": "api", "issue_number": 412},
        tool_output={"title": "Pagination skips rows", "state": "open"},
    ),
    "cursor-afterShellExecution.json": dict(
        kind="tool_post",
        tool_name="Shell",
        tool_input={"command": "npm test -- pagination"},
        tool_output="PASS  tests/pagination.test.ts (4 tests)\n",
        cwd=ACME,
    ),
    "cursor-beforeSubmitPrompt.json": dict(
        kind="prompt",
        session_id=CURSOR_SID,
        turn_id=CURSOR_GEN,
        cwd=ACME,
        prompt="Refactor the pagination helper to use cursors",
    ),
    "cursor-stop.json": dict(kind="agent_response", turn_id=CURSOR_GEN, message=None, error=None),
    "gemini-cli-AfterAgent.json": dict(
        kind="agent_response",
        session_id=GEMINI_SID,
        cwd=ACME,
        transcript_path=GEMINI_TRANSCRIPT,
        timestamp=GEMINI_TS,
        prompt="Why does the nightly export job OOM?",
        message="export() materializes all rows via read_all(); switch to a server-side cursor "
        "with fetchmany(10000).",
    ),
    "gemini-cli-AfterTool-mcp.json": dict(
        kind="tool_post",
        tool_name="mcp__github__get_issue",
        tool_input={"owner": "acme", "repo": "api", "issue_number": 412},
        tool_output={"llmContent": '{"title":"Export OOM"}', "returnDisplay": "issue #412"},
    ),
    "gemini-cli-AfterTool.json": dict(
        kind="tool_post",
        tool_name="read_file",
        error=None,
        tool_input={"absolute_path": f"{ACME}/jobs/export.py"},
        tool_output={
            "llmContent": "def export():\n    rows = cursor.read_all()\n",
            "returnDisplay": "Read jobs/export.py",
        },
    ),
    "gemini-cli-BeforeAgent.json": dict(
        kind="prompt", timestamp=GEMINI_TS, prompt="Why does the nightly export job OOM?"
    ),
    "gemini-cli-BeforeTool.json": dict(
        kind="tool_pre",
        tool_name="run_shell_command",
        tool_output=None,
        tool_input={
            "command": "grep -rn 'read_all' jobs/export.py",
            "description": "Find eager reads",
        },
    ),
    "gemini-cli-Notification.json": dict(
        kind="notification",
        tool_name=None,
        tool_input=None,
        message="Gemini wants to run: rm -rf build/",
    ),
    "gemini-cli-PreCompress.json": dict(kind="compact", session_id=GEMINI_SID, timestamp=GEMINI_TS),
    "gemini-cli-SessionEnd.json": dict(kind="session_end", session_id=GEMINI_SID, cwd=ACME),
    "gemini-cli-SessionStart.json": dict(
        kind="session_start",
        session_id=GEMINI_SID,
        cwd=ACME,
        transcript_path=GEMINI_TRANSCRIPT,
        timestamp=GEMINI_TS,
    ),
    "kimi-PostToolUse.json": dict(
        kind="tool_post",
        session_id="kimi_4b9e2d1a7c",
        tool_use_id="c1",
        cwd=ACME,
        tool_name="Read",
        tool_input={"path": f"{ACME}/importer/csv.py"},
        tool_output="import csv\n...",
    ),
    "kimi-SessionStart.json": dict(kind="session_start", session_id="kimi_4b9e2d1a7c", cwd=ACME),
    "kimi-UserPromptSubmit.json": dict(kind="prompt", prompt="Speed up the CSV importer"),
    "windsurf-post_cascade_response.json": dict(
        kind="agent_response",
        session_id=WINDSURF_SID,
        turn_id=WINDSURF_EXEC,
        timestamp=WINDSURF_TS,
        cwd=None,
        message="Added express-rate-limit (5 req/min) to POST /login and a test.",
    ),
    "windsurf-post_mcp_tool_use.json": dict(
        kind="tool_post",
        tool_name="mcp__github__create_issue",
        tool_input={"title": "Rate limit login"},
        tool_output={"number": 418},
        cwd=None,
    ),
    "windsurf-post_run_command.json": dict(
        kind="tool_post",
        tool_name="Shell",
        cwd=ACME,
        tool_output=None,
        tool_input={"command": "npm run test -- auth", "cwd": ACME},
    ),
    "windsurf-post_write_code.json": dict(
        kind="file_edit",
        tool_name="Edit",
        tool_input={
            "file_path": f"{ACME}/src/routes/login.ts",
            "edits": [
                {
                    "old_string": "router.post('/login', login)",
                    "new_string": "router.post('/login', rateLimit({max:5}), login)",
                }
            ],
        },
    ),
    "windsurf-pre_user_prompt.json": dict(
        kind="prompt",
        session_id=WINDSURF_SID,
        turn_id=WINDSURF_EXEC,
        prompt="Add rate limiting to the /login route",
    ),
}


# --- fixtures ---------------------------------------------------------------------------------


def test_every_fixture_is_checked() -> None:
    assert len(FIXTURES) >= 30
    assert {p.name for p in FIXTURES} <= set(EXPECTED), "a new fixture needs expected fields"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_every_fixture_host_has_an_adapter(path: Path) -> None:
    host, hook = split_name(path)
    adapter = registry.load(host)
    assert host == adapter.HOST
    assert hook in adapter.EVENTS, f"{path.name}: {hook} is not in {host}'s EVENTS"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_normalises_to_the_expected_fields(name: str) -> None:
    event = load(name)
    host, hook = split_name(HOST_FIXTURES / name)
    assert (event.host, event.hook) == (host, hook)
    assert event.kind == registry.load(host).EVENTS[hook] or event.kind == "tool_failure"
    for field, want in EXPECTED[name].items():
        assert getattr(event, field) == want, field


def test_gemini_tool_error_is_a_failure() -> None:
    payload = json.loads((HOST_FIXTURES / "gemini-cli-AfterTool.json").read_text())
    payload["tool_response"]["error"] = "ENOENT: no such file jobs/export.py"
    event = registry.load("gemini-cli").normalise("AfterTool", payload)
    assert (event.kind, event.error) == ("tool_failure", "ENOENT: no such file jobs/export.py")


def test_codex_stop_failure_keeps_category_and_details() -> None:
    payload = {
        "session_id": CODEX_SID,
        "cwd": ACME,
        "turn_id": "turn_0002",
        "hook_event_name": "StopFailure",
        "error": "rate_limit",
        "error_details": "429 Too Many Requests",
        "last_assistant_message": None,
    }
    event = registry.load("codex").normalise("StopFailure", payload)
    assert (event.kind, event.error, event.turn_id) == (
        "other",
        "rate_limit: 429 Too Many Requests",
        "turn_0002",
    )


def test_cursor_generic_tool_hooks_and_failures() -> None:
    base = {
        "conversation_id": CURSOR_SID,
        "generation_id": CURSOR_GEN,
        "workspace_roots": [ACME],
        "tool_use_id": "tool_81a2",
    }
    cursor = registry.load("cursor")
    post = cursor.normalise(
        "postToolUse",
        {
            **base,
            "tool_name": "Shell",
            "tool_input": '{"command": "ls"}',
            "tool_output": '{"output": "a.py\\n"}',
        },
    )
    assert (post.tool_input, post.tool_output, post.tool_use_id) == (
        {"command": "ls"},
        {"output": "a.py\n"},
        "tool_81a2",
    )
    failed = cursor.normalise(
        "postToolUseFailure", {**base, "tool_name": "Shell", "error_message": "exit 1"}
    )
    assert (failed.kind, failed.error) == ("tool_failure", "exit 1")
    stop = cursor.normalise("stop", {**base, "status": "error", "loop_count": 0})
    assert stop.error == "agent loop ended: error"
    read = cursor.normalise(
        "beforeReadFile", {**base, "file_path": f"{ACME}/.env", "content": "SECRET=1"}
    )
    assert (read.tool_name, read.tool_input, read.tool_output) == (
        "Read",
        {"file_path": f"{ACME}/.env"},
        None,
    )  # the file's content is not captured


def test_kimi_subagent_notification_and_stop_failure() -> None:
    kimi = registry.load("kimi")
    base = {"session_id": "kimi_4b9e2d1a7c", "cwd": ACME}
    sub = kimi.normalise("SubagentStop", {**base, "agent_name": "coder", "response": "done"})
    assert (sub.kind, sub.tool_input, sub.message) == (
        "subagent_stop",
        {"agentName": "coder"},
        "done",
    )
    note = kimi.normalise("Notification", {**base, "title": "Task", "body": "build finished"})
    assert (note.kind, note.message) == ("notification", "Task: build finished")
    fail = kimi.normalise(
        "StopFailure", {**base, "error_type": "rate_limit", "error_message": "slow down"}
    )
    assert fail.error == "rate_limit: slow down"


# --- Copilot CLI (no fixture: payloads from the Copilot CLI hooks reference) ------------------

COPILOT_PRE = {
    "timestamp": 1787221800123,
    "cwd": ACME,
    "toolName": "bash",
    "toolArgs": '{"command": "npm test", "description": "run tests"}',
}
COPILOT_POST = {
    **COPILOT_PRE,
    "timestamp": 1787221803456,
    "toolResult": {"resultType": "success", "textResultForLlm": "4 passing"},
}


def test_copilot_camel_case_payloads() -> None:
    copilot = registry.load("copilot-cli")
    pre = copilot.normalise("preToolUse", COPILOT_PRE)
    assert (pre.kind, pre.tool_name, pre.tool_input, pre.cwd, pre.timestamp) == (
        "tool_pre",
        "bash",
        {"command": "npm test", "description": "run tests"},
        ACME,
        1787221800.123,
    )
    post = copilot.normalise("postToolUse", COPILOT_POST)
    assert (post.kind, post.tool_output, post.error) == (
        "tool_post",
        {"resultType": "success", "textResultForLlm": "4 passing"},
        None,
    )
    failed = copilot.normalise(
        "postToolUse",
        {
            **COPILOT_POST,
            "toolResult": {
                "resultType": "failure",
                "textResultForLlm": "npm ERR! missing script: test",
            },
        },
    )
    assert (failed.kind, failed.error) == ("tool_failure", "failure: npm ERR! missing script: test")
    prompt = copilot.normalise(
        "userPromptSubmitted",
        {"timestamp": 1787221799000, "cwd": ACME, "prompt": "Fix the login test"},
    )
    assert (prompt.kind, prompt.prompt, prompt.timestamp) == (
        "prompt",
        "Fix the login test",
        1787221799.0,
    )
    error = copilot.normalise(
        "errorOccurred",
        {
            "timestamp": 1787221805000,
            "cwd": ACME,
            "errorContext": "model_call",
            "error": {"message": "rate limited", "name": "RateLimitError", "stack": "at x"},
        },
    )
    assert (error.kind, error.error) == (
        "other",
        "RateLimitError: rate limited (during model_call)",
    )
    end = copilot.normalise(
        "sessionEnd", {"timestamp": 1787221900000, "cwd": ACME, "reason": "user_exit"}
    )
    assert end.kind == "session_end"


def test_copilot_session_id_from_payload_or_derived() -> None:
    copilot = registry.load("copilot-cli")
    given = copilot.normalise(
        "sessionStart", {"sessionId": "c0pilot-1", "timestamp": 1, "cwd": ACME, "source": "new"}
    )
    assert given.session_id == "c0pilot-1"
    first = copilot.normalise(
        "sessionStart", {"timestamp": 1787221700000, "cwd": ACME, "source": "new"}
    )
    later = copilot.normalise("preToolUse", COPILOT_PRE)
    assert first.session_id == later.session_id == copilot_cli.derived_session_id(ACME)
    assert first.session_id.startswith("copilot-")
    assert copilot_cli.derived_session_id(ACME, 4242) != copilot_cli.derived_session_id(ACME, 4243)
    assert copilot_cli.derived_session_id(ACME, 1) != copilot_cli.derived_session_id("/srv", 1)


def test_copilot_vscode_compatible_payloads() -> None:
    event = registry.load("copilot-cli").normalise(
        "PostToolUse",
        {
            "hook_event_name": "PostToolUse",
            "session_id": "s-9",
            "timestamp": "2026-08-20T10:30:00Z",
            "cwd": ACME,
            "tool_name": "view",
            "tool_input": {"path": f"{ACME}/a.py"},
            "tool_result": {"result_type": "success", "text_result_for_llm": "x = 1"},
        },
    )
    assert (event.kind, event.session_id, event.tool_name, event.tool_input, event.timestamp) == (
        "tool_post",
        "s-9",
        "view",
        {"path": f"{ACME}/a.py"},
        1787221800.0,
    )


# --- raw --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "kind"),
    [
        ("SessionStart", "session_start"),
        ("session_start", "session_start"),
        ("session-end", "session_end"),
        ("UserPromptSubmit", "prompt"),
        ("PostToolUse", "tool_post"),
        ("tool_pre", "tool_pre"),
        ("PostToolUseFailure", "tool_failure"),
        ("Stop", "agent_response"),
        ("PreCompact", "compact"),
        ("deploy", "other"),
    ],
)
def test_raw_infers_the_kind_from_the_event_name(hook: str, kind: str) -> None:
    assert raw.kind_of(hook) == kind


@pytest.mark.parametrize("style", ["camel", "snake"])
def test_raw_reads_the_observe_shape(style: str) -> None:
    camel = {
        "sessionId": "job-17",
        "project": "acme-api",
        "cwd": ACME,
        "hookType": "PostToolUse",
        "toolName": "Bash",
        "toolInput": {"command": "make test"},
        "toolOutput": {"stdout": "ok"},
        "prompt": None,
        "timestamp": 1787221800,
        "eventId": "ci-run-17-step-3",
        "transcriptPath": f"{ACME}/log.jsonl",
    }
    snake = {re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), k): v for k, v in camel.items()}
    event = raw.normalise("PostToolUse", camel if style == "camel" else snake)
    assert (
        event.kind,
        event.session_id,
        event.project,
        event.cwd,
        event.tool_name,
        event.tool_input,
        event.tool_output,
        event.timestamp,
        event.tool_use_id,
        event.transcript_path,
    ) == (
        "tool_post",
        "job-17",
        "acme-api",
        ACME,
        "Bash",
        {"command": "make test"},
        {"stdout": "ok"},
        1787221800.0,
        "ci-run-17-step-3",
        f"{ACME}/log.jsonl",
    )
    assert event_id(event, 0.0) == "raw:job-17:PostToolUse:ci-run-17-step-3"


# --- timestamps -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2026-08-20T10:20:31.412Z", GEMINI_TS),
        ("2026-08-20T12:20:31.412+02:00", GEMINI_TS),
        ("2026-08-20T10:20:31.412", GEMINI_TS),
        (1787221231412, GEMINI_TS),
        (1787221231.412, GEMINI_TS),
        ("1787221231412", GEMINI_TS),
        (None, None),
        ("", None),
    ],
)
def test_epoch_seconds(value: Any, seconds: float | None) -> None:
    got = epoch_seconds(value)
    assert got == pytest.approx(seconds) if seconds is not None else got is None


@pytest.mark.parametrize("value", [True, {"t": 1}, [1], "yesterday", -5])
def test_epoch_seconds_rejects(value: Any) -> None:
    with pytest.raises(BadPayload, match="timestamp"):
        epoch_seconds(value)


# --- respond ----------------------------------------------------------------------------------


def claude_envelope(context: str) -> str:
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
    )


SESSION_START = {  # host -> (its session-start hook, what it prints with CTX)
    "claude-code": ("SessionStart", claude_envelope(CTX)),
    "codex": ("SessionStart", claude_envelope(CTX)),
    "gemini-cli": ("SessionStart", claude_envelope(CTX)),
    "cursor": ("sessionStart", json.dumps({"additional_context": CTX})),
    "kimi": ("SessionStart", CTX),
    "raw": ("session_start", CTX),
    "copilot-cli": ("sessionStart", ""),  # Copilot ignores sessionStart output
    "windsurf": (None, ""),  # no session-start hook
}


def test_every_host_has_a_session_start_answer() -> None:
    assert set(SESSION_START) == set(HOOK_HOSTS)


@pytest.mark.parametrize("host", sorted(SESSION_START))
def test_session_start_answers_with_the_context(host: str) -> None:
    adapter = registry.load(host)
    hook, want = SESSION_START[host]
    if hook is None:
        assert "session_start" not in adapter.EVENTS.values()
        hook = next(iter(adapter.EVENTS))
    event = HookEvent(host, hook, "session_start", session_id="s1")
    out = adapter.respond(event, CTX)
    assert out == want
    if out.startswith("{"):  # the envelope carries the block unchanged
        decoded = json.loads(out)
        leaf = (
            decoded.get("additional_context") or decoded["hookSpecificOutput"]["additionalContext"]
        )
        assert leaf == CTX
    none = adapter.respond(event, None)
    assert none in ("", "{}")
    if host != "cursor":
        assert none == ""


ANSWERS = {  # host -> hook -> what it prints on a normal event (every other hook: "")
    "cursor": {
        "beforeShellExecution": "{}",
        "beforeMCPExecution": "{}",
        "beforeReadFile": "{}",
        "preToolUse": "{}",
        "beforeSubmitPrompt": '{"continue": true}',
    },
}


PROMPT_ANSWERS = {  # host -> how its prompt hook adds context (the others cannot)
    "claude-code": ("hookSpecificOutput", "UserPromptSubmit"),
    "codex": ("hookSpecificOutput", "UserPromptSubmit"),
    "gemini-cli": ("hookSpecificOutput", "BeforeAgent"),
    "kimi": ("stdout", None),
}


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
def test_a_prompt_hook_adds_context_where_the_host_takes_it(host: str) -> None:
    adapter = registry.load(host)
    assert bool(getattr(adapter, "PROMPT_CONTEXT", False)) == (host in PROMPT_ANSWERS)
    for hook, kind in adapter.EVENTS.items():
        if kind != "prompt" or host not in PROMPT_ANSWERS:
            continue
        event = HookEvent(host, hook, kind, session_id="s1")
        assert adapter.respond(event, None) == ""  # nothing cleared the bar: nothing printed
        printed = adapter.respond(event, CTX)
        shape, name = PROMPT_ANSWERS[host]
        if shape == "stdout":
            assert printed == CTX
        else:
            out = json.loads(printed)["hookSpecificOutput"]
            assert out == {"hookEventName": name, "additionalContext": CTX}


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
def test_other_events_get_what_the_host_expects(host: str) -> None:
    adapter = registry.load(host)
    for hook, kind in adapter.EVENTS.items():
        if kind == "session_start" or (kind == "prompt" and host in PROMPT_ANSWERS):
            continue
        event = HookEvent(host, hook, kind, session_id="s1")
        want = ANSWERS.get(host, {}).get(hook, "")
        for context in (CTX, None):
            assert adapter.respond(event, context) == want, (hook, context)
        if want:
            json.loads(want)  # a verdict is JSON, and never a block


# --- bad payloads -----------------------------------------------------------------------------


def fixture_for(host: str) -> tuple[str, dict[str, Any]]:
    """One real payload of the host (Copilot: from its docs)."""
    if host == "copilot-cli":
        return "preToolUse", dict(COPILOT_PRE, sessionId="s1")
    if host == "raw":
        return "PostToolUse", {"sessionId": "s1", "cwd": ACME, "toolName": "Bash"}
    path = next(p for p in FIXTURES if split_name(p)[0] == host)
    return split_name(path)[1], json.loads(path.read_text())


SESSION_KEY = {
    "claude-code": "session_id",
    "codex": "session_id",
    "gemini-cli": "session_id",
    "kimi": "session_id",
    "cursor": "conversation_id",
    "windsurf": "trajectory_id",
    "copilot-cli": "sessionId",
    "raw": "sessionId",
}


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
@pytest.mark.parametrize("payload", [[], "text", 42, None], ids=["list", "str", "int", "none"])
def test_payload_must_be_an_object(host: str, payload: Any) -> None:
    with pytest.raises(BadPayload, match="payload must be a JSON object"):
        registry.load(host).normalise(fixture_for(host)[0], payload)


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
@pytest.mark.parametrize("bad", ["../../etc", "a/b", "x..y", "", 3.5, {"id": 1}])
def test_unsafe_session_ids_are_rejected(host: str, bad: Any) -> None:
    hook, payload = fixture_for(host)
    payload = dict(payload, **{SESSION_KEY[host]: bad})
    if bad == "":  # absent is not an error; only a present, unsafe one is
        return
    with pytest.raises(BadPayload, match=SESSION_KEY[host]):
        registry.load(host).normalise(hook, payload)


CWD_HOSTS = ["claude-code", "codex", "gemini-cli", "kimi", "copilot-cli", "raw"]


@pytest.mark.parametrize("host", CWD_HOSTS)
@pytest.mark.parametrize("bad", ["src/acme", "/home/dev/../../etc", "/tmp/a\nb", 7])
def test_bad_cwd_is_rejected(host: str, bad: Any) -> None:
    hook, payload = fixture_for(host)
    with pytest.raises(BadPayload, match="cwd"):
        registry.load(host).normalise(hook, dict(payload, cwd=bad))


@pytest.mark.parametrize(
    ("host", "key", "value", "field"),
    [
        ("claude-code", "transcript_path", "../t.jsonl", "transcript_path"),
        ("gemini-cli", "transcript_path", "/tmp/../t.json", "transcript_path"),
        ("cursor", "workspace_roots", ["relative/root"], "workspace_roots"),
        ("cursor", "workspace_roots", "/home/dev", "workspace_roots"),
        ("cursor", "generation_id", "g/1", "generation_id"),
        ("windsurf", "execution_id", "..", "execution_id"),
        ("windsurf", "tool_info", "not an object", "tool_info"),
        ("kimi", "tool_call_id", "c/1", "tool_call_id"),
        ("codex", "turn_id", "turn 1", "turn_id"),
        ("claude-code", "tool_use_id", ["x"], "tool_use_id"),
        ("claude-code", "tool_name", 12, "tool_name"),
        ("gemini-cli", "timestamp", {"at": 1}, "timestamp"),
        ("copilot-cli", "toolResult", "ok", "toolResult"),
        ("copilot-cli", "toolName", ["bash"], "toolName"),
        ("raw", "eventId", "a/b", "eventId"),
        ("raw", "project", "x\ny", "project"),
    ],
)
def test_wrong_fields_are_rejected_with_their_name(
    host: str, key: str, value: Any, field: str
) -> None:
    hook, payload = fixture_for(host)
    with pytest.raises(BadPayload, match=field):
        registry.load(host).normalise(hook, dict(payload, **{key: value}))


def test_windsurf_command_cwd_is_validated() -> None:
    payload = json.loads((HOST_FIXTURES / "windsurf-post_run_command.json").read_text())
    payload["tool_info"]["cwd"] = "../elsewhere"
    with pytest.raises(BadPayload, match=r"tool_info\.cwd"):
        registry.load("windsurf").normalise("post_run_command", payload)


# --- event ids --------------------------------------------------------------------------------

PAIRS = {  # host -> (pre hook, post hook, payload carrying both)
    "claude-code": ("PreToolUse", "PostToolUse", "claude-code-PreToolUse.json"),
    "codex": ("PreToolUse", "PostToolUse", "codex-PostToolUse.json"),
    "gemini-cli": ("BeforeTool", "AfterTool", "gemini-cli-AfterTool.json"),
    "kimi": ("PreToolUse", "PostToolUse", "kimi-PostToolUse.json"),
    "cursor": ("beforeMCPExecution", "afterMCPExecution", "cursor-afterMCPExecution.json"),
    "windsurf": ("pre_mcp_tool_use", "post_mcp_tool_use", "windsurf-post_mcp_tool_use.json"),
}


def pair_payload(host: str) -> tuple[str, str, dict[str, Any]]:
    if host == "copilot-cli":
        return "preToolUse", "postToolUse", COPILOT_POST
    if host == "raw":
        return (
            "PreToolUse",
            "PostToolUse",
            {"sessionId": "s1", "eventId": "call-1", "toolName": "Bash"},
        )
    pre, post, name = PAIRS[host]
    return pre, post, json.loads((HOST_FIXTURES / name).read_text())


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
def test_event_ids_tell_pre_from_post_and_recognise_replays(host: str) -> None:
    adapter = registry.load(host)
    pre_hook, post_hook, payload = pair_payload(host)
    pre, post = adapter.normalise(pre_hook, payload), adapter.normalise(post_hook, payload)
    replay = adapter.normalise(post_hook, json.loads(json.dumps(payload)))
    ids = [event_id(e, 1787221999.0) for e in (pre, post, replay)]
    assert ids[0] != ids[1]
    assert ids[1] == ids[2]
    body = observe_body(post, ids[1])
    assert body["eventId"] == ids[1] and body["hookType"] == post_hook and body["host"] == host
    assert body["sessionId"] == post.session_id and post.session_id
    assert body.get("toolName") == post.tool_name


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_observe_bodies(path: Path) -> None:
    event = load(path.name)
    body = observe_body(event, event_id(event, 1.0))
    assert body["host"] == event.host and body["hookType"] == event.hook
    assert body["eventKind"] == event.kind  # what happened, so the gateway needs no host names
    if event.tool_use_id:
        assert body["eventId"].endswith(":" + event.tool_use_id)
    elif event.turn_id and event.kind in ("prompt", "agent_response"):
        assert body["eventId"].endswith(":turn:" + event.turn_id)
    else:
        assert body["eventId"].startswith("derived:")
    if event.message and event.tool_output is None:
        assert body["toolOutput"]["message"] == event.message


def test_turn_scoped_ids_and_host_timestamps() -> None:
    cursor_answer = load("cursor-afterAgentResponse.json")
    assert event_id(cursor_answer, 0) == f"cursor:{CURSOR_SID}:afterAgentResponse:turn:{CURSOR_GEN}"
    gemini = load("gemini-cli-SessionStart.json")  # no host ids: the host's clock decides
    assert event_id(gemini, 1.0) == event_id(gemini, 2.0)


# --- docs -------------------------------------------------------------------------------------


def doc_sections() -> dict[str, str]:
    text = HOSTS_DOC.read_text()
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return {part.splitlines()[0].strip(): part for part in parts}


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
def test_every_adapter_is_documented(host: str) -> None:
    adapter = registry.load(host)
    sections = doc_sections()
    title = next((t for t in sections if t.startswith(adapter.DISPLAY)), None)
    assert title, f"docs/hosts.md has no '## {adapter.DISPLAY}' section"
    section = sections[title]
    assert f"engram hook {host}" in section
    missing = [e for e in adapter.EVENTS if f"`{e}`" not in section]
    assert not missing, f"{host}: events not documented in docs/hosts.md: {missing}"


def test_every_kind_is_known() -> None:
    for host in HOOK_HOSTS:
        assert set(registry.load(host).EVENTS.values()) <= KINDS, host


# --- hot path ---------------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(set(registry.BUILT_IN.values())))
def test_adapters_import_only_the_standard_library(module: str) -> None:
    probe = (
        "import sys, json\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        "bad = sorted(m for m in set(sys.modules) - before"
        " if m.split('.')[0] not in sys.stdlib_module_names"
        " and m not in ('engram', 'engram.wire') and not m.startswith('engram.agents'))\n"
        "print(json.dumps({'bad': bad, 'typing': 'typing' in sys.modules,"
        " 'dataclasses': 'dataclasses' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == {"bad": [], "typing": False, "dataclasses": False}


@pytest.mark.parametrize("host", sorted(HOOK_HOSTS))
def test_each_host_says_once_which_events_connect_registers(host: str) -> None:
    """The adapter is the one description of a host's events: connect registers its CONNECT
    events with the adapter's kinds, never a "before" event (Engram only observes)."""
    from engram.agents.hostconfig.hosts import events_for

    adapter = registry.load(host)
    connect = getattr(adapter, "CONNECT", ())
    assert set(connect) <= set(adapter.EVENTS)
    assert events_for(host) == {e: adapter.EVENTS[e] for e in connect}
    assert "tool_pre" not in events_for(host).values()
    if host != "raw":
        assert {"prompt", "tool_post"} <= set(events_for(host).values())


def test_a_host_writes_hooks_exactly_where_its_module_has_events_to_register() -> None:
    """Each host is one module: a connect record writes hooks exactly when the same module is
    a hook adapter with events to register (raw has none to write: it is for scripts)."""
    from engram.agents.hostconfig.hosts import connect_hosts

    records, problems = connect_hosts()
    assert problems == {}
    assert list(records) == [n for n in registry.BUILT_IN if n != "raw"]
    for name, record in records.items():
        writes_hooks = any(part.kind == "hooks" for part in record.parts)
        assert writes_hooks == (name in HOOK_HOSTS), name
        module = registry.load(name)
        assert record.display == module.DISPLAY and bool(getattr(module, "CONNECT", ())) == (
            name in HOOK_HOSTS
        ), name
    assert set(HOOK_HOSTS) - set(records) == {"raw"}
