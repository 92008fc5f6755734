"""Every health check in infra/docker-compose.yml, run against the live process its service
starts (the service's own command), and again once that process is gone.

No Docker daemon runs here, so each service's command runs as a plain process with the
compose network's names pointed at this machine's Redis and a scratch store; the one thing a
container adds, a host name of its own, is this machine's (``%h`` and ``$HOSTNAME`` agree, as
they do in a container).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import ENGRAM, REPO, free_port, wait_for

pytestmark = pytest.mark.slow
COMPOSE = REPO / "infra" / "docker-compose.yml"
BIN = str(Path(ENGRAM).parent)


def _services() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


class Service:
    """One compose service's command as a local process, and its health check as a shell."""

    def __init__(self, name: str, spec: dict[str, Any], env: dict[str, str], tmp: Path) -> None:
        self.port = free_port()  # in place of the service's fixed port (8737, 5555)
        self.name, self.spec, self.tmp = name, spec, tmp
        self.env = {**env, "ENGRAM_PORT": str(self.port)}
        self.proc: subprocess.Popen[bytes] | None = None

    def _local(self, text: str) -> str:
        """The compose network's addresses as this machine's."""
        return (
            text.replace("redis://redis:6379/0", self.env["ENGRAM_BROKER_URL"])
            .replace("8737", str(self.port))
            .replace("5555", str(self.port))
            .replace("0.0.0.0", "127.0.0.1")
        )

    def start(self) -> None:
        argv = [self._local(a) for a in self.spec["command"]]
        argv[0] = os.path.join(BIN, argv[0])
        log = open(self.tmp / f"{self.name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def healthy(self) -> bool:
        test = self.spec["healthcheck"]["test"]
        if test[0] == "CMD-SHELL":
            argv = ["sh", "-c", self._local(test[1]).replace("$$", "$")]
        else:
            assert test[0] == "CMD", test
            argv = [self._local(a) for a in test[1:]]
        done = subprocess.run(argv, env=self.env, capture_output=True, timeout=60, check=False)
        return done.returncode == 0

    def output(self) -> str:
        return (self.tmp / f"{self.name}.log").read_text(errors="replace")


@pytest.fixture
def env(tmp_path: Path, redis_url: str) -> Iterator[dict[str, str]]:
    yield {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "HOSTNAME": socket.gethostname(),  # a container's $HOSTNAME is its host name
        "ENGRAM_BROKER_URL": redis_url,
        "ENGRAM_DATABASE_URL": f"sqlite:///{tmp_path / 'engram.db'}",
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "ENGRAM_CONFIG_DIR": str(tmp_path / "config"),
        "ENGRAM_EMBEDDER": "none",
        "FLOWER_BASIC_AUTH": "admin:compose-test",
        "FLOWER_UNAUTHENTICATED_API": "false",
    }


def test_every_engram_service_has_a_health_check() -> None:
    services = _services()
    runs_engram = [n for n, s in services.items() if s.get("command", [""])[0] == "engram"]
    assert {"gateway", "worker", "derived", "beat"} <= set(runs_engram)
    # beat answers no ping (it is a scheduler, not a worker): its liveness is the sweeper's
    # last run in /v1/status, which the gateway reports
    assert [n for n in runs_engram if "healthcheck" not in services[n]] == ["beat"]


@pytest.mark.parametrize("name", ["gateway", "worker", "derived", "flower"])
def test_the_health_check_passes_on_the_live_service_and_fails_without_it(
    name: str, env: dict[str, str], tmp_path: Path
) -> None:
    service = Service(name, _services()[name], env, tmp_path)
    assert not service.healthy(), f"{name}: healthy before it started"
    service.start()
    try:
        wait_for(service.healthy, 90, interval=1.0, message=f"{name} healthy\n{service.output()}")
    finally:
        service.stop()
    assert not service.healthy(), f"{name}: still healthy after it stopped"


def _ping_names(env: dict[str, str]) -> list[str]:
    """The node names that answer ``celery inspect ping`` on the broker."""
    done = subprocess.run(
        ["celery", "--broker", env["ENGRAM_BROKER_URL"], "inspect", "ping", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return sorted({part for part in done.stdout.split('"') if "@" in part})


def test_worker_node_names_survive_a_restart(env: dict[str, str], tmp_path: Path) -> None:
    """The default node name has no pid in it: a restarted pool answers to the same name (one
    entry in Flower, one name for a health check), and names differ per pool kind."""
    host = socket.gethostname()
    names = []
    for run in range(2):
        command = shlex.split("engram worker --queues capture,maintenance")
        service = Service(f"pool-{run}", {"command": command}, env, tmp_path)
        service.start()
        try:
            names.append(
                wait_for(lambda: _ping_names(env), 60, interval=1.0, message="a ping answer")
            )
        finally:
            service.stop()
    assert names == [[f"engram-capture-maintenance@{host}"]] * 2
