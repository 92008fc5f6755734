#!/usr/bin/env python3
"""Load benchmark: Engram under a sustained, paced stream of realistic events, and its throughput.

Standalone measurement script, not a pytest test. It starts real processes, each run in its own
temporary ENGRAM_DATA_DIR and ENGRAM_CONFIG_DIR:

  embedded     `engram serve` alone, default settings (local embedder, vectors and graph on).
  distributed  `engram serve` (gateway) + N `engram worker --concurrency C` + one `engram beat`
               on Redis (DB --redis-db, flushed before and after), a Chroma server
               (`chroma run --path DIR --host 127.0.0.1 --port P`, ENGRAM_CHROMA_URL), and the
               store in SQLite (<data dir>/engram.db) or, with --pg, a throwaway PostgreSQL
               database (created and dropped through --pg-url).

Two phases (--phases):

  sustained  --rate events/s for --duration s from --clients client threads (a slow answer does
             not lower the rate; lateness of sends is reported), then a bounded wait for the
             backlog (--catch-up-timeout). Measures:
               - accept latency of POST /v1/observe (p50/p95/p99), 503s (inbox full, resent);
               - accept -> stored for every accepted event, exact: event_ledger.accepted_at and
                 stored_at read with SQL from the store of record;
               - accept -> searchable per derived target: about --probe-rate accepted events a
                 second are probes; a probe is vector- (graph-) searchable once it is stored and
                 its derive_queue row for target 'vector' ('graph') is gone (polled every
                 --probe-poll s, so a lag is an upper bound by at most that much);
               - derived lag over time: count and oldest age of derive_queue rows per target,
                 inbox waiting entries, every --sample-interval s (max, at load end, at the end);
               - catch-up: time from the last answer until the inbox is empty and the
                 derive_queue is empty, or what was left when --catch-up-timeout ran out;
               - GET /v1/livez latency, one probe every --livez-interval s during the load;
               - distributed: Redis LLEN of every Celery queue list in the DB (found with SCAN,
                 kombu bindings excluded) and HLEN of `unacked`, max, at load end, at the end;
                 `engram.observe` tasks that returned "skipped" (a duplicate delivery: nothing
                 left to claim), counted from the workers' task events (--no-task-events: off);
               - RSS per process from /proc: gateway, each worker with its pool children, beat,
                 Chroma server: at start, max sampled, peak (VmHWM), at the end.
  burst      --burst events sent as fast as --clients threads can, once embedded (its default
             in-process worker) and once per --workers count in distributed mode; measures how
             fast the inbox drains: stored events/s while a backlog existed (from stored_at in
             the ledger), the drain time after the last accept, what the derive queue held then.

Events reuse bench_spine.py's realistic corpus (RealisticEventFactory: Python stdlib sources as
files read and edited, real tracebacks, pytest/git/grep/pip/docker/npm/lint outputs, LongMemEval
prose), with a fixed --seed; this file shifts payload sizes up and makes every payload (tool
input + output, or prompt) at least 300 characters, and adds build logs.

Only 127.0.0.1 is contacted. Every process started is stopped (SIGTERM, then SIGKILL of its
process group), temp dirs are removed, the Redis DB is flushed and the PostgreSQL database
dropped, also on Ctrl-C and on error. Progress goes to stderr, the Markdown report to stdout.

  .venv/bin/python tests/benchmarks/bench_load.py --mode both --duration 300 --pg
  .venv/bin/python tests/benchmarks/bench_load.py --mode embedded --phases sustained \\
      --rate 20 --duration 180
  # the code of another checkout, with this venv's interpreter (its entry module is
  # engram.entry before the composition root moved to cli/, engram.cli.entry since):
  .venv/bin/python tests/benchmarks/bench_load.py --cwd /tmp/engram-before \\
      --engram "$PWD/.venv/bin/python -m engram.entry"
"""

from __future__ import annotations

import argparse
import heapq
import http.client
import json
import math
import os
import queue
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_spine as bs  # noqa: E402 - the benchmarks folder is not a package

REPO = bs.REPO
HOST = bs.HOST
DEFAULT_ENGRAM = str(REPO / ".venv" / "bin" / "engram")
DEFAULT_PG_URL = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
TARGETS = ("vector", "graph")
WAITING = ("pending", "processing", "retrying")
MIN_PAYLOAD = 300  # characters of toolInput + toolOutput + prompt, at least
STARTUP_TIMEOUT_S = 120
VECTORS_READY_TIMEOUT_S = 120
WARMUP_TIMEOUT_S = 180
OBSERVE_RESULTS = ("stored", "skipped", "dead")  # what tasks.capture.observe returns
MAX_SEND_ATTEMPTS = 20  # per event: 503s and connection errors are resent, this often
SQL_CHUNK = 500  # ids per IN (...) query


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Events: bench_spine's realistic factory, with payloads of at least MIN_PAYLOAD characters
# --------------------------------------------------------------------------------------------


def payload_chars(fields: dict[str, Any]) -> int:
    """Characters of what a hook carries: toolInput + toolOutput (as JSON) + prompt."""
    total = 0
    for key in ("toolInput", "toolOutput", "prompt"):
        value = fields.get(key)
        if value is not None:
            total += len(value) if isinstance(value, str) else len(json.dumps(value))
    return total


class LoadEventFactory(bs.RealisticEventFactory):
    """bench_spine's RealisticEventFactory with bigger payloads: sizes drawn from ~560 B to
    ~6.8 KB (log-uniform) instead of 200 B to 5 KB, prompts that paste the error the user saw,
    end-of-turn messages that list what changed, build logs among the Bash outputs, and a
    redraw when a payload is still under MIN_PAYLOAD characters (git status, pip show, ...)."""

    def __init__(self, seed: int, prefix: str, corpus: bs.RealisticCorpus) -> None:
        super().__init__(seed, prefix, corpus)
        self.bash_kinds = [*self.bash_kinds, (self._build, 0.08)]

    def _event(self, project: str, size: int) -> dict[str, Any]:
        size = int(size * 1.25) + 300
        fields: dict[str, Any] = {}
        for _ in range(8):
            fields = super()._event(project, size)
            if payload_chars(fields) >= MIN_PAYLOAD:
                break
        return fields

    def _prompt(self, project: str, budget: int) -> str:
        text = super()._prompt(project, budget)
        if len(text) >= MIN_PAYLOAD:
            return text
        if self.rng.random() < 0.5:  # the user pastes the error they saw
            pasted = self._traceback(project)
        else:
            pasted = bs.fill_lines(
                [], max(budget - len(text), 250), lambda: self._log_line(project), cap=30
            )
        return text + "\n\n" + "\n".join(pasted)

    def _reply(self, project: str, budget: int) -> str:
        text = super()._reply(project, budget)
        if len(text) >= MIN_PAYLOAD:
            return text
        files = self.rng.sample(self.work, min(len(self.work), self.rng.randint(2, 5)))
        lines = [text, "", "Changes:"]
        lines += [f"- {f.rel}: {self._commit_message(project)}" for f in files]
        lines += [
            "",
            f"`pytest {files[0].dir if files else '.'}`: {self.rng.randint(5, 300)} "
            f"passed in {self.rng.uniform(0.5, 60):.2f}s",
        ]
        return "\n".join(lines)

    def _build(self, project: str, budget: int) -> tuple[str, str, str, str]:
        """`python -m build` (file copies, sometimes a failing backend) or `make test` (lint,
        then a pytest run)."""
        r, files = self.rng, self._files(project).files
        if r.random() < 0.5:
            out = [
                "* Creating isolated environment: venv+pip...",
                "* Installing packages in isolated environment:",
                "  - setuptools >= 68",
                "  - wheel",
                "* Getting build dependencies for wheel...",
                "running bdist_wheel",
                "running build",
                "running build_py",
            ]
            out = bs.fill_lines(
                out,
                budget - 300,
                lambda: f"copying {(f := r.choice(files)).rel} -> build/lib/{project}/{f.dir}",
            )
            if r.random() < 0.3:
                trace = self._traceback(project)
                return (
                    "python -m build",
                    "Build the package",
                    "\n".join(out),
                    "\n".join(
                        [
                            *trace,
                            "",
                            "ERROR Backend subprocess exited when trying to invoke build_wheel",
                        ]
                    ),
                )
            version = f"0.{r.randint(1, 30)}.{r.randint(0, 9)}"
            out += [
                f"Successfully built {project}-{version}.tar.gz and "
                f"{project}-{version}-py3-none-any.whl"
            ]
            return "python -m build", "Build the package", "\n".join(out), ""
        _, _, lint, _ = self._lint(project, budget // 3)
        _, _, tests, _ = self._pytest(project, budget - len(lint))
        failed = " failed" in tests.rsplit("\n", 1)[-1]
        out = ["ruff check src tests", lint, "python -m pytest -q", tests]
        if failed:
            out.append(f"make: *** [Makefile:{r.randint(8, 40)}: test] Error 1")
        return "make test", "Lint and run the tests", "\n".join(out), ""


def make_bodies(
    corpus: bs.RealisticCorpus, seed: int, prefix: str, count: int
) -> list[tuple[str, bytes]]:
    """(eventId, JSON body) of ``count`` events; the timestamp is the time of sending."""
    factory = LoadEventFactory(seed, prefix, corpus)
    bodies = []
    for _ in range(count):
        body = factory.next()
        body.pop("timestamp", None)  # the gateway stamps the time it receives the event
        bodies.append((body["eventId"], json.dumps(body).encode()))
    return bodies


def describe_bodies(bodies: list[tuple[str, bytes]]) -> str:
    parsed = [json.loads(raw) for _, raw in bodies]
    sizes = [payload_chars(b) for b in parsed]
    mix = Counter(b.get("toolName") or b["hookType"] for b in parsed)
    pct = "/".join(str(int(bs.percentile(sizes, q))) for q in (0, 5, 50, 95, 100))
    return (
        f"{len(parsed)} events; payload chars min/p5/p50/p95/max {pct}; "
        f"body bytes p50 {int(bs.percentile([len(r) for _, r in bodies], 50))}; mix "
        + ", ".join(f"{k} {v * 100 // len(parsed)}%" for k, v in mix.most_common())
    )


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


@dataclass
class Target:
    """What to run: the engram command line, and where (cwd, PYTHONPATH) to run it."""

    engram: list[str]
    cwd: Path
    pythonpath: str
    chroma: str
    extra_env: dict[str, str]


TEMP_DIRS: list[Path] = []
PG_DATABASES: list[tuple[str, str]] = []  # (admin URL, database name)
KEPT_LOGS: list[Path] = []


def spawn(role: str, argv: list[str], env: dict[str, str], log_dir: Path, cwd: Path) -> bs.Proc:
    """Like bench_spine.spawn, in ``cwd``; registered in bs.RUNNING so bs.stop_all stops it."""
    log_path = log_dir / f"{role}.log"
    with open(log_path, "wb") as handle:
        popen = subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    proc = bs.Proc(role, popen, log_path)
    bs.RUNNING.append(proc)
    log(f"  started {role} pid {proc.pid}: {shlex.join(argv)}")
    return proc


def run_env(root: Path, broker: str | None, target: Target) -> dict[str, str]:
    env = bs.base_env(root, broker)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [target.pythonpath, os.environ.get("PYTHONPATH")])
    )
    env["ANONYMIZED_TELEMETRY"] = "False"  # Chroma: contact nothing but loopback
    env.update(target.extra_env)
    return env


