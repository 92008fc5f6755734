#!/usr/bin/env python3
"""Benchmark: the capture-to-recall spine of Engram, end to end, against real processes.

Standalone measurement script, not a pytest test. For each mode it starts the real processes
(`engram serve`, and in distributed mode two `engram worker --concurrency 1` and one
`engram beat` on Redis), each run in its own temporary data and config dirs, and measures:

  1. POST /v1/observe latency (client wall time per request, sequential, one keep-alive
     connection) and sustained accept throughput with --threads concurrent clients;
  2. time from accept to searchable (unique token in the payload, polled with POST /v1/search
     mode "bm25"), idle and under load; the time for the stream to drain (GET /v1/capture counts
     pending+processing+retrying reach 0) and the processing throughput (events stored per s);
  3. BM25 search latency, project-scoped 2-5 word code-ish queries, at each corpus --sizes
     (the corpus is loaded through POST /v1/observe, or POST /v1/import when that would not fit
     the time budget: --load says which, the output names the one used);
  4. resident memory (VmRSS, VmHWM from /proc) of the gateway, and in distributed mode of the
     workers (with their pool children) and beat.

Payloads have the shape of Claude Code PostToolUse hooks (Bash with output, Edit, Read), 200 B to
5 KB, spread over a few projects with sessions of ~40 events. Only 127.0.0.1 is contacted. All
processes are stopped (SIGTERM, then SIGKILL of their process group) and the temp dirs removed in
all cases, including Ctrl-C; distributed mode uses Redis DB --redis-db (flushed before and after).

  .venv/bin/python tests/benchmarks/bench_spine.py --sizes 10000,50000 --observe-count 2000 \\
      --mode both
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import math
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import sqlite3
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
ENGRAM = str(VENV_BIN / "engram")
HOST = "127.0.0.1"
SECRET = "bench-" + "x" * 40
TOKEN_PROJECT = "latency-probe"
IMPORT_CHUNK = 1000            # observations per POST /v1/import (body limit is 4 MB)
STOP_TIMEOUT_S = 15
STARTUP_TIMEOUT_S = 90
DRAIN_TIMEOUT_S = 900
SEARCHABLE_TIMEOUT_S = 120
SEARCH_POLL_S = 0.005          # idle accept->searchable poll interval
TRACKER_POLL_S = 0.02          # under-load tracker: pause between polls
INBOX_FULL_BACKOFF_S = 0.05    # a 503 inbox_full is resent after this pause, like a spool


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------
# Shared helpers: timing and percentiles
# --------------------------------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) of unsorted values; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass
class Dist:
    """Summary of a list of durations, in milliseconds."""
    n: int
    p50: float
    p95: float
    p99: float
    max: float
    mean: float

    @classmethod
    def of(cls, seconds: list[float]) -> Dist:
        ms = [s * 1000.0 for s in seconds]
        return cls(len(ms), percentile(ms, 50), percentile(ms, 95), percentile(ms, 99),
                   max(ms) if ms else math.nan, sum(ms) / len(ms) if ms else math.nan)

    def short(self, with_p99: bool = True) -> str:
        if not self.n:
            return "n/a"
        p99 = f"/{self.p99:.1f}" if with_p99 else ""
        return f"{self.p50:.1f}/{self.p95:.1f}{p99}"

    def line(self) -> str:
        return (f"n={self.n} p50={self.p50:.2f} p95={self.p95:.2f} p99={self.p99:.2f} "
                f"max={self.max:.2f} mean={self.mean:.2f} ms")


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


# --------------------------------------------------------------------------------------------
# Machine description
# --------------------------------------------------------------------------------------------

def machine_lines() -> list[str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return [
        f"machine: nproc={os.cpu_count()} cpu={model!r} mem={mem} "
        f"kernel={platform.release()}",
        f"python:  {platform.python_version()} ({sys.executable})  sqlite {sqlite3.sqlite_version}",
    ]


# --------------------------------------------------------------------------------------------
# Processes: start, watch memory, stop
# --------------------------------------------------------------------------------------------

@dataclass
class Proc:
    role: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid


RUNNING: list[Proc] = []
TEMP_DIRS: list[Path] = []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def spawn(role: str, args: list[str], env: dict[str, str], log_dir: Path) -> Proc:
    log_path = log_dir / f"{role}.log"
    handle = open(log_path, "wb")  # noqa: SIM115 - closed by the child's exit; kept for logs
    popen = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                             start_new_session=True)  # own group: SIGKILL reaches pool children
    handle.close()
    proc = Proc(role, popen, log_path)
    RUNNING.append(proc)
    log(f"  started {role} pid {proc.pid}: {' '.join(shlex.quote(a) for a in args)}")
    return proc


def stop(proc: Proc) -> None:
    if proc.popen.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log(f"  {proc.role} pid {proc.pid} ignored SIGTERM for {STOP_TIMEOUT_S}s: SIGKILL")
        except ProcessLookupError:
            pass
    with suppress(ProcessLookupError, PermissionError):  # what is left in its group (pool)
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.popen.poll() is None:
        proc.popen.wait(5)
    if proc in RUNNING:
        RUNNING.remove(proc)


def stop_all() -> None:
    for proc in list(reversed(RUNNING)):
        stop(proc)


def children_of(pid: int) -> list[int]:
    kids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry.name))
    return kids


def proc_mem_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of one process, in kB; zeros when it is gone."""
    rss = hwm = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def tree_mem_mb(pid: int) -> tuple[float, float, int]:
    """(RSS MB, HWM MB, process count) of a process and its direct children."""
    pids = [pid, *children_of(pid)]
    rss = hwm = 0
    for one in pids:
        r, h = proc_mem_kb(one)
        rss, hwm = rss + r, hwm + h
    return rss / 1024, hwm / 1024, len(pids)


