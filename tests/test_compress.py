"""Synthetic compression: what a captured event turns into, per kind and per host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram.compress import DEFAULT_MAX_CHARS, TITLE_MAX_CHARS, Compressed, clip, compress

HOST_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hosts"
HOSTS = ("claude-code", "gemini-cli", "codex", "cursor", "windsurf", "kimi", "copilot-cli")
KINDS = {
    "prompt",
    "command",
    "edit",
    "read",
    "search",
    "web",
    "agent",
    "tool",
    "error",
    "session",
    "note",
}


def normalised(path: Path) -> dict[str, Any]:
    """Map a host payload to the gateway's observe shape, the way an adapter would, roughly."""
    raw = json.loads(path.read_text())
    host = next(h for h in HOSTS if path.name.startswith(h + "-"))
    fields = {**raw, **(raw.get("tool_info") or {})}  # Windsurf nests everything in tool_info

    def pick(*keys: str) -> Any:
        return next((fields[k] for k in keys if fields.get(k) not in (None, "")), None)

    tool = pick("tool_name", "toolName", "tool")
    if not tool and "mcp_tool_name" in fields:
        tool = f"mcp__{fields['mcp_server_name']}__{fields['mcp_tool_name']}"
    tool_input = pick("tool_input", "toolInput", "tool_args", "toolArgs", "mcp_tool_arguments")
    if tool_input is None and pick("command", "command_line"):
        tool_input = {"command": pick("command", "command_line")}
    if tool_input is None and "file_path" in fields:
        tool_input = {"file_path": fields["file_path"], "edits": fields.get("edits", [])}
    return {
        "sessionId": pick("session_id", "conversation_id", "trajectory_id"),
        "project": pick("cwd") or "acme-api",
        "host": host,
        "hookType": pick("hook_event_name", "agent_action_name") or path.stem[len(host) + 1 :],
        "toolName": tool,
        "toolInput": tool_input,
        "toolOutput": pick(
            "tool_response",
            "tool_output",
            "toolResult",
            "output",
            "result",
            "result_json",
            "mcp_result",
            "last_assistant_message",
            "prompt_response",
            "text",
            "response",
            "message",
        ),
        "prompt": pick("prompt", "user_prompt"),
        "error": pick("error"),
        "timestamp": pick("timestamp"),
    }


def fixture(name: str) -> dict[str, Any]:
    return normalised(HOST_FIXTURES / name)


def event(
    tool: str | None = None,
    tool_input: Any = None,
    tool_output: Any = None,
    hook: str = "PostToolUse",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "sessionId": "s1",
        "project": "/home/dev/src/app",
        "host": "claude-code",
        "hookType": hook,
        "toolName": tool,
        "toolInput": tool_input,
        "toolOutput": tool_output,
        **extra,
    }


def bash(command: str, output: Any) -> Compressed:
    return compress(event("Bash", {"command": command}, output))


def test_host_fixtures_are_there() -> None:
    assert len(list(HOST_FIXTURES.glob("*.json"))) >= 30


