"""The `engram` command line, run as a real subprocess."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import ENGRAM, Cluster, free_port, hears_ctrl_c, wait_for

COMMANDS = ["serve", "worker", "beat", "status", "export", "import", "demo", "bench"]


def run(
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENGRAM, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        input=stdin,
    )


def isolated(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_CONFIG_DIR": str(tmp_path / "cfg"),
        "ENGRAM_BROKER_URL": "",
        "ENGRAM_PORT": str(free_port()),
        **extra,
    }


def test_top_level_help_explains_where_to_start() -> None:
    result = run(["--help"])
    assert result.returncode == 0
    for word in ("engram serve", "engram demo", "engram status", *COMMANDS):
        assert word in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = run([command, "--help"])
    assert result.returncode == 0 and f"usage: engram {command}" in result.stdout
    assert len(result.stdout.splitlines()) > 4


def test_no_command_prints_help_and_exits_2() -> None:
    result = run([])
    assert result.returncode == 2 and "engram serve" in result.stdout


def test_bad_setting_is_a_clear_error(tmp_path: Path) -> None:
    result = run(["status"], env=isolated(tmp_path, ENGRAM_PORT="eighty"))
    assert result.returncode == 2
    assert "configuration error: ENGRAM_PORT='eighty'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["worker", "beat"])
def test_worker_and_beat_need_a_broker(tmp_path: Path, command: str) -> None:
    result = run([command], env=isolated(tmp_path))
    assert result.returncode == 2
    assert "ENGRAM_BROKER_URL" in result.stderr and "engram serve" in result.stderr


def test_status_when_the_gateway_is_down_says_how_to_fix_it(tmp_path: Path) -> None:
    result = run(["status"], env=isolated(tmp_path))
    assert result.returncode == 1
    assert "not answering" in result.stderr and "engram serve" in result.stderr
    assert "Traceback" not in result.stderr


def test_import_of_a_missing_or_broken_file(tmp_path: Path) -> None:
    env = isolated(tmp_path)
    result = run(["import", str(tmp_path / "nope.json")], env=env)
    assert result.returncode == 2 and "cannot read" in result.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    result = run(["import", str(broken)], env=env)
    assert result.returncode == 2 and "is not JSON" in result.stderr
    # validated whole before anything is sent (it is sent in parts), so no server is needed
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"version": 99, "observations": []}')
    result = run(["import", str(foreign)], env=env)
    assert result.returncode == 2 and "is not an Engram export" in result.stderr
    assert "version" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_serve_status_export_import_demo(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    env: dict[str, Any] = {k: v for k, v in cluster.env.items()}
    try:
        server = cluster.serve()
        assert "listening on http://127.0.0.1:" in server.output()
        assert str(tmp_path / "data") in server.output()

        result = run(["status"], env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert ": OK" in result.stdout and "embedded" in result.stdout

        result = run(["demo"], env=env, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "search: 'login test KeyError user_id'" in result.stdout
        assert "user_id" in result.stdout.split("search: 'redis cache TTL'")[0]
        assert "Session-start context" in result.stdout

        export = tmp_path / "export.json"
        result = run(["export", "-o", str(export)], env=env)
        assert result.returncode == 0, result.stderr
        document = json.loads(export.read_text())
        assert len(document["observations"]) >= 14 and document["memories"]
        assert f"{len(document['observations'])} observations" in result.stderr
        assert not export.with_name("export.json.partial").exists()
        streamed = run(["export"], env=env)  # to stdout, as the gateway streams it
        assert streamed.returncode == 0 and json.loads(streamed.stdout) == {
            **document,
            "exportedAt": json.loads(streamed.stdout)["exportedAt"],
        }
        conn = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=30)
        conn.request("GET", "/v1/export", headers={"Authorization": f"Bearer {cluster.secret}"})
        answer = conn.getresponse()
        assert answer.status == 200 and answer.getheader("Content-Length") is None
        assert answer.getheader("Transfer-Encoding") == "chunked"  # sent as it is read
        assert json.loads(answer.read())["memories"] == document["memories"]
        conn.close()

        result = run(["import", str(export), "--strategy", "skip"], env=env)
        assert result.returncode == 0 and "0 observations" in result.stdout
        result = run(["import", "-", "--strategy", "merge"], env=env, stdin=export.read_text())
        assert result.returncode == 0, result.stderr

        # a second server on the same port fails with a clear message, not a traceback
        second = run(["serve"], env=env, timeout=30)
        assert second.returncode == 1 and "cannot listen" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        cluster.stop_all()


@pytest.mark.slow
def test_demo_without_a_running_gateway_starts_its_own(tmp_path: Path) -> None:
    result = run(["demo"], env=isolated(tmp_path), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "started one for the demo" in result.stdout
    assert "[memory]" in result.stdout or "[observation]" in result.stdout
    # stopping its own gateway under a request still being answered printed waitress's EBADF
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.slow
def test_serve_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    import signal

    cluster = Cluster(tmp_path)
    server = cluster.serve()
    os.killpg(server.popen.pid, signal.SIGINT)
    assert server.popen.wait(30) == 0
    wait_for(lambda: "Stopped." in server.output(), 5, message="Stopped. line")
    assert "Traceback" not in server.output()
    server.stop()


@pytest.mark.slow
def test_real_server_body_limits(tmp_path: Path) -> None:
    """Through waitress, not just Flask: an oversized request gets the JSON 413, while an
    import may be larger than ordinary requests; a Content-Length over both is refused before
    a byte of the body is sent and without the secret."""
    import socket
    from urllib.parse import urlsplit

    cluster = Cluster(tmp_path, ENGRAM_MAX_BODY_BYTES="10000", ENGRAM_MAX_IMPORT_BYTES="100000")
    try:
        cluster.serve()
        url = urlsplit(cluster.url)
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(
                b"POST /v1/import HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 150000\r\n\r\n"
            )
            assert sock.recv(200).startswith(b"HTTP/1.1 413"), "refused before the body"
        status, body = cluster.request("POST", "/v1/observe", {"prompt": "x" * 20_000})
        assert status == 413 and body["error"]["code"] == "payload_too_large"
        memories = [
            {"id": f"mem_{n:04d}", "project": "big", "content": "fact " * 40} for n in range(200)
        ]
        status, body = cluster.request(
            "POST",
            "/v1/import",
            {"strategy": "merge", "data": {"version": 1, "memories": memories}},
        )
        assert status == 200 and body["imported"]["memories"] == 200
    finally:
        cluster.stop_all()


@pytest.mark.slow
def test_ctrl_c_stops_an_import_between_pieces_and_a_rerun_completes_it(tmp_path: Path) -> None:
    import signal

    cluster = Cluster(tmp_path)
    try:
        cluster.serve()
        memories = [
            {"id": f"mem_{n:06d}", "project": "bulk", "content": f"bulk fact {n} " * 8}
            for n in range(12000)  # enough that the import is still running at the signal
        ]
        export = tmp_path / "export.json"
        export.write_text(json.dumps({"version": 1, "memories": memories}))
        command = [ENGRAM, "import", "--strategy", "merge", str(export)]
        running = subprocess.Popen(
            command,
            env=cluster.env,
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=hears_ctrl_c,
        )
        assert running.stderr is not None
        first = running.stderr.readline()  # "  200/12000 items": the first piece is stored
        assert "/12000 items" in first, first
        running.send_signal(signal.SIGINT)
        _, rest = running.communicate(timeout=60)
        assert running.returncode == 130, rest
        assert "import stopped after" in rest and "to complete it" in rest, rest
        assert "Traceback" not in rest
        done = subprocess.run(command, env=cluster.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        from sqlalchemy import func, select

        from engram.schema import memories as table

        store = cluster.store()
        try:
            with store.read() as conn:  # every item once: the re-run merged what was there
                assert conn.execute(select(func.count()).select_from(table)).scalar() == 12000
        finally:
            store.close()
    finally:
        cluster.stop_all()


@pytest.mark.slow
def test_sigterm_stops_the_server_mid_import(tmp_path: Path) -> None:
    """A large import in flight does not keep the server alive after SIGTERM: it is gone within
    seconds (STOP_DEADLINE_SECONDS), and what the import committed stays."""
    import signal
    import threading

    cluster = Cluster(tmp_path)
    try:
        server = cluster.serve()
        memories = [
            {"id": f"mem_{n:06d}", "project": "bulk", "content": f"bulk fact {n} " * 8}
            for n in range(40_000)
        ]
        answers: list[Any] = []

        def post() -> None:
            try:
                answers.append(
                    cluster.request(
                        "POST",
                        "/v1/import",
                        {"strategy": "merge", "data": {"version": 1, "memories": memories}},
                    )
                )
            except Exception as exc:  # the server went away mid-request: expected here
                answers.append(exc)

        sender = threading.Thread(target=post)
        sender.start()
        wait_for(lambda: _imported(cluster) > 0, 60, message="the import to be under way")
        started = time.monotonic()
        os.killpg(server.popen.pid, signal.SIGTERM)
        assert server.popen.wait(15) == 0
        stopped_in = time.monotonic() - started
        sender.join(30)
        assert stopped_in < 15 and "Stopped" in server.output(), server.output()
        assert "Traceback" not in server.output()
        assert 0 < _imported(cluster) < len(memories)  # committed batches stay
    finally:
        cluster.stop_all()


def _imported(cluster: Cluster) -> int:
    """Memories committed so far, read without opening a Store (which would migrate)."""
    import sqlite3

    path = cluster.tmp / "data" / "engram.db"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT count(*) FROM memories").fetchone()[0])
    except sqlite3.Error:  # not created yet, or locked this instant
        return 0
