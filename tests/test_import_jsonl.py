"""`engram import-jsonl`: Claude Code transcripts through a real gateway, stored exactly once."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from engram.agents.adapters import claude_code
from engram.agents.contract import event_id, observe_body
from engram.watcher import claude_import
from engram.watcher.delivery import Delivery
from engram.watcher.importer import Importer
from tests.support import ENGRAM, Api, Cluster

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "transcripts"
CLAUDE_FILES = [
    "basic.jsonl",
    "tool-use.jsonl",
    "errors.jsonl",
    "claude-code-transcript.jsonl",
    "claude-code-session.endless-mode-v1.jsonl",
    "sample-transcript.claude-code-2025.jsonl",
]


class FlaskTransport:
    """engram.client.Client's request() over the Flask test client of a real gateway."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return self.api.call(method, path, body)


class Recording(FlaskTransport):
    """FlaskTransport that remembers each call as "METHOD path"."""

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self.log: list[str] = []

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        self.log.append(f"{method} {path}")
        return super().request(method, path, body)


def age(path: Path, seconds: float = 3600.0) -> Path:
    """Set the file's mtime ``seconds`` ago: a finished transcript, not one being written."""
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def finished(tmp_path: Path, name: str) -> Path:
    """A copy of a fixture transcript, last written an hour ago."""
    folder = tmp_path / "finished"
    folder.mkdir(exist_ok=True)
    return age(Path(shutil.copy(FIXTURES / name, folder / name)))


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "-home-dev-src"
    folder.mkdir(parents=True)
    for name in CLAUDE_FILES:
        age(Path(shutil.copy(FIXTURES / name, folder / name)))
    return tmp_path / "projects"


def importer(api: Api, tmp_path: Path, **kw: Any) -> Importer:
    return Importer(
        Delivery(FlaskTransport(api)),
        tmp_path / "data",  # type: ignore[arg-type]
        out=io.StringIO(),
        **kw,
    )


def timeline(api: Api, session: str) -> list[dict[str, Any]]:
    status, page = api.get(f"/v1/sessions/{session}/observations?limit=1000")
    assert status == 200, page
    return list(page["items"])


@pytest.fixture
def api(own_api: Api) -> Api:
    """This module's tests use fixed session ids: each gets a gateway of its own."""
    return own_api


def test_parse_gives_hook_shaped_events() -> None:
    parsed = claude_import.parse(FIXTURES / "tool-use.jsonl")
    assert [(e.hook, e.kind) for e in parsed.events] == [
        ("UserPromptSubmit", "prompt"),
        ("PostToolUse", "tool_post"),
        ("Stop", "agent_response"),
    ]
    prompt, tool, stop = parsed.events
    assert event_id(prompt, 0) == "claude-code:sess-tool:UserPromptSubmit:turn:u1"
    assert event_id(tool, 0) == "claude-code:sess-tool:PostToolUse:toolu_1"
    assert (tool.tool_name, tool.tool_input, tool.tool_output) == (
        "Bash",
        {"command": "ls"},
        "README.md\nsrc\n",
    )
    assert event_id(stop, 0) == "claude-code:sess-tool:Stop:turn:a2"
    assert stop.message == "Two entries."
    assert prompt.project == "repo"  # project_for(cwd): no git repo above it, the folder name


def test_failed_tool_and_invalid_line() -> None:
    parsed = claude_import.parse(FIXTURES / "errors.jsonl")
    assert parsed.invalid == 1
    failure = parsed.events[-1]
    assert (failure.hook, failure.kind, failure.tool_name, failure.error) == (
        "PostToolUseFailure",
        "tool_failure",
        "Bash",
        "exit 1",
    )


