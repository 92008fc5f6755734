"""infra/dev/team.sh: a team deployment's processes on one machine, up in one command (the
gateway, capture and derived pools, beat, Flower with a login), working, then down."""

from __future__ import annotations

import base64
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL
from tests.support import REPO, Cluster, free_port, observe_body, postgres_database, wait_for

pytestmark = pytest.mark.slow
SCRIPT = str(REPO / "infra" / "dev" / "team.sh")


def team(action: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", SCRIPT, action], env=env, capture_output=True, text=True, timeout=240
    )


def test_up_refuses_without_a_broker(tmp_path: Path) -> None:
    env = {**os.environ, "ENGRAM_CONFIG_DIR": str(tmp_path), "ENGRAM_RUN_DIR": str(tmp_path)}
    env.pop("ENGRAM_BROKER_URL", None)
    done = team("up", env)
    assert done.returncode == 2 and "ENGRAM_BROKER_URL is not set" in done.stderr
    assert "make serve" in done.stderr


@pytest.mark.skipif(not POSTGRES_URL, reason="needs the test PostgreSQL server")
def test_up_works_and_down_stops_everything(tmp_path: Path, redis_url: str) -> None:
    with postgres_database(POSTGRES_URL) as database:
        cluster = Cluster(
            tmp_path,
            ENGRAM_BROKER_URL=redis_url,
            ENGRAM_DATABASE_URL=database,
            ENGRAM_RUN_DIR=str(tmp_path / "run"),
            FLOWER_PORT=str(free_port()),
            FLOWER_BASIC_AUTH="admin:team-test",
        )
        env = cluster.env
        try:
            done = team("up", env)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "==> up." in done.stdout
            pids = {p.stem: int(p.read_text()) for p in (tmp_path / "run").glob("*.pid")}
            assert set(pids) == {"gateway", "capture", "derived", "beat", "flower"}
            status, body = cluster.request("POST", "/v1/observe", observe_body("team", "s1", 1))
            assert status == 201, body
            wait_for(
                lambda: (
                    cluster.request("GET", f"/v1/observations/{body['observationId']}")[0] == 200
                ),
                60,
                message="stored by the team's capture pool",
            )
            flower = f"http://127.0.0.1:{env['FLOWER_PORT']}"
            wait_for(lambda: _answers(flower + "/healthcheck"), 60, message="Flower")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(flower + "/api/workers", timeout=10)
            assert refused.value.code == 401  # a login is required
            login = base64.b64encode(b"admin:team-test").decode()
            request = urllib.request.Request(
                flower + "/api/workers?refresh=1", headers={"Authorization": f"Basic {login}"}
            )
            wait_for(
                lambda: b"engram-capture@" in urllib.request.urlopen(request, timeout=10).read(),
                60,
                message="Flower lists the capture pool by its stable name",
            )
            again = team("up", env)  # a second up starts nothing twice
            assert again.returncode == 0 and again.stdout.count("already running") == 5
        finally:
            down = team("down", env)
        assert down.returncode == 0, down.stderr
        for name, pid in pids.items():
            assert not _running(pid), f"{name} still runs after down"
        assert not list((tmp_path / "run").glob("*.pid"))


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
