"""`engram watch-transcripts`: the schema engine, and the watcher against a real gateway."""

from __future__ import annotations

import io
import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engram.client import Unreachable
from engram.watcher.delivery import Delivery
from engram.watcher.schema import (
    MISSING,
    ConfigError,
    compile_config,
    compile_field,
    compile_match,
    get,
    load_config,
)
from engram.watcher.transcripts import TranscriptWatcher, subagent_marker
from tests.support import ENGRAM, Api, Cluster, hears_ctrl_c, wait_for

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
CONFIGS = sorted((SHARED / "transcript-schemas").glob("*.json"))
ROLLOUT = SHARED / "transcripts" / "codex-rollout-sample.jsonl"
SESSION = "019a3f5e-8c21-7d40-b6e2-4f9a1c0d7e55"
LINES = ROLLOUT.read_text(encoding="utf-8").splitlines(keepends=True)


# --- the schema engine -------------------------------------------------------------------------

LINE = {
    "type": "response_item",
    "n": 3,
    "flag": True,
    "none": None,
    "one": 1,
    "bits": [1, 0],
    "payload": {
        "type": "message",
        "role": "user",
        "tags": ["a", "b"],
        "content": [{"type": "input_text", "text": "<skills> do it"}],
    },
}


@pytest.fixture
def api(own_api: Api) -> Api:
    """This module's tests use fixed session ids: each gets a gateway of its own."""
    return own_api


