"""The hook CLI as agent hosts run it: a real `engram hook` subprocess against a real `engram serve`,
a stopped one, a frozen one and a full one. Every event a hook produced is stored exactly once,
or is visible in the spool."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import ENGRAM, Cluster, redis_available, wait_for

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "hosts"
SESSION = "7f3c2a91-5b64-4e0d-9c1a-2d8e4f6b1a37"  # the Claude Code fixtures' session
SECRET_VALUE = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8" * 4


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def hook(
    env: dict[str, str], host: str, event: str, payload: Any, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [ENGRAM, "hook", host, event],
        input=stdin,
        env=env,
        text=True,
        capture_output=True,
        timeout=30,
        cwd=cwd,
    )


def engram(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], env=env, text=True, capture_output=True, timeout=60)


def observations(cluster: Cluster, session: str) -> list[dict[str, Any]]:
    status, page = cluster.request("GET", f"/v1/sessions/{session}/observations?limit=1000")
    return page["items"] if status == 200 else []


def settled(cluster: Cluster) -> bool:
    _, report = cluster.request("GET", "/v1/status")
    inbox = report.get("inbox", {})
    return inbox.get("waiting", 1) == 0 and inbox.get("processing", 1) == 0


def spool_dir(cluster: Cluster) -> Path:
    return cluster.tmp / "data" / "spool"


def spooled(cluster: Cluster) -> list[dict[str, Any]]:
    """The waiting requests, once no drain (a hook's detached child) holds a batch."""
    wait_for(lambda: not list(spool_dir(cluster).glob("draining-*")))
    path = spool_dir(cluster) / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path, ENGRAM_PROJECT="acme-api", ENGRAM_HOOK_TIMEOUT_SECONDS="1.5")
    made.env.pop("PYTHONDONTWRITEBYTECODE", None)
    yield made
    made.stop_all()


def tool_call(n: int, session: str = SESSION) -> dict[str, Any]:
    payload = fixture("claude-code-PostToolUse")
    payload["session_id"] = session
    payload["tool_use_id"] = f"toolu_{n:04d}"
    payload["tool_input"] = {"command": f"pytest tests/test_{n}.py -q"}
    return payload