def log_problems(proc: Proc, limit: int = 6) -> tuple[int, int, list[str]]:
    """(ERROR lines, tracebacks, first few such lines) in a process log."""
    try:
        text = proc.log_path.read_text(errors="replace")
    except OSError:
        return 0, 0, []
    errors = [ln for ln in text.splitlines() if " ERROR " in ln or " CRITICAL " in ln]
    warnings = [ln for ln in text.splitlines() if " WARNING " in ln
                and "No hostname was supplied" not in ln]
    tracebacks = text.count("Traceback (most recent call last)")
    return len(errors), tracebacks, (errors + warnings)[:limit]


# --------------------------------------------------------------------------------------------
# HTTP: one keep-alive connection per client thread
# --------------------------------------------------------------------------------------------

@dataclass
class Reply:
    status: int
    data: Any
    seconds: float


class Api:
    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self.port, self.timeout = port, timeout
        self.conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        self.headers = {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json",
                        "Accept": "application/json"}

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Reply:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        for attempt in (1, 2):
            start = time.perf_counter()
            try:
                self.conn.request(method, path, body=data, headers=self.headers)
                resp = self.conn.getresponse()
                payload = resp.read()
                seconds = time.perf_counter() - start
                break
            except (http.client.HTTPException, ConnectionError, TimeoutError):
                self.conn.close()  # server closed the keep-alive connection: reconnect once
                self.conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
                if attempt == 2:
                    raise
        try:
            parsed = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload.decode(errors="replace")
        return Reply(resp.status, parsed, seconds)

    def close(self) -> None:
        self.conn.close()


# --------------------------------------------------------------------------------------------
# Realistic payloads: Claude Code PostToolUse (Bash, Edit, Read)
# --------------------------------------------------------------------------------------------

PROJECTS = [("webshop", 0.45), ("billing-api", 0.25), ("infra", 0.15), ("mobile-app", 0.10),
            ("docs-site", 0.05)]
MODULES = ["auth", "session", "billing", "invoice", "cart", "checkout", "catalog", "cache", "user",
           "payment", "webhook", "search", "api", "worker", "queue", "scheduler", "migrations",
           "config", "login", "orders", "shipping", "discount", "ratelimit", "middleware"]
FUNCS = ["login", "logout", "refresh_token", "get_user", "create_invoice", "apply_discount",
         "add_to_cart", "checkout", "verify_signature", "list_products", "get_cached", "set_ttl",
         "enqueue", "retry_with_backoff", "parse_config", "connect_db", "send_email",
         "compute_total", "round_amount", "validate_card", "handle_webhook", "rebuild_index"]
ERRORS = ["KeyError", "ValueError", "TimeoutError", "ConnectionError", "IntegrityError",
          "AttributeError", "TypeError", "PermissionError", "AssertionError"]
KEYS = ["user_id", "session_id", "token", "cart_id", "ttl", "invoice_id", "email", "amount",
        "currency", "signature", "redis_url", "database_url"]
SERVICES = ["redis", "postgres", "api", "worker", "nginx", "celery", "rabbitmq"]
WORDS = ["cache", "ttl", "expired", "redis", "connection", "refused", "retry", "backoff", "login",
         "failing", "test", "session", "cookie", "token", "refresh", "invoice", "total", "rounding",
         "discount", "checkout", "cart", "payment", "gateway", "timeout", "webhook", "signature",
         "verification", "migration", "column", "index", "postgres", "query", "slow", "rate",
         "limit", "middleware", "config", "env", "variable", "missing", "docker", "compose",
         "container", "kubernetes", "pod", "crashloop", "mypy", "optional", "ruff", "unused",
         "import", "fixture", "database", "rollback", "deadlock", "serializer", "json", "schema",
         "validation", "email", "queue", "worker", "celery", "schedule", "cron"]
QUERIES = [
    "fix failing login test", "KeyError user_id session", "redis cache ttl",
    "invoice total rounding", "docker compose postgres connection refused",
    "mypy optional email", "refresh token expired", "webhook signature verification",
    "migration add column index", "checkout apply discount", "TimeoutError payment gateway",
    "pytest fixture database rollback", "rate limit middleware", "kubectl pod crashloop",
    "ruff unused import", "cart session cookie", "IntegrityError duplicate key",
    "rebuild search index", "celery retry backoff", "config env variable missing",
    "slow query postgres", "send email queue worker", "validate card payment",
    "deadlock orders table", "json schema validation error",
]


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


