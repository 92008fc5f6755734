"""Heuristic session summaries, built from observation records as compression produces them."""

from __future__ import annotations

from typing import Any

from engram.compress import compress
from engram.summary import MAX_COMMANDS, MAX_FILES, MAX_REQUEST_CHARS, summarize

ROOT = "/home/dev/src/app"
HEADINGS = ("Request:", "Files changed:", "Files read:", "Commands:", "Errors:", "Outcome:")


def record(
    hook: str,
    tool: str | None = None,
    tool_input: Any = None,
    tool_output: Any = None,
    prompt: str | None = None,
    minute: int = 0,
) -> dict[str, Any]:
    """An observation record as the store keeps it: the event compressed, in camelCase."""
    event = {
        "sessionId": "s1",
        "project": ROOT,
        "host": "claude-code",
        "hookType": hook,
        "toolName": tool,
        "toolInput": tool_input,
        "toolOutput": tool_output,
        "prompt": prompt,
    }
    c = compress(event)
    return {
        "kind": c.kind,
        "title": c.title,
        "text": c.text,
        "hookType": hook,
        "toolName": tool,
        "prompt": prompt,
        "filesRead": list(c.files_read),
        "filesModified": list(c.files_modified),
        "commands": list(c.commands),
        "errors": list(c.errors),
        "createdAt": f"2026-08-20T10:{minute:02d}:00Z",
    }


def bash(command: str, stdout: str, exit_code: int = 0) -> dict[str, Any]:
    return record(
        "PostToolUse",
        "Bash",
        {"command": command},
        {"stdout": stdout, "stderr": "", "exit_code": exit_code},
    )


def edit(path: str, old: str = "a", new: str = "b") -> dict[str, Any]:
    return record(
        "PostToolUse", "Edit", {"file_path": f"{ROOT}/{path}", "old_string": old, "new_string": new}
    )


def prompt(text: str) -> dict[str, Any]:
    return record("UserPromptSubmit", prompt=text)


def stop(message: str) -> dict[str, Any]:
    return record("Stop", tool_output={"last_assistant_message": message})


FAILING = (
    "..F.\nFAILED tests/test_auth.py::test_login - assert 401 == 200\n1 failed, 3 passed in 0.84s\n"
)


def realistic_session() -> list[dict[str, Any]]:
    return [
        prompt("Fix the failing login test in tests/test_auth.py"),
        record("PostToolUse", "Read", {"file_path": f"{ROOT}/src/app/session.py"}, "class S: ..."),
        edit("src/app/auth.py", "return None", "return user"),
        bash("pytest tests/test_auth.py -q", FAILING, exit_code=1),
        edit("src/app/auth.py", "if token:", "if token and not expired:"),
        bash("pytest tests/test_auth.py -q", "....\n4 passed in 0.71s\n"),
        bash('git commit -am "Fix login token check"', "[main 1a2b3c4] Fix login token check"),
        stop("The login test failed because expired tokens were accepted; fixed the check."),
    ]


def assert_no_empty_sections(text: str) -> None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line in ("Commands:", "Errors:"):  # list headings: a bullet must follow
            assert i + 1 < len(lines) and lines[i + 1].startswith("- "), text
        elif line.startswith(HEADINGS):
            assert line.partition(":")[2].strip(), text


def test_realistic_session() -> None:
    summary = summarize(realistic_session())
    assert summary.request == "Fix the failing login test in tests/test_auth.py"
    assert summary.files_changed == (f"{ROOT}/src/app/auth.py",)
    assert summary.files_read == (f"{ROOT}/src/app/session.py",)
    assert summary.commands == (
        "pytest tests/test_auth.py -q",
        'git commit -am "Fix login token check"',
    )
    assert "FAILED tests/test_auth.py::test_login - assert 401 == 200" in summary.errors
    assert summary.unresolved_errors == ()
    assert all(summary.is_resolved(e) for e in summary.errors)
    assert summary.outcome.startswith("completed")
    assert summary.outcome == "completed: tests passing"
    assert summary.observation_count == 8


def test_realistic_session_text_and_dict() -> None:
    summary = summarize(realistic_session())
    text = summary.to_text()
    assert_no_empty_sections(text)
    assert text.startswith("Request: Fix the failing login test")
    assert "(resolved)" in text and "(unresolved)" not in text
    assert text.splitlines()[-1] == "Outcome: completed: tests passing"
    assert summary.to_dict() == {
        "request": summary.request,
        "filesRead": list(summary.files_read),
        "filesChanged": list(summary.files_changed),
        "commands": list(summary.commands),
        "errors": list(summary.errors),
        "unresolvedErrors": [],
        "outcome": summary.outcome,
        "observationCount": 8,
    }


def test_unresolved_error_session_says_so() -> None:
    summary = summarize(
        [
            prompt("Make the login route rate limited"),
            edit("src/routes/login.ts"),
            bash(
                "npm test -- auth",
                "FAIL src/login.test.ts\n  ● limits to 5 per minute\nTests: 1 failed, 6 passed",
                exit_code=1,
            ),
            stop("I added the limiter but one test still fails."),
        ]
    )
    assert summary.unresolved_errors == summary.errors and summary.errors
    assert summary.outcome.startswith("unresolved errors: ")
    assert "FAIL src/login.test.ts" in summary.outcome
    text = summary.to_text()
    assert "(unresolved)" in text
    assert_no_empty_sections(text)


def test_later_errors_after_passing_tests_are_unresolved() -> None:
    summary = summarize(
        [
            bash("pytest -q", "3 passed"),
            bash("make deploy", "make: *** No rule to make target 'deploy'.", 2),
        ]
    )
    assert summary.outcome.startswith("unresolved errors: make: *** No rule")