def test_every_claude_code_event_is_stored_once_and_session_start_gets_context(
    cluster: Cluster,
) -> None:
    cluster.serve()
    events = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolUse-Edit",
        "PostToolUseFailure",
        "PreCompact",
        "Stop",
        "SubagentStop",
    ]
    for name in events:
        result = hook(
            cluster.env, "claude-code", name.removesuffix("-Edit"), fixture(f"claude-code-{name}")
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        # nothing is known of the project yet: nothing is injected, not even an empty block
        assert result.stdout == ""
    # Replays of the tool calls (same tool_use_id): the gateway recognises them.
    for name in ("PostToolUse", "PreToolUse"):
        assert (
            hook(cluster.env, "claude-code", name, fixture(f"claude-code-{name}")).returncode == 0
        )
    wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) >= 8)
    stored = observations(cluster, SESSION)
    hooks = sorted(o["hookType"] for o in stored)
    assert hooks == sorted(
        [
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "PreCompact",
            "Stop",
            "SubagentStop",
        ]
    )
    assert not spooled(cluster)

    result = hook(cluster.env, "claude-code", "SessionEnd", fixture("claude-code-SessionEnd"))
    assert result.returncode == 0 and result.stdout == ""
    wait_for(lambda: cluster.request("GET", f"/v1/sessions/{SESSION}")[1]["status"] == "ended")

    # A second session starts with what the first one left.
    start = fixture("claude-code-SessionStart") | {"session_id": "second-session"}
    answer = json.loads(hook(cluster.env, "claude-code", "SessionStart", start).stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Engram memory: acme-api") and "pytest" in context


def test_a_prompt_gets_what_earlier_sessions_know_about_it_once(cluster: Cluster) -> None:
    """UserPromptSubmit: the hook adds what other sessions hold about the prompt (Claude Code's
    additionalContext), nothing from the session itself, and an item only once per session."""
    cluster.serve()
    earlier = "earlier-session"
    prompt = fixture("claude-code-UserPromptSubmit") | {
        "session_id": earlier,
        "prompt": "The invoice exporter leaks connections in src/billing/export_rows.py; "
        "fix ListInvoiceRows so the pool stops draining",
    }
    edit = fixture("claude-code-PostToolUse-Edit") | {
        "session_id": earlier,
        "tool_use_id": "toolu_leak",
        "tool_input": {
            "file_path": "/home/dev/src/acme-api/src/billing/export_rows.py",
            "old_string": "rows = conn.execute(query)",
            "new_string": "rows = conn.execute(query)\n    defer_close(rows)  # ListInvoiceRows leaked",
        },
    }
    stop = fixture("claude-code-Stop") | {
        "session_id": earlier,
        "last_assistant_message": "ListInvoiceRows in src/billing/export_rows.py never closed its "
        "rows, so every export leaked a pool connection; it now closes them.",
    }
    for name, payload in (("UserPromptSubmit", prompt), ("PostToolUse", edit), ("Stop", stop)):
        assert hook(cluster.env, "claude-code", name, payload).stdout == ""  # nothing known yet
    end = fixture("claude-code-SessionEnd") | {"session_id": earlier}
    hook(cluster.env, "claude-code", "SessionEnd", end)
    wait_for(lambda: cluster.request("GET", f"/v1/sessions/{earlier}")[1].get("summary"), 20)
    wait_for(lambda: settled(cluster))

    later = fixture("claude-code-UserPromptSubmit") | {
        "session_id": "later-session",
        "prompt": "Exports are slow again and the pool drains: what did we change in "
        "ListInvoiceRows (src/billing/export_rows.py) last time?",
    }
    result = hook(cluster.env, "claude-code", "UserPromptSubmit", later)
    assert result.returncode == 0 and result.stderr == ""
    answer = json.loads(result.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    assert "never closed its rows" in answer["additionalContext"]
    assert re.search(r"\(obs_[0-9a-f]{24}\)", answer["additionalContext"])
    # the same prompt again in the same session: it was given already
    assert hook(cluster.env, "claude-code", "UserPromptSubmit", later).stdout == ""
    # the earlier session's own prompt gets nothing from itself
    again = prompt | {"prompt": prompt["prompt"] + " (again)"}
    assert (
        "never closed its rows"
        not in hook(cluster.env, "claude-code", "UserPromptSubmit", again).stdout
    )
    # off by setting: no request, nothing printed
    off = dict(cluster.env, ENGRAM_PROMPT_CONTEXT_TOKENS="0")
    fresh = later | {"session_id": "third-session"}
    assert hook(off, "claude-code", "UserPromptSubmit", fresh).stdout == ""


def test_gateway_down_spools_then_drain_stores_each_event_exactly_once(cluster: Cluster) -> None:
    cluster.env["ENGRAM_URL"] = f"http://127.0.0.1:{cluster.port}"
    started = time.monotonic()
    for n in range(5):
        payload = tool_call(n)
        if n == 0:
            payload["tool_response"] = {"stdout": f"export ANTHROPIC_API_KEY={SECRET_VALUE}"}
        result = hook(cluster.env, "claude-code", "PostToolUse", payload)
        assert result.returncode == 0 and result.stdout == "", result.stderr
    assert time.monotonic() - started < 5 * 3.0  # refused at once, never the whole budget
    end = hook(cluster.env, "claude-code", "SessionEnd", fixture("claude-code-SessionEnd"))
    assert end.returncode == 0

    records = spooled(cluster)
    assert [r["path"] for r in records] == ["/v1/observe"] * 6 + [f"/v1/sessions/{SESSION}/end"]
    spool_file = spool_dir(cluster) / "events.jsonl"
    assert stat.S_IMODE(spool_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(spool_dir(cluster).stat().st_mode) == 0o700
    assert SECRET_VALUE not in spool_file.read_text()
    shown = engram(cluster.env, "capture")
    assert shown.returncode == 0 and "waiting:  7 request(s)" in shown.stdout, shown.stdout
    status = engram(cluster.env, "status")
    assert status.returncode == 1 and "Hook spool" in status.stderr
    assert "7 waiting" in status.stderr and "engram capture --drain" in status.stderr

    cluster.serve()  # starts draining the spool itself; `capture --drain` waits for it
    drained = engram(cluster.env, "capture", "--drain")
    assert drained.returncode == 0, drained.stderr
    assert "still waiting 0" in drained.stdout or "nothing waiting" in drained.stdout
    wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) == 6)
    assert cluster.request("GET", f"/v1/sessions/{SESSION}")[1]["status"] == "ended"
    assert not spooled(cluster)
    assert "Hook spool" not in engram(cluster.env, "status").stdout

    # The same events again (a drain that died after sending): duplicates, nothing doubles.
    for n in range(5):
        hook(cluster.env, "claude-code", "PostToolUse", tool_call(n))
    wait_for(lambda: settled(cluster))
    stored = observations(cluster, SESSION)
    assert len(stored) == 6
    assert SECRET_VALUE not in json.dumps(stored)


def test_a_later_hook_drains_the_spool_in_a_detached_child(cluster: Cluster) -> None:
    for n in range(3):
        assert hook(cluster.env, "claude-code", "PostToolUse", tool_call(n)).returncode == 0
    assert len(spooled(cluster)) == 3
    cluster.serve()
    assert hook(cluster.env, "claude-code", "PostToolUse", tool_call(3)).returncode == 0
    wait_for(
        lambda: (
            not spooled(cluster) and settled(cluster) and len(observations(cluster, SESSION)) == 4
        )
    )
    calls = sorted(o["commands"][0] for o in observations(cluster, SESSION))
    assert calls == [f"pytest tests/test_{n}.py -q" for n in range(4)]


def test_the_server_drains_the_spool_when_it_starts(cluster: Cluster) -> None:
    for n in range(3):
        assert hook(cluster.env, "claude-code", "PostToolUse", tool_call(n)).returncode == 0
    assert len(spooled(cluster)) == 3
    proc = cluster.serve()
    wait_for(
        lambda: (
            not spooled(cluster) and settled(cluster) and len(observations(cluster, SESSION)) == 3
        )
    )
    assert "spool:   hook events spooled on this machine" in proc.output()


def test_a_frozen_gateway_costs_the_hook_its_budget_not_more(cluster: Cluster) -> None:
    proc = cluster.serve()
    os.kill(proc.popen.pid, signal.SIGSTOP)  # accepts connections, answers nothing
    try:
        started = time.monotonic()
        result = hook(cluster.env, "claude-code", "PostToolUse", tool_call(1))
        took = time.monotonic() - started
    finally:
        os.kill(proc.popen.pid, signal.SIGCONT)
    assert result.returncode == 0 and result.stdout == ""
    assert 1.4 < took < 1.5 + 2.5, took  # ENGRAM_HOOK_TIMEOUT_SECONDS=1.5, plus start-up
    assert [r["body"]["eventId"] for r in spooled(cluster)] == [
        f"claude-code:{SESSION}:PostToolUse:toolu_0001"
    ]
    assert engram(cluster.env, "capture", "--drain").returncode == 0
    wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) == 1)