class EventFactory:
    """Deterministic stream of observe bodies. One per client thread (not thread-safe)."""

    def __init__(self, seed: int, prefix: str) -> None:
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.n = 0
        self.session: dict[str, str] = {}
        self.left_in_session = 0

    # -- building blocks ----------------------------------------------------------------------
    def _pick(self, items: list[str]) -> str:
        return self.rng.choice(items)

    def _path(self, project: str) -> str:
        return f"/home/dev/src/{project}/src/{self._pick(MODULES)}/{self._pick(MODULES)}.py"

    def _code_line(self) -> str:
        r = self.rng
        templates = [
            lambda: f"def {self._pick(FUNCS)}(self, {self._pick(KEYS)}):",
            lambda: f"    return self.{self._pick(MODULES)}.get({self._pick(KEYS)!r})",
            lambda: f"    if {self._pick(KEYS)} is None:",
            lambda: f"        raise {self._pick(ERRORS)}(\"missing {self._pick(KEYS)}\")",
            lambda: f"import {self._pick(MODULES)}",
            lambda: f"{self._pick(KEYS).upper()} = {r.randint(1, 3600)}",
            lambda: f"    logger.info(\"{' '.join(r.sample(WORDS, 4))}\")",
            lambda: f"    # {' '.join(r.sample(WORDS, r.randint(3, 8)))}",
            lambda: f"    {self._pick(KEYS)} = await {self._pick(FUNCS)}({self._pick(KEYS)})",
        ]
        return r.choice(templates)()

    def _log_line(self) -> str:
        r = self.rng
        templates = [
            lambda: f"FAILED tests/test_{self._pick(MODULES)}.py::test_{self._pick(FUNCS)} - "
                    f"{self._pick(ERRORS)}: '{self._pick(KEYS)}'",
            lambda: f"tests/test_{self._pick(MODULES)}.py::test_{self._pick(FUNCS)} PASSED",
            lambda: f"{self._pick(ERRORS)}: {' '.join(r.sample(WORDS, 5))}",
            lambda: f"2025-06-{r.randint(10, 28)} 12:{r.randint(10, 59)}:{r.randint(10, 59)} "
                    f"INFO {self._pick(MODULES)}: {' '.join(r.sample(WORDS, 6))}",
            lambda: f"src/{self._pick(MODULES)}/{self._pick(MODULES)}.py:{r.randint(1, 400)}: "
                    f"error: {' '.join(r.sample(WORDS, 4))}",
            lambda: f"  File \"src/{self._pick(MODULES)}.py\", line {r.randint(1, 500)}, "
                    f"in {self._pick(FUNCS)}",
        ]
        return r.choice(templates)()

    def _fill(self, make_line: Callable[[], str], size: int) -> str:
        lines, total = [], 0
        while total < size:
            line = make_line()
            lines.append(line)
            total += len(line) + 1
        return "\n".join(lines)

    # -- tools --------------------------------------------------------------------------------
    def _bash(self, project: str, size: int, token: str | None) -> tuple[dict, Any]:
        r = self.rng
        commands = [
            f"pytest tests/test_{self._pick(MODULES)}.py -q",
            f"pytest tests/ -k {self._pick(FUNCS)} -x",
            f"npm test -- {self._pick(MODULES)}", "git status", "git diff --stat",
            f"docker compose logs {self._pick(SERVICES)} --tail 50",
            f"mypy src/{self._pick(MODULES)}", "ruff check src/",
            f"grep -rn \"{self._pick(FUNCS)}\" src/",
            f"kubectl get pods -n {self._pick(MODULES)}",
            f"redis-cli ttl cache:{self._pick(MODULES)}:{self._pick(KEYS)}",
            f"psql -c 'select count(*) from {self._pick(MODULES)}'",
        ]
        command = r.choice(commands)
        if token:
            command = f"pytest tests/test_{self._pick(MODULES)}.py -k {token}"
        failed = r.random() < 0.3
        stdout = self._fill(self._log_line, size)
        tail = (f"\n{r.randint(1, 4)} failed, {r.randint(5, 80)} passed in {r.random() * 9:.2f}s"
                if failed else f"\n{r.randint(5, 80)} passed in {r.random() * 9:.2f}s")
        return ({"command": command, "description": " ".join(r.sample(WORDS, 3)).capitalize()},
                {"stdout": stdout + tail, "stderr": "", "interrupted": False, "isImage": False})

    def _edit(self, project: str, size: int) -> tuple[dict, Any]:
        path = self._path(project)
        old, new = self._code_line(), self._code_line()
        original = self._fill(self._code_line, size)
        return ({"file_path": path, "old_string": old, "new_string": new, "replace_all": False},
                {"filePath": path, "oldString": old, "newString": new, "originalFile": original,
                 "structuredPatch": [{"oldStart": 42, "oldLines": 1, "newStart": 42,
                                      "newLines": 1, "lines": [f"-{old}", f"+{new}"]}],
                 "userModified": False, "replaceAll": False})

    def _read(self, project: str, size: int) -> tuple[dict, Any]:
        path = self._path(project)
        content = self._fill(self._code_line, size)
        lines = content.count("\n") + 1
        return ({"file_path": path},
                {"type": "text", "file": {"filePath": path, "content": content,
                                          "numLines": lines, "startLine": 1,
                                          "totalLines": lines + self.rng.randint(0, 300)}})

    # -- events -------------------------------------------------------------------------------
    def _next_session(self) -> None:
        projects, weights = zip(*PROJECTS, strict=True)
        project = self.rng.choices(projects, weights)[0]
        sid = f"{self.prefix}-s{self.n}-{self.rng.randrange(16 ** 8):08x}"
        self.session = {"sessionId": sid, "project": project}
        self.left_in_session = self.rng.randint(20, 60)

    def next(self, token: str | None = None) -> dict[str, Any]:
        """One observe body; with ``token`` a Bash event in its own session of TOKEN_PROJECT."""
        if self.left_in_session <= 0:
            self._next_session()
        self.left_in_session -= 1
        self.n += 1
        size = _log_uniform(self.rng, 200, 5000)  # whole body; minus the envelope below
        if token:
            session = {"sessionId": f"{self.prefix}-probe-{self.n}", "project": TOKEN_PROJECT}
            tool, (tool_input, tool_output) = "Bash", self._bash(TOKEN_PROJECT, size - 250,
                                                                 token)
        else:
            session = self.session
            tool = self.rng.choices(["Bash", "Edit", "Read"], [0.45, 0.25, 0.30])[0]
            project = session["project"]
            tool_input, tool_output = (self._bash(project, size - 250, None) if tool == "Bash"
                                       else self._edit(project, size - 500) if tool == "Edit"
                                       else self._read(project, size - 300))
        return {
            "eventId": f"toolu_{self.prefix}_{self.n:07d}", **session, "host": "claude-code",
            "hookType": "PostToolUse", "toolName": tool, "toolInput": tool_input,
            "toolOutput": tool_output, "timestamp": time.time(),
        }


