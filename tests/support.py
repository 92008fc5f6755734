"""Test helpers: an authenticated API wrapper, real engram processes, polling without sleeps
of fixed length, a throw-away PostgreSQL database, a local JSON endpoint standing in for a
remote model API."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from engram.store import Store

REPO = Path(__file__).resolve().parents[1]
ENGRAM = str(Path(sys.executable).parent / "engram")
START_TIMEOUT = 30.0


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 20.0,
    interval: float = 0.05,
    message: object = "condition",
) -> Any:
    """Poll until ``predicate()`` is truthy; fail with ``message`` after ``timeout`` (any
    object: it is made text only then, so it can read what went wrong at that moment)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


class Api:
    """The Flask test client with the bearer secret, returning (status, json)."""

    def __init__(self, client: Any, secret: str, store: Store) -> None:
        self.client = client
        self.secret = secret
        self.store = store
        self.headers = {"Authorization": f"Bearer {secret}"}

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        response = self.client.open(path, method=method, json=body, headers=headers, **kwargs)
        return response.status_code, response.get_json()

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return self.call("POST", path, body, **kw)

    def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return self.call("GET", path, **kw)

    def drained(self) -> bool:
        counts = self.get("/v1/capture?limit=1")[1]["counts"]
        return not (counts["pending"] or counts["processing"] or counts["retrying"])

    def wait_drained(self, timeout: float = 20.0) -> None:
        wait_for(self.drained, timeout, message="the capture inbox to drain")


def observe_body(project: str, session: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "eventId": f"{session}:{n}",
        "sessionId": session,
        "project": project,
        "host": "claude-code",
        "hookType": "PostToolUse",
        "toolName": "Bash",
        "toolInput": {"command": f"pytest tests/test_{n}.py"},
        "toolOutput": {"stdout": f"event {n} marker{n}x passed", "exit_code": 0},
        **extra,
    }


def assert_stored_exactly_once(conn: Any, accepted: list[str]) -> None:
    """The delivery guarantee, read from the store: every accepted event is one observation,
    none twice, the ledger says stored for each, and nothing waits in the inbox."""
    from engram.metrics import ledger_states
    from engram.schema import capture_inbox, observations

    stored = list(conn.execute(select(observations.c.event_id)).scalars())
    assert sorted(stored) == sorted(set(stored)), "an event was stored twice"
    assert set(stored) == set(accepted), (
        f"missing {len(set(accepted) - set(stored))}, extra {len(set(stored) - set(accepted))}"
    )
    assert ledger_states(conn) == {"stored": len(accepted)}
    assert conn.execute(select(func.count()).select_from(capture_inbox)).scalar_one() == 0


def assert_cluster_stored_exactly_once(cluster: Cluster, accepted: list[str]) -> None:
    """``assert_stored_exactly_once`` on a cluster's own store."""
    store = cluster.store()
    try:
        with store.read() as conn:
            assert_stored_exactly_once(conn, accepted)
    finally:
        store.close()


def count_rows(store: Store, table: Any) -> int:
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def hears_ctrl_c() -> None:
    """``preexec_fn`` of a child the test sends Ctrl-C (SIGINT): its default action back. A
    shell that runs the suite in the background leaves SIGINT ignored, children inherit that,
    and Python then never raises KeyboardInterrupt (as a terminal's Ctrl-C always would)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_available(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except (redis.exceptions.RedisError, OSError):
        return False


@contextlib.contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"engram_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class Proc:
    """A real engram process (serve, worker, beat) with its output captured to a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args = args
        self.log = log
        self._log_handle = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            [ENGRAM, *args],
            env=env,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        """SIGKILL the whole process group (a prefork worker's children too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._log_handle.close()
        return self.popen.returncode


class Cluster:
    """Real engram processes sharing one data dir, config dir and environment."""

    def __init__(self, tmp: Path, **env: str) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.env = {
            **os.environ,
            "ENGRAM_DATA_DIR": str(tmp / "data"),
            "ENGRAM_CONFIG_DIR": str(tmp / "config"),
            "ENGRAM_PORT": str(self.port),
            "ENGRAM_LOG_LEVEL": "INFO",
            "ENGRAM_EMBEDDER": "none",
            **env,
        }
        self.procs: list[Proc] = []
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, *args: str) -> Proc:
        proc = Proc(list(args), self.env, self.tmp / f"{args[0]}-{len(self.procs)}.log")
        self.procs.append(proc)
        return proc

    def serve(self) -> Proc:
        proc = self.start("serve")
        wait_for(lambda: self._live(proc), START_TIMEOUT, message=f"engram serve\n{proc.output()}")
        return proc

    def _live(self, proc: Proc) -> bool:
        if proc.popen.poll() is not None:
            raise AssertionError(f"engram serve exited:\n{proc.output()}")
        try:
            with urllib.request.urlopen(self.url + "/v1/livez", timeout=1) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    @property
    def secret(self) -> str:
        return (self.tmp / "config" / "secret").read_text().strip()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.secret}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def store(self) -> Store:
        return Store.open(
            self.env.get("ENGRAM_DATABASE_URL") or f"sqlite:///{self.tmp / 'data' / 'engram.db'}"
        )

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


class JsonEndpoint:
    """A real HTTP server on 127.0.0.1 for a remote model API's protocol: every POST is recorded
    (``requests``: path, JSON body, Authorization and Content-Type headers) and answered by
    ``answer(payload)`` -> (status, raw body). ``base_url`` ends in ``/v1``."""

    def __init__(self, answer: Callable[[Any], tuple[int, bytes]]) -> None:
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(
                    {
                        "path": self.path,
                        "body": payload,
                        "auth": self.headers.get("Authorization"),
                        "type": self.headers.get("Content-Type"),
                    }
                )
                status, body = answer(payload)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
