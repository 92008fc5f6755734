"""Logs an operator can read and ship: quiet by default (no line per HTTP call), one JSON object a
line with ENGRAM_LOG_FORMAT=json, from the gateway and a worker pool alike (real processes)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import ENGRAM, REPO, Cluster, observe_body, wait_for

HTTPX_CALL = """
import logging, sys, httpx
from engram.cli.server import setup_logging
setup_logging(sys.argv[2], "text")
httpx.get(sys.argv[1])
logging.getLogger("engram.capture").warning("event e-1 attempt 1 failed")
"""


@pytest.fixture
def local_http() -> Iterator[str]:
    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_http_client_calls_are_not_logged_unless_debugging(local_http: str, level: str) -> None:
    """Chroma's server client and the LLM clients log every call through httpx at INFO: that
    drowned the engram.* lines an operator watches. DEBUG shows them again."""
    done = subprocess.run(
        [sys.executable, "-c", HTTPX_CALL, local_http, level],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=True,
    )
    assert "engram.capture: event e-1 attempt 1 failed" in done.stderr
    assert ("HTTP Request: GET" in done.stderr) == (level == "DEBUG"), done.stderr


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"{path.name}: not a JSON line: {line!r}") from None
    return parsed


@pytest.mark.slow
def test_gateway_and_worker_log_one_json_object_a_line(tmp_path: Path, redis_url: str) -> None:
    """A worker pool and two gateways, ENGRAM_LOG_FORMAT=json: every stderr line of each is one
    JSON object (library warnings too), and a capture problem is one line naming the event."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(cluster: Cluster, name: str, *args: str) -> Path:
        err = tmp_path / f"{name}.stderr"
        with open(tmp_path / f"{name}.stdout", "wb") as out, open(err, "wb") as errf:
            procs.append(
                subprocess.Popen(
                    [ENGRAM, *args],
                    env=cluster.env,
                    stdout=out,
                    stderr=errf,
                    cwd=REPO,
                    start_new_session=True,
                )
            )
        return err

    def up(cluster: Cluster) -> None:
        def live() -> bool:
            try:
                return cluster.request("GET", "/v1/livez")[0] == 200
            except OSError:  # not listening yet, or its secret not written yet
                return False

        wait_for(live, 60, message="gateway")

    team = Cluster(tmp_path / "team", ENGRAM_BROKER_URL=redis_url, ENGRAM_LOG_FORMAT="json")
    # a gateway whose broker is down: it accepts into the inbox and says so, per event
    cut = Cluster(
        tmp_path / "cut", ENGRAM_BROKER_URL="redis://127.0.0.1:1/0", ENGRAM_LOG_FORMAT="json"
    )
    try:
        worker = start(team, "worker", "worker", "--concurrency", "1", "--name", "logs@%h")
        gateway = start(team, "serve", "serve")
        lonely = start(cut, "cut", "serve")
        up(team)
        up(cut)
        status, body = team.request("POST", "/v1/observe", observe_body("logs", "s1", 1))
        assert status == 201, body
        wait_for(
            lambda: team.request("GET", f"/v1/observations/{body['observationId']}")[0] == 200,
            60,
            message="the event stored by the worker",
        )
        status, waiting = cut.request("POST", "/v1/observe", observe_body("logs", "s2", 1))
        assert status == 201, waiting
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
            proc.wait(30)
    for path in (worker, gateway, lonely):
        for record in _json_lines(path):
            assert {"time", "level", "logger", "message"} <= set(record), record
            assert record["time"].endswith("+00:00")
    worker_lines = _json_lines(worker)
    assert any(r["logger"] == "celery.apps.worker" for r in worker_lines), worker_lines
    if os.geteuid() == 0:  # celery warns a root worker through the warnings module
        assert any(r["logger"] == "py.warnings" for r in worker_lines), worker_lines
    problems = [r for r in _json_lines(lonely) if waiting["eventId"] in r["message"]]
    assert len(problems) == 1 and problems[0]["level"] == "WARNING", _json_lines(lonely)
