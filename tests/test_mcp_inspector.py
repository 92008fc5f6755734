"""The MCP Inspector's CLI as a second, independent MCP client (TypeScript SDK): `engram mcp`
over stdio and /mcp over streamable HTTP must work for it as for the Python SDK's client.

infra/dev/install.sh (`dev`) installs the pinned Inspector into .tools/ when npm exists; the tests
run it from there, with no network. They skip when node or npm is missing or the install did not
happen, except under CI=true with npm present, where a missing Inspector is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import ENGRAM, REPO, Cluster

pytestmark = pytest.mark.slow

INSPECTOR = REPO / ".tools" / "node_modules" / ".bin" / "mcp-inspector"
CORE = ["save_memory", "recall", "search", "get_context", "get_observations", "status"]
RUN_TIMEOUT = 60.0


def inspector() -> Path:
    """The Inspector's bin, or skip (fail under CI with npm) saying why it is not there."""
    if INSPECTOR.exists() and shutil.which("node"):
        return INSPECTOR
    if not shutil.which("node") or not shutil.which("npm"):
        reason = "node/npm not found: the MCP Inspector CLI cannot run"
    else:
        reason = (
            f"the MCP Inspector is not installed at {INSPECTOR}: run "
            "`bash infra/dev/install.sh dev` (it needs the npm registry)"
        )
    if os.environ.get("CI") == "true" and shutil.which("npm"):
        pytest.fail(f"{reason} (CI=true and npm exists, so this is not skipped)")
    pytest.skip(reason)


@pytest.fixture
def cluster(served: Cluster) -> Cluster:
    return served


def run(cluster: Cluster, server: list[str], *args: str) -> tuple[int, Any, str]:
    """Run the Inspector CLI with ``args`` against ``server`` (from stdio() or http()); (exit
    code, its JSON output, stderr). HOME is the test's own: the Inspector keeps a catalog and
    OAuth state under it, and hands it to the stdio server."""
    home = cluster.tmp / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "NO_COLOR": "1"}
    done = subprocess.run(
        [str(inspector()), "--cli", *args, *server],
        env=env,
        cwd=cluster.tmp,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    try:
        output = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        output = done.stdout
    return done.returncode, output, done.stderr


def stdio(cluster: Cluster) -> list[str]:
    """`engram mcp` as the Inspector starts it. Its stdio transport passes only a few variables
    (PATH, HOME, ...) to the server, so Engram's go in with -e, as in a host's config block."""
    env = {
        "ENGRAM_URL": cluster.url,
        "ENGRAM_CONFIG_DIR": cluster.env["ENGRAM_CONFIG_DIR"],
        "ENGRAM_DATA_DIR": cluster.env["ENGRAM_DATA_DIR"],
        "ENGRAM_EMBEDDER": "none",
    }
    return [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")] + [
        "--transport",
        "stdio",
        "--",
        ENGRAM,
        "mcp",
    ]


def http(cluster: Cluster, secret: str | None = None) -> list[str]:
    header = [] if secret is None else ["--header", f"Authorization: Bearer {secret}"]
    return ["--transport", "http", "--server-url", cluster.url + "/mcp", *header]


def tool_json(output: Any) -> Any:
    assert isinstance(output, dict) and output.get("isError") is False, output
    return json.loads(output["content"][0]["text"])


def test_inspector_over_stdio(cluster: Cluster) -> None:
    code, listed, err = run(cluster, stdio(cluster), "--method", "tools/list")
    assert code == 0, err
    assert [t["name"] for t in listed["tools"]] == CORE
    assert listed["tools"][0]["inputSchema"]["required"] == ["content"]

    code, saved, err = run(
        cluster,
        stdio(cluster),
        "--method",
        "tools/call",
        "--tool-name",
        "save_memory",
        "--tool-arg",
        "content=Inspector checks: the stdio server answers",
        "project=insp",
    )
    assert code == 0, err
    memory = tool_json(saved)
    assert memory["mode"] == "gateway" and memory["memory"]["project"] == "insp"

    code, found, err = run(
        cluster,
        stdio(cluster),
        "--method",
        "tools/call",
        "--tool-name",
        "recall",
        "--tool-arg",
        "query=stdio server answers",
        "project=insp",
    )
    assert code == 0, err
    assert memory["memory"]["id"] in [hit["id"] for hit in tool_json(found)["hits"]]

    # a refused call: an error result with the API's message, no traceback; the CLI exits non-0
    code, refused, err = run(
        cluster,
        stdio(cluster),
        "--method",
        "tools/call",
        "--tool-name",
        "save_memory",
        "--tool-arg",
        "content=   ",
    )
    assert code != 0
    assert refused["isError"] is True
    text = refused["content"][0]["text"]
    assert "content" in text and "Traceback" not in text


def test_inspector_over_http_with_the_bearer_header(cluster: Cluster) -> None:
    code, listed, err = run(cluster, http(cluster, cluster.secret), "--method", "tools/list")
    assert code == 0, err
    assert [t["name"] for t in listed["tools"]] == CORE

    code, saved, err = run(
        cluster,
        http(cluster, cluster.secret),
        "--method",
        "tools/call",
        "--tool-name",
        "save_memory",
        "--tool-arg",
        "content=Inspector over HTTP saved this",
        "project=insp",
    )
    assert code == 0, err
    memory = tool_json(saved)
    assert memory["mode"] == "gateway"
    status, listed_rest = cluster.request("GET", "/v1/memories?project=insp")
    assert status == 200 and [m["id"] for m in listed_rest["items"]] == [memory["memory"]["id"]]

    # without the secret the gateway answers 401 and the Inspector gets nothing
    code, output, err = run(cluster, http(cluster), "--method", "tools/list")
    assert code != 0
    assert not (isinstance(output, dict) and "tools" in output)