@pytest.mark.parametrize("path", sorted(HOST_FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_every_host_fixture_compresses(path: Path) -> None:
    result = compress(normalised(path))
    assert result.kind in KINDS
    assert result.title.strip() and "\n" not in result.title
    assert len(result.title) <= TITLE_MAX_CHARS
    assert result.text.startswith(result.title)
    assert len(result.text) <= DEFAULT_MAX_CHARS


@pytest.mark.parametrize(
    ("name", "kind", "title"),
    [
        ("claude-code-UserPromptSubmit.json", "prompt", "Prompt: Fix the flaky retry test"),
        ("claude-code-PostToolUse-Edit.json", "edit", "Edited acme/client.py"),
        ("claude-code-PreToolUse.json", "read", "Read tests/test_client.py"),
        ("claude-code-SessionStart.json", "session", "Session started"),
        ("claude-code-Stop.json", "session", "Agent finished: The retry test was flaky"),
        ("codex-PostToolUse.json", "command", "Ran `python scripts/migrate.py --help`"),
        ("cursor-afterShellExecution.json", "command", "Ran `npm test -- pagination`"),
        ("cursor-afterFileEdit.json", "edit", "Edited acme/pagination.py"),
        ("cursor-afterMCPExecution.json", "tool", "Called github.get_issue (MCP)"),
        ("gemini-cli-AfterTool.json", "read", "Read jobs/export.py"),
        ("gemini-cli-AfterTool-mcp.json", "tool", "Called github.get_issue (MCP)"),
        ("gemini-cli-BeforeTool.json", "command", "Ran `grep -rn 'read_all' jobs/export.py`"),
        ("gemini-cli-Notification.json", "session", "Notification: Gemini wants to run"),
        ("kimi-PostToolUse.json", "read", "Read importer/csv.py"),
        ("kimi-UserPromptSubmit.json", "prompt", "Prompt: Speed up the CSV importer"),
        ("windsurf-post_run_command.json", "command", "Ran `npm run test -- auth`"),
        ("windsurf-post_write_code.json", "edit", "Edited src/routes/login.ts"),
        ("windsurf-pre_user_prompt.json", "prompt", "Prompt: Add rate limiting"),
    ],
)
def test_fixture_kinds_and_titles(name: str, kind: str, title: str) -> None:
    result = compress(fixture(name))
    assert (result.kind, result.title[: len(title)]) == (kind, title)


def test_failing_pytest_is_a_command_with_its_error_and_exit_code() -> None:
    output = {
        "stdout": "..F.\n___ test_login ___\nE       assert 401 == 200\n"
        "FAILED tests/test_login.py::test_login - assert 401 == 200\n"
        "1 failed, 3 passed in 0.84s\n",
        "stderr": "",
        "exit_code": 1,
    }
    result = bash("pytest -x tests/", output)
    assert result.kind == "command"
    assert result.title == "Ran `pytest -x tests/` (exit 1)"
    assert result.commands == ("pytest -x tests/",)
    assert "FAILED tests/test_login.py::test_login - assert 401 == 200" in result.errors
    assert {"test", "python"} <= set(result.concepts)
    assert "$ pytest -x tests/" in result.text and "1 failed, 3 passed" in result.text


def test_fixture_pytest_failure_without_exit_code_is_still_an_error() -> None:
    result = compress(fixture("claude-code-PostToolUse.json"))
    assert result.kind == "command"
    assert result.errors == ("1 failed, 3 passed in 0.84s",)
    assert result.title.endswith("(failed)")


@pytest.mark.parametrize(
    "output",
    [
        {"stdout": "", "exit_code": 3},
        {"stdout": "", "exitCode": 3},
        {"stdout": "", "returncode": 3},
        {"output": "", "exit_status": 3},
        "Exit code 3\nsomething went wrong",
        '{"output": "boom", "metadata": {"exit_code": 3, "duration_seconds": 0.2}}',  # Codex
        {"llmContent": "Command: make\nStdout: (empty)\nError: (none)\nExit Code: 3"},  # Gemini
    ],
)
def test_exit_codes_are_found_in_fields_and_text(output: Any) -> None:
    result = bash("make", output)
    assert result.title == "Ran `make` (exit 3)"
    assert result.errors  # a non-zero exit is an error even without an error-looking line
    assert "(none)" not in " ".join(result.errors)


def test_successful_command_has_no_errors_and_no_exit_suffix() -> None:
    result = bash("git status", {"stdout": "On branch main\nnothing to commit", "exit_code": 0})
    assert (result.title, result.errors, result.concepts) == ("Ran `git status`", (), ("git",))


@pytest.mark.parametrize(
    ("output", "error"),
    [
        (
            'Traceback (most recent call last):\n  File "a.py", line 1\n    x()\n'
            "ModuleNotFoundError: No module named 'requests'",
            "ModuleNotFoundError: No module named",
        ),
        ("npm ERR! code ELIFECYCLE\nnpm ERR! errno 1", "npm ERR! code ELIFECYCLE"),
        (
            "fatal: not a git repository (or any of the parent directories): .git",
            "fatal: not a git",
        ),
        ("error[E0308]: mismatched types\n --> src/main.rs:4:5", "error[E0308]: mismatched types"),
        ("src/a.ts(3,5): error TS2322: Type 'string' is not assignable", "error TS2322"),
        ("Error: Cannot find module 'express'", "Error: Cannot find module"),
    ],
)
def test_error_lines_are_extracted(output: str, error: str) -> None:
    result = bash("run-it", output)
    assert any(e.startswith(error) or error in e for e in result.errors), result.errors


def test_content_printing_commands_and_known_success_are_not_errors() -> None:
    log = "INFO start\nError: disk full (yesterday)\nFAILED tests/x.py::t\n"
    assert bash("cat build.log | grep -n Error", log).errors == ()
    assert bash("git log -3 --oneline", "abc123 Fix Error: handling").errors == ()
    assert bash("./run-report.sh", {"stdout": log, "exit_code": 0}).errors == ()
    assert bash("./run-report.sh", log).errors  # unknown exit: the log lines count
    assert bash(
        "cat missing.txt", {"stderr": "cat: missing.txt: No such file or directory", "exit_code": 1}
    ).errors


def test_tool_failure_payload_is_an_error_observation() -> None:
    result = compress(fixture("claude-code-PostToolUseFailure.json"))
    assert result.kind == "error"
    assert result.commands == ("make lint",)
    assert "(exit 2)" in result.title and "make lint" in result.title
    assert result.errors and "No rule to make target 'lint'" in result.errors[0]
    assert "No rule to make target" in result.text


def test_copilot_json_string_arguments_and_failure_result() -> None:
    result = compress(
        {
            "hookType": "postToolUse",
            "host": "copilot-cli",
            "toolName": "bash",
            "toolInput": '{"command": "npm test", "description": "Run tests"}',
            "toolOutput": {
                "resultType": "failure",
                "textResultForLlm": "npm error Test failed. See above.",
            },
        }
    )
    assert (result.kind, result.commands) == ("command", ("npm test",))
    assert result.errors == ("npm error Test failed. See above.",)


def test_codex_argv_command_is_unwrapped() -> None:
    result = compress(
        event("shell", {"command": ["bash", "-lc", "cargo test"]}, "ok", host="codex")
    )
    assert (result.commands, result.concepts) == (("cargo test",), ("test", "rust"))


def test_host_error_hook_is_an_error_observation() -> None:
    result = compress(
        {
            "hookType": "errorOccurred",
            "host": "copilot-cli",
            "error": {"message": "Rate limit exceeded", "name": "APIError"},
        }
    )
    assert (result.kind, result.title) == ("error", "Error: Rate limit exceeded")
    assert result.errors == ("Rate limit exceeded",)


def test_edit_reports_path_and_change_excerpt() -> None:
    result = compress(fixture("claude-code-PostToolUse-Edit.json"))
    assert result.files_modified == ("/home/dev/src/acme-api/acme/client.py",)
    assert "- backoff = 0.1" in result.text and "+ backoff = 0.5" in result.text
    assert "python" in result.concepts


def test_write_multiedit_and_codex_patch() -> None:
    write = compress(
        event(
            "Write",
            {
                "file_path": "/home/dev/src/app/Dockerfile",
                "content": "FROM python:3.12\nRUN pip install .\n",
            },
        )
    )
    assert (write.kind, write.title) == ("edit", "Wrote Dockerfile (2 lines)")
    assert "docker" in write.concepts and "FROM python:3.12" in write.text
    multi = compress(
        event(
            "MultiEdit",
            {
                "file_path": "src/app/auth.py",
                "edits": [
                    {"old_string": "def login():", "new_string": "def login(user):"},
                    {"old_string": "return None", "new_string": "return user"},
                ],
            },
        )
    )
    assert multi.title == "Edited src/app/auth.py"
    assert "+ def login(user):" in multi.text and "+ return user" in multi.text
    patch = (
        "*** Begin Patch\n*** Update File: scripts/migrate.py\n@@\n-    run(sql)\n"
        "+    if not args.dry_run:\n+        run(sql)\n*** Add File: tests/test_migrate.py\n"
        "+def test_dry_run(): ...\n*** End Patch\n"
    )
    codex = compress(event("apply_patch", {"input": patch}, host="codex"))
    assert codex.kind == "edit"
    assert codex.files_modified == ("scripts/migrate.py", "tests/test_migrate.py")
    assert codex.title == "Edited scripts/migrate.py, tests/test_migrate.py"
    assert "+    if not args.dry_run:" in codex.text


@pytest.mark.parametrize(
    ("tool", "tool_input", "kind", "title"),
    [
        ("Read", {"file_path": "/home/dev/src/app/README.md"}, "read", "Read README.md"),
        (
            "Grep",
            {"pattern": "def login", "path": "src/"},
            "search",
            "Searched for `def login` in src/",
        ),
        ("Glob", {"pattern": "**/*.py"}, "search", "Searched for `**/*.py`"),
        (
            "WebFetch",
            {"url": "https://docs.python.org/3/", "prompt": "what is new"},
            "web",
            "Fetched https://docs.python.org/3/",
        ),
        (
            "google_web_search",
            {"query": "pytest fixtures"},
            "web",
            "Searched the web for `pytest fixtures`",
        ),
        (
            "Task",
            {
                "description": "Find call sites",
                "prompt": "Find RetryPolicy users",
                "subagent_type": "Explore",
            },
            "agent",
            "Delegated to Explore agent: Find call sites",
        ),
        (
            "TodoWrite",
            {
                "todos": [
                    {"content": "Fix test", "status": "completed"},
                    {"content": "Write docs", "status": "pending"},
                ]
            },
            "note",
            "Updated todo list (1/2 done)",
        ),
        (
            "run_shell_command",
            {"command": "docker compose up -d"},
            "command",
            "Ran `docker compose up -d`",
        ),
        (
            "replace",
            {"file_path": "jobs/export.py", "old_string": "a", "new_string": "b"},
            "edit",
            "Edited jobs/export.py",
        ),
    ],
)
def test_tool_families(tool: str, tool_input: Any, kind: str, title: str) -> None:
    result = compress(event(tool, tool_input, "ok"))
    assert (result.kind, result.title) == (kind, title)


def test_read_lists_the_file_and_todo_text_lists_items() -> None:
    claude_response = {
        "type": "text",
        "file": {"filePath": "src/app/auth.py", "content": "def login(): ...", "numLines": 1},
    }
    read = compress(event("Read", {"file_path": "src/app/auth.py"}, claude_response))
    assert read.files_read == ("src/app/auth.py",) and read.files_modified == ()
    assert "def login(): ..." in read.text
    todo = compress(event("TodoWrite", {"todos": [{"content": "Fix test", "status": "done"}]}))
    assert "[x] Fix test" in todo.text


def test_unknown_tool_and_host_give_a_generic_tool_observation() -> None:
    result = compress(
        {
            "hookType": "after_something",
            "host": "brand-new-agent",
            "toolName": "frobnicate",
            "toolInput": {"level": 11, "target": "widget"},
            "toolOutput": {"frobnicated": True},
        }
    )
    assert (result.kind, result.title) == ("tool", "Called frobnicate")
    assert '"target": "widget"' in result.text and '"frobnicated": true' in result.text


def test_mcp_tool_names_give_server_and_tool() -> None:
    result = compress(event("mcp__github__create_issue", {"title": "Rate limit"}, {"number": 418}))
    assert (result.kind, result.title) == ("tool", "Called github.create_issue (MCP)")
    assert result.concepts[:2] == ("mcp", "github")


def test_session_events_without_tool_or_prompt() -> None:
    for hook in ("SessionStart", "Stop", "Notification", "SessionEnd"):
        result = compress({"hookType": hook, "sessionId": "s1"})
        assert result.kind == "session" and result.title
    stop = compress({"hookType": "Stop", "toolOutput": {"last_assistant_message": "x " * 200}})
    assert stop.title.startswith("Agent finished: x x") and len(stop.text) > len(stop.title)


def test_long_output_keeps_head_and_tail_within_max_chars() -> None:
    lines = [f"collected line {i}" for i in range(5000)]
    output = "START OF OUTPUT\n" + "\n".join(lines) + "\nAssertionError: boom at the end\n"
    for max_chars in (300, 800, DEFAULT_MAX_CHARS):
        result = compress(
            event("Bash", {"command": "pytest"}, {"stdout": output, "exit_code": 1}),
            max_chars=max_chars,
        )
        assert len(result.text) <= max_chars
        assert "START OF OUTPUT" in result.text and "AssertionError: boom at the end" in result.text
        assert "chars omitted] …" in result.text


def test_long_prompt_and_long_command_are_bounded() -> None:
    prompt = compress({"hookType": "UserPromptSubmit", "prompt": "please " * 2000})
    assert prompt.kind == "prompt" and len(prompt.text) <= DEFAULT_MAX_CHARS
    assert len(prompt.title) <= TITLE_MAX_CHARS
    command = bash("echo " + "x" * 10_000, "ok")
    assert len(command.title) <= TITLE_MAX_CHARS and command.title.endswith("…`")


def test_clip_never_splits_a_surrogate_pair() -> None:
    text = "\ud83d\ude00" * 500  # pairs as JSON decoding can leave them
    for limit in range(40, 90):
        clipped = clip(text, limit)
        assert len(clipped) <= limit
        head, _, tail = clipped.partition("\n…")
        assert not head or not "\ud800" <= head[-1] <= "\udbff"
        assert not "\udc00" <= tail.rpartition("…\n")[2][:1] <= "\udfff"
    assert clip("short", 100) == "short"


@pytest.mark.parametrize(
    "odd",
    [
        None,
        42,
        "a string",
        [1, [2, [3]]],
        {},
        {"hookType": None},
        {"hookType": 7, "toolName": ["Bash"], "toolInput": [[[[]]]], "toolOutput": 3.5},
        {"hookType": "PostToolUse", "toolName": "Bash", "toolInput": {"command": None}},
        {"hookType": "PostToolUse", "toolName": "Bash", "toolInput": {"command": ["ls", 3, None]}},
        {"hookType": "PostToolUse", "toolName": "Edit", "toolInput": {"edits": 5, "file_path": 9}},
        {
            "hookType": "PostToolUse",
            "toolName": "Read",
            "toolInput": "{not json",
            "toolOutput": "x" * 3_000_000,
        },
        {
            "hookType": "PostToolUse",
            "toolName": "Bash",
            "toolInput": {"command": "'unbalanced"},
            "toolOutput": {"stdout": "\udc80 lone surrogate", "exit_code": True},
        },
        {"hookType": "UserPromptSubmit", "prompt": [{"type": "text", "text": None}, 5]},
        {"hookType": "PostToolUse", "toolName": "x", "toolInput": {1: {2: [3] * 1000}}},
    ],
)
def test_odd_input_never_raises(odd: Any) -> None:
    result = compress(odd)
    assert result.kind in KINDS and result.title
    assert len(result.text) <= DEFAULT_MAX_CHARS


def test_circular_and_deep_structures_never_raise() -> None:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    for payload in (loop, deep):
        assert compress(event("mystery", payload, payload)).kind == "tool"


def test_max_chars_edge_values() -> None:
    assert len(bash("ls", "x" * 5000).text) <= DEFAULT_MAX_CHARS
    assert len(compress(event("Bash", {"command": "ls"}, "x" * 5000), max_chars=10).text) <= 10
    assert len(compress(event("Bash", {"command": "ls"}, "x" * 5000), max_chars=0).text) <= (
        DEFAULT_MAX_CHARS
    )  # nonsense limits fall back to the default


def test_the_sent_event_kind_decides_over_the_hook_name() -> None:
    """An adapter says what happened (eventKind); the hook's own name is only displayed."""
    base = {"host": "some-new-host", "project": "p", "sessionId": "s"}
    finished = compress(
        {
            **base,
            "hookType": "onTurnDone",
            "eventKind": "agent_response",
            "toolOutput": {"message": "Fixed the parser; tests pass."},
        }
    )
    assert (finished.kind, finished.title) == (
        "session",
        "Agent finished: Fixed the parser; tests pass.",
    )
    edited = compress(
        {
            **base,
            "hookType": "onChange",
            "eventKind": "file_edit",
            "toolInput": {"file_path": "src/parser.py", "edits": [{"old": "a", "new": "b"}]},
        }
    )
    assert edited.kind == "edit" and edited.files_modified == ("src/parser.py",)
    failed = compress(
        {
            **base,
            "hookType": "onTool",
            "eventKind": "tool_failure",
            "toolName": "Bash",
            "toolInput": {"command": "make"},
            "toolOutput": {"error": "make: *** [all] Error 2"},
        }
    )
    assert failed.kind == "error" and failed.commands == ("make",) and failed.errors
    # without eventKind, a name no rule knows says nothing: a plain session event
    plain = compress({**base, "hookType": "onTurnDone", "toolOutput": {"message": "x"}})
    assert (plain.kind, plain.title) == ("session", "onTurnDone event: x")


@pytest.mark.parametrize(
    ("hook", "kind"),
    [
        ("PreToolUse", "tool_pre"),
        ("beforeShellExecution", "tool_pre"),
        ("PreCompact", "compact"),
        ("UserPromptSubmit", "prompt"),
        ("SubagentStop", "subagent_stop"),
        ("SubagentStart", "other"),
        ("subagent_start", "other"),
        ("Stop", "agent_response"),
        ("post_cascade_response", "agent_response"),
        ("PostToolUseFailure", "tool_failure"),
        ("SessionStart", "session_start"),
    ],
)
def test_without_an_event_kind_the_hook_name_is_read_for_generic_words(
    hook: str, kind: str
) -> None:
    from engram.compress import event_kind

    assert event_kind({"hookType": hook}) == kind
    assert event_kind({"hookType": hook, "eventKind": "other"}) == "other"  # sent wins
    assert event_kind({"hookType": hook, "eventKind": "nonsense"}) == kind


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("go test ./internal/x -run Ledger -v", ("test", "go test")),
        ("pytest -q tests/test_api.py", ("test", "pytest")),
        ("python -m pytest -x tests/", ("test", "python -m pytest")),
        ("npm run test:unit -- --watch=false", ("test", "npm run test:unit")),
        ("cd web && make test", ("test", "make test")),
    ],
)
def test_family_invocations_count_one_tool_however_it_is_called(
    command: str, expected: tuple[str, str]
) -> None:
    from engram.compress import family_invocations

    assert expected in family_invocations(command)
