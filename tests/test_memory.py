"""What a process holds: heavy libraries load only where they are used, glibc's heap is bounded,
and /proc's figures are read as they are."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from engram.memory import bound_heap, process_memory
from tests.support import REPO

GATEWAY_SCRIPT = """
import json, sys, time
from engram.cli.server import build_gateway
from engram.settings import load_settings

settings = load_settings(overrides={
    "data_dir": sys.argv[1], "config_dir": sys.argv[2], "embedder": "none",
})
gateway = build_gateway(settings)
client = gateway.app.test_client()
auth = {"Authorization": "Bearer " + gateway.secret}
seen = {}
observed = client.post("/v1/observe", headers=auth, json={
    "eventId": "s-memory:1", "sessionId": "s-memory", "project": "memory",
    "host": "claude-code", "hookType": "PostToolUse", "toolName": "Bash",
    "toolInput": {"command": "pytest -q"}, "toolOutput": {"stdout": "3 passed", "exit_code": 0},
})
seen["observe"] = observed.status_code
from engram.tasks.sweeper import sweep_once
sweep_once()
seen["started"] = {name: name in sys.modules for name in ("mcp", "redis")}
mcp = client.post("/mcp", headers={**auth, "Accept": "application/json, text/event-stream"},
    json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
seen["mcp"] = mcp.status_code
seen["asked"] = "mcp" in sys.modules
gateway.close()
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_the_gateway_loads_the_mcp_sdk_on_the_first_mcp_request_and_never_redis(
    tmp_path: Path,
) -> None:
    """The embedded server starts, captures and sweeps without the MCP SDK (~25 MB) or redis
    (~6 MB, a Redis broker's client): /mcp loads the SDK when a client first asks."""
    out = subprocess.run(
        [sys.executable, "-c", GATEWAY_SCRIPT, str(tmp_path / "data"), str(tmp_path / "config")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANONYMIZED_TELEMETRY": "False"},
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["observe"] == 201
    assert seen["started"] == {"mcp": False, "redis": False}
    assert seen["mcp"] == 200 and seen["asked"] is True


def test_process_memory_reads_proc() -> None:
    here = process_memory()
    if here is None:
        pytest.skip("no /proc here")
    assert 0 < here["rssMb"] <= here["peakRssMb"]
    assert process_memory(2**22 + 12345) is None  # no such process


def test_bound_heap_is_idempotent() -> None:
    first = bound_heap()
    assert bound_heap() is first
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert first is True  # glibc takes the thresholds: the heap is bounded here