def new_token(rng: random.Random) -> str:
    return "zqprobe" + "".join(rng.choice(string.ascii_lowercase) for _ in range(12))


# --------------------------------------------------------------------------------------------
# The stack under test
# --------------------------------------------------------------------------------------------

@dataclass
class Stack:
    mode: str
    port: int
    root: Path
    serve: Proc
    workers: list[Proc] = field(default_factory=list)
    beat: Proc | None = None

    @property
    def procs(self) -> list[Proc]:
        return [self.serve, *self.workers, *([self.beat] if self.beat else [])]

    def check_alive(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.role} (pid {proc.pid}) exited with "
                                   f"{proc.popen.returncode}; see the log tail:\n"
                                   + tail(proc.log_path))


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def base_env(root: Path, broker: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({
        "ENGRAM_SECRET": SECRET,
        "ENGRAM_DATA_DIR": str(root / "data"), "ENGRAM_CONFIG_DIR": str(root / "config"),
        # A stale editable install can make `api` resolve as a namespace package; putting the
        # repository first on the path runs the checked-out code whatever the install says.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    })
    if broker:
        env["ENGRAM_BROKER_URL"] = broker
    return env


def dir_args(root: Path) -> list[str]:
    return ["--data-dir", str(root / "data"), "--config-dir", str(root / "config")]


def wait_until(what: str, check: Callable[[], bool], stack: Stack, timeout: float) -> float:
    watch = Stopwatch()
    while watch.elapsed() < timeout:
        stack.check_alive()
        try:
            if check():
                return watch.elapsed()
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


def start_stack(mode: str, args: argparse.Namespace) -> Stack:
    root = Path(tempfile.mkdtemp(prefix=f"engram-bench-{mode}-"))
    TEMP_DIRS.append(root)
    log_dir = root / "logs"
    log_dir.mkdir()
    broker = f"redis://127.0.0.1:{args.redis_port}/{args.redis_db}" if mode == "distributed" \
        else None
    env = base_env(root, broker)
    port = free_port()
    serve = spawn("serve", [ENGRAM, "serve", "--port", str(port), *dir_args(root)], env, log_dir)
    stack = Stack(mode, port, root, serve)
    probe = Api(port, timeout=5)
    up = wait_until("GET /v1/livez", lambda: probe.call("GET", "/v1/livez").status == 200,
                    stack, STARTUP_TIMEOUT_S)
    log(f"  gateway answers /v1/livez after {up:.1f}s")
    if mode == "distributed":
        for i in (1, 2):
            stack.workers.append(spawn(f"worker{i}", [
                ENGRAM, "worker", "--concurrency", "1", "--name", f"bench{i}@%h",
                *dir_args(root)], env, log_dir))
        stack.beat = spawn("beat", [ENGRAM, "beat", *dir_args(root)], env, log_dir)

        def two_workers() -> bool:
            status = probe.call("GET", "/v1/status").data or {}
            return int(status.get("workers", {}).get("alive", 0)) >= 2

        ready = wait_until("2 workers answering in /v1/status", two_workers, stack,
                           STARTUP_TIMEOUT_S)
        log(f"  two workers answer ping after {ready:.1f}s more")
    probe.close()
    return stack


def stop_stack(stack: Stack) -> None:
    log(f"stopping {stack.mode} processes")
    for proc in reversed(stack.procs):
        stop(proc)


def flush_redis(port: int, db: int) -> bool:
    """FLUSHDB on our dedicated Redis DB (and nothing else); False when Redis is unreachable."""
    try:
        import redis  # installed with celery[redis]

        client = redis.Redis(host=HOST, port=port, db=db, socket_timeout=3)
        client.flushdb()
        client.close()
        return True
    except Exception as exc:  # noqa: BLE001 - report and skip the distributed mode
        log(f"redis at {HOST}:{port}/{db} unusable: {exc}")
        return False


def memory_snapshot(stack: Stack) -> dict[str, tuple[float, float, int]]:
    """Role -> (RSS MB, peak RSS MB, processes); workers include their pool children."""
    snap = {"serve": tree_mem_mb(stack.serve.pid)}
    if stack.workers:
        totals = [tree_mem_mb(w.pid) for w in stack.workers]
        snap["workers"] = (sum(t[0] for t in totals), sum(t[1] for t in totals),
                           sum(t[2] for t in totals))
    if stack.beat:
        snap["beat"] = tree_mem_mb(stack.beat.pid)
    return snap


def fmt_mem(snap: dict[str, tuple[float, float, int]]) -> str:
    return ", ".join(f"{role} {rss:.0f} MB (peak {hwm:.0f}, {n} proc)"
                     for role, (rss, hwm, n) in snap.items())


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------

@dataclass
class SendResult:
    accepted: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    inbox_full_retries: int = 0
    failures: list[str] = field(default_factory=list)
    body_bytes: list[int] = field(default_factory=list)

    def merge(self, other: SendResult) -> None:
        self.accepted += other.accepted
        self.latencies += other.latencies
        self.statuses.update(other.statuses)
        self.inbox_full_retries += other.inbox_full_retries
        self.body_bytes += other.body_bytes
        self.failures += other.failures[: max(0, 5 - len(self.failures))]


def post_event(api: Api, body: dict[str, Any], result: SendResult) -> Reply:
    """POST one event; a 503 inbox_full is resent after a pause (what the hook spool does)."""
    raw = json.dumps(body).encode()
    result.body_bytes.append(len(raw))
    while True:
        reply = api.call("POST", "/v1/observe", raw=raw)
        result.statuses[reply.status] += 1
        if reply.status == 503 and isinstance(reply.data, dict) and reply.data.get("retryable"):
            result.inbox_full_retries += 1
            time.sleep(INBOX_FULL_BACKOFF_S)
            continue
        result.latencies.append(reply.seconds)
        if reply.status in (200, 201, 202):
            result.accepted += reply.status == 201
        elif len(result.failures) < 5:
            result.failures.append(f"HTTP {reply.status}: {str(reply.data)[:300]}")
        return reply


def send_sequential(port: int, factory: EventFactory, count: int) -> SendResult:
    api, result = Api(port), SendResult()
    watch = Stopwatch()
    for _ in range(count):
        post_event(api, factory.next(), result)
    result.seconds = watch.elapsed()
    api.close()
    return result


class SearchableTracker:
    """Under load: polls POST /v1/search for outstanding probe tokens (several per query, OR),
    records when each first shows up in a hit's text."""

    def __init__(self, port: int) -> None:
        self.api = Api(port)
        self.lock = threading.Lock()
        self.pending: dict[str, float] = {}
        self.delays: list[float] = []
        self.missing = 0
        self.errors = 0
        self.last_error = ""
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tracker", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def add(self, token: str, accepted_at: float) -> None:
        with self.lock:
            self.pending[token] = accepted_at

    def _run(self) -> None:
        while not (self.stopping.is_set() and not self.pending):
            with self.lock:
                batch = sorted(self.pending, key=self.pending.get)[:8]  # type: ignore[arg-type]
            if batch:
                try:
                    reply = self.api.call("POST", "/v1/search", {
                        "query": " ".join(batch), "project": TOKEN_PROJECT, "mode": "bm25",
                        "limit": 50})
                except (OSError, http.client.HTTPException) as exc:
                    self.errors += 1
                    self.last_error = repr(exc)
                    time.sleep(0.5)
                    continue
                seen = time.perf_counter()
                texts = " ".join(i.get("text", "") for i in (reply.data or {}).get("items", [])) \
                    if reply.status == 200 else ""
                with self.lock:
                    for token in batch:
                        if token in texts:
                            self.delays.append(seen - self.pending.pop(token))
                        elif seen - self.pending[token] > SEARCHABLE_TIMEOUT_S:
                            self.pending.pop(token)
                            self.missing += 1
            time.sleep(TRACKER_POLL_S)

    def finish(self) -> None:
        self.stopping.set()
        self.thread.join(SEARCHABLE_TIMEOUT_S + 30)
        self.api.close()


def send_concurrent(port: int, seed: int, prefix: str, count: int, threads: int,
                    tracker: SearchableTracker | None = None, probe_every: int = 50
                    ) -> SendResult:
    """``count`` events from ``threads`` clients, each on its own keep-alive connection."""
    results = [SendResult() for _ in range(threads)]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            api, factory = Api(port), EventFactory(seed * 1000 + i, f"{prefix}{i}")
            rng = random.Random(seed * 7 + i)
            for n in range(count // threads + (i < count % threads)):
                token = new_token(rng) if tracker and n % probe_every == probe_every // 2 \
                    else None
                reply = post_event(api, factory.next(token), results[i])
                if token and reply.status == 201:
                    tracker.add(token, time.perf_counter())  # type: ignore[union-attr]
            api.close()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    watch = Stopwatch()
    pool = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    total = SendResult(seconds=watch.elapsed())
    for r in results:
        total.merge(r)
    return total


def inbox_counts(api: Api) -> dict[str, int]:
    reply = api.call("GET", "/v1/capture?limit=1")
    if reply.status != 200:
        raise RuntimeError(f"GET /v1/capture answered {reply.status}: {reply.data}")
    return reply.data["counts"]


def wait_drained(stack: Stack, timeout: float = DRAIN_TIMEOUT_S) -> tuple[float, dict[str, int]]:
    """Seconds until pending+processing+retrying reach 0, and the final counts."""
    api, watch = Api(stack.port), Stopwatch()
    last_report = 0.0
    try:
        while True:
            stack.check_alive()
            counts = inbox_counts(api)
            waiting = counts["pending"] + counts["processing"] + counts["retrying"]
            if waiting == 0:
                return watch.elapsed(), counts
            if watch.elapsed() > timeout:
                raise RuntimeError(f"inbox not drained after {timeout:.0f}s: {counts}")
            if watch.elapsed() - last_report >= 10:
                last_report = watch.elapsed()
                log(f"    draining: {counts} after {watch.elapsed():.0f}s")
            time.sleep(0.1)
    finally:
        api.close()


def searchable_idle(port: int, samples: int, seed: int) -> tuple[list[float], int]:
    """Post one probe at a time on an idle system and poll search until it is found."""
    api, rng = Api(port), random.Random(seed)
    factory, result = EventFactory(seed, f"idle{seed}"), SendResult()
    delays, missing = [], 0
    for _ in range(samples):
        token = new_token(rng)
        reply = post_event(api, factory.next(token), result)
        accepted = time.perf_counter()
        if reply.status != 201:
            missing += 1
            continue
        while True:
            found = api.call("POST", "/v1/search", {"query": token, "project": TOKEN_PROJECT,
                                                    "mode": "bm25", "limit": 5})
            now = time.perf_counter()
            if found.status == 200 and any(token in i.get("text", "")
                                           for i in found.data.get("items", [])):
                delays.append(now - accepted)
                break
            if now - accepted > SEARCHABLE_TIMEOUT_S:
                missing += 1
                break
            time.sleep(SEARCH_POLL_S)
    api.close()
    return delays, missing


def search_latency(port: int, queries: int, seed: int) -> tuple[Dist, float, Counter]:
    """Sequential project-scoped BM25 searches; (latency, mean hits, statuses)."""
    api, rng = Api(port), random.Random(seed)
    projects, weights = zip(*PROJECTS, strict=True)
    for q in QUERIES[:10]:  # warm-up: page cache and statement cache
        api.call("POST", "/v1/search", {"query": q, "project": "webshop", "mode": "bm25"})
    times, hits, statuses = [], [], Counter[int]()
    for _ in range(queries):
        body = {"query": rng.choice(QUERIES), "project": rng.choices(projects, weights)[0],
                "mode": "bm25", "limit": 10}
        reply = api.call("POST", "/v1/search", body)
        statuses[reply.status] += 1
        times.append(reply.seconds)
        if reply.status == 200:
            hits.append(len(reply.data.get("items", [])))
    api.close()
    return Dist.of(times), (sum(hits) / len(hits) if hits else 0.0), statuses


def store_sizes(port: int) -> dict[str, int]:
    api = Api(port)
    try:
        reply = api.call("GET", "/v1/status")
        return reply.data.get("indexes", {}).get("keyword", {}) if reply.status == 200 else {}
    finally:
        api.close()


# --------------------------------------------------------------------------------------------
# Loading a corpus: through /v1/observe (real path) or /v1/import (bulk)
# --------------------------------------------------------------------------------------------

def export_observation(body: dict[str, Any]) -> dict[str, Any]:
    """An export-document observation for one observe body, compressed as a worker would."""
    from engram.compress import compress

    c = compress(body)
    event_id = body["eventId"]
    obs_id = "obs_" + hashlib.sha256(event_id.encode()).hexdigest()[:24]
    return {
        "id": obs_id, "eventId": event_id, "sessionId": body["sessionId"],
        "project": body["project"], "host": body["host"], "hookType": body["hookType"],
        "kind": c.kind, "toolName": body["toolName"], "title": c.title, "text": c.text,
        "filesRead": list(c.files_read), "filesModified": list(c.files_modified),
        "commands": list(c.commands), "errors": list(c.errors), "concepts": list(c.concepts),
        "createdAt": body["timestamp"], "storedAt": body["timestamp"],
    }


def load_by_import(port: int, count: int, seed: int, prefix: str) -> tuple[float, Counter]:
    api, factory, statuses = Api(port, timeout=600), EventFactory(seed, prefix), Counter[int]()
    watch, sent = Stopwatch(), 0
    while sent < count:
        chunk = [export_observation(factory.next()) for _ in range(min(IMPORT_CHUNK, count - sent))]
        document = {"format": "engram-export", "version": 1, "sessions": [],
                    "observations": chunk, "memories": []}
        reply = api.call("POST", "/v1/import", {"data": document, "strategy": "merge"})
        statuses[reply.status] += 1
        if reply.status != 200:
            raise RuntimeError(f"POST /v1/import answered {reply.status}: {str(reply.data)[:500]}")
        sent += len(chunk)
        if sent % (IMPORT_CHUNK * 10) == 0 or sent == count:
            log(f"    imported {sent}/{count} ({watch.elapsed():.0f}s)")
    api.close()
    return watch.elapsed(), statuses


# --------------------------------------------------------------------------------------------
# One mode, start to finish
# --------------------------------------------------------------------------------------------

@dataclass
class ModeReport:
    mode: str
    startup_s: float = 0.0
    seq: SendResult = field(default_factory=SendResult)
    burst: SendResult = field(default_factory=SendResult)
    burst_drain_s: float = 0.0
    burst_process_rate: float = 0.0
    idle_searchable: list[float] = field(default_factory=list)
    idle_missing: int = 0
    load_searchable: list[float] = field(default_factory=list)
    load_missing: int = 0
    loads: list[str] = field(default_factory=list)
    load_rates: list[float] = field(default_factory=list)
    search: dict[int, tuple[Dist, float, Counter]] = field(default_factory=dict)
    memory: dict[str, dict[str, tuple[float, float, int]]] = field(default_factory=dict)
    stored: dict[int, dict[str, int]] = field(default_factory=dict)
    dead: int = 0
    log_notes: list[str] = field(default_factory=list)
    error: str | None = None


def bring_to_size(stack: Stack, report: ModeReport, target: int, have: int,
                  args: argparse.Namespace, seed: int) -> int:
    """Add observations until ``target``; returns the new total. Picks observe or import."""
    missing = target - have
    if missing <= 0:
        return have
    rate = report.load_rates[-1] if report.load_rates else report.burst_process_rate
    estimate = missing / rate if rate > 0 else math.inf
    method = args.load
    if method == "auto":
        method = "observe" if estimate <= args.load_budget else "import"
    log(f"  loading {missing} observations to reach {target} via POST /v1/"
        f"{'observe' if method == 'observe' else 'import'} (estimated observe path: "
        f"{estimate:.0f}s at {rate:.0f} ev/s; budget {args.load_budget:.0f}s)")
    watch = Stopwatch()
    if method == "observe":
        sent = send_concurrent(stack.port, seed, f"load{target}-", missing, args.threads)
        drain, counts = wait_drained(stack)
        total = watch.elapsed()
        rate_now = sent.accepted / total if total else 0.0
        report.load_rates.append(rate_now)
        report.dead = counts.get("dead", 0)
        note = (f"observe: {sent.accepted} accepted in {sent.seconds:.1f}s "
                f"({sent.accepted / sent.seconds:.0f} ev/s accepted), drained {drain:.1f}s later; "
                f"{rate_now:.0f} ev/s stored end to end; 503 inbox_full retries "
                f"{sent.inbox_full_retries}; statuses {dict(sent.statuses)}")
        if sent.failures:
            note += f"; failures: {sent.failures}"
    else:
        seconds, statuses = load_by_import(stack.port, missing, seed, f"imp{target}-")
        note = (f"import: {missing} observations in {seconds:.1f}s "
                f"({missing / seconds:.0f}/s, chunks of {IMPORT_CHUNK}); statuses {dict(statuses)}")
    report.loads.append(f"to {target}: {note}")
    log(f"    {note}")
    return target


def run_mode(mode: str, args: argparse.Namespace) -> ModeReport:
    report = ModeReport(mode)
    log(f"=== {mode} mode ===")
    if mode == "distributed" and not flush_redis(args.redis_port, args.redis_db):
        report.error = "Redis unreachable: distributed mode skipped"
        return report
    watch = Stopwatch()
    try:
        stack = start_stack(mode, args)
    except RuntimeError as exc:
        report.error = f"could not start: {exc}"
        log(f"  FAILED: {report.error}")
        stop_all()
        return report
    report.startup_s = watch.elapsed()
    report.memory["idle"] = memory_snapshot(stack)
    log(f"  memory at start: {fmt_mem(report.memory['idle'])}")
    seed = 1 if mode == "embedded" else 2
    try:
        measure(stack, report, args, seed)
        total = int(store_sizes(stack.port).get("observations", 0))
        for size in args.sizes:
            total = bring_to_size(stack, report, size, total, args, seed * 100 + size)
            report.stored[size] = store_sizes(stack.port)
            log(f"  store: {report.stored[size]}")
            dist, hits, statuses = search_latency(stack.port, args.queries, seed + size)
            report.search[size] = (dist, hits, statuses)
            log(f"  search @ {size}: {dist.line()}; mean hits {hits:.1f}; statuses "
                f"{dict(statuses)}")
            report.memory[str(size)] = memory_snapshot(stack)
            log(f"  memory @ {size}: {fmt_mem(report.memory[str(size)])}")
    except Exception as exc:  # noqa: BLE001 - reported, then the other mode still runs
        report.error = f"{type(exc).__name__}: {exc}"
        for proc in stack.procs:
            if proc.popen.poll() is not None:
                report.error += (f"\n  {proc.role} (pid {proc.pid}) had exited with "
                                 f"{proc.popen.returncode}; its log ends:\n"
                                 + tail(proc.log_path, 40))
        log(f"  FAILED: {report.error}")
    finally:
        for proc in stack.procs:
            n_err, n_tb, lines = log_problems(proc)
            if n_err or n_tb or lines:
                report.log_notes.append(f"{proc.role}: {n_err} ERROR lines, {n_tb} tracebacks"
                                        + "".join(f"\n      {ln[:240]}" for ln in lines))
        stop_stack(stack)
        if args.keep_logs:
            log(f"  logs kept in {stack.root / 'logs'}")
            shutil.rmtree(stack.root / "data", ignore_errors=True)
            TEMP_DIRS.remove(stack.root)
        if mode == "distributed":
            flush_redis(args.redis_port, args.redis_db)
    return report


def measure(stack: Stack, report: ModeReport, args: argparse.Namespace, seed: int) -> None:
    """Latency, throughput, accept-to-searchable."""
    warm = send_sequential(stack.port, EventFactory(seed + 50, f"warm{seed}"), 50)
    log(f"  warm-up: 50 events, statuses {dict(warm.statuses)}")
    wait_drained(stack)

    log(f"  sequential observe x{args.observe_count} (one keep-alive connection)")
    report.seq = send_sequential(stack.port, EventFactory(seed, f"seq{seed}"), args.observe_count)
    log(f"    latency {Dist.of(report.seq.latencies).line()}; statuses "
        f"{dict(report.seq.statuses)}")
    drain, _ = wait_drained(stack)
    log(f"    drained {drain:.1f}s after the last request")

    log(f"  accept->searchable on an idle system x{args.probes}")
    report.idle_searchable, report.idle_missing = searchable_idle(stack.port, args.probes, seed)
    log(f"    {Dist.of(report.idle_searchable).line()}; not found {report.idle_missing}")

    burst_n = args.observe_count * 2
    log(f"  concurrent observe x{burst_n} with {args.threads} threads, 1 in 50 a probe")
    tracker = SearchableTracker(stack.port)
    tracker.start()
    watch = Stopwatch()
    report.burst = send_concurrent(stack.port, seed + 10, f"burst{seed}-", burst_n, args.threads,
                                   tracker)
    log(f"    {report.burst.accepted} accepted in {report.burst.seconds:.2f}s = "
        f"{report.burst.accepted / report.burst.seconds:.0f} ev/s; latency "
        f"{Dist.of(report.burst.latencies).line()}; statuses {dict(report.burst.statuses)}")
    report.burst_drain_s, counts = wait_drained(stack)
    end_to_end = watch.elapsed()
    report.burst_process_rate = report.burst.accepted / end_to_end
    report.dead = counts.get("dead", 0)
    tracker.finish()
    report.load_searchable, report.load_missing = tracker.delays, tracker.missing + len(
        tracker.pending)
    log(f"    drained {report.burst_drain_s:.1f}s after the last accept; processing "
        f"{report.burst_process_rate:.0f} ev/s end to end; dead letters {report.dead}")
    log(f"    accept->searchable under load {Dist.of(report.load_searchable).line()}; "
        f"not found {report.load_missing}; search errors {tracker.errors} {tracker.last_error}")


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

def print_table(reports: list[ModeReport], args: argparse.Namespace, command: str,
                total_s: float) -> None:
    print()
    print("=" * 100)
    print("Engram spine benchmark")
    for line in machine_lines():
        print(line)
    print(f"command: {command}")
    print(f"run:     {total_s:.0f}s total; threads={args.threads} probes={args.probes} "
          f"queries={args.queries}; search limit 10, mode bm25, project-scoped")
    print("=" * 100)
    cols = [r.mode for r in reports]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Callable[[ModeReport], str]) -> None:
        values = []
        for r in reports:
            try:
                values.append(fn(r))
            except Exception:  # noqa: BLE001 - a phase that did not run
                values.append("-")
        rows.append((label, values))

    row("startup to ready (s)", lambda r: f"{r.startup_s:.1f}")
    row("observe seq p50/p95/p99 ms", lambda r: Dist.of(r.seq.latencies).short())
    row("observe seq max ms", lambda r: f"{Dist.of(r.seq.latencies).max:.1f}")
    row("observe seq statuses", lambda r: _statuses(r.seq.statuses))
    row("observe body bytes min/p50/max", lambda r: "/".join(
        str(int(percentile(r.seq.body_bytes, q))) for q in (0, 50, 100)))
    row(f"observe {args.threads} thr accepted ev/s",
        lambda r: f"{r.burst.accepted / r.burst.seconds:.0f}")
    row(f"observe {args.threads} thr p50/p95/p99 ms", lambda r: Dist.of(r.burst.latencies).short())
    row(f"observe {args.threads} thr max ms", lambda r: f"{Dist.of(r.burst.latencies).max:.1f}")
    row("observe burst statuses", lambda r: _statuses(r.burst.statuses))
    row("burst drain after last accept (s)", lambda r: f"{r.burst_drain_s:.1f}")
    row("processing ev/s (burst, e2e)", lambda r: f"{r.burst_process_rate:.0f}")
    row("processing ev/s (bulk load, e2e)",
        lambda r: ", ".join(f"{x:.0f}" for x in r.load_rates) or "-")
    row("accept->searchable idle p50/p95 ms",
        lambda r: Dist.of(r.idle_searchable).short(False) + _missing(r.idle_missing))
    row("accept->searchable load p50/p95 ms",
        lambda r: Dist.of(r.load_searchable).short(False) + _missing(r.load_missing))
    row("dead letters", lambda r: str(r.dead))
    for size in args.sizes:
        row(f"observations stored @{size}", lambda r, s=size: str(r.stored[s].get("observations")))
        row(f"search p50/p95 ms @{size}", lambda r, s=size: r.search[s][0].short(False))
        row(f"search p99/max ms @{size}",
            lambda r, s=size: f"{r.search[s][0].p99:.1f}/{r.search[s][0].max:.1f}")
        row(f"search mean hits @{size}", lambda r, s=size: f"{r.search[s][1]:.1f}")
    for key in ["idle", *map(str, args.sizes)]:
        row(f"RSS serve MB @{key}", lambda r, k=key: _mem(r, k, "serve"))
        if any(r.mode == "distributed" for r in reports):
            row(f"RSS workers MB @{key}", lambda r, k=key: _mem(r, k, "workers"))
            row(f"RSS beat MB @{key}", lambda r, k=key: _mem(r, k, "beat"))
    width = max(len(label) for label, _ in rows) + 2
    colw = max([18, *(len(v) + 2 for _, vals in rows for v in vals)])
    print("".ljust(width) + "".join(c.rjust(colw) for c in cols))
    for label, values in rows:
        print(label.ljust(width) + "".join(v.rjust(colw) for v in values))
    print()
    print("RSS: VmRSS of the process (workers: both `engram worker` processes plus their prefork "
          "children), '(peak)' = VmHWM.")
    for r in reports:
        print(f"[{r.mode}] corpus loading:")
        for line in r.loads or ["(none)"]:
            print(f"    {line}")
        if r.log_notes:
            print(f"[{r.mode}] process logs:")
            for note in r.log_notes:
                print(f"    {note}")
        if r.error:
            print(f"[{r.mode}] ERROR: {r.error}")


def _statuses(c: Counter) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(c.items()))


def _missing(n: int) -> str:
    return f" ({n} lost)" if n else ""


def _mem(r: ModeReport, key: str, role: str) -> str:
    if role not in r.memory.get(key, {}):
        return "-"
    rss, hwm, _ = r.memory[key][role]
    return f"{rss:.0f} (peak {hwm:.0f})"


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Prints progress lines, then one table.")
    p.add_argument("--sizes", default="10000,50000",
                   help="comma-separated corpus sizes for search latency and RSS "
                        "(default 10000,50000)")
    p.add_argument("--observe-count", type=int, default=2000,
                   help="sequential observe requests timed; the concurrent burst sends twice "
                        "as many (default 2000)")
    p.add_argument("--mode", choices=("embedded", "distributed", "both"), default="both")
    p.add_argument("--threads", type=int, default=4, help="concurrent clients (default 4)")
    p.add_argument("--probes", type=int, default=30,
                   help="accept->searchable samples on an idle system (default 30)")
    p.add_argument("--queries", type=int, default=300, help="searches timed per size "
                   "(default 300)")
    p.add_argument("--load", choices=("auto", "observe", "import"), default="auto",
                   help="how the corpus is grown to each size: POST /v1/observe (real path), "
                        "POST /v1/import (bulk), or auto: observe when the measured processing "
                        "rate fits --load-budget, else import (default auto)")
    p.add_argument("--load-budget", type=float, default=200.0,
                   help="seconds one growth step may take through observe in auto (default 200)")
    p.add_argument("--redis-port", type=int, default=6379)
    p.add_argument("--redis-db", type=int, default=13,
                   help="dedicated Redis DB for distributed mode, flushed before and after "
                        "(default 13)")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep the process logs (printed path) instead of deleting them")
    args = p.parse_args(argv)
    args.sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    for line in machine_lines():
        log(line)
    modes = ["embedded", "distributed"] if args.mode == "both" else [args.mode]

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    reports: list[ModeReport] = []
    watch = Stopwatch()
    try:
        for mode in modes:
            reports.append(run_mode(mode, args))
    except KeyboardInterrupt:
        log("interrupted: stopping every process started")
        return 130
    finally:
        stop_all()
        for root in TEMP_DIRS:
            shutil.rmtree(root, ignore_errors=True)
    print_table(reports, args, command, watch.elapsed())
    return 1 if any(r.error for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