def test_noise_is_not_a_prompt() -> None:
    parsed = claude_import.parse(FIXTURES / "claude-code-session.endless-mode-v1.jsonl")
    assert parsed.invalid == 1  # the deliberately torn last line
    prompts = [e.prompt for e in parsed.events if e.kind == "prompt"]
    assert (prompts[0] or "").startswith("Add a bottle renderer")
    joined = "\n".join(p or "" for p in prompts)
    for marker in (
        "SYSTEM-REMINDER-MARKER",
        "CAVEAT-MARKER",
        "COMMAND-WRAPPER-MARKER",
        "SIDECHAIN-USER-MARKER",
        "COMPACT-SUMMARY-MARKER",
        "MEDIA-DATA-MARKER",
    ):
        assert marker not in joined
    answers = "\n".join(e.message or "" for e in parsed.events if e.kind == "agent_response")
    assert "SIDECHAIN-ASSISTANT-MARKER" not in answers
    assert "All 12 tests green" in answers
    tools = [e.tool_use_id for e in parsed.events if e.kind == "tool_post"]
    assert tools == ["toolu_01", "toolu_02"]


def test_real_transcript_pairs_every_tool_call() -> None:
    parsed = claude_import.parse(FIXTURES / "sample-transcript.claude-code-2025.jsonl")
    tools = [e for e in parsed.events if e.kind in ("tool_post", "tool_failure")]
    assert len(tools) == 38 and all(e.tool_name and e.tool_use_id for e in tools)
    assert len({event_id(e, 0) for e in parsed.events}) == len(parsed.events)
    assert parsed.invalid == 0


def test_import_every_fixture_then_rerun_stores_nothing_new(
    api: Api, tmp_path: Path, transcripts: Path
) -> None:
    files = list(claude_import.transcript_files([transcripts]))
    first = importer(api, tmp_path).run(files)
    assert first.files == len(CLAUDE_FILES)
    assert first.invalid_lines == 2  # errors.jsonl's bad line, endless-mode's torn last line
    assert first.rejected == 0 and first.accepted == first.sent > 60
    api.wait_drained()
    stored = {s: len(timeline(api, s)) for s in ("sess-basic", "sess-tool", "sess-err")}
    assert stored == {"sess-basic": 2, "sess-tool": 3, "sess-err": 2}
    assert api.get("/v1/sessions/sess-tool")[1]["status"] == "ended"
    real = "7f3c2a91-5b64-4e0d-9c1a-2d8e4f6b1a37"
    before = len(timeline(api, real))

    again = importer(api, tmp_path).run(files)  # the ledger skips unchanged files
    assert (again.skipped_unchanged, again.sent) == (len(CLAUDE_FILES), 0)
    rescan = importer(api, tmp_path, use_ledger=False).run(files)  # eventIds alone
    assert rescan.accepted == 0 and rescan.duplicates == first.sent
    api.wait_drained()
    assert len(timeline(api, real)) == before
    assert {s: len(timeline(api, s)) for s in stored} == stored


def hook_event(hook: str, payload: dict[str, Any], at: float) -> dict[str, Any]:
    """What the live Claude Code hook sends: its own clock decides the ids of prompts and
    answers (the payloads carry no turn id or timestamp)."""
    event = claude_code.normalise(
        hook, {"session_id": "sess-tool", "cwd": "/Users/bob/repo", **payload}
    )
    event.project = "repo"
    return observe_body(event, event_id(event, at))


def test_tool_call_seen_by_hook_and_import_is_stored_once(api: Api, tmp_path: Path) -> None:
    assert (
        api.post(
            "/v1/sessions", {"sessionId": "sess-tool", "project": "repo", "host": "claude-code"}
        )[0]
        == 201
    )
    hook = hook_event(
        "PostToolUse",
        {
            "tool_use_id": "toolu_1",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_response": {"stdout": "README.md\nsrc\n"},
        },
        1.0,
    )
    assert api.post("/v1/observe", hook)[0] == 201
    totals = importer(api, tmp_path).run([finished(tmp_path, "tool-use.jsonl")])
    assert (totals.accepted, totals.duplicates) == (0, 1)
    api.wait_drained()
    bash = [o for o in timeline(api, "sess-tool") if o["toolName"] == "Bash"]
    assert len(bash) == 1 and bash[0]["eventId"] == "claude-code:sess-tool:PostToolUse:toolu_1"