def test_broader_test_run_resolves_a_narrow_failure_but_other_commands_do_not() -> None:
    summary = summarize(
        [
            bash("pytest tests/test_auth.py -q", FAILING, exit_code=1),
            bash("make lint", "make: *** No rule to make target 'lint'.", exit_code=2),
            bash("make", "built"),
            bash("pytest -q", "12 passed"),
        ]
    )
    lint_error = "make: *** No rule to make target 'lint'."
    assert summary.unresolved_errors == (lint_error,)
    assert summary.is_resolved("1 failed, 3 passed in 0.84s")
    # the last tests passed after the error, but the lint target is still missing: the outcome
    # says both, never "completed" beside an unresolved error
    assert summary.outcome == f"tests passing; unresolved errors: {lint_error}"


def test_a_final_passing_test_run_resolves_every_earlier_test_and_build_failure() -> None:
    """`go test ./...` failing twice, a narrower run failing, a build error, then the whole
    suite passing: nothing is left unresolved (the context's "open items" came from here)."""
    summary = summarize(
        [
            bash("go test ./...", "--- FAIL: TestInvoiceTotals (0.01s)\nFAIL", exit_code=1),
            bash("go build ./...", "internal/store/invoice.go:42:2: undefined: sqlc", 1),
            bash("go test ./internal/store/...", "--- FAIL: TestListInvoices\nFAIL", 1),
            bash("go test -run TestInvoice ./internal/store/", "ok  ledger/internal/store", 0),
            bash("go test ./...", "ok  ledger/internal/store 0.41s\nok  ledger/api 0.12s", 0),
        ]
    )
    assert summary.errors and summary.unresolved_errors == ()
    assert summary.outcome == "completed: tests passing"
    assert "unresolved" not in summary.to_text()


def test_a_pre_tool_record_is_no_evidence_of_success() -> None:
    about_to_run = record("PreToolUse", "Bash", {"command": "pytest -q"})
    summary = summarize([bash("pytest -q", FAILING, exit_code=1), about_to_run])
    assert summary.unresolved_errors == summary.errors
    assert summary.outcome.startswith("unresolved errors: ")


def test_failed_edit_is_resolved_by_a_later_edit_of_the_same_file() -> None:
    failed = record(
        "PostToolUseFailure",
        "Edit",
        {"file_path": f"{ROOT}/a.py", "old_string": "x", "new_string": "y"},
    )
    failed["errors"] = ["String to replace not found in file."]
    summary = summarize([failed, edit("a.py")])
    assert summary.errors == ("String to replace not found in file.",)
    assert summary.unresolved_errors == ()


def test_outcome_falls_back_to_the_last_stop_message_then_unknown() -> None:
    summary = summarize([prompt("Explain the export job"), stop("It reads all rows eagerly.")])
    assert summary.outcome == "It reads all rows eagerly."
    long_stop = stop("Long answer. " * 50)
    assert summarize([long_stop]).outcome.startswith("Long answer. Long answer.")
    assert summarize([prompt("hello")]).outcome == "unknown"


def test_several_prompts_are_joined_and_bounded() -> None:
    summary = summarize(
        [
            prompt("Fix the login test"),
            bash("ls", "a"),
            prompt("Now add docs"),
            prompt("Fix the login test"),
            prompt("x" * 5000),
        ]
    )
    assert summary.request.startswith("Fix the login test — then: Now add docs; xxx")
    assert len(summary.request) <= MAX_REQUEST_CHARS


def test_empty_session() -> None:
    summary = summarize([])
    assert (summary.request, summary.outcome, summary.observation_count) == ("", "empty session", 0)
    assert summary.to_text() == "Outcome: empty session"


def test_commands_keep_relevant_and_recent_ones_bounded() -> None:
    noise = [bash(f"cat notes-{i}.txt", "...") for i in range(10)]
    tests = [bash(f"pytest tests/test_{i}.py", "1 passed") for i in range(MAX_COMMANDS + 5)]
    summary = summarize([*noise[:5], bash("git status", "clean"), *tests, *noise[5:]])
    assert len(summary.commands) == MAX_COMMANDS
    assert summary.commands[-3:] == ("cat notes-7.txt", "cat notes-8.txt", "cat notes-9.txt")
    assert "cat notes-0.txt" not in summary.commands
    assert "pytest tests/test_16.py" in summary.commands


def test_files_are_deduplicated_in_first_seen_order_and_bounded() -> None:
    edits = [edit(f"src/m{i}.py") for i in range(MAX_FILES + 10)]
    summary = summarize([edit("src/b.py"), edit("src/a.py"), edit("src/b.py"), *edits])
    assert summary.files_changed[:2] == (f"{ROOT}/src/b.py", f"{ROOT}/src/a.py")
    assert len(summary.files_changed) == MAX_FILES


def test_odd_records_do_not_raise() -> None:
    odd: list[Any] = [
        {},
        {"kind": "prompt", "text": "Prompt: do it", "prompt": None},
        {"commands": "pytest", "errors": None, "filesModified": [None, 3, "x.py"]},
        {"errors": ["boom"], "commands": [5]},
        "not a record",
        None,
    ]
    summary = summarize(odd)
    assert summary.request == "do it"
    assert summary.files_changed == ("x.py",)
    assert summary.observation_count == len(odd)
    assert_no_empty_sections(summary.to_text())


def test_a_final_clean_build_resolves_an_earlier_type_error() -> None:
    summary = summarize(
        [
            bash("npx tsc --noEmit", "src/lib/images.ts:5:32 - error TS2339: no API_BASE_URL", 2),
            bash("npm run build", "vite v5.4.14 building for production...\n✓ built in 2.1s", 0),
        ]
    )
    assert summary.errors and summary.unresolved_errors == ()
    assert "unresolved" not in summary.to_text()