def test_a_full_inbox_503_spools_and_the_drain_delivers_once_workers_run(tmp_path: Path) -> None:
    redis_url = os.environ.get("ENGRAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
    if not redis_available(redis_url):
        if os.environ.get("CI"):
            pytest.fail(f"Redis is not reachable at {redis_url}; .ci/run must start it")
        pytest.skip(f"Redis is not reachable at {redis_url}")
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    cluster = Cluster(
        tmp_path, ENGRAM_BROKER_URL=redis_url, ENGRAM_INBOX_MAX="2", ENGRAM_PROJECT="acme-api"
    )
    try:
        cluster.serve()  # distributed mode, no worker yet: the inbox fills
        for n in range(4):
            assert hook(cluster.env, "claude-code", "PostToolUse", tool_call(n)).returncode == 0
        assert [r["body"]["eventId"][-4:] for r in spooled(cluster)] == ["0002", "0003"]
        cluster.start("worker", "--pool", "solo")
        wait_for(lambda: settled(cluster), timeout=60)
        drained = engram(cluster.env, "capture", "--drain")
        assert drained.returncode == 0, drained.stdout + drained.stderr
        wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) == 4, timeout=60)
    finally:
        cluster.stop_all()


def test_a_wrong_secret_spools_and_says_how_to_fix_it(cluster: Cluster) -> None:
    cluster.serve()
    env = {**cluster.env, "ENGRAM_SECRET": "not-the-secret"}
    result = hook(env, "claude-code", "PostToolUse", tool_call(7))
    assert result.returncode == 0
    assert "HTTP 401" in result.stderr and "ENGRAM_SECRET" in result.stderr
    assert len(spooled(cluster)) == 1
    assert engram(cluster.env, "capture", "--drain").returncode == 0
    wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) == 1)


def test_unusable_input_never_breaks_the_agent_and_is_never_silent(cluster: Cluster) -> None:
    cluster.serve()
    log = spool_dir(cluster) / "hook-errors.log"
    cases = [
        ("claude-code", "PostToolUse", "not json {"),
        ("claude-code", "PostToolUse", "[1, 2]"),
        ("claude-code", "PostToolUse", json.dumps(tool_call(1) | {"session_id": "../../etc"})),
        ("claude-code", "PostToolUse", json.dumps(tool_call(1) | {"cwd": "relative/dir"})),
        ("nosuchhost", "PostToolUse", json.dumps(tool_call(1))),
    ]
    for host, event, stdin in cases:
        result = hook(cluster.env, host, event, stdin)
        assert result.returncode == 0
        assert result.stdout == ""
        assert result.stderr.startswith(f"engram hook {host} {event}: "), result.stderr
        assert "Traceback" not in result.stderr
    lines = log.read_text().splitlines()
    assert len(lines) == len(cases)
    assert "stdin is not JSON" in lines[0] and "one JSON object" in lines[1]
    assert "session_id is not a safe id" in lines[2] and "absolute path" in lines[3]
    assert "unknown host 'nosuchhost'" in lines[4]
    assert not (cluster.tmp / "etc").exists()
    assert not spooled(cluster)