def test_session_captured_by_hooks_gets_only_its_tool_calls(api: Api, tmp_path: Path) -> None:
    """The hooks captured the whole (still open) session; importing its transcript afterwards
    stores no second prompt or answer, and neither re-opens nor ends the session."""
    assert (
        api.post(
            "/v1/sessions",
            {
                "sessionId": "sess-tool",
                "project": "repo",
                "host": "claude-code",
                "cwd": "/Users/bob/repo",
            },
        )[0]
        == 201
    )
    hooks: list[tuple[str, dict[str, Any]]] = [
        ("UserPromptSubmit", {"prompt": "List the files"}),
        (
            "PostToolUse",
            {
                "tool_use_id": "toolu_1",
                "tool_name": "Bash",
                "tool_input": {"command": "ls"},
                "tool_response": {"stdout": "README.md\nsrc\n"},
            },
        ),
        ("Stop", {"last_assistant_message": "Two entries."}),
    ]
    for hook, payload in hooks:
        assert api.post("/v1/observe", hook_event(hook, payload, time.time()))[0] == 201
    api.wait_drained()
    before = timeline(api, "sess-tool")
    assert len(before) == 3

    transport = Recording(api)
    run = Importer(
        Delivery(transport),
        tmp_path / "data",  # type: ignore[arg-type]
        out=io.StringIO(),
    )
    totals = run.run([finished(tmp_path, "tool-use.jsonl")])
    assert (totals.sent, totals.duplicates, totals.covered_by_hooks) == (1, 1, 2)
    assert "2 covered by hooks" in totals.line()
    assert "2 covered by hooks" in run.out.getvalue()  # type: ignore[attr-defined]
    api.wait_drained()
    assert [o["eventId"] for o in timeline(api, "sess-tool")] == [o["eventId"] for o in before]
    assert transport.log == ["GET /v1/sessions/sess-tool", "POST /v1/observe"]
    assert api.get("/v1/sessions/sess-tool")[1]["status"] == "active"  # not ended by the import
    ledger = json.loads((tmp_path / "data" / "transcript-import-ledger.json").read_text())
    assert ledger["createdSessions"] == []


