"""`engram doctor` against real set-ups: nothing running, a live embedded server with a connected
host whose entries were then removed by hand, a distributed gateway whose workers leave a queue
unconsumed. Each run is the real command in a subprocess; its exit code is what a script sees."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engram.db import MIGRATIONS
from tests.support import ENGRAM, Cluster, wait_for


def doctor(env: dict[str, str], *args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [ENGRAM, "doctor", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=cwd,
    )
    assert done.stderr == "" or "Warning" in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def levels(report: dict[str, Any], component: str) -> list[str]:
    return [f["level"] for f in report["findings"] if f["component"] == component]


def finding(report: dict[str, Any], component: str, level: str) -> dict[str, Any]:
    return next(
        f for f in report["findings"] if f["component"] == component and f["level"] == level
    )


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_CONFIG_DIR": str(tmp_path / "config"),
        "ENGRAM_EMBEDDER": "none",
        "PATH": os.path.dirname(ENGRAM) + os.pathsep + os.environ.get("PATH", ""),
        **extra,
    }
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("ENGRAM_SECRET", None)
    return env


def test_nothing_running_fails_on_the_gateway_and_writes_nothing(tmp_path: Path) -> None:
    env = base_env(tmp_path, ENGRAM_PORT="1")  # nothing listens on port 1
    code, report = doctor(env)
    assert code == 1
    gateway = finding(report, "gateway", "fail")
    assert "engram serve" in gateway["fix"]
    assert levels(report, "store") == ["warn"]  # no store yet: serve creates it
    assert not (tmp_path / "data").exists() and not (tmp_path / "config").exists()


def test_a_bad_setting_is_a_failure_with_its_name(tmp_path: Path) -> None:
    code, report = doctor(base_env(tmp_path, ENGRAM_EMBEDDER="bogus"))
    assert code == 1
    config = finding(report, "config", "fail")
    assert "ENGRAM_EMBEDDER" in config["what"]


@pytest.mark.slow
def test_a_healthy_embedded_server_then_a_hand_edited_host(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    env = base_env(tmp_path, ENGRAM_PORT=str(cluster.port))
    cluster.env.update(env)
    try:
        cluster.serve()
        wait_for(lambda: cluster.request("GET", "/v1/status")[1]["ok"], 30, message="status ok")
        code, report = doctor(env)
        assert code == 0, report
        assert not [f for f in report["findings"] if f["level"] in ("fail", "warn")], report
        latest = MIGRATIONS[-1][0]
        assert finding(report, "store", "ok")["what"].endswith(f"schema {latest}")
        assert levels(report, "hosts") == ["info"]  # nothing connected yet
        done = subprocess.run(
            [ENGRAM, "connect", "claude-code", "--with-hooks"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        code, report = doctor(env)
        assert code == 0 and levels(report, "hosts") == ["ok"], report
        settings_file = tmp_path / "home" / ".claude" / "settings.json"
        data = json.loads(settings_file.read_text())
        del data["hooks"]["PostToolUse"]  # someone took the capture hook out by hand
        settings_file.write_text(json.dumps(data))
        code, report = doctor(env)
        assert code == 0  # a warning: capture still works for the other events
        drift = finding(report, "hosts", "warn")
        assert str(settings_file) in drift["what"]
        assert drift["fix"].startswith("`engram connect claude-code --with-hooks`")
        os.chmod(tmp_path / "config" / "secret", 0o644)
        code, report = doctor(env)
        assert code == 1 and "chmod 600" in finding(report, "secret", "fail")["fix"]
    finally:
        cluster.stop_all()


@pytest.mark.slow
def test_distributed_names_the_queue_no_worker_consumes(tmp_path: Path, redis_url: str) -> None:
    cluster = Cluster(tmp_path, ENGRAM_BROKER_URL=redis_url)
    env = base_env(tmp_path, ENGRAM_BROKER_URL=redis_url, ENGRAM_PORT=str(cluster.port))
    cluster.env.update(env)
    try:
        cluster.serve()
        cluster.start("worker", "-Q", "capture,graph", "--concurrency", "1")
        wait_for(
            lambda: cluster.request("GET", "/v1/status")[1]["workers"]["alive"], 60, message="up"
        )
        code, report = doctor(env)
        assert code == 1
        missing = finding(report, "workers", "fail")
        assert "maintenance" in missing["what"] and "engram worker -Q maintenance" in missing["fix"]
        consumed = [f["what"] for f in report["findings"] if f["component"] == "workers"]
        assert any(w.startswith("queue capture: engram-capture-graph@") for w in consumed)
        assert finding(report, "broker", "ok")
    finally:
        cluster.stop_all()
    down = base_env(tmp_path, ENGRAM_BROKER_URL="redis://127.0.0.1:1/0", ENGRAM_PORT="1")
    code, report = doctor(down)
    assert code == 1 and "Redis" in finding(report, "broker", "fail")["fix"]
