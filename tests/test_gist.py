"""What an observation's vector represents (engram/gist.py)."""

from __future__ import annotations

from engram.compress import compress
from engram.gist import OBSERVATION_CHARS, OTHER_CHARS, gist
from engram.observations import index_body


def pytest_run_body() -> str:
    passing = "\n".join(f"tests/test_api.py::test_case_{n} PASSED" for n in range(200))
    output = (
        f"{passing}\n_____ test_login_ok _____\n    def test_login_ok(client):\n"
        ">       assert session['user_id'] == 7\nE       KeyError: 'user_id'\n"
        "FAILED tests/test_login.py::test_login_ok - KeyError: 'user_id'\n"
        "1 failed, 200 passed in 3.2s"
    )
    return index_body(
        compress(
            {
                "host": "claude-code",
                "hookType": "PostToolUse",
                "toolName": "Bash",
                "toolInput": {"command": "pytest -q tests/"},
                "toolOutput": {"stdout": output, "exit_code": 1},
            }
        )
    )


def test_observation_gist_is_short_and_keeps_title_and_errors() -> None:
    body = pytest_run_body()
    assert len(body) > 1500  # the indexed body is long ...
    text = gist("observation", body)
    assert len(text) <= OBSERVATION_CHARS  # ... its gist is not
    lines = text.splitlines()
    assert lines[0] == body.splitlines()[0]  # the title first
    assert "pytest -q tests/" in lines[0]
    # the failure, which sits at the end of a long output, is in the gist
    assert any("KeyError: 'user_id'" in line for line in lines)
    assert "chars omitted]" not in text


def test_short_observation_is_embedded_whole() -> None:
    body = "Edited src/app.py\n- x = 0\n+ x = 1\nsrc/app.py"
    assert gist("observation", body) == body


def test_other_kinds_are_embedded_as_written() -> None:
    memory = "Anonymous sessions have no user_id: use .get()"
    assert gist("memory", memory) == memory
    summary = "word " * 1000
    assert gist("summary", summary) == summary[:OTHER_CHARS]