def interpreter_of(argv: list[str]) -> str | None:
    """The Python that runs ``argv``: itself, or a script's shebang interpreter."""
    first = argv[0]
    if Path(first).name.startswith("python"):
        return first
    try:
        with open(shutil.which(first) or first, "rb") as fh:
            line = fh.readline(300).decode(errors="replace")
    except OSError:
        return None
    return line[2:].split()[0] if line.startswith("#!") and line[2:].strip() else None


def engram_origin(target: Target) -> str:
    """Where the processes import engram, api and tasks from (same interpreter, env, cwd)."""
    python = interpreter_of(target.engram)
    if python is None:
        return "unknown (not a Python command)"
    env = run_env(Path(tempfile.gettempdir()) / "engram-load-probe", None, target)
    code = (
        "import engram, api, tasks; print(engram.__file__, api.__file__, tasks.__file__, "
        "engram.__version__)"
    )
    try:
        done = subprocess.run(
            [python, "-c", code],
            env=env,
            cwd=target.cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return done.stdout.strip() or f"import failed: {done.stderr.strip()[-300:]}"


def git_revision(cwd: Path) -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(cwd), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(cwd), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return f"{rev or '?'}" + (f" + {len(dirty)} modified files" if dirty else " (clean)")


def redis_client(port: int, db: int) -> Any:
    import redis  # installed with celery[redis]

    return redis.Redis(host=HOST, port=port, db=db, socket_timeout=5, socket_connect_timeout=3)


def flush_redis(port: int, db: int) -> None:
    """FLUSHDB of our dedicated DB, nothing else."""
    try:
        client = redis_client(port, db)
        found = client.dbsize()
        if found:
            log(f"  redis DB {db}: flushing {found} keys")
        client.flushdb()
        client.close()
    except Exception as exc:  # noqa: BLE001 - reported; the run that needs Redis fails later
        log(f"  redis {HOST}:{port}/{db} unusable: {exc}")


def create_pg_database(admin_url: str) -> str:
    import psycopg

    name = f"engram_load_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    PG_DATABASES.append((admin_url, name))
    return name


def drop_pg_database(admin_url: str, name: str) -> None:
    import psycopg

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception as exc:  # noqa: BLE001 - reported, cleanup goes on
        log(f"  could not drop PostgreSQL database {name}: {exc}")
    with suppress(ValueError):
        PG_DATABASES.remove((admin_url, name))


def with_database(url: str, name: str, scheme: str | None = None) -> str:
    head, _, _ = url.rpartition("/")
    if scheme:
        head = scheme + head[head.index("://") :]
    return f"{head}/{name}"


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return resp.status == 200
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# The store of record, read with SQL (SQLite file or PostgreSQL)
# --------------------------------------------------------------------------------------------


@dataclass
class InboxState:
    by_state: dict[str, int]
    oldest_waiting_age: float  # seconds; 0 when nothing waits

    @property
    def waiting(self) -> int:
        return sum(self.by_state.get(s, 0) for s in WAITING)


class StoreConn:
    """One connection (per thread) to the store of record; read-only queries, autocommit."""

    def __init__(self, sqlite_path: Path | None, pg_url: str | None) -> None:
        self.sqlite_path, self.pg_url = sqlite_path, pg_url
        self.conn: Any = None

    def _open(self) -> None:
        if self.pg_url:
            import psycopg

            self.conn = psycopg.connect(
                self.pg_url,
                autocommit=True,
                connect_timeout=5,
                options="-c statement_timeout=20000",
            )
        else:
            self.conn = sqlite3.connect(
                f"file:{self.sqlite_path}?mode=ro",
                uri=True,
                timeout=10,
                isolation_level=None,
                check_same_thread=False,
            )

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        for attempt in (1, 2):
            try:
                if self.conn is None:
                    self._open()
                if self.pg_url:
                    with self.conn.cursor() as cur:
                        cur.execute(sql.replace("?", "%s"), list(params))
                        return list(cur.fetchall())
                return list(self.conn.execute(sql, list(params)).fetchall())
            except Exception:
                self.close()
                if attempt == 2:
                    raise
        return []

    def close(self) -> None:
        if self.conn is not None:
            with suppress(Exception):
                self.conn.close()
        self.conn = None

    def inbox(self) -> InboxState:
        rows = self.rows(
            "SELECT state, COUNT(*), MIN(created_at) FROM capture_inbox GROUP BY state"
        )
        oldest = [r[2] for r in rows if r[0] in WAITING and r[2] is not None]
        return InboxState(
            {r[0]: int(r[1]) for r in rows}, max(0.0, time.time() - min(oldest)) if oldest else 0.0
        )

    def derive(self) -> dict[str, tuple[int, float]]:
        """target -> (rows queued, age in s of the oldest)."""
        now = time.time()
        found = {
            r[0]: (int(r[1]), max(0.0, now - float(r[2])))
            for r in self.rows(
                "SELECT target, COUNT(*), MIN(enqueued_at) FROM derive_queue GROUP BY target"
            )
        }
        return {t: found.get(t, (0, 0.0)) for t in sorted({*TARGETS, *found})}

    def ledger(self, event_ids: list[str]) -> dict[str, tuple[float, float | None, str]]:
        """event id -> (accepted_at, stored_at or None, state)."""
        found: dict[str, tuple[float, float | None, str]] = {}
        for i in range(0, len(event_ids), SQL_CHUNK):
            chunk = event_ids[i : i + SQL_CHUNK]
            for eid, acc, sto, state in self.rows(
                "SELECT event_id, accepted_at, stored_at, state FROM event_ledger "
                f"WHERE event_id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                found[eid] = (float(acc), None if sto is None else float(sto), state)
        return found

    def queued(self, doc_ids: list[str]) -> set[tuple[str, str]]:
        """(target, doc id) rows of the derive queue among ``doc_ids``."""
        found: set[tuple[str, str]] = set()
        for i in range(0, len(doc_ids), SQL_CHUNK):
            chunk = doc_ids[i : i + SQL_CHUNK]
            found |= {
                (t, d)
                for t, d in self.rows(
                    "SELECT target, doc_id FROM derive_queue WHERE target IN ('vector', 'graph') "
                    f"AND doc_id IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
            }
        return found


# --------------------------------------------------------------------------------------------
# The stack under test
# --------------------------------------------------------------------------------------------


@dataclass
class Stack:
    mode: str
    label: str
    root: Path
    port: int = 0
    procs: list[bs.Proc] = field(default_factory=list)  # gateway, workers, beat, chroma
    sqlite_path: Path | None = None
    pg_url: str | None = None  # plain postgresql:// URL of the run's database
    pg_db: tuple[str, str] | None = None
    broker_url: str | None = None
    redis: Any = None
    drained: tuple[str, ...] = TARGETS  # derive targets something drains (vector: embedder on)

    def derived(self, derive: dict[str, tuple[int, float]]) -> bool:
        return all(derive.get(t, (0, 0.0))[0] == 0 for t in self.drained)

    def store(self) -> StoreConn:
        return StoreConn(self.sqlite_path, self.pg_url)

    @property
    def store_name(self) -> str:
        return "postgresql" if self.pg_url else "sqlite"

    def check_alive(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"{proc.role} (pid {proc.pid}) exited with "
                    f"{proc.popen.returncode}; its log ends:\n" + bs.tail(proc.log_path, 30)
                )


def wait_for(what: str, check: Callable[[], bool], stack: Stack, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        stack.check_alive()
        try:
            if check():
                return time.monotonic() - start
        except (OSError, http.client.HTTPException, ValueError, LookupError, TypeError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


def new_stack(mode: str, label: str) -> Stack:
    root = Path(tempfile.mkdtemp(prefix=f"engram-load-{mode}-"))
    TEMP_DIRS.append(root)
    (root / "logs").mkdir()
    return Stack(mode, label, root)


def start_stack(stack: Stack, workers: int, args: argparse.Namespace, target: Target) -> None:
    """Start the processes of ``stack``; the caller stops them (stop_stack), also on error."""
    mode, root, log_dir = stack.mode, stack.root, stack.root / "logs"
    log(f"[{stack.label}] starting in {root}")
    broker = None
    if mode == "distributed":
        broker = stack.broker_url = f"redis://{HOST}:{args.redis_port}/{args.redis_db}"
        flush_redis(args.redis_port, args.redis_db)
        stack.redis = redis_client(args.redis_port, args.redis_db)
    env = run_env(root, broker, target)
    if mode == "distributed":
        if args.pg:
            name = create_pg_database(args.pg_url)
            stack.pg_db = (args.pg_url, name)
            stack.pg_url = with_database(args.pg_url, name)
            env["ENGRAM_DATABASE_URL"] = with_database(args.pg_url, name, "postgresql+psycopg")
            log(f"  PostgreSQL database {name}")
        chroma_port = bs.free_port()
        (root / "chroma").mkdir()
        stack.procs.append(
            spawn(
                "chroma",
                [
                    target.chroma,
                    "run",
                    "--path",
                    str(root / "chroma"),
                    "--host",
                    HOST,
                    "--port",
                    str(chroma_port),
                ],
                env,
                log_dir,
                target.cwd,
            )
        )
        url = f"http://{HOST}:{chroma_port}"
        up = wait_for(
            "the Chroma server",
            lambda: http_ok(f"{url}/api/v2/heartbeat"),
            stack,
            STARTUP_TIMEOUT_S,
        )
        log(f"  chroma answers after {up:.1f}s")
        env["ENGRAM_CHROMA_URL"] = url
    if not stack.pg_url:
        stack.sqlite_path = root / "data" / "engram.db"
    stack.port = bs.free_port()
    stack.procs.insert(
        0,
        spawn(
            "gateway",
            [*target.engram, "serve", "--port", str(stack.port), *bs.dir_args(root)],
            env,
            log_dir,
            target.cwd,
        ),
    )
    api = bs.Api(stack.port, timeout=10)
    try:
        up = wait_for(
            "GET /v1/livez",
            lambda: api.call("GET", "/v1/livez").status == 200,
            stack,
            STARTUP_TIMEOUT_S,
        )
        log(f"  gateway answers /v1/livez after {up:.1f}s")
        if mode == "distributed":
            nodes = workers
            if args.topology == "split":
                # docs/operations.md: capture pools (prefork, no model) + ONE derived pool
                for i in range(1, workers + 1):
                    stack.procs.append(
                        spawn(
                            f"capture{i}",
                            [
                                *target.engram,
                                "worker",
                                "-Q",
                                "capture,maintenance",
                                "-c",
                                "2",
                                "-n",
                                f"capture{i}@%h",
                                *bs.dir_args(root),
                            ],
                            env,
                            log_dir,
                            target.cwd,
                        )
                    )
                stack.procs.append(
                    spawn(
                        "derived",
                        [
                            *target.engram,
                            "worker",
                            "-Q",
                            "embed,graph",
                            "-c",
                            str(args.derived_concurrency),
                            "-n",
                            "derived@%h",
                            *bs.dir_args(root),
                        ],
                        env,
                        log_dir,
                        target.cwd,
                    )
                )
                nodes = workers + 1
            else:
                for i in range(1, workers + 1):
                    stack.procs.append(
                        spawn(
                            f"worker{i}",
                            [
                                *target.engram,
                                "worker",
                                "--concurrency",
                                str(args.concurrency),
                                "--name",
                                f"load{i}@%h",
                                *bs.dir_args(root),
                            ],
                            env,
                            log_dir,
                            target.cwd,
                        )
                    )
            stack.procs.append(
                spawn(
                    "beat", [*target.engram, "beat", *bs.dir_args(root)], env, log_dir, target.cwd
                )
            )
            ready = wait_for(
                f"{nodes} workers answering in /v1/status",
                lambda: int(api.call("GET", "/v1/status").data["workers"]["alive"]) >= nodes,
                stack,
                STARTUP_TIMEOUT_S,
            )
            log(f"  {nodes} workers answer after {ready:.1f}s more")
        embedder = (api.call("GET", "/v1/status").data or {}).get("embedder") or {}
        if embedder.get("name") == "none":
            stack.drained = ("graph",)
            log("  embedder none: no vectors; derive_queue 'vector' rows are not waited for")
            return
        try:
            ready = wait_for(
                "vector search in /v1/status",
                lambda: bool(api.call("GET", "/v1/status").data["embedder"]["vectorSearch"]),
                stack,
                VECTORS_READY_TIMEOUT_S,
            )
            log(f"  vector search on after {ready:.1f}s more")
        except RuntimeError as exc:
            if "exited" in str(exc):
                raise
            log(f"  WARNING: {exc}; going on (vectors may be off)")
    finally:
        api.close()


def stop_stack(stack: Stack, args: argparse.Namespace) -> None:
    log(f"[{stack.label}] stopping its processes")
    for proc in reversed(stack.procs):  # beat, workers before the gateway; chroma last
        if proc.role != "chroma":
            bs.stop(proc)
    for proc in stack.procs:
        if proc.role == "chroma":
            bs.stop(proc)
    if stack.redis is not None:
        with suppress(Exception):
            stack.redis.close()
        flush_redis(args.redis_port, args.redis_db)
    if stack.pg_db:
        drop_pg_database(*stack.pg_db)
    if args.keep_logs:
        kept = (
            Path(tempfile.gettempdir())
            / f"engram-load-logs-{os.getpid()}"
            / re.sub(r"\W+", "-", stack.label)
        )
        kept.parent.mkdir(exist_ok=True)
        shutil.copytree(stack.root / "logs", kept, dirs_exist_ok=True)
        KEPT_LOGS.append(kept)
        log(f"  logs kept in {kept}")
    shutil.rmtree(stack.root, ignore_errors=True)
    with suppress(ValueError):
        TEMP_DIRS.remove(stack.root)


# --------------------------------------------------------------------------------------------
# Watchers: memory, queues, broker, livez, derived probes, task events
# --------------------------------------------------------------------------------------------


def memory(stack: Stack) -> dict[str, tuple[float, float, int]]:
    """role -> (RSS MB, VmHWM MB, processes) of each process with its direct children."""
    return {p.role: bs.tree_mem_mb(p.pid) for p in stack.procs if p.popen.poll() is None}


def broker_lengths(client: Any, limit: int = 5000) -> dict[str, int]:
    """LLEN of every list key (Celery queues, with priority suffixes) and HLEN of `unacked`."""
    keys = []
    for key in client.scan_iter(count=500):
        if not key.startswith(b"_kombu.binding."):
            keys.append(key)
        if len(keys) >= limit:
            break
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
    kinds = pipe.execute()
    pipe = client.pipeline(transaction=False)
    named = []
    for key, kind in zip(keys, kinds, strict=True):
        name = key.decode("utf-8", "backslashreplace").encode("unicode_escape").decode()
        if kind == b"list":
            pipe.llen(key)
            named.append(name)
        elif key == b"unacked" and kind == b"hash":
            pipe.hlen(key)
            named.append("unacked (HLEN)")
    return dict(zip(named, (int(n) for n in pipe.execute()), strict=True))


@dataclass
class Sample:
    t: float
    inbox: InboxState
    derive: dict[str, tuple[int, float]]
    broker: dict[str, int] | None
    rss: dict[str, float]


class Sampler:
    """Every ``every`` seconds: inbox, derive queue, broker lengths, RSS of each process."""

    def __init__(self, stack: Stack, every: float) -> None:
        self.stack, self.every = stack, every
        self.samples: list[Sample] = []
        self.errors: Counter = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def take(self, conn: StoreConn) -> Sample | None:
        try:
            inbox, derive = conn.inbox(), conn.derive()
        except Exception as exc:  # noqa: BLE001 - counted, the next sample may work
            self.errors[f"store: {type(exc).__name__}: {exc}"[:160]] += 1
            return None
        lengths = None
        if self.stack.redis is not None:
            try:
                lengths = broker_lengths(self.stack.redis)
            except Exception as exc:  # noqa: BLE001 - counted
                self.errors[f"redis: {type(exc).__name__}: {exc}"[:160]] += 1
        rss = {role: m[0] for role, m in memory(self.stack).items()}
        sample = Sample(time.time(), inbox, derive, lengths, rss)
        self.samples.append(sample)
        return sample

    def _run(self) -> None:
        conn = self.stack.store()
        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                self.take(conn)
                self.stopping.wait(max(0.0, self.every - (time.monotonic() - started)))
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


class LivezProber:
    """GET /v1/livez every ``interval`` seconds on one keep-alive connection."""

    def __init__(self, port: int, interval: float) -> None:
        self.port, self.interval = port, interval
        self.latencies: list[float] = []
        self.failures: Counter = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="livez", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        api = bs.Api(self.port, timeout=10)
        next_at = time.monotonic()
        while not self.stopping.is_set():
            try:
                reply = api.call("GET", "/v1/livez")
                if reply.status == 200:
                    self.latencies.append(reply.seconds)
                else:
                    self.failures[f"HTTP {reply.status}"] += 1
            except (OSError, http.client.HTTPException) as exc:
                self.failures[type(exc).__name__] += 1
            next_at = max(next_at + self.interval, time.monotonic())
            self.stopping.wait(max(0.0, next_at - time.monotonic()))
        api.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(15)


@dataclass
class Accepted:
    event_id: str
    observation_id: str
    at: float  # client wall clock when the 201 arrived


class DerivedTracker:
    """About one accepted event every ``every`` s is a probe: records when it is stored and its
    derive_queue rows for 'vector' and 'graph' are gone (= searchable through that stream)."""

    def __init__(self, stack: Stack, every: float, poll: float) -> None:
        self.stack, self.every, self.poll = stack, every, poll
        self.lock = threading.Lock()
        self.last_pick = 0.0
        self.outstanding: dict[str, tuple[str, dict[str, float]]] = {}  # eid -> (obs, done)
        self.lags: dict[str, list[float]] = {t: [] for t in TARGETS}
        self.probes = 0
        self.errors: Counter = Counter()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="derived", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def offer(self, acc: Accepted) -> None:
        with self.lock:
            if acc.at - self.last_pick >= self.every:
                self.last_pick = acc.at
                self.outstanding[acc.event_id] = (acc.observation_id, {})
                self.probes += 1

    def _check(self, conn: StoreConn) -> None:
        with self.lock:
            batch = dict(self.outstanding)
        if not batch:
            return
        ledger = conn.ledger(list(batch))  # first the ledger, then the queue (see below)
        stored = {eid: row for eid, row in ledger.items() if row[1] is not None}
        # Stored and queued rows commit together: stored now and no row now means derived.
        queued = conn.queued([batch[eid][0] for eid in stored])
        now = time.time()
        with self.lock:
            for eid, (accepted_at, _, _) in stored.items():
                obs, done = self.outstanding[eid]
                for target in TARGETS:
                    if target not in done and (target, obs) not in queued:
                        done[target] = now
                        self.lags[target].append(now - accepted_at)
                if len(done) == len(TARGETS):
                    del self.outstanding[eid]

    def _run(self) -> None:
        conn = self.stack.store()
        try:
            while True:
                last = self.stopping.is_set()  # one more look after stop() was called
                try:
                    self._check(conn)
                except Exception as exc:  # noqa: BLE001 - counted, polled again
                    self.errors[f"{type(exc).__name__}: {exc}"[:160]] += 1
                if last:
                    break
                self.stopping.wait(self.poll)
        finally:
            conn.close()

    def stop(self) -> dict[str, int]:
        """Stop; returns how many probes never became searchable, per target."""
        self.stopping.set()
        self.thread.join(30)
        with self.lock:
            return {
                t: sum(1 for _, done in self.outstanding.values() if t not in done) for t in TARGETS
            }


class TaskEvents:
    """Counts what `engram.observe` tasks returned, from the workers' Celery task events
    (task-received carries the name, task-succeeded the result's repr)."""

    def __init__(self, broker_url: str) -> None:
        self.broker_url = broker_url
        self.names: dict[str, str] = {}
        self.results: Counter = Counter()
        self.receiver: Any = None
        self.error = ""
        self.thread = threading.Thread(target=self._run, name="task-events", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _received(self, event: dict[str, Any]) -> None:
        self.names[event["uuid"]] = event.get("name", "?")

    def _succeeded(self, event: dict[str, Any]) -> None:
        name = self.names.pop(event.get("uuid", ""), "?")
        result = str(event.get("result", "")).strip("'\"")
        # Without its task-received event (sent before the receiver listened) an observe task
        # is still known by its result: only observe returns these strings.
        if name == "engram.observe" or (name == "?" and result in OBSERVE_RESULTS):
            self.results[result] += 1

    def _other(self, event: dict[str, Any]) -> None:
        if event.get("type") in ("task-failed", "task-retried", "task-rejected"):
            name = self.names.get(event.get("uuid", ""), "?")
            self.results[f"{event['type']} {name}"] += 1

    def _run(self) -> None:
        try:
            from celery import Celery

            app = Celery("bench-load-events", broker=self.broker_url)
            with app.connection_for_read() as conn:
                self.receiver = app.events.Receiver(
                    conn,
                    handlers={
                        "task-received": self._received,
                        "task-succeeded": self._succeeded,
                        "*": self._other,
                    },
                )
                self.receiver.capture(limit=None, timeout=None, wakeup=False)
        except Exception as exc:  # noqa: BLE001 - optional measurement
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        if self.receiver is not None:
            self.receiver.should_stop = True
        self.thread.join(10)


# --------------------------------------------------------------------------------------------
# Sending: paced (sustained) or as fast as possible (burst)
# --------------------------------------------------------------------------------------------


@dataclass
class SendStats:
    events: int = 0
    accepted: list[Accepted] = field(default_factory=list)
    accept_latencies: list[float] = field(default_factory=list)  # 201 answers
    statuses: Counter = field(default_factory=Counter)
    conn_errors: Counter = field(default_factory=Counter)
    resent: int = 0
    gave_up: int = 0
    lateness: list[float] = field(default_factory=list)  # send start - scheduled time
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0  # first send to last answer
    last_answer: float = 0.0  # wall clock

    def merge(self, other: SendStats) -> None:
        self.accepted += other.accepted
        self.accept_latencies += other.accept_latencies
        self.statuses.update(other.statuses)
        self.conn_errors.update(other.conn_errors)
        self.resent += other.resent
        self.lateness += other.lateness
        self.failures += other.failures[: max(0, 5 - len(self.failures))]


def send(
    port: int,
    bodies: list[tuple[str, bytes]],
    clients: int,
    rate: float | None,
    retry_delay: float,
    time_limit: float,
    on_accept: Callable[[Accepted], None] | None = None,
) -> SendStats:
    """POST every body from ``clients`` threads (one keep-alive connection each). With ``rate``
    event i is due at start + i/rate; without, all are due at once. 503 (retryable) answers and
    connection errors are resent after ``retry_delay`` s, at most MAX_SEND_ATTEMPTS times.
    Nothing new is sent after ``time_limit`` s."""
    work: queue.Queue = queue.Queue()
    retries: list[tuple[float, int, int]] = []  # heap of (due, index, attempt)
    lock = threading.Lock()
    left = [len(bodies)]  # events not finished
    per_thread = [SendStats() for _ in range(clients)]
    errors: list[BaseException] = []

    def finished() -> None:
        with lock:
            left[0] -= 1

    def again(index: int, attempt: int, stats: SendStats) -> None:
        if attempt + 1 >= MAX_SEND_ATTEMPTS:
            stats.gave_up += 1
            finished()
            return
        stats.resent += 1
        with lock:
            heapq.heappush(retries, (time.monotonic() + retry_delay, index, attempt + 1))

    def client(stats: SendStats) -> None:
        api = bs.Api(port, timeout=30)
        try:
            while True:
                item = work.get()
                if item is None:
                    return
                due, index, attempt = item
                if attempt == 0:
                    stats.lateness.append(max(0.0, time.monotonic() - due))
                event_id, raw = bodies[index]
                try:
                    reply = api.call("POST", "/v1/observe", raw=raw)
                except (OSError, http.client.HTTPException) as exc:
                    stats.conn_errors[type(exc).__name__] += 1
                    again(index, attempt, stats)
                    continue
                stats.statuses[reply.status] += 1
                data = reply.data if isinstance(reply.data, dict) else {}
                if reply.status == 201:
                    acc = Accepted(event_id, str(data.get("observationId")), time.time())
                    stats.accepted.append(acc)
                    stats.accept_latencies.append(reply.seconds)
                    if on_accept is not None:
                        on_accept(acc)
                elif reply.status == 503 and data.get("retryable"):
                    again(index, attempt, stats)
                    continue
                elif len(stats.failures) < 5:
                    stats.failures.append(f"HTTP {reply.status}: {str(reply.data)[:200]}")
                finished()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(exc)
        finally:
            api.close()

    threads = [
        threading.Thread(target=client, args=(s,), daemon=True, name=f"client{i}")
        for i, s in enumerate(per_thread)
    ]
    for t in threads:
        t.start()
    start = time.monotonic()
    wall_start = time.time()
    sent = 0
    try:
        while time.monotonic() - start < time_limit and not errors:
            with lock:
                if left[0] <= 0:
                    break
            now = time.monotonic()
            if sent < len(bodies) and (rate is None or start + sent / rate <= now):
                work.put((now if rate is None else start + sent / rate, sent, 0))
                sent += 1
                continue
            with lock:
                while retries and retries[0][0] <= now:
                    work.put(heapq.heappop(retries))
                next_retry = retries[0][0] if retries else math.inf
            next_new = start + sent / rate if rate and sent < len(bodies) else math.inf
            time.sleep(min(max(0.0, min(next_new, next_retry) - time.monotonic()), 0.05))
    finally:
        while True:  # what was never sent is not waited for
            try:
                work.get_nowait()
            except queue.Empty:
                break
        for _ in threads:
            work.put(None)
        for t in threads:
            t.join(40)
    if errors:
        raise errors[0]
    total = SendStats(events=len(bodies))
    for stats in per_thread:
        total.merge(stats)
        total.gave_up += stats.gave_up  # resent MAX_SEND_ATTEMPTS times
    with lock:
        total.gave_up += max(0, left[0])  # never sent, or waiting to be resent at the limit
    total.last_answer = time.time()
    total.seconds = total.last_answer - wall_start
    return total


# --------------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------------


@dataclass
class CatchUp:
    seconds: float = math.nan  # until inbox and derive queue were both empty
    inbox_empty_after: float = math.nan
    derive_empty_after: dict[str, float] = field(default_factory=dict)
    left: str = ""  # what was still there when the wait ran out


@dataclass
class Report:
    phase: str  # sustained | burst
    mode: str
    label: str
    workers: int = 0
    store: str = ""
    error: str = ""
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    startup_s: float = math.nan
    send: SendStats = field(default_factory=SendStats)
    duration: float = 0.0
    rate: float | None = None
    livez: list[float] = field(default_factory=list)
    livez_failures: Counter = field(default_factory=Counter)
    stored_lags: list[float] = field(default_factory=list)
    stored_at: list[float] = field(default_factory=list)
    first_accepted_at: float = math.nan
    not_stored: Counter = field(default_factory=Counter)
    searchable: dict[str, list[float]] = field(default_factory=dict)
    probes: int = 0
    probes_missing: dict[str, int] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    load_end_at: float = 0.0
    catch_up: CatchUp = field(default_factory=CatchUp)
    drain_s: float = math.nan  # burst: last answer -> inbox empty
    derive_at_drain: dict[str, tuple[int, float]] = field(default_factory=dict)
    mem_start: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    mem_end: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    task_results: Counter = field(default_factory=Counter)
    task_events_error: str = ""
    dead: int = 0
    notes: list[str] = field(default_factory=list)
    log_notes: list[str] = field(default_factory=list)
    sigterm: SigtermResult | None = None
    bulk: BulkResult | None = None


@dataclass
class SigtermResult:
    in_flight: str = ""  # what the server had to do when SIGTERM was sent
    seconds: float = math.nan  # SIGTERM -> process exit
    returncode: int | None = None
    killed: bool = False  # still running after SIGTERM_WAIT_S: SIGKILL
    log_lines: list[str] = field(default_factory=list)  # what it logged after SIGTERM


@dataclass
class BulkResult:
    events: int = 0
    file_mb: float = 0.0
    build_s: float = 0.0
    returncode: int | None = None
    import_s: float = math.nan
    import_peak_mb: float = 0.0  # VmHWM of the `engram import` process
    import_out: list[str] = field(default_factory=list)
    hook: SendStats = field(default_factory=SendStats)
    hook_stored_lags: list[float] = field(default_factory=list)
    hook_not_stored: Counter = field(default_factory=Counter)
    drained_after: float = math.nan  # s after the import ended until the inbox was empty
    drain_left: str = ""
    derive_after: dict[str, tuple[int, float]] = field(default_factory=dict)


def warm_up(
    stack: Stack, conn: StoreConn, corpus: bs.RealisticCorpus, count: int, seed: int
) -> None:
    """A few events through the whole path (the workers load the embedder), then wait until the
    inbox and the derive queue are empty."""
    if count <= 0:
        return
    stats = send(stack.port, make_bodies(corpus, seed, f"warm{seed}", count), 2, None, 1.0, 60)
    log(f"  warm-up: {count} events, statuses {dict(stats.statuses)}")
    watch = time.monotonic()
    while time.monotonic() - watch < WARMUP_TIMEOUT_S:
        stack.check_alive()
        inbox, derive = conn.inbox(), conn.derive()
        if inbox.waiting == 0 and stack.derived(derive):
            log(f"  warm-up processed and derived after {time.monotonic() - watch:.1f}s")
            return
        time.sleep(0.5)
    log(
        f"  WARNING: warm-up not derived after {WARMUP_TIMEOUT_S}s: inbox {inbox.by_state}, "
        f"derive {derive}; going on"
    )


def wait_caught_up(
    stack: Stack, conn: StoreConn, since: float, timeout: float, inbox_only: bool = False
) -> CatchUp:
    """Poll until the inbox (and, unless ``inbox_only``, the derive queue) is empty."""
    result = CatchUp()
    deadline = time.monotonic() + timeout
    last_log = time.monotonic()
    inbox, derive = conn.inbox(), conn.derive()
    while True:
        stack.check_alive()
        inbox, derive = conn.inbox(), conn.derive()
        now = time.time()
        if inbox.waiting == 0 and math.isnan(result.inbox_empty_after):
            result.inbox_empty_after = now - since
        for t, (n, _) in derive.items():
            if n == 0 and t not in result.derive_empty_after:
                result.derive_empty_after[t] = now - since
        if inbox.waiting == 0 and (inbox_only or stack.derived(derive)):
            result.seconds = now - since
            return result
        if time.monotonic() >= deadline:
            break
        if time.monotonic() - last_log >= 15:
            last_log = time.monotonic()
            log(
                f"    catching up after {now - since:.0f}s: inbox {inbox.by_state}, derive "
                + ", ".join(f"{t} {n} (oldest {a:.0f}s)" for t, (n, a) in derive.items())
            )
        time.sleep(0.5)
    result.left = (
        f"inbox {inbox.by_state} (oldest waiting {inbox.oldest_waiting_age:.0f}s); "
        "derive_queue "
        + ", ".join(f"{t} {n} rows (oldest {a:.0f}s)" for t, (n, a) in derive.items())
    )
    if stack.redis is not None:
        with suppress(Exception):
            result.left += "; broker " + fmt_broker(broker_lengths(stack.redis))
    return result


def ledger_lags(conn: StoreConn, report: Report) -> None:
    ids = [a.event_id for a in report.send.accepted]
    rows = conn.ledger(ids)
    for eid in ids:
        row = rows.get(eid)
        if row is None:
            report.not_stored["missing from the ledger"] += 1
        elif row[1] is None:
            report.not_stored[row[2]] += 1
        else:
            report.stored_lags.append(row[1] - row[0])
            report.stored_at.append(row[1])
    if rows:
        report.first_accepted_at = min(r[0] for r in rows.values())
    report.dead = conn.inbox().by_state.get("dead", 0)


def run_phase(
    phase: str,
    mode: str,
    workers: int,
    args: argparse.Namespace,
    target: Target,
    corpus: bs.RealisticCorpus,
    seed: int,
) -> Report:
    label = (
        "embedded"
        if mode == "embedded"
        else (
            f"distributed split {workers} capture + 1 derived"
            if args.topology == "split"
            else f"distributed default {workers}w x c{args.concurrency}"
        )
    )
    report = Report(phase, mode, f"{phase}: {label}", workers)
    stack = new_stack(mode, report.label)
    watch = time.monotonic()
    try:
        start_stack(stack, workers, args, target)
        report.store = stack.store_name
        report.startup_s = time.monotonic() - watch
        if stack.drained != TARGETS:
            report.notes.append(
                "embedder none: nothing drains derive_queue 'vector' rows (one "
                "per document is queued anyway); the waits ignore them"
            )
        conn = stack.store()
        try:
            warm_up(stack, conn, corpus, args.warmup, seed + 7)
            if phase == "sustained":
                sustained(stack, conn, report, args, corpus, seed)
            elif phase == "bulk":
                bulk(stack, conn, report, args, target, corpus, seed)
            else:
                burst(stack, conn, report, args, corpus, seed)
            if args.sigterm and mode == "embedded" and phase in ("sustained", "bulk"):
                report.sigterm = sigterm_exit(
                    stack,
                    conn,
                    corpus,
                    seed + 13,
                    "import finished, its derived work queued; " if phase == "bulk" else "",
                )
        finally:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - reported; the other runs still happen
        report.error = f"{type(exc).__name__}: {exc}"
        log(f"  FAILED: {report.error}")
    finally:
        report.load_after = os.getloadavg()
        for proc in stack.procs:
            report.log_notes += log_digest(proc)
        stop_stack(stack, args)
    return report


def sustained(
    stack: Stack,
    conn: StoreConn,
    report: Report,
    args: argparse.Namespace,
    corpus: bs.RealisticCorpus,
    seed: int,
) -> None:
    count = int(args.rate * args.duration)
    bodies = make_bodies(corpus, seed, f"load{seed}", count)
    report.rate, report.duration = args.rate, args.duration
    report.notes.append("corpus: " + describe_bodies(bodies))
    report.mem_start = memory(stack)
    sampler = Sampler(stack, args.sample_interval)
    livez = LivezProber(stack.port, args.livez_interval)
    tracker = DerivedTracker(stack, 1.0 / args.probe_rate, args.probe_poll)
    events = TaskEvents(stack.broker_url) if stack.broker_url and args.task_events else None
    report.load_before = os.getloadavg()
    log(
        f"  sustained: {count} events at {args.rate:g}/s for {args.duration:g}s from "
        f"{args.clients} clients; load average {fmt_load(report.load_before)}"
    )
    for watcher in (sampler, livez, tracker, events):
        if watcher is not None:
            watcher.start()
    try:
        progress = threading.Thread(target=log_progress, args=(sampler, args.duration), daemon=True)
        progress.start()
        report.send = send(
            stack.port,
            bodies,
            args.clients,
            args.rate,
            args.retry_delay,
            args.duration + 120,
            tracker.offer,
        )
        report.load_end_at = time.time()
        livez.stop()
        sampler.take(conn)  # the state at the end of the load
        log(
            f"  load done: {len(report.send.accepted)} accepted in {report.send.seconds:.1f}s, "
            f"statuses {dict(report.send.statuses)}; accept "
            f"{bs.Dist.of(report.send.accept_latencies).line()}"
        )
        report.catch_up = wait_caught_up(stack, conn, report.load_end_at, args.catch_up_timeout)
        log(
            f"  caught up after {report.catch_up.seconds:.1f}s"
            if not report.catch_up.left
            else f"  NOT caught up after {args.catch_up_timeout:g}s: {report.catch_up.left}"
        )
        sampler.take(conn)
    finally:
        livez.stop()
        report.probes_missing = tracker.stop()
        sampler.stop()
        if events is not None:
            events.stop()
    report.mem_end = memory(stack)
    report.livez, report.livez_failures = livez.latencies, livez.failures
    report.searchable, report.probes = tracker.lags, tracker.probes
    report.samples = sampler.samples
    if events is not None:
        report.task_results, report.task_events_error = events.results, events.error
    for what, errs in (("sampler", sampler.errors), ("probe tracker", tracker.errors)):
        report.notes += [f"{what} error x{n}: {e}" for e, n in errs.most_common(3)]
    ledger_lags(conn, report)


def log_progress(sampler: Sampler, duration: float) -> None:
    """A progress line every 30 s during the load (reads the sampler's last sample)."""
    start = time.monotonic()
    while time.monotonic() - start < duration + 5:
        if sampler.stopping.wait(30):
            return
        if sampler.samples:
            s = sampler.samples[-1]
            log(
                f"    t+{time.monotonic() - start:.0f}s: inbox waiting {s.inbox.waiting}, derive "
                + ", ".join(f"{t} {n} (oldest {a:.0f}s)" for t, (n, a) in s.derive.items())
                + (f", broker {fmt_broker(s.broker)}" if s.broker is not None else "")
            )


def burst(
    stack: Stack,
    conn: StoreConn,
    report: Report,
    args: argparse.Namespace,
    corpus: bs.RealisticCorpus,
    seed: int,
) -> None:
    bodies = make_bodies(corpus, seed, f"burst{seed}", args.burst)
    report.notes.append("corpus: " + describe_bodies(bodies))
    report.mem_start = memory(stack)
    sampler = Sampler(stack, args.sample_interval)
    report.load_before = os.getloadavg()
    log(
        f"  burst: {args.burst} events as fast as {args.clients} clients go; load average "
        f"{fmt_load(report.load_before)}"
    )
    sampler.start()
    try:
        report.send = send(
            stack.port, bodies, args.clients, None, args.retry_delay, args.catch_up_timeout
        )
        report.load_end_at = time.time()
        log(
            f"  sent: {len(report.send.accepted)} accepted in {report.send.seconds:.1f}s "
            f"({len(report.send.accepted) / max(report.send.seconds, 1e-9):.0f}/s), statuses "
            f"{dict(report.send.statuses)}"
        )
        caught = wait_caught_up(
            stack, conn, report.load_end_at, args.catch_up_timeout, inbox_only=True
        )
        report.catch_up = caught
        report.drain_s = caught.inbox_empty_after
        report.derive_at_drain = conn.derive()
        sampler.take(conn)
        log(
            f"  inbox drained {report.drain_s:.1f}s after the last answer; derive queue then "
            + ", ".join(f"{t} {n}" for t, (n, _) in report.derive_at_drain.items())
            if not caught.left
            else f"  inbox NOT drained: {caught.left}"
        )
    finally:
        sampler.stop()
    report.mem_end = memory(stack)
    report.samples = sampler.samples
    ledger_lags(conn, report)


SIGTERM_WAIT_S = 30.0
SIGTERM_EVENTS = 300  # a short burst that leaves derived work, when none is queued


def sigterm_exit(
    stack: Stack, conn: StoreConn, corpus: bs.RealisticCorpus, seed: int, in_flight: str = ""
) -> SigtermResult:
    """SIGTERM to the (embedded) server while it has derived work, timed until it exits. When
    its derive queue is empty, a short burst first gives it some, and SIGTERM follows once the
    inbox is empty (the derived lane is then at work) or after 60 s."""
    gateway = stack.procs[0]
    result = SigtermResult()
    if stack.derived(conn.derive()):
        stats = send(
            stack.port, make_bodies(corpus, seed, f"term{seed}", SIGTERM_EVENTS), 4, None, 1.0, 60
        )
        log(f"  sigterm: sent {len(stats.accepted)} events to give the server derived work")
        watch = time.monotonic()
        while time.monotonic() - watch < 60 and conn.inbox().waiting:
            time.sleep(0.2)
        time.sleep(1.0)  # the derived lane takes its first step
    inbox, derive = conn.inbox(), conn.derive()
    result.in_flight = (
        in_flight
        + f"inbox waiting {inbox.waiting}; derive_queue "
        + ", ".join(f"{t} {n}" for t, (n, _) in derive.items())
    )
    log_from = gateway.log_path.stat().st_size if gateway.log_path.exists() else 0
    log(f"  sigterm: SIGTERM to the server (pid {gateway.pid}) with {result.in_flight}")
    watch = time.monotonic()
    os.kill(gateway.pid, signal.SIGTERM)
    try:
        gateway.popen.wait(SIGTERM_WAIT_S)
        result.seconds = time.monotonic() - watch
        result.returncode = gateway.popen.returncode
    except subprocess.TimeoutExpired:
        result.killed = True
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(gateway.pid, signal.SIGKILL)
        gateway.popen.wait(10)
        result.seconds = time.monotonic() - watch
        result.returncode = gateway.popen.returncode
    with suppress(OSError):
        with open(gateway.log_path, "rb") as fh:
            fh.seek(log_from)
            lines = fh.read().decode(errors="replace").splitlines()
        result.log_lines = [ln[:300] for ln in lines if ln.strip()][-8:]
    log(
        f"  sigterm: exited after {result.seconds:.2f}s with {result.returncode}"
        + (" (SIGKILL needed)" if result.killed else "")
    )
    return result


def write_export(path: Path, corpus: bs.RealisticCorpus, seed: int, count: int) -> None:
    """An Engram export document of ``count`` observations (bench_spine.export_observation of
    this file's realistic events: sessions of 20-60 events over the corpus projects), written
    as it is built."""
    factory = LoadEventFactory(seed, f"bulk{seed}", corpus)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            '{"format": "engram-export", "version": 1, "sessions": [], "memories": [], '
            '"observations": [\n'
        )
        for i in range(count):
            if i:
                fh.write(",\n")
            fh.write(json.dumps(bs.export_observation(factory.next())))
            if (i + 1) % 10000 == 0:
                log(f"    export document: {i + 1}/{count} observations")
        fh.write("\n]}\n")


def hook_client(
    port: int,
    corpus: bs.RealisticCorpus,
    seed: int,
    rate: float,
    stop: threading.Event,
    stats: SendStats,
) -> None:
    """POST /v1/observe one event at a time at ``rate``/s on one keep-alive connection, as a
    coding agent's hook does, until ``stop``; every non-201 answer is counted, none resent."""
    factory = LoadEventFactory(seed, f"hook{seed}", corpus)
    api = bs.Api(port, timeout=30)
    start, i = time.monotonic(), 0
    wall = time.time()
    try:
        while not stop.is_set():
            due = start + i / rate
            if stop.wait(max(0.0, due - time.monotonic())):
                break
            body = factory.next()
            body.pop("timestamp", None)
            stats.events += 1
            stats.lateness.append(max(0.0, time.monotonic() - due))
            i += 1
            try:
                reply = api.call("POST", "/v1/observe", raw=json.dumps(body).encode())
            except (OSError, http.client.HTTPException) as exc:
                stats.conn_errors[type(exc).__name__] += 1
                continue
            stats.statuses[reply.status] += 1
            if reply.status == 201:
                data = reply.data if isinstance(reply.data, dict) else {}
                stats.accepted.append(
                    Accepted(body["eventId"], str(data.get("observationId")), time.time())
                )
                stats.accept_latencies.append(reply.seconds)
            elif len(stats.failures) < 5:
                stats.failures.append(
                    f"HTTP {reply.status} after {reply.seconds * 1000:.0f} "
                    f"ms: {str(reply.data)[:200]}"
                )
    finally:
        api.close()
        stats.last_answer = time.time()
        stats.seconds = stats.last_answer - wall


def bulk(
    stack: Stack,
    conn: StoreConn,
    report: Report,
    args: argparse.Namespace,
    target: Target,
    corpus: bs.RealisticCorpus,
    seed: int,
) -> None:
    """`engram import FILE --strategy merge` of --bulk-events observations while a hook client
    posts one event at a time at --hook-rate/s."""
    res = report.bulk = BulkResult(events=args.bulk_events)
    path = stack.root / "bulk-export.json"
    watch = time.monotonic()
    log(f"  bulk: building an export document of {args.bulk_events} observations")
    write_export(path, corpus, seed, args.bulk_events)
    res.build_s, res.file_mb = time.monotonic() - watch, path.stat().st_size / 1e6
    log(f"  bulk: {path.name} {res.file_mb:.0f} MB built in {res.build_s:.0f}s")
    report.mem_start = memory(stack)
    sampler = Sampler(stack, args.sample_interval)
    stop_hook = threading.Event()
    hook = threading.Thread(
        target=hook_client,
        args=(stack.port, corpus, seed + 1, args.hook_rate, stop_hook, res.hook),
        name="hook",
        daemon=True,
    )
    env = run_env(stack.root, None, target)
    argv = [
        *target.engram,
        "import",
        str(path),
        "--strategy",
        "merge",
        "--url",
        f"http://{HOST}:{stack.port}",
        *bs.dir_args(stack.root),
    ]
    out_path = stack.root / "logs" / "import.log"
    report.load_before = os.getloadavg()
    sampler.start()
    hook.start()
    time.sleep(2.0)  # the hook's first events before the import
    log(f"  bulk: {shlex.join(argv)}")
    started = time.time()
    try:
        with open(out_path, "wb") as out:
            popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=target.cwd,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        proc = bs.Proc("import", popen, out_path)
        bs.RUNNING.append(proc)
        last_log = time.monotonic()
        while popen.poll() is None:
            with suppress(Exception):
                res.import_peak_mb = max(res.import_peak_mb, bs.proc_mem_kb(popen.pid)[1] / 1024)
            stack.check_alive()
            if time.monotonic() - last_log >= 30:
                last_log = time.monotonic()
                progress = [
                    ln for ln in out_path.read_text(errors="replace").splitlines() if "items" in ln
                ]
                s = sampler.samples[-1] if sampler.samples else None
                log(
                    f"    import {time.time() - started:.0f}s: {progress[-1].strip() if progress else '-'}"
                    + (
                        f"; inbox waiting {s.inbox.waiting}, derive "
                        + ", ".join(f"{t} {n}" for t, (n, _) in s.derive.items())
                        + f", gateway RSS {s.rss.get('gateway', 0):.0f} MB"
                        if s
                        else ""
                    )
                    + f"; hook {len(res.hook.accepted)} accepted"
                )
            time.sleep(0.5)
        res.import_s = time.time() - started
        res.returncode = popen.returncode
        with suppress(ValueError):
            bs.RUNNING.remove(proc)
        res.import_out = [
            ln[:300] for ln in out_path.read_text(errors="replace").splitlines() if ln.strip()
        ][-3:]
        log(
            f"  bulk: import exited {res.returncode} after {res.import_s:.1f}s "
            f"({res.events / res.import_s:.0f} items/s): {res.import_out[-1:] or ''}"
        )
    finally:
        stop_hook.set()
        hook.join(40)
        report.load_end_at = time.time()
    try:
        caught = wait_caught_up(stack, conn, report.load_end_at, 120, inbox_only=True)
        res.drained_after, res.drain_left = caught.inbox_empty_after, caught.left
        res.derive_after = conn.derive()
        sampler.take(conn)
    finally:
        sampler.stop()
    report.load_after = os.getloadavg()
    report.mem_end = memory(stack)
    report.samples = sampler.samples
    report.send = res.hook
    ledger_lags(conn, report)
    res.hook_stored_lags, res.hook_not_stored = report.stored_lags, report.not_stored
    log(
        f"  bulk: hook {len(res.hook.accepted)} accepted, statuses {dict(res.hook.statuses)}; "
        f"accept {bs.Dist.of(res.hook.accept_latencies).line()}"
    )


# --------------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------------

_NOISE = re.compile(r"^\S+ \S+ |\b[0-9a-f]{8,}\b|\d+(\.\d+)?")


def log_digest(proc: bs.Proc, limit: int = 5) -> list[str]:
    """ERROR/WARNING/traceback counts, sweeper re-dispatches, and the first distinct problem
    lines of one process log."""
    try:
        text = proc.log_path.read_text(errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    errors = [ln for ln in lines if " ERROR " in ln or " CRITICAL " in ln]
    warnings = [ln for ln in lines if " WARNING " in ln and "No hostname was supplied" not in ln]
    tracebacks = text.count("Traceback (most recent call last)")
    redispatched = [int(m.group(1)) for m in re.finditer(r"re-dispatched (\d+) events", text)]
    notes = []
    if errors or warnings or tracebacks or redispatched:
        notes.append(
            f"{proc.role}: {len(errors)} ERROR, {len(warnings)} WARNING lines, "
            f"{tracebacks} tracebacks"
            + (
                f"; sweeper re-dispatched {sum(redispatched)} events in {len(redispatched)} sweeps"
                if redispatched
                else ""
            )
        )
    seen: set[str] = set()
    for line in errors + warnings:
        key = _NOISE.sub("#", line)[:120]
        if key not in seen and len(seen) < limit:
            seen.add(key)
            notes.append(f"    `{line[:300]}`")
    return notes


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def fmt_load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


def fmt_broker(lengths: dict[str, int] | None) -> str:
    if not lengths:
        return "empty"
    return ", ".join(f"{k} {v}" for k, v in sorted(lengths.items()))


def secs(values: list[float], p99: bool = False) -> str:
    if not values:
        return "n/a"
    qs = (50, 95, 99) if p99 else (50, 95)
    return (
        "/".join(f"{bs.percentile(values, q):.2f}" for q in qs)
        + f" (max {max(values):.2f}, n={len(values)})"
    )


def ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    d = bs.Dist.of(values)
    return f"{d.p50:.1f}/{d.p95:.1f}/{d.p99:.1f} (max {d.max:.0f}, n={d.n})"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


def derive_summary(samples: list[Sample], target: str, at: float | None = None) -> str:
    if not samples:
        return "n/a"
    counts = [s.derive.get(target, (0, 0.0)) for s in samples]
    peak_n, peak_age = max(c[0] for c in counts), max(c[1] for c in counts)
    text = f"max {peak_n} rows, oldest {peak_age:.0f}s"
    if at is not None:
        before = [s for s in samples if s.t <= at + 1] or samples[:1]
        n, age = before[-1].derive.get(target, (0, 0.0))
        text += f"; at load end {n} ({age:.0f}s)"
    n, age = counts[-1]
    return text + f"; at end {n} ({age:.0f}s)"


def broker_summary(samples: list[Sample], at: float | None = None) -> list[str]:
    """Per key: max; at load end; at the end."""
    with_broker = [s for s in samples if s.broker is not None]
    if not with_broker:
        return ["n/a"]
    keys = sorted({k for s in with_broker for k in s.broker or {}})
    before = [s for s in with_broker if at is not None and s.t <= at + 1] or with_broker[:1]
    total = [sum((s.broker or {}).values()) for s in with_broker]
    out = [
        f"all keys: max {max(total)}, at load end {sum((before[-1].broker or {}).values())}, "
        f"at end {total[-1]}"
    ]
    for key in keys:
        values = [(s.broker or {}).get(key, 0) for s in with_broker]
        out.append(
            f"`{key}`: max {max(values)}, at load end {(before[-1].broker or {}).get(key, 0)}"
            f", at end {values[-1]}"
        )
    return out


def mem_table(reports: list[Report]) -> str:
    rows = []
    for r in reports:
        roles = list(dict.fromkeys([*r.mem_start, *r.mem_end]))
        for role in roles:
            start = r.mem_start.get(role)
            end = r.mem_end.get(role)
            sampled = [s.rss.get(role, 0.0) for s in r.samples]
            rows.append(
                [
                    r.label,
                    role,
                    f"{end[2] if end else start[2] if start else 0}",
                    f"{start[0]:.0f}" if start else "-",
                    f"{max(sampled):.0f}" if sampled else "-",
                    f"{end[1]:.0f}" if end else "-",
                    f"{end[0]:.0f}" if end else "-",
                ]
            )
    return md_table(
        [
            "run",
            "process",
            "procs",
            "RSS at start MB",
            "max sampled RSS MB",
            "peak VmHWM MB",
            "RSS at end MB",
        ],
        rows,
    )


def sustained_table(reports: list[Report]) -> str:
    rows: list[list[str]] = []

    def row(label: str, fn: Callable[[Report], str]) -> None:
        values = []
        for r in reports:
            try:
                values.append(fn(r))
            except Exception:  # noqa: BLE001 - a measurement that did not happen
                values.append("-")
        rows.append([label, *values])

    row("store", lambda r: r.store)
    row("startup to ready (s)", lambda r: f"{r.startup_s:.1f}")
    row(
        "load average before / after",
        lambda r: f"{fmt_load(r.load_before)} / {fmt_load(r.load_after)}",
    )
    row(
        "events offered (rate x duration)",
        lambda r: f"{r.send.events} ({r.rate:g}/s x {r.duration:g}s)",
    )
    row(
        "accepted (201) / achieved rate",
        lambda r: (
            f"{len(r.send.accepted)} / "
            f"{len(r.send.accepted) / r.send.seconds:.1f}/s over {r.send.seconds:.0f}s"
        ),
    )
    row(
        "HTTP statuses (503 = resent later)",
        lambda r: " ".join(f"{k}:{v}" for k, v in sorted(r.send.statuses.items())),
    )
    row(
        "connection errors / gave up",
        lambda r: (
            f"{sum(r.send.conn_errors.values())} "
            f"{dict(r.send.conn_errors) or ''} / {r.send.gave_up}"
        ),
    )
    row(
        "send lateness p50/p95/max ms",
        lambda r: "/".join(
            f"{bs.percentile(r.send.lateness, q) * 1000:.0f}" for q in (50, 95, 100)
        ),
    )
    row("POST /v1/observe accept p50/p95/p99 ms", lambda r: ms(r.send.accept_latencies))
    row(
        "GET /v1/livez p50/p95/p99 ms (every 200 ms)",
        lambda r: (
            ms(r.livez) + (f"; failures {dict(r.livez_failures)}" if r.livez_failures else "")
        ),
    )
    row("accept -> stored p50/p95/p99 s (all)", lambda r: secs(r.stored_lags, True))
    row(
        "accepted but not stored at the end",
        lambda r: (
            str(sum(r.not_stored.values())) + (f" {dict(r.not_stored)}" if r.not_stored else "")
        ),
    )
    for t in TARGETS:
        row(
            f"accept -> {t}-searchable p50/p95 s (probes)",
            lambda r, t=t: (
                secs(r.searchable[t])
                + (
                    f"; {r.probes_missing.get(t, 0)} of {r.probes} probes never"
                    if r.probes_missing.get(t)
                    else ""
                )
            ),
        )
    row("inbox waiting", lambda r: _inbox_summary(r))
    for t in TARGETS:
        row(f"derive_queue `{t}`", lambda r, t=t: derive_summary(r.samples, t, r.load_end_at))
    row(
        "catch-up after the load (s)",
        lambda r: (
            f"{r.catch_up.seconds:.1f}"
            if not r.catch_up.left
            else f"NOT within the wait: {r.catch_up.left}"
        ),
    )
    row("  inbox empty after (s)", lambda r: f"{r.catch_up.inbox_empty_after:.1f}")
    for t in TARGETS:
        row(
            f"  derive `{t}` empty after (s)",
            lambda r, t=t: (
                f"{r.catch_up.derive_empty_after[t]:.1f}"
                if t in r.catch_up.derive_empty_after
                else "not empty"
            ),
        )
    row("dead letters", lambda r: str(r.dead))
    row(
        "broker (Redis) queue lengths",
        lambda r: (
            "<br>".join(broker_summary(r.samples, r.load_end_at))
            if r.mode == "distributed"
            else "n/a (in-memory)"
        ),
    )
    row(
        "engram.observe results (task events)",
        lambda r: (
            (
                " ".join(f"{k}:{v}" for k, v in r.task_results.most_common())
                + (f" (error: {r.task_events_error})" if r.task_events_error else "")
            )
            if r.mode == "distributed"
            else "n/a"
        ),
    )
    return md_table(["measure", *(r.label for r in reports)], rows)


def _inbox_summary(r: Report) -> str:
    waits = [s.inbox.waiting for s in r.samples]
    ages = [s.inbox.oldest_waiting_age for s in r.samples]
    before = [s for s in r.samples if s.t <= r.load_end_at + 1] or r.samples[:1]
    return (
        f"max {max(waits)}, oldest {max(ages):.0f}s; at load end "
        f"{before[-1].inbox.waiting}; at end {waits[-1]}"
    )


def burst_table(reports: list[Report]) -> str:
    rows = []
    for r in reports:
        if r.error and not r.send.accepted:
            rows.append([r.label, r.store, f"FAILED: {r.error[:200]}", *["-"] * 8])
            continue
        n = len(r.stored_at)
        stored = sorted(r.stored_at)
        rate = (n - 1) / (stored[-1] - stored[0]) if n > 1 and stored[-1] > stored[0] else math.nan
        e2e = (
            n / (stored[-1] - r.first_accepted_at)
            if n and stored[-1] > r.first_accepted_at
            else math.nan
        )
        inbox_max = max((s.inbox.waiting for s in r.samples), default=0)
        broker = [sum((s.broker or {}).values()) for s in r.samples if s.broker is not None]
        vec_left = r.derive_at_drain.get("vector", (0, 0.0))[0]
        graph_left = r.derive_at_drain.get("graph", (0, 0.0))[0]
        rows.append(
            [
                r.label,
                r.store,
                f"{len(r.send.accepted)}",
                f"{len(r.send.accepted) / max(r.send.seconds, 1e-9):.0f}",
                f"{rate:.1f}",
                f"{e2e:.1f}",
                f"{r.drain_s:.1f}" if not r.catch_up.left else f"not drained: {r.catch_up.left}",
                f"{inbox_max}" + (f" / {max(broker)}" if broker else ""),
                f"{vec_left} / {graph_left}",
                secs(r.stored_lags),
                f"{fmt_load(r.load_before)} / {fmt_load(r.load_after)}",
            ]
        )
    return md_table(
        [
            "run",
            "store",
            "accepted",
            "accept ev/s",
            "stored ev/s (backlog)",
            "stored ev/s (first accept -> last stored)",
            "inbox drained after last answer (s)",
            "max inbox waiting / max broker msgs",
            "derive rows left vector / graph",
            "accept -> stored p50/p95 s",
            "load avg before / after",
        ],
        rows,
    )


def bulk_table(reports: list[Report]) -> str:
    rows = []
    for r in reports:
        b = r.bulk
        if b is None:
            rows.append([r.label, f"FAILED: {r.error[:200]}", *["-"] * 11])
            continue
        hook = b.hook
        non201 = {k: v for k, v in hook.statuses.items() if k != 201}
        errs = sum(hook.conn_errors.values())
        p95 = bs.percentile(hook.accept_latencies, 95) * 1000 if hook.accept_latencies else math.nan
        gw = r.mem_end.get("gateway")
        sampled = [s.rss.get("gateway", 0.0) for s in r.samples]
        rows.append(
            [
                r.label,
                f"{b.events} ({b.file_mb:.0f} MB file, built in {b.build_s:.0f}s)",
                f"{b.import_s:.1f}" + (f" (exit {b.returncode})" if b.returncode else ""),
                f"{b.events / b.import_s:.0f}" if b.import_s == b.import_s else "-",
                f"{b.import_peak_mb:.0f}",
                f"{len(hook.accepted)} of {hook.events}",
                ms(hook.accept_latencies) + (" OK" if p95 < 50 else " ABOVE 50 ms"),
                (" ".join(f"{k}:{v}" for k, v in sorted(non201.items())) or "none")
                + (f"; connection errors {dict(hook.conn_errors)}" if errs else ""),
                secs(b.hook_stored_lags, True)
                + (f"; not stored {dict(b.hook_not_stored)}" if b.hook_not_stored else ""),
                (f"{max(sampled):.0f} / {gw[1]:.0f}" if gw and sampled else "-"),
                (
                    f"yes, {b.drained_after:.1f}s after the import"
                    if not b.drain_left
                    else f"NO: {b.drain_left}"
                ),
                ", ".join(f"{t} {n}" for t, (n, _) in b.derive_after.items()),
                f"{fmt_load(r.load_before)} / {fmt_load(r.load_after)}",
            ]
        )
    return md_table(
        [
            "run",
            "observations imported",
            "import wall s",
            "items/s",
            "`engram import` peak RSS MB",
            "hook accepted",
            "hook accept p50/p95/p99 ms (max)",
            "hook non-201",
            "hook accept -> stored p50/p95/p99 s",
            "server RSS max sampled / VmHWM MB",
            "inbox drained",
            "derive_queue rows after",
            "load avg before / after",
        ],
        rows,
    )


def sigterm_table(reports: list[Report]) -> str:
    rows = []
    for r in reports:
        t = r.sigterm
        assert t is not None
        rows.append(
            [
                r.label,
                t.in_flight,
                f"{t.seconds:.2f}" + (" OK" if t.seconds < 5 else " ABOVE 5 s"),
                str(t.returncode),
                "YES" if t.killed else "no",
                "<br>".join(f"`{ln}`" for ln in t.log_lines) or "-",
            ]
        )
    return md_table(
        [
            "run",
            "in flight at SIGTERM",
            "SIGTERM -> exit (s)",
            "exit code",
            f"SIGKILL needed (> {SIGTERM_WAIT_S:g} s)",
            "server log after SIGTERM (last lines)",
        ],
        rows,
    )


def series_table(r: Report, rows: int = 16) -> str:
    if not r.samples:
        return "(no samples)"
    t0 = r.samples[0].t
    step = max(1, len(r.samples) // rows)
    picked = r.samples[::step]
    if picked[-1] is not r.samples[-1]:
        picked.append(r.samples[-1])
    table = []
    for s in picked:
        table.append(
            [
                f"{s.t - t0:.0f}",
                str(s.inbox.waiting),
                f"{s.inbox.oldest_waiting_age:.0f}",
                *(
                    f"{s.derive.get(t, (0, 0.0))[0]} / {s.derive.get(t, (0, 0.0))[1]:.0f}"
                    for t in TARGETS
                ),
                str(sum(s.broker.values())) if s.broker is not None else "-",
                str(round(sum(s.rss.values()))),
            ]
        )
    return md_table(
        [
            "t (s)",
            "inbox waiting",
            "oldest waiting (s)",
            *(f"derive {t}: rows / oldest s" for t in TARGETS),
            "broker msgs",
            "RSS all MB",
        ],
        table,
    )


def print_report(
    reports: list[Report],
    args: argparse.Namespace,
    command: str,
    origin: str,
    revision: str,
    started: tuple[float, float, float],
    seconds: float,
) -> None:
    print("# Engram load benchmark\n")
    print(f"- command: `{command}`")
    for line in bs.machine_lines():
        print(f"- {line}")
    print(
        f"- cores: {os.cpu_count()}; load average at start {fmt_load(started)}, at end "
        f"{fmt_load(os.getloadavg())}; wall time {seconds / 60:.1f} min"
    )
    print(
        f"- engram command: `{shlex.join(shlex.split(args.engram))}` in `{args.cwd}` "
        f"(PYTHONPATH `{args.pythonpath or args.cwd}`); git {revision}"
    )
    print(f"- modules imported from: {origin}")
    print(
        f"- clients {args.clients}, seed {args.seed}, warm-up {args.warmup} events, probes "
        f"{args.probe_rate:g}/s polled every {args.probe_poll:g}s, samples every "
        f"{args.sample_interval:g}s, Redis DB {args.redis_db}"
        + (f", extra env {args.env}" if args.env else "")
    )
    if args.mode != "embedded":
        print(
            "- distributed topology: "
            + (
                "split: per worker count N, N x `engram worker -Q capture,maintenance -c 2 -n "
                f"capture{{i}}@%h` + 1 x `engram worker -Q embed,graph -c {args.derived_concurrency} -n "
                "derived@%h` (pool "
                "--pool auto), + `engram beat`"
                if args.topology == "split"
                else f"default: N x `engram worker --concurrency {args.concurrency}` (all queues), + "
                "`engram beat`"
            )
        )
    sustained_reports = [r for r in reports if r.phase == "sustained"]
    bursts = [r for r in reports if r.phase == "burst"]
    bulks = [r for r in reports if r.phase == "bulk"]
    if sustained_reports:
        print("\n## Sustained load\n")
        print(sustained_table(sustained_reports))
        print(
            "\nLags in seconds from the gateway's accepted_at; searchable = stored and the "
            "document's derive_queue row for that target gone (polled, so up to "
            f"{args.probe_poll:g}s late)."
        )
    if bursts:
        print("\n## Burst throughput\n")
        print(burst_table(bursts))
        print(
            "\nstored ev/s (backlog) = (n - 1) / (last stored_at - first stored_at) over the "
            "burst's events; derive rows left = derive_queue rows when the inbox was empty."
        )
    if bulks:
        print("\n## Bulk import with a hook posting\n")
        print(bulk_table(bulks))
        print(
            f"\nThe hook posts one event at a time at {args.hook_rate:g}/s on its own "
            "connection from 2 s before the import until it exits; target accept p95 < 50 ms."
        )
    terms = [r for r in reports if r.sigterm is not None]
    if terms:
        print("\n## SIGTERM while work is in flight (embedded server)\n")
        print(sigterm_table(terms))
    if reports:
        print("\n## Memory (RSS per process, MB; a worker includes its pool children)\n")
        print(mem_table(reports))
    for r in [*sustained_reports, *bulks]:
        print(f"\n### Over time: {r.label}\n")
        print(series_table(r))
    print("\n## Notes\n")
    for r in reports:
        for note in r.notes:
            print(f"- [{r.label}] {note}")
        if r.error:
            print(f"- [{r.label}] ERROR: {r.error}")
        if r.send.failures:
            print(f"- [{r.label}] failed requests: {r.send.failures}")
        if r.log_notes:
            print(f"- [{r.label}] process logs:")
            for note in r.log_notes:
                print(f"    {note}" if note.startswith("    ") else f"  - {note}")
    if KEPT_LOGS:
        print(f"- logs kept in {', '.join(map(str, KEPT_LOGS))}")


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Progress goes to stderr, the Markdown report to stdout.",
    )
    p.add_argument("--mode", choices=("embedded", "distributed", "both"), default="both")
    p.add_argument(
        "--phases",
        default="sustained,burst",
        help="comma-separated: sustained, burst, bulk (embedded only; default sustained,burst)",
    )
    p.add_argument("--rate", type=float, default=20.0, help="events/s, sustained (default 20)")
    p.add_argument(
        "--duration", type=float, default=300.0, help="seconds of sustained load (default 300)"
    )
    p.add_argument(
        "--sustained-workers",
        type=int,
        default=2,
        help="engram worker processes in the distributed sustained run (default 2)",
    )
    p.add_argument(
        "--burst", type=int, default=2000, help="events per throughput burst (default 2000)"
    )
    p.add_argument(
        "--workers", default="1,2,4", help="worker counts of the distributed bursts (default 1,2,4)"
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="--concurrency of each engram worker, topology default (default 1)",
    )
    p.add_argument(
        "--topology",
        choices=("default", "split"),
        default="default",
        help="distributed pools: default = N x `engram worker --concurrency C` on "
        "every queue; split = per worker count one `engram worker -Q "
        "capture,maintenance -c 2 -n capture{i}@%%h`, plus ONE `engram worker "
        "-Q embed,graph -c N -n derived@%%h` for the run (docs/operations.md)",
    )
    p.add_argument(
        "--derived-concurrency",
        type=int,
        default=1,
        help="threads of the split topology's embed,graph pool (default 1, as "
        "docs/operations.md sizes it on 2 cores)",
    )
    p.add_argument(
        "--sigterm",
        action="store_true",
        help="embedded sustained/bulk: at the end, SIGTERM the server while it has "
        "derived work and time its exit (target < 5 s)",
    )
    p.add_argument(
        "--bulk-events",
        type=int,
        default=100000,
        help="observations in the bulk phase's export document (default 100000)",
    )
    p.add_argument(
        "--hook-rate",
        type=float,
        default=5.0,
        help="events/s of the hook client during the bulk import (default 5)",
    )
    p.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    p.add_argument(
        "--catch-up-timeout",
        type=float,
        default=600.0,
        help="longest wait for the backlog after the load (default 600 s)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=20,
        help="events sent and fully derived before measuring (default 20)",
    )
    p.add_argument(
        "--probe-rate",
        type=float,
        default=1.0,
        help="accepted events per second followed to searchable (default 1)",
    )
    p.add_argument(
        "--probe-poll",
        type=float,
        default=0.25,
        help="seconds between derive_queue polls for probes (default 0.25)",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        default=2.0,
        help="seconds between samples of queues, broker and RSS (default 2)",
    )
    p.add_argument(
        "--livez-interval",
        type=float,
        default=0.2,
        help="seconds between /v1/livez probes (default 0.2)",
    )
    p.add_argument(
        "--retry-delay",
        type=float,
        default=2.0,
        help="seconds before a 503 or a failed request is resent (default 2)",
    )
    p.add_argument("--seed", type=int, default=11, help="corpus seed (default 11)")
    p.add_argument(
        "--engram",
        default=DEFAULT_ENGRAM,
        help="the engram command, split with shlex: an executable or e.g. "
        '"$PWD/.venv/bin/python -m engram.entry" for a checkout before '
        "cli/ (engram.cli.entry since) "
        f"(default {DEFAULT_ENGRAM})",
    )
    p.add_argument(
        "--cwd",
        type=Path,
        default=REPO,
        help="working directory of every process (default the repository)",
    )
    p.add_argument("--pythonpath", default="", help="PYTHONPATH of every process (default: --cwd)")
    p.add_argument(
        "--chroma",
        default=str(Path(sys.executable).parent / "chroma"),
        help="the chroma executable (default beside this Python)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for every engram process (repeatable)",
    )
    p.add_argument(
        "--pg",
        action="store_true",
        help="distributed mode stores in a throwaway PostgreSQL database "
        "(default: SQLite in the data dir)",
    )
    p.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"admin URL to create/drop it (default {DEFAULT_PG_URL})",
    )
    p.add_argument("--redis-port", type=int, default=6379)
    p.add_argument(
        "--redis-db",
        type=int,
        default=12,
        help="dedicated Redis DB, flushed before and after (default 12)",
    )
    p.add_argument(
        "--no-task-events",
        dest="task_events",
        action="store_false",
        help="do not count observe results from the workers' task events",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=bs.DEFAULT_DATA_DIR,
        help="folder with longmemeval/ for prose (default ../shared/data)",
    )
    p.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the process logs (the report names the folder)",
    )
    args = p.parse_args(argv)
    args.phases = [x.strip() for x in args.phases.split(",") if x.strip()]
    if not set(args.phases) <= {"sustained", "burst", "bulk"}:
        p.error("--phases takes sustained, burst and/or bulk")
    args.workers = [int(x) for x in args.workers.split(",") if x.strip()]
    args.pythonpath = args.pythonpath or str(args.cwd)
    for item in args.env:
        if "=" not in item:
            p.error(f"--env wants KEY=VALUE, not {item!r}")
    from urllib.parse import urlsplit

    if urlsplit(args.pg_url).hostname not in ("127.0.0.1", "localhost", None):
        p.error("--pg-url must point at 127.0.0.1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join(
        [sys.executable, *(sys.argv if argv is None else ["bench_load.py", *argv])]
    )
    bs.log = log  # bench_spine's process helpers report through our log (stderr)
    target = Target(
        shlex.split(args.engram),
        args.cwd,
        args.pythonpath,
        args.chroma,
        dict(item.split("=", 1) for item in args.env),
    )

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started, watch = os.getloadavg(), time.monotonic()
    origin = engram_origin(target)
    revision = git_revision(args.cwd)
    log(f"engram modules from: {origin}")
    log(f"git {revision}; load average {fmt_load(started)}; cores {os.cpu_count()}")
    modes = ["embedded", "distributed"] if args.mode == "both" else [args.mode]
    reports: list[Report] = []
    try:
        log("reading the realistic corpus sources")
        corpus = bs.RealisticCorpus(args.data_dir)
        log(f"corpus: {corpus.describe()}")
        plan: list[tuple[str, str, int]] = []
        for phase in args.phases:
            for mode in modes:
                if phase == "bulk" and mode != "embedded":
                    log("bulk runs embedded only: skipped in distributed mode")
                    continue
                counts = (
                    [1]
                    if mode == "embedded"
                    else ([args.sustained_workers] if phase == "sustained" else args.workers)
                )
                plan += [(phase, mode, n) for n in counts]
        for i, (phase, mode, n) in enumerate(plan):
            log(
                f"=== run {i + 1}/{len(plan)}: {phase}, {mode}"
                + (f", {n} workers" if mode == "distributed" else "")
            )
            reports.append(run_phase(phase, mode, n, args, target, corpus, args.seed * 100 + i))
    except KeyboardInterrupt:
        log("interrupted: stopping every process started")
    finally:
        bs.stop_all()
        for admin_url, name in list(PG_DATABASES):
            drop_pg_database(admin_url, name)
        for root in TEMP_DIRS:
            shutil.rmtree(root, ignore_errors=True)
        if "distributed" in modes:
            flush_redis(args.redis_port, args.redis_db)
    print_report(reports, args, command, origin, revision, started, time.monotonic() - watch)
    return 1 if any(r.error for r in reports) or len(reports) == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