def test_paths() -> None:
    assert get(LINE, "payload.content[0].text") == "<skills> do it"
    assert get(LINE, "payload.content[-1].type") == "input_text"
    assert get(LINE, "payload.content[1].text") is MISSING
    assert get(LINE, "payload.nope.deeper") is MISSING
    assert get(LINE, "none") is None
    for bad in ("", "a..b", "a.", "[0]", "a]b"):
        with pytest.raises(ConfigError):
            get(LINE, bad)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"path": "type", "equals": "response_item"}, True),
        ({"path": "n", "equals": 3.0}, True),
        ({"path": "flag", "equals": 1}, False),  # true is not 1
        ({"path": "missing", "equals": None}, False),
        ({"path": "none", "equals": None}, True),
        ({"path": "type", "not_equals": "session_meta"}, True),
        ({"path": "missing", "not_equals": "x"}, True),
        ({"path": "payload.role", "in": ["user", "developer"]}, True),
        ({"path": "missing", "in": ["user"]}, False),
        ({"path": "payload.role", "not_in": ["assistant"]}, True),
        ({"path": "payload.role", "not_in": ["user"]}, False),
        ({"path": "payload.content[0].text", "exists": True}, True),
        ({"path": "payload.content[3].text", "exists": True}, False),
        ({"path": "none", "exists": True}, False),
        ({"path": "missing", "exists": False}, True),
        ({"path": "payload.content[0].text", "starts_with": "<skills>"}, True),
        ({"path": "n", "starts_with": "3"}, False),
        ({"path": "payload.content[0].text", "not_starts_with": "<skills>"}, False),
        ({"path": "payload.content[0].text", "not_starts_with": "<recommended"}, True),
        ({"path": "payload.content[0].text", "contains": "do it"}, True),
        ({"path": "payload.tags", "contains": "b"}, True),
        ({"path": "payload", "contains": "role"}, True),
        ({"path": "payload.tags", "contains": "z"}, False),
        ({"path": "payload.content[0].text", "regex": r"^<\w+>\s"}, True),
        ({"path": "n", "regex": "3"}, False),
        (
            {
                "all": [
                    {"path": "type", "equals": "response_item"},
                    {
                        "any": [
                            {"path": "payload.role", "equals": "assistant"},
                            {"path": "payload.tags", "contains": "a"},
                        ]
                    },
                ]
            },
            True,
        ),
        ({"any": [{"path": "type", "equals": "x"}, {"all": [{"path": "n", "equals": 4}]}]}, False),
    ],
)
def test_match_operators(rule: dict[str, Any], expected: bool) -> None:
    assert compile_match(rule, "test")(LINE) is expected


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # JSON true is not the number 1 (Python's True == 1), in every operator that compares
        ({"path": "flag", "in": [1]}, False),
        ({"path": "flag", "in": [1.0, 0]}, False),
        ({"path": "flag", "in": [True]}, True),
        ({"path": "flag", "not_in": [1]}, True),
        ({"path": "flag", "not_in": [True]}, False),
        ({"path": "one", "in": [True]}, False),
        ({"path": "one", "in": [1.0]}, True),
        ({"path": "one", "not_in": [True, False]}, True),
        ({"path": "one", "equals": True}, False),
        ({"path": "one", "not_equals": True}, True),
        ({"path": "flag", "not_equals": 1}, True),
        ({"path": "bits", "equals": [True, False]}, False),
        ({"path": "bits", "equals": [1.0, 0]}, True),
        ({"path": "bits", "in": [[True, False]]}, False),
        ({"path": "bits", "contains": True}, False),
        ({"path": "bits", "contains": 1}, True),
    ],
)
def test_booleans_never_equal_numbers(rule: dict[str, Any], expected: bool) -> None:
    assert compile_match(rule, "test")(LINE) is expected


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"path": "type", "equalz": "x"}, "unknown operator 'equalz'"),
        ({"path": "type", "equals": "x", "in": ["y"]}, "exactly one operator"),
        ({"path": "type", "in": "x"}, "'in' needs a list"),
        ({"path": "type", "regex": "("}, "bad regex"),
        ({"path": "type", "exists": "yes"}, "true or false"),
        ({"all": []}, "non-empty list"),
        ({"equals": "x"}, "needs 'path'"),
    ],
)
def test_bad_match_rules_say_what_is_wrong(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_match(rule, "where")


def test_field_specs() -> None:
    assert compile_field("payload.role", "f")(LINE) == "user"
    assert compile_field({"path": "payload.role"}, "f")(LINE) == "user"
    assert compile_field({"coalesce": ["missing", "none", "payload.role"]}, "f")(LINE) == "user"
    assert compile_field({"coalesce": ["missing", "none"]}, "f")(LINE) is MISSING
    assert compile_field({"value": "exec_command"}, "f")(LINE) == "exec_command"
    assert compile_field({"path": "missing", "default": "d"}, "f")(LINE) == "d"
    assert compile_field({"path": "none", "default": 0}, "f")(LINE) == 0
    assert compile_field({"coalesce": ["missing"], "default": []}, "f")(LINE) == []
    with pytest.raises(ConfigError, match="unknown key 'paths'"):
        compile_field({"paths": "x"}, "f")
    with pytest.raises(ConfigError, match="exactly one of"):
        compile_field({"path": "x", "value": 1}, "f")


def _config(events: list[dict[str, Any]], **watch: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "schemas": {"codex": {"events": events}},
        "watches": [{"name": "codex", "path": "/tmp/x/*.jsonl", "schema": "codex", **watch}],
    }


def test_config_errors_name_the_schema_and_event() -> None:
    with pytest.raises(ConfigError, match="schema 'codex' event 'e1': unknown action 'shout'"):
        compile_config(
            _config([{"name": "e1", "match": {"path": "t", "equals": 1}, "action": "shout"}])
        )
    with pytest.raises(ConfigError, match="event 'e2': action tool_result needs a 'toolId'"):
        compile_config(
            _config(
                [
                    {
                        "name": "e2",
                        "match": {"path": "t", "equals": 1},
                        "action": "tool_result",
                        "fields": {},
                    }
                ]
            )
        )
    with pytest.raises(ConfigError, match="event 'e3': match.all\\[1\\]: bad regex"):
        compile_config(
            _config(
                [
                    {
                        "name": "e3",
                        "action": "session_end",
                        "match": {"all": [{"path": "t", "equals": 1}, {"path": "t", "regex": "("}]},
                    }
                ]
            )
        )
    with pytest.raises(ConfigError, match="watch 'codex': unknown schema 'nope'"):
        compile_config(
            _config([{"match": {"path": "t", "equals": 1}, "action": "session_end"}], schema="nope")
        )


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_fixture_configs_load_unchanged_and_match_a_real_rollout(path: Path) -> None:
    config = load_config(path)
    codex = config.schemas["codex"]
    names = [getattr(codex.rule_for(json.loads(line)), "name", None) for line in LINES]
    v04 = "0.4" in json.loads(path.read_text())["schemas"]["codex"]["version"]
    assert names == [
        "session-meta",
        "turn-context",
        "user-message" if v04 else None,
        None if v04 else "user-message",
        "tool-use",
        "tool-result",
        "tool-use",
        "tool-result",
        "assistant-message" if v04 else None,
        None if v04 else "assistant-message",
        "session-end",
    ]
    assert config.state_file == "~/.claude-mem/transcript-watch-state.json"
    assert config.watches[0].start_at_end is True


def test_subagent_marker() -> None:
    def meta(source: Any) -> dict[str, Any]:
        return {"type": "session_meta", "payload": {"id": "s", "source": source}}

    assert subagent_marker(json.loads(LINES[0])) is False  # "source": "cli"
    assert subagent_marker(meta({"subagent": "review"})) is True
    assert (
        subagent_marker(meta({"subagent": {"thread_spawn": {"parent_thread_id": "p", "depth": 1}}}))
        is True
    )
    assert subagent_marker(meta("vscode")) is False
    assert subagent_marker(json.loads(LINES[1])) is None


# --- the watcher against a real gateway --------------------------------------------------------


class FlakyTransport:
    """Client.request over the Flask test client of a real gateway; ``down`` makes it behave
    like a gateway that does not answer."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.down = False
        self.calls = 0

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        if self.down:
            raise Unreachable("http://127.0.0.1:1: connection refused")
        self.calls += 1
        return self.api.call(method, path, body)


def write_config(tmp_path: Path, **watch: Any) -> Path:
    data = json.loads((SHARED / "transcript-schemas" / "transcript-watch.example.json").read_text())
    data["watches"] = [
        {
            **data["watches"][0],
            "path": str(tmp_path / "sessions" / "**" / "*.jsonl"),
            "startAtEnd": False,
            **watch,
        }
    ]
    data["stateFile"] = str(tmp_path / "state.json")
    path = tmp_path / "transcript-watch.json"
    path.write_text(json.dumps(data))
    return path


def rollout(tmp_path: Path, name: str = "rollout-a.jsonl", lines: list[str] = LINES) -> Path:
    path = tmp_path / "sessions" / "2026" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return path


def make_watcher(
    tmp_path: Path, transport: Any, hooks: frozenset[str] = frozenset(), **watch: Any
) -> TranscriptWatcher:
    config = load_config(write_config(tmp_path, **watch))
    return TranscriptWatcher(
        config,
        Delivery(transport),
        state_path=tmp_path / "state.json",
        dead_letter_path=tmp_path / "dead.jsonl",
        hooks_connected=hooks,
        out=io.StringIO(),
    )


def stored(api: Api, session: str = SESSION) -> list[dict[str, Any]]:
    api.wait_drained()
    status, page = api.get(f"/v1/sessions/{session}/observations?limit=1000")
    return list(page["items"]) if status == 200 else []


def file_state(watcher: TranscriptWatcher, path: Path) -> dict[str, Any]:
    return dict(watcher.state["files"][str(path.resolve())])


def test_one_pass_sends_the_rollout_once(api: Api, tmp_path: Path) -> None:
    path = rollout(tmp_path)
    watcher = make_watcher(tmp_path, FlakyTransport(api))
    assert watcher.pass_once()["lines"] == len(LINES)
    items = stored(api)
    assert sorted(o["hookType"] for o in items) == [
        "PostToolUse",
        "PostToolUse",
        "Stop",
        "UserPromptSubmit",
    ]
    tool_ids = {o["eventId"] for o in items if o["hookType"] == "PostToolUse"}
    assert tool_ids == {
        f"codex:{SESSION}:PostToolUse:call_8dK2mQ4vX1pL7rS3",
        f"codex:{SESSION}:PostToolUse:call_9eL3nR5wY2qM8sT4",
    }
    assert {o["toolName"] for o in items if o["toolName"]} == {"shell", "apply_patch"}
    assert api.get(f"/v1/sessions/{SESSION}")[1]["status"] == "ended"
    state = file_state(watcher, path)
    assert state["offset"] == path.stat().st_size and state["pending"] == {}
    assert json.loads((tmp_path / "state.json").read_text())["files"]  # saved

    # Forgetting the state re-reads the file: every event is a duplicate, nothing doubles.
    (tmp_path / "state.json").unlink()
    again = make_watcher(tmp_path, FlakyTransport(api))
    again.pass_once()
    assert file_state(again, path)["duplicates"] == 4
    assert len(stored(api)) == 4


def test_gateway_down_mid_file_rolls_back_offset_and_state(api: Api, tmp_path: Path) -> None:
    path = rollout(tmp_path)
    transport = FlakyTransport(api)
    watcher = make_watcher(tmp_path, transport)
    tool_result = sum(len(x.encode()) for x in LINES[:5])  # byte offset of function_call_output

    class DownAtToolResult(FlakyTransport):
        def request(self, method: str, path_: str, body: Any = None) -> tuple[int, Any]:
            if body and body.get("hookType") == "PostToolUse":
                self.down = True
            return super().request(method, path_, body)

    watcher.gateway = Delivery(DownAtToolResult(api))  # type: ignore[arg-type]
    result = watcher.pass_once()
    assert result["stalled"] == 1
    state = file_state(watcher, path)
    assert state["offset"] == tool_result  # the failed line is not consumed...
    assert list(state["pending"]) == ["call_8dK2mQ4vX1pL7rS3"]  # ...and its call still waits
    assert (
        json.loads((tmp_path / "state.json").read_text())["files"][str(path.resolve())]["offset"]
        == tool_result
    )
    watcher.pass_once()  # still down: nothing moves
    assert file_state(watcher, path)["offset"] == tool_result

    watcher.gateway = Delivery(transport)  # type: ignore[arg-type]
    assert watcher.pass_once()["stalled"] == 0
    items = stored(api)
    assert len(items) == 4 and len({o["eventId"] for o in items}) == 4
    shell = [o for o in items if o["toolName"] == "shell"]
    assert len(shell) == 1  # the pending call survived the rollback: input and output joined


def test_permanent_failures_are_dead_lettered_and_the_watcher_moves_on(
    api: Api, tmp_path: Path
) -> None:
    bad_tool = json.dumps(
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "x" * 300,
                "arguments": "{}",
                "call_id": "call_long",
            },
        }
    )
    bad_out = json.dumps(
        {
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "call_long", "output": "ok"},
        }
    )
    path = rollout(
        tmp_path,
        lines=[*LINES[:4], bad_tool + "\n", bad_out + "\n", "this is not json\n", *LINES[4:]],
    )
    watcher = make_watcher(tmp_path, FlakyTransport(api))
    assert watcher.pass_once()["stalled"] == 0
    state = file_state(watcher, path)
    assert state["deadLetters"] == 2 and state["offset"] == path.stat().st_size
    letters = [json.loads(x) for x in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [x["reason"].split(":")[0] for x in letters] == ["HTTP 422", "not a JSON line"]
    assert letters[0]["line"] == bad_out and letters[1]["line"] == "this is not json"
    assert len(stored(api)) == 4  # everything after the bad lines still arrived


def test_partial_last_line_waits_for_its_newline(api: Api, tmp_path: Path) -> None:
    whole = LINES[4]
    path = rollout(tmp_path, lines=[*LINES[:4], whole[:40]])
    watcher = make_watcher(tmp_path, FlakyTransport(api))
    watcher.pass_once()
    before = sum(len(x.encode()) for x in LINES[:4])
    assert file_state(watcher, path)["offset"] == before
    assert (tmp_path / "dead.jsonl").exists() is False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(whole[40:])
    watcher.pass_once()
    state = file_state(watcher, path)
    assert state["offset"] == before + len(whole.encode())
    assert list(state["pending"]) == ["call_8dK2mQ4vX1pL7rS3"]


class Recording(FlakyTransport):
    """FlakyTransport that remembers each call as "METHOD path"."""

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.log: list[str] = []

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        self.log.append(
            f"{method} {path}" + (f" {body['hookType']}" if path == "/v1/observe" else "")
        )
        return super().request(method, path, body)


def _other_session(session: str, marker: str) -> list[str]:
    """The sample rollout as another session, with its own prompt, call ids and answer."""
    return [
        line.replace(SESSION, session)
        .replace('"call_', f'"call_{marker}')
        .replace("--dry-run", f"--{marker}")
        for line in LINES
    ]


@pytest.mark.parametrize("how", ["rename", "in_place"])
def test_a_file_replaced_at_the_same_path_is_read_from_the_start(
    api: Api, tmp_path: Path, how: str
) -> None:
    path = rollout(tmp_path, lines=LINES[:5])
    watcher = make_watcher(tmp_path, FlakyTransport(api))
    watcher.pass_once()
    assert list(file_state(watcher, path)["pending"]) == ["call_8dK2mQ4vX1pL7rS3"]
    old_offset = file_state(watcher, path)["offset"]
    # Rotated: another (larger) session's rollout now lives at this path.
    replacement = _other_session("sess-rotated", "rot")
    assert len("".join(replacement).encode()) > old_offset
    if how == "rename":
        fresh = rollout(tmp_path, "incoming.tmp", replacement)
        fresh.replace(path)
    else:  # truncated and rewritten in place: same inode, different bytes
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("".join(replacement))
    watcher.pass_once()
    items = stored(api, "sess-rotated")
    assert sorted(o["hookType"] for o in items) == [
        "PostToolUse",
        "PostToolUse",
        "Stop",
        "UserPromptSubmit",
    ]
    assert any("--rot" in json.dumps(o) for o in items if o["hookType"] == "UserPromptSubmit")
    state = file_state(watcher, path)
    assert state["offset"] == path.stat().st_size
    assert state["pending"] == {}  # the old file's waiting call is dropped with it
    assert state["sessionId"] == "sess-rotated"
    assert not (tmp_path / "dead.jsonl").exists()
    assert "reading it from the start" in watcher.out.getvalue()  # type: ignore[attr-defined]
    # An ordinary append afterwards is not mistaken for a replacement.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(LINES[2].replace("--dry-run", "--later"))
    watcher.pass_once()
    assert file_state(watcher, path)["offset"] == path.stat().st_size
    assert watcher.out.getvalue().count("reading it from the start") == 1  # type: ignore[attr-defined]


def test_codex_turns_after_a_task_complete_reannounce_the_session(api: Api, tmp_path: Path) -> None:
    second_turn = [LINES[3].replace("--dry-run", "--verbose"), LINES[9], LINES[10]]
    path = rollout(tmp_path)
    transport = Recording(api)
    watcher = make_watcher(tmp_path, transport)
    watcher.pass_once()
    assert transport.log[0] == "POST /v1/sessions"
    assert transport.log[-1] == f"POST /v1/sessions/{SESSION}/end"
    assert file_state(watcher, path)["announced"] is False
    transport.log.clear()
    with open(path, "a", encoding="utf-8") as handle:
        handle.writelines(second_turn)
    watcher.pass_once()
    assert transport.log == [
        "POST /v1/sessions",
        "POST /v1/observe UserPromptSubmit",
        "POST /v1/observe Stop",
        f"POST /v1/sessions/{SESSION}/end",
    ]
    assert api.get(f"/v1/sessions/{SESSION}")[1]["status"] == "ended"


def test_start_at_end_reads_only_new_lines_of_files_found_at_start(
    api: Api, tmp_path: Path
) -> None:
    old = rollout(tmp_path, lines=LINES[:4])
    watcher = make_watcher(tmp_path, FlakyTransport(api), startAtEnd=True)
    watcher.pass_once()
    state = file_state(watcher, old)
    assert state["offset"] == old.stat().st_size and state["sessionId"] == SESSION
    assert stored(api) == []  # the prompt before the start is not sent
    with open(old, "a", encoding="utf-8") as handle:
        handle.writelines(LINES[4:6])
    later = rollout(
        tmp_path, "rollout-b.jsonl", [LINES[0].replace(SESSION, "sess-later"), *LINES[2:4]]
    )
    watcher.pass_once()
    assert [o["toolName"] for o in stored(api)] == ["shell"]  # new line, known session id
    assert [o["hookType"] for o in stored(api, "sess-later")] == ["UserPromptSubmit"]
    assert file_state(watcher, later)["offset"] == later.stat().st_size


def test_codex_hooks_connected_leaves_only_subagent_rollouts(api: Api, tmp_path: Path) -> None:
    main = rollout(tmp_path)
    meta = json.loads(LINES[0])
    meta["payload"].update(
        id="sub-1", source={"subagent": {"thread_spawn": {"parent_thread_id": SESSION, "depth": 1}}}
    )
    sub = rollout(tmp_path, "rollout-sub.jsonl", [json.dumps(meta) + "\n", *LINES[1:]])
    watcher = make_watcher(tmp_path, FlakyTransport(api), hooks=frozenset({"codex"}))
    watcher.pass_once()
    assert stored(api) == []
    main_state = file_state(watcher, main)
    # 4 events and the session end, all left to the hooks
    assert main_state["coveredByHooks"] == 5 and main_state["offset"] == main.stat().st_size
    assert len(stored(api, "sub-1")) == 4
    assert file_state(watcher, sub)["subagent"] is True


def test_status_and_config_errors_from_the_cli(tmp_path: Path, capsys: Any) -> None:
    from engram.cli.main import main

    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            _config([{"name": "oops", "match": {"path": "t", "same": 1}, "action": "session_end"}])
        )
    )
    base = ["--data-dir", str(tmp_path / "d"), "--config-dir", str(tmp_path / "c")]
    assert main(["watch-transcripts", *base, "--config", str(bad), "--once"]) == 2
    assert "schema 'codex' event 'oops'" in capsys.readouterr().err
    good = write_config(tmp_path)
    assert (
        main(
            [
                "watch-transcripts",
                *base,
                "--config",
                str(good),
                "--status",
                "--state",
                str(tmp_path / "other.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "other.json" in out and "no files read yet" in out and "dead letters: 0" in out


@pytest.mark.slow
def test_cli_once_against_a_real_server_stopped_and_restarted(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    cluster = Cluster(tmp_path / "c")
    env = {**cluster.env, "ENGRAM_URL": cluster.url}
    config = write_config(tmp_path)
    path = rollout(tmp_path)
    command = [ENGRAM, "watch-transcripts", "--config", str(config), "--once"]

    down = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 1 and "Traceback" not in down.stderr
    assert "will retry" in down.stderr
    state = json.loads((tmp_path / "state.json").read_text())
    # Context lines need no gateway; the first prompt stops the file until it answers.
    assert state["files"][str(path.resolve())]["offset"] == sum(len(x.encode()) for x in LINES[:3])

    try:
        cluster.serve()
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        status, body = cluster.request("GET", f"/v1/sessions/{SESSION}/observations")
        assert status == 200 and len(body["items"]) == 4
        status_out = subprocess.run(
            [*command[:-1], "--status"], env=env, capture_output=True, text=True, timeout=60
        )
        assert f"offset {path.stat().st_size} of {path.stat().st_size}" in status_out.stdout

        # Long-lived: a line appended later arrives; Ctrl-C stops cleanly.
        follow = subprocess.Popen(
            command[:-1],
            env={**env, "ENGRAM_TRANSCRIPT_POLL_SECONDS": "0.2"},
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=hears_ctrl_c,
        )
        try:
            late = rollout(
                tmp_path, "rollout-late.jsonl", [LINES[0].replace(SESSION, "sess-late"), LINES[3]]
            )
            wait_for(
                lambda: cluster.request("GET", "/v1/sessions/sess-late/observations")[0] == 200,
                message="the appended file to be captured",
            )
            assert late.exists()
        finally:
            follow.send_signal(signal.SIGINT)
            assert follow.wait(15) == 0
            assert "Traceback" not in (follow.stderr.read() if follow.stderr else "")
    finally:
        cluster.stop_all()
    shutil.rmtree(tmp_path / "sessions")


def test_dead_letters_are_scrubbed_and_private(tmp_path: Path) -> None:
    import stat

    from engram.watcher.delivery import append_dead_letter

    secret = "sk-ant-api03-" + "Zq9Xw8Vu7Ts6Rp5O" * 4
    path = tmp_path / "letters" / "dead.jsonl"
    append_dead_letter(
        path,
        source="/x.jsonl",
        offset=7,
        reason="not a JSON line",
        line=f'{{"torn": "export ANTHROPIC_API_KEY={secret}',
    )
    text = path.read_text()
    assert secret not in text and "REDACTED" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