def test_the_gateway_refusing_an_event_for_good_is_kept_as_refused(cluster: Cluster) -> None:
    cluster.serve()
    payload = {"sessionId": "raw-1", "project": "acme-api", "toolName": "x" * 500}
    result = hook(cluster.env, "raw", "PostToolUse", payload)
    assert result.returncode == 0 and "HTTP 422" in result.stderr
    shown = engram(cluster.env, "capture")
    assert "refused:  1" in shown.stdout and "HTTP 422" in shown.stdout, shown.stdout


def test_capture_filters_and_output_bound(cluster: Cluster) -> None:
    cluster.serve()
    own = tool_call(1) | {"tool_name": "mcp__engram__search", "tool_use_id": "toolu_own"}
    assert hook(cluster.env, "claude-code", "PostToolUse", own).returncode == 0
    env = {
        **cluster.env,
        "ENGRAM_CAPTURE_ALLOW": "Bash,Edit",
        "ENGRAM_CAPTURE_DENY": "",
        "ENGRAM_CAPTURE_MAX_OUTPUT_CHARS": "1000",
    }
    read = tool_call(2) | {"tool_name": "Read", "tool_use_id": "toolu_read"}
    assert hook(env, "claude-code", "PostToolUse", read).returncode == 0
    big = tool_call(3) | {"tool_response": {"stdout": "x" * 50_000 + "THE-END"}}
    assert hook(env, "claude-code", "PostToolUse", big).returncode == 0
    wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) >= 1)
    stored = observations(cluster, SESSION)
    assert [o["toolName"] for o in stored] == ["Bash"]
    detail = cluster.request("GET", f"/v1/observations/{stored[0]['id']}")[1]
    output = json.dumps(detail["toolOutput"])
    assert len(output) < 1200 and "THE-END" in output and "chars omitted" in output


def test_spool_bounds_are_counted_and_a_dead_drains_batch_is_resent(cluster: Cluster) -> None:
    env = {**cluster.env, "ENGRAM_SPOOL_MAX_BYTES": "3000"}
    for n in range(6):
        hook(env, "claude-code", "PostToolUse", tool_call(n))
    kept = spooled(cluster)
    assert 0 < len(kept) < 6
    # A drain killed mid-way left its batch; an old record is past its age.
    directory = spool_dir(cluster)
    leftover = dict(kept[0], body=dict(kept[0]["body"], eventId="claude-code:left:over:1"))
    (directory / "draining-999999.jsonl").write_text(json.dumps(leftover) + "\n")
    old = dict(
        kept[0],
        spooledAt=time.time() - 8 * 24 * 3600,
        body=dict(kept[0]["body"], eventId="claude-code:too:old:1"),
    )
    with open(directory / "events.jsonl", "a") as out:
        out.write(json.dumps(old) + "\n")
    shown = engram(env, "capture")
    assert f"dropped:  {6 - len(kept)} (spool full" in shown.stdout, shown.stdout
    cluster.serve()  # drains the spool itself; so may `capture --drain`
    assert engram(env, "capture", "--drain").returncode == 0
    wait_for(lambda: settled(cluster) and len(observations(cluster, SESSION)) == len(kept) + 1)
    assert not spooled(cluster)
    shown = engram(env, "capture").stdout
    assert f"dropped:  {6 - len(kept)} (spool full" in shown and ", 1 (older than" in shown, shown


def test_the_hook_imports_only_the_standard_library_and_its_adapter(cluster: Cluster) -> None:
    cluster.serve()
    probe = (
        "import sys, json\n"
        "from engram.cli.entry import main\n"
        "main(['hook', 'claude-code', 'PostToolUse'])\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(tool_call(1)),
        env=cluster.env,
        text=True,
        capture_output=True,
        timeout=30,
    )
    loaded = json.loads(result.stderr.strip().splitlines()[-1])
    outside = {m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names}
    ours = {m for m in outside if m.split(".")[0] == "engram"}
    assert outside - ours <= {"__main__", "_distutils_hack", "__editable___engram_0_1_0_finder"}, (
        outside
    )
    assert {m for m in ours if m.startswith("engram.agents.adapters.")} <= {
        "engram.agents.adapters.claude_code",
        "engram.agents.adapters._common",
    }
    assert "engram.privacy" not in ours  # the scrubber loads only when an event is spooled
    for heavy in (
        "flask",
        "celery",
        "sqlalchemy",
        "chromadb",
        "typing",
        "dataclasses",
        "urllib.request",
        "http.client",
        "ssl",
    ):
        assert heavy not in loaded, heavy