def test_sessions_the_importer_created_stay_its_own(api: Api, tmp_path: Path) -> None:
    """The gateway has the session after a first import; a later import of the grown file is
    still its writer: the new prompt and answer arrive, and the session is ended again."""
    path = finished(tmp_path, "tool-use.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.chmod(0o644)
    path.write_text("".join(lines[:3]))
    age(path)
    first = importer(api, tmp_path).run([path])
    assert (first.accepted, first.covered_by_hooks) == (2, 0)
    api.wait_drained()
    assert api.get("/v1/sessions/sess-tool")[1]["status"] == "ended"
    path.write_text("".join(lines))
    age(path, 1800)
    grown = importer(api, tmp_path).run([path])
    assert (grown.accepted, grown.duplicates, grown.covered_by_hooks) == (1, 2, 0)
    api.wait_drained()
    assert [o["hookType"] for o in timeline(api, "sess-tool")] == [
        "UserPromptSubmit",
        "PostToolUse",
        "Stop",
    ]
    rescan = importer(api, tmp_path, use_ledger=False).run([path])  # --rescan: still its own
    assert (rescan.duplicates, rescan.covered_by_hooks) == (3, 0)


def test_a_file_still_being_written_is_skipped_unless_asked(api: Api, tmp_path: Path) -> None:
    live = finished(tmp_path, "tool-use.jsonl")
    age(live, 30)  # written 30 seconds ago: its session is probably running
    out = io.StringIO()
    run = Importer(
        Delivery(FlaskTransport(api)),
        tmp_path / "data",  # type: ignore[arg-type]
        out=out,
    )
    totals = run.run([live])
    assert (totals.skipped_live, totals.sent) == (1, 0)
    assert "still being written, skipped" in out.getvalue()
    assert api.get("/v1/sessions/sess-tool")[0] == 404
    assert run.ledger == {}  # not recorded: the next run looks at it again
    totals = importer(api, tmp_path, include_live=True).run([live])
    assert (totals.skipped_live, totals.accepted) == (0, 3)


def test_gateway_down_stops_the_import_and_keeps_the_ledger(tmp_path: Path) -> None:
    from engram.client import Client
    from engram.watcher.importer import ImportStopped

    down = Importer(
        Delivery(Client("http://127.0.0.1:9", None, timeout=2)), tmp_path, out=io.StringIO()
    )
    with pytest.raises(ImportStopped, match="did not take"):
        down.run([finished(tmp_path, "basic.jsonl")])
    assert down.ledger == {}


@pytest.mark.slow
def test_cli_end_to_end(tmp_path: Path, transcripts: Path) -> None:
    (tmp_path / "c").mkdir()
    cluster = Cluster(tmp_path / "c")
    env = {**cluster.env, "ENGRAM_URL": cluster.url}
    try:
        cluster.serve()
        done = subprocess.run(
            [ENGRAM, "import-jsonl", str(transcripts)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert f"[{len(CLAUDE_FILES)}/{len(CLAUDE_FILES)}]" in done.stderr
        assert "2 invalid lines skipped" in done.stderr and "0 rejected" in done.stderr
        again = subprocess.run(
            [ENGRAM, "import-jsonl", "--rescan", str(transcripts)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 0, again.stderr
        assert " 0 new" in again.stderr.splitlines()[-1]
        status, body = cluster.request("GET", "/v1/sessions/sess-basic/observations")
        assert status == 200 and len(body["items"]) == 2
        live = tmp_path / "live"
        live.mkdir()
        (live / "now.jsonl").write_text(
            (FIXTURES / "tool-use.jsonl").read_text().replace("sess-tool", "sess-live")
        )
        done = subprocess.run(
            [ENGRAM, "import-jsonl", str(live)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "still being written, skipped" in done.stderr
        assert "(1 still being written, skipped)" in done.stderr.splitlines()[-1]
        done = subprocess.run(
            [ENGRAM, "import-jsonl", "--include-live", str(live)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert " 3 new" in done.stderr.splitlines()[-1]
    finally:
        cluster.stop_all()
    down = subprocess.run(
        [ENGRAM, "import-jsonl", "--rescan", str(transcripts)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 1
    assert "import stopped" in down.stderr and "engram serve" in down.stderr
    assert "Traceback" not in down.stderr
    missing = subprocess.run(
        [ENGRAM, "import-jsonl", str(tmp_path / "nope")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def test_a_full_inbox_paces_the_import_instead_of_stopping_it(tmp_path: Path) -> None:
    """A bulk import faster than the workers fills the inbox (503): the importer waits for them
    and goes on, and every event arrives once."""
    from engram.cli.server import build_gateway
    from tests.conftest import api_for, make_settings

    gateway = build_gateway(
        make_settings(tmp_path / "gw", ENGRAM_INBOX_MAX="2"), start_worker=False
    )
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        if not slept:
            gateway.start_worker()  # the workers catch up while the importer waits
        slept.append(seconds)
        time.sleep(seconds)

    try:
        api = api_for(gateway)
        out = io.StringIO()
        importer = Importer(Delivery(FlaskTransport(api)), tmp_path, out=out, sleep=sleep)  # type: ignore[arg-type]
        totals = importer.run([finished(tmp_path, "tool-use.jsonl")])
        assert slept and "gateway busy" in out.getvalue() and "inbox" in out.getvalue()
        assert totals.accepted >= 3 and not totals.rejections
        api.wait_drained()
        status, body = api.get("/v1/sessions/sess-tool/observations")
        assert status == 200 and len(body["items"]) == totals.accepted
    finally:
        gateway.close()