def test_hook_help_and_usage(cluster: Cluster) -> None:
    shown = engram(cluster.env, "hook", "--help")
    assert shown.returncode == 0 and "claude-code" in shown.stdout and "spool" in shown.stdout
    usage = engram(cluster.env, "hook")
    assert usage.returncode == 2 and "usage: engram hook HOST EVENT" in usage.stderr


# --- a host from another package -------------------------------------------------------------

ACME_HOST = """
from engram.agents.contract import HookEvent, text, valid_id, valid_path

HOST = "acme"
DISPLAY = "Acme Agent"
EVENTS = {"afterTool": "tool_post", "userPrompt": "prompt", "sessionStart": "session_start"}
CONNECT = ("afterTool", "userPrompt")


def normalise(hook, payload):
    return HookEvent(
        HOST, hook, EVENTS.get(hook, "other"),
        session_id=valid_id(payload.get("session"), "session"),
        cwd=valid_path(payload.get("cwd"), "cwd"),
        tool_name=payload.get("tool"), tool_input=payload.get("input"),
        tool_output=payload.get("output"), prompt=text(payload.get("prompt")),
    )


def respond(event, context):
    return context or ""


def connect_parts():
    from engram.agents.hostconfig import hosts as c

    return (
        c.part("mcp", "json", {"project": "./.acme/mcp.json"},
               c.mcp_map("mcpServers", c.stdio_entry)),
        c.part("hooks", "json", {"project": "./.acme/hooks.json"},
               c.flat_hooks(lambda command: {"command": command})),
    )
"""


def install_package(site: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """A package as pip installs it: its modules and a dist-info whose entry_points.txt
    importlib.metadata reads (what `pip install` of a package with entry points writes)."""
    package = site / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for module, source in modules.items():
        (package / f"{module}.py").write_text(source)
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_a_host_from_another_package_captures_and_connects_like_a_built_in(
    cluster: Cluster, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    install_package(
        site,
        "acme_engram",
        "[engram.hosts]\nacme = acme_engram.host\nbroken = acme_engram.broken\n"
        "claude-code = acme_engram.host\n",
        {"host": ACME_HOST, "broken": 'HOST = "not-broken"\nDISPLAY = "Broken"\n'},
    )
    env = {**cluster.env, "PYTHONPATH": f"{site}{os.pathsep}{cluster.env.get('PYTHONPATH', '')}"}
    cluster.serve()

    listed = engram(env, "connect", "--list")
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^  acme\s+Acme Agent$", listed.stdout, re.M)
    assert "not usable" in listed.stdout and "HOST is 'not-broken', not 'broken'" in listed.stdout
    assert listed.stdout.count("Claude Code") == 1  # a package cannot take over a built-in name

    project = tmp_path / "proj"
    project.mkdir()
    connected = subprocess.run(
        [ENGRAM, "connect", "acme", "--with-hooks", "--scope", "project"],
        env={**env, "HOME": str(tmp_path / "home")},
        cwd=project,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert connected.returncode == 0, connected.stderr
    hooks = json.loads((project / ".acme" / "hooks.json").read_text())
    commands = json.dumps(hooks)
    assert "hook acme afterTool" in commands and "hook acme userPrompt" in commands
    assert "engram" in json.loads((project / ".acme" / "mcp.json").read_text())["mcpServers"]

    payload = {
        "session": "acme-s1",
        "cwd": str(project),
        "tool": "Bash",
        "input": {"command": "make test"},
        "output": {"stdout": "acmemarker 12 passed"},
    }
    result = hook(env, "acme", "afterTool", payload)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    wait_for(lambda: settled(cluster) and len(observations(cluster, "acme-s1")) == 1)
    assert "acmemarker" in json.dumps(observations(cluster, "acme-s1"))

    broken = hook(env, "broken", "afterTool", payload)
    assert broken.returncode == 0 and broken.stdout == ""
    assert "HOST is 'not-broken'" in broken.stderr and "Traceback" not in broken.stderr
    zed = hook(env, "zed", "afterTool", payload)
    assert zed.returncode == 0 and "host 'zed' has no hooks" in zed.stderr
