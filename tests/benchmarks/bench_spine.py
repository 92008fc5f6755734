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
  3. BM25 search latency, project-scoped 1-5 word queries, at each corpus --sizes (the corpus
     is loaded through POST /v1/observe, or POST /v1/import when that would not fit the time
     budget: --load says which, the output names the one used), with the share of queries
     that found nothing;
  4. resident memory (VmRSS, VmHWM from /proc) of the gateway, and in distributed mode of the
     workers (with their pool children) and beat.

Payloads have the shape of Claude Code hooks (PostToolUse of Bash with output, Edit, Read; with
--corpus realistic also UserPromptSubmit and Stop), 200 B to 5 KB bodies, spread over 5 projects
(skewed weights) with sessions of ~40 events. --corpus picks their content:

  realistic (default)  read at run time from this machine, nothing copied into the repository:
                       Read/Edit carry windows of real Python standard library files
                       (sysconfig stdlib) under their real relative paths, split over the
                       projects; Bash runs pytest/python/git/grep/pip/docker/npm/ruff/mypy on
                       those paths with outputs made of their real lines (test names, tracebacks
                       through real functions, `raise` messages, grep hits, string literals as
                       log lines, installed distributions, npm's bundled packages); prompts and
                       end-of-turn messages mix LongMemEval prose (--data-dir) with coding
                       requests. Queries: 70% identifiers and words drawn from the project's
                       own files (function, module, error and test names, error messages), 30%
                       the code-ish list.
  dense                WORST CASE for search: synthetic bodies from a ~70-word vocabulary, so
                       every query word is in 20-50% of all documents and a BM25 OR-query
                       visits most of the index; only the code-ish queries.

Only 127.0.0.1 is contacted. All processes are stopped (SIGTERM, then SIGKILL of their process
group) and the temp dirs removed in all cases, including Ctrl-C; distributed mode uses Redis DB
--redis-db (flushed before and after).

  .venv/bin/python tests/benchmarks/bench_spine.py --sizes 10000,50000 --observe-count 2000 \\
      --mode both
  .venv/bin/python tests/benchmarks/bench_spine.py --mode embedded --sizes 50000 \\
      --corpus dense --observe-count 500        # the worst-case line
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import hashlib
import http.client
import json
import keyword
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import string
import subprocess
import sys
import sysconfig
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
IMPORT_CHUNK = 1000  # observations per POST /v1/import (body limit is 4 MB)
STOP_TIMEOUT_S = 15
STARTUP_TIMEOUT_S = 90
DRAIN_TIMEOUT_S = 900
SEARCHABLE_TIMEOUT_S = 120
SEARCH_POLL_S = 0.005  # idle accept->searchable poll interval
TRACKER_POLL_S = 0.02  # under-load tracker: pause between polls
INBOX_FULL_BACKOFF_S = 0.05  # a 503 inbox_full is resent after this pause, like a spool


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
        return cls(
            len(ms),
            percentile(ms, 50),
            percentile(ms, 95),
            percentile(ms, 99),
            max(ms) if ms else math.nan,
            sum(ms) / len(ms) if ms else math.nan,
        )

    def short(self, with_p99: bool = True) -> str:
        if not self.n:
            return "n/a"
        p99 = f"/{self.p99:.1f}" if with_p99 else ""
        return f"{self.p50:.1f}/{self.p95:.1f}{p99}"

    def line(self) -> str:
        return (
            f"n={self.n} p50={self.p50:.2f} p95={self.p95:.2f} p99={self.p99:.2f} "
            f"max={self.max:.2f} mean={self.mean:.2f} ms"
        )


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
        f"machine: nproc={os.cpu_count()} cpu={model!r} mem={mem} kernel={platform.release()}",
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
    popen = subprocess.Popen(
        args, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True
    )  # own group: SIGKILL reaches pool children
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
    warnings = [
        ln for ln in text.splitlines() if " WARNING " in ln and "No hostname was supplied" not in ln
    ]
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
        self.headers = {
            "Authorization": f"Bearer {SECRET}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }

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

PROJECTS = [
    ("webshop", 0.45),
    ("billing-api", 0.25),
    ("infra", 0.15),
    ("mobile-app", 0.10),
    ("docs-site", 0.05),
]
MODULES = [
    "auth",
    "session",
    "billing",
    "invoice",
    "cart",
    "checkout",
    "catalog",
    "cache",
    "user",
    "payment",
    "webhook",
    "search",
    "api",
    "worker",
    "queue",
    "scheduler",
    "migrations",
    "config",
    "login",
    "orders",
    "shipping",
    "discount",
    "ratelimit",
    "middleware",
]
FUNCS = [
    "login",
    "logout",
    "refresh_token",
    "get_user",
    "create_invoice",
    "apply_discount",
    "add_to_cart",
    "checkout",
    "verify_signature",
    "list_products",
    "get_cached",
    "set_ttl",
    "enqueue",
    "retry_with_backoff",
    "parse_config",
    "connect_db",
    "send_email",
    "compute_total",
    "round_amount",
    "validate_card",
    "handle_webhook",
    "rebuild_index",
]
ERRORS = [
    "KeyError",
    "ValueError",
    "TimeoutError",
    "ConnectionError",
    "IntegrityError",
    "AttributeError",
    "TypeError",
    "PermissionError",
    "AssertionError",
]
KEYS = [
    "user_id",
    "session_id",
    "token",
    "cart_id",
    "ttl",
    "invoice_id",
    "email",
    "amount",
    "currency",
    "signature",
    "redis_url",
    "database_url",
]
SERVICES = ["redis", "postgres", "api", "worker", "nginx", "celery", "rabbitmq"]
WORDS = [
    "cache",
    "ttl",
    "expired",
    "redis",
    "connection",
    "refused",
    "retry",
    "backoff",
    "login",
    "failing",
    "test",
    "session",
    "cookie",
    "token",
    "refresh",
    "invoice",
    "total",
    "rounding",
    "discount",
    "checkout",
    "cart",
    "payment",
    "gateway",
    "timeout",
    "webhook",
    "signature",
    "verification",
    "migration",
    "column",
    "index",
    "postgres",
    "query",
    "slow",
    "rate",
    "limit",
    "middleware",
    "config",
    "env",
    "variable",
    "missing",
    "docker",
    "compose",
    "container",
    "kubernetes",
    "pod",
    "crashloop",
    "mypy",
    "optional",
    "ruff",
    "unused",
    "import",
    "fixture",
    "database",
    "rollback",
    "deadlock",
    "serializer",
    "json",
    "schema",
    "validation",
    "email",
    "queue",
    "worker",
    "celery",
    "schedule",
    "cron",
]
QUERIES = [
    "fix failing login test",
    "KeyError user_id session",
    "redis cache ttl",
    "invoice total rounding",
    "docker compose postgres connection refused",
    "mypy optional email",
    "refresh token expired",
    "webhook signature verification",
    "migration add column index",
    "checkout apply discount",
    "TimeoutError payment gateway",
    "pytest fixture database rollback",
    "rate limit middleware",
    "kubectl pod crashloop",
    "ruff unused import",
    "cart session cookie",
    "IntegrityError duplicate key",
    "rebuild search index",
    "celery retry backoff",
    "config env variable missing",
    "slow query postgres",
    "send email queue worker",
    "validate card payment",
    "deadlock orders table",
    "json schema validation error",
]


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


class EventFactory:
    """Deterministic stream of observe bodies. One per client thread (not thread-safe).

    Sessions of 20-60 events in one project (weights in PROJECTS); a subclass makes the events."""

    def __init__(self, seed: int, prefix: str) -> None:
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.n = 0
        self.session: dict[str, str] = {}
        self.left_in_session = 0

    def _pick(self, items: list[str]) -> str:
        return self.rng.choice(items)

    def _next_session(self) -> None:
        projects, weights = zip(*PROJECTS, strict=True)
        project = self.rng.choices(projects, weights)[0]
        sid = f"{self.prefix}-s{self.n}-{self.rng.randrange(16**8):08x}"
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
            fields = self._probe(size, token)
        else:
            session = self.session
            fields = self._event(session["project"], size)
        return {
            "eventId": f"toolu_{self.prefix}_{self.n:07d}",
            **session,
            "host": "claude-code",
            "hookType": "PostToolUse",
            **fields,
            "timestamp": time.time(),
        }

    def _probe(self, size: int, token: str) -> dict[str, Any]:
        """hookType (when not PostToolUse), toolName, toolInput, toolOutput of a probe event."""
        raise NotImplementedError

    def _event(self, project: str, size: int) -> dict[str, Any]:
        raise NotImplementedError


class DenseEventFactory(EventFactory):
    """WORST CASE: bodies built from the ~70-word MODULES/FUNCS/KEYS/WORDS lists, so every query
    word is in 20-50% of all documents and a BM25 OR-query visits most of the index."""

    # -- building blocks ----------------------------------------------------------------------
    def _path(self, project: str) -> str:
        return f"/home/dev/src/{project}/src/{self._pick(MODULES)}/{self._pick(MODULES)}.py"

    def _code_line(self) -> str:
        r = self.rng
        templates = [
            lambda: f"def {self._pick(FUNCS)}(self, {self._pick(KEYS)}):",
            lambda: f"    return self.{self._pick(MODULES)}.get({self._pick(KEYS)!r})",
            lambda: f"    if {self._pick(KEYS)} is None:",
            lambda: f'        raise {self._pick(ERRORS)}("missing {self._pick(KEYS)}")',
            lambda: f"import {self._pick(MODULES)}",
            lambda: f"{self._pick(KEYS).upper()} = {r.randint(1, 3600)}",
            lambda: f'    logger.info("{" ".join(r.sample(WORDS, 4))}")',
            lambda: f"    # {' '.join(r.sample(WORDS, r.randint(3, 8)))}",
            lambda: f"    {self._pick(KEYS)} = await {self._pick(FUNCS)}({self._pick(KEYS)})",
        ]
        return r.choice(templates)()

    def _log_line(self) -> str:
        r = self.rng
        templates = [
            lambda: (
                f"FAILED tests/test_{self._pick(MODULES)}.py::test_{self._pick(FUNCS)} - "
                f"{self._pick(ERRORS)}: '{self._pick(KEYS)}'"
            ),
            lambda: f"tests/test_{self._pick(MODULES)}.py::test_{self._pick(FUNCS)} PASSED",
            lambda: f"{self._pick(ERRORS)}: {' '.join(r.sample(WORDS, 5))}",
            lambda: (
                f"2025-06-{r.randint(10, 28)} 12:{r.randint(10, 59)}:{r.randint(10, 59)} "
                f"INFO {self._pick(MODULES)}: {' '.join(r.sample(WORDS, 6))}"
            ),
            lambda: (
                f"src/{self._pick(MODULES)}/{self._pick(MODULES)}.py:{r.randint(1, 400)}: "
                f"error: {' '.join(r.sample(WORDS, 4))}"
            ),
            lambda: (
                f'  File "src/{self._pick(MODULES)}.py", line {r.randint(1, 500)}, '
                f"in {self._pick(FUNCS)}"
            ),
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
            f"npm test -- {self._pick(MODULES)}",
            "git status",
            "git diff --stat",
            f"docker compose logs {self._pick(SERVICES)} --tail 50",
            f"mypy src/{self._pick(MODULES)}",
            "ruff check src/",
            f'grep -rn "{self._pick(FUNCS)}" src/',
            f"kubectl get pods -n {self._pick(MODULES)}",
            f"redis-cli ttl cache:{self._pick(MODULES)}:{self._pick(KEYS)}",
            f"psql -c 'select count(*) from {self._pick(MODULES)}'",
        ]
        command = r.choice(commands)
        if token:
            command = f"pytest tests/test_{self._pick(MODULES)}.py -k {token}"
        failed = r.random() < 0.3
        stdout = self._fill(self._log_line, size)
        tail = (
            f"\n{r.randint(1, 4)} failed, {r.randint(5, 80)} passed in {r.random() * 9:.2f}s"
            if failed
            else f"\n{r.randint(5, 80)} passed in {r.random() * 9:.2f}s"
        )
        return (
            {"command": command, "description": " ".join(r.sample(WORDS, 3)).capitalize()},
            {"stdout": stdout + tail, "stderr": "", "interrupted": False, "isImage": False},
        )

    def _edit(self, project: str, size: int) -> tuple[dict, Any]:
        path = self._path(project)
        old, new = self._code_line(), self._code_line()
        original = self._fill(self._code_line, size)
        return (
            {"file_path": path, "old_string": old, "new_string": new, "replace_all": False},
            {
                "filePath": path,
                "oldString": old,
                "newString": new,
                "originalFile": original,
                "structuredPatch": [
                    {
                        "oldStart": 42,
                        "oldLines": 1,
                        "newStart": 42,
                        "newLines": 1,
                        "lines": [f"-{old}", f"+{new}"],
                    }
                ],
                "userModified": False,
                "replaceAll": False,
            },
        )

    def _read(self, project: str, size: int) -> tuple[dict, Any]:
        path = self._path(project)
        content = self._fill(self._code_line, size)
        lines = content.count("\n") + 1
        return (
            {"file_path": path},
            {
                "type": "text",
                "file": {
                    "filePath": path,
                    "content": content,
                    "numLines": lines,
                    "startLine": 1,
                    "totalLines": lines + self.rng.randint(0, 300),
                },
            },
        )

    # -- events -------------------------------------------------------------------------------
    def _probe(self, size: int, token: str) -> dict[str, Any]:
        tool_input, tool_output = self._bash(TOKEN_PROJECT, size - 250, token)
        return {"toolName": "Bash", "toolInput": tool_input, "toolOutput": tool_output}

    def _event(self, project: str, size: int) -> dict[str, Any]:
        tool = self.rng.choices(["Bash", "Edit", "Read"], [0.45, 0.25, 0.30])[0]
        tool_input, tool_output = (
            self._bash(project, size - 250, None)
            if tool == "Bash"
            else self._edit(project, size - 500)
            if tool == "Edit"
            else self._read(project, size - 300)
        )
        return {"toolName": tool, "toolInput": tool_input, "toolOutput": tool_output}


def new_token(rng: random.Random) -> str:
    return "zqprobe" + "".join(rng.choice(string.ascii_lowercase) for _ in range(12))


# --------------------------------------------------------------------------------------------
# Realistic payloads: real text read at run time from this machine (never stored in the repo)
# --------------------------------------------------------------------------------------------
# Read and Edit carry windows of real Python standard library files under their real relative
# paths; Bash commands (pytest, python, git, grep, pip, docker, npm, ruff, mypy) name those paths
# and print outputs assembled from their real lines: test names from their `def test_...`,
# tracebacks through their real functions, `raise` messages, grep hits, string literals as log
# messages, installed distributions for pip, npm's bundled packages for npm. Prompts and
# end-of-turn messages mix LongMemEval turns with coding requests naming real identifiers.

DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
LONGMEMEVAL_FILE = Path("longmemeval") / "longmemeval_oracle.json.gz"
NPM_MODULES = [
    Path("/usr/lib/node_modules/npm/node_modules"),
    Path("/usr/local/lib/node_modules/npm/node_modules"),
]
CORPUS_SEED = 7919  # which project owns which source file: the same in every run
MAX_SOURCE_BYTES = 300_000  # bigger stdlib files are generated tables, not code one reads
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", "idlelib", "turtledemo"}
PY_WORDS = frozenset(keyword.kwlist) | {
    "self",
    "cls",
    "print",
    "len",
    "str",
    "int",
    "dict",
    "list",
    "isinstance",
    "None",
    "True",
    "False",
    "object",
}
CODE_QUERY_SHARE = 0.3  # realistic corpus: share of searches taken from QUERIES
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,40}")
_RAISE_RE = re.compile(
    r"raise\s+([A-Z]\w*(?:Error|Exception|Warning|Exit))\(\s*[rbf]?"
    r"(['\"])([^'\"\\{}%]{8,110})\2"
)
_LITERAL_RE = re.compile(r"(['\"])([A-Za-z][^'\"\\{}%]{14,90})\1")
_IMPORT_RE = re.compile(r"^(?:from\s+[\w.]+\s+import\s+(\w+)|import\s+([\w.]+))")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z_]{2,}")
_NUMBER_RE = re.compile(r"\b\d+\b")


@dataclass(eq=False)  # hashed by identity
class SourceFile:
    rel: str  # path relative to the stdlib root
    lines: list[str]
    defs: list[tuple[int, str, str]] = field(default_factory=list)  # (line, name, Class.name)
    tests: list[tuple[int, str]] = field(default_factory=list)  # (line, "Class::test_x")
    raises: list[tuple[str, str]] = field(default_factory=list)  # (exception, message)

    @property
    def dir(self) -> str:
        return self.rel.rpartition("/")[0] or "."

    @property
    def module(self) -> str:
        return self.rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")

    def enclosing(self, line: int) -> tuple[int, str, str] | None:
        """The last def at or above ``line``."""
        at = bisect.bisect_right(self.defs, (line, "\uffff", "")) - 1
        return self.defs[at] if at >= 0 else None


def parse_source(rel: str, text: str) -> SourceFile:
    src = SourceFile(rel, text.splitlines())
    cls: str | None = None
    for i, line in enumerate(src.lines):
        stripped = line.lstrip()
        if not stripped or stripped[0] == "#":
            continue
        indent = len(line) - len(stripped)
        if indent == 0:
            cls = None
        if stripped.startswith("class ") and indent == 0:
            name = stripped[6:].split("(")[0].split(":")[0].strip()
            cls = name if name.isidentifier() else None
        elif stripped.startswith(("def ", "async def ")):
            name = stripped.split("def ", 1)[1].split("(")[0].strip()
            if not name.isidentifier():
                continue
            src.defs.append((i, name, f"{cls}.{name}" if cls and indent else name))
            if name.startswith("test") and (indent == 0 or (cls and indent == 4)):
                src.tests.append((i, f"{cls}::{name}" if cls and indent else name))
        elif stripped.startswith("raise "):
            match = _RAISE_RE.match(stripped)
            if match:
                src.raises.append((match.group(1), match.group(3).strip()))
    return src


@dataclass
class ProjectFiles:
    files: list[SourceFile]
    tests: list[SourceFile]
    raises: list[tuple[str, str]]


class RealisticCorpus:
    """Read-only after construction, so the client threads share one."""

    def __init__(self, data_dir: Path) -> None:
        watch = Stopwatch()
        self.root = Path(sysconfig.get_paths()["stdlib"])
        files = [f for f in map(self._load, self._source_paths()) if f is not None]
        if len(files) < 100:
            raise RuntimeError(
                f"only {len(files)} Python files under {self.root}: "
                f"the realistic corpus needs the standard library sources"
            )
        rng = random.Random(CORPUS_SEED)
        names, weights = zip(*PROJECTS, strict=True)
        owned: dict[str, list[SourceFile]] = {name: [] for name in names}
        for src in files:
            owned[rng.choices(names, weights)[0]].append(src)
        self.all = self._project(files)
        self.projects = {name: self._project(fs) for name, fs in owned.items()}
        self.projects[TOKEN_PROJECT] = self.all
        self.n_bytes = sum(len(line) + 1 for f in files for line in f.lines)
        self.dists = installed_distributions()
        self.versions = {name.lower(): version for name, version, _, _ in self.dists}
        self.npm = npm_packages() or [(n.lower(), v, s) for n, v, s, _ in self.dists]
        self.assistant, self.user, self.prose_source = load_prose(data_dir)
        self.seconds = watch.elapsed()

    def _source_paths(self) -> list[Path]:
        found = []
        for top, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            found += [Path(top) / n for n in sorted(names) if n.endswith(".py")]
        return found

    def _load(self, path: Path) -> SourceFile | None:
        try:
            if path.stat().st_size > MAX_SOURCE_BYTES:
                return None
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        src = parse_source(path.relative_to(self.root).as_posix(), text)
        return src if len(src.lines) >= 10 else None

    def _project(self, files: list[SourceFile]) -> ProjectFiles:
        tests = [f for f in files if f.tests]
        raises = [r for f in files for r in f.raises]
        return ProjectFiles(files, tests or self.all.tests, raises or self.all.raises)

    def describe(self) -> str:
        sizes = ", ".join(f"{name} {len(self.projects[name].files)}" for name, _ in PROJECTS)
        return (
            f"realistic: {len(self.all.files)} Python stdlib files "
            f"({self.n_bytes / 1e6:.1f} MB) from {self.root}, split over projects "
            f"({sizes} files); "
            f"{len(self.dists)} installed distributions (pip), {len(self.npm)} npm packages; "
            f"prose: {self.prose_source}; read in {self.seconds:.1f}s"
        )

    # -- queries ------------------------------------------------------------------------------
    def query(self, rng: random.Random, project: str) -> tuple[str, str]:
        """(query, source): identifiers and words sampled from the project's own files
        (source "corpus"), or one of the code-ish QUERIES (source "code-ish")."""
        if rng.random() < CODE_QUERY_SHARE:
            return rng.choice(QUERIES), "code-ish"
        pf = self.projects[project]
        src = rng.choice(pf.files)
        roll = rng.random()
        if roll < 0.3:  # identifiers on one real line
            for _ in range(20):
                idents = identifiers(rng.choice(src.lines))
                if idents:
                    return " ".join(
                        rng.sample(idents, min(len(idents), rng.randint(1, 3)))
                    ), "corpus"
        if roll < 0.55 and src.defs:  # module and function: "base_events run_until_complete"
            _, name, qual = rng.choice(src.defs)
            stem = src.module.rpartition(".")[2]
            return rng.choice([f"{stem} {name}", qual.replace(".", " "), name]), "corpus"
        if roll < 0.75:  # an error type and the first words of its message
            error, message = rng.choice(pf.raises)
            words = _WORD_RE.findall(message)
            return " ".join([error, *words[: rng.randint(1, 4)]]), "corpus"
        if roll < 0.88:  # a test name
            test = rng.choice(rng.choice(pf.tests).tests)[1].rpartition("::")[2]
            return (
                f"{test} {rng.choice(['failing', 'fails', 'error', 'broken', ''])}".strip(),
                "corpus",
            )
        _, name, _ = rng.choice(src.defs) if src.defs else (0, src.module, "")
        return f"{name} {rng.choice(pf.raises)[0]}", "corpus"


def identifiers(line: str) -> list[str]:
    return [w for w in dict.fromkeys(_IDENT_RE.findall(line)) if w not in PY_WORDS]


def installed_distributions() -> list[tuple[str, str, str, list[str]]]:
    """(name, version, summary, requirement names) of the distributions this Python sees."""
    from importlib import metadata

    found: dict[str, tuple[str, str, str, list[str]]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        requires = [
            re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]
            for req in dist.requires or []
            if "extra ==" not in req
        ]
        found[name.lower()] = (name, dist.version, dist.metadata["Summary"] or "", requires)
    return sorted(found.values())


def npm_packages() -> list[tuple[str, str, str]]:
    """(name, version, description) of the packages bundled with the system npm, if any."""
    for folder in NPM_MODULES:
        if not folder.is_dir():
            continue
        found = []
        for manifest in sorted(folder.glob("*/package.json")) + sorted(
            folder.glob("@*/*/package.json")
        ):
            try:
                data = json.loads(manifest.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("name") and data.get("version"):
                found.append(
                    (str(data["name"]), str(data["version"]), str(data.get("description") or ""))
                )
        if found:
            return found
    return []


def load_prose(data_dir: Path) -> tuple[list[str], list[str], str]:
    """Distinct assistant and user turns of LongMemEval (oracle split), if it is there."""
    path = data_dir / LONGMEMEVAL_FILE
    if not path.is_file():
        return [], [], f"none ({path} not found: coding templates only)"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    seen: set[str] = set()
    by_role: dict[str, list[str]] = {"assistant": [], "user": []}
    for question in data:
        for session in question.get("haystack_sessions", []):
            for turn in session:
                text = str(turn.get("content", "")).strip()
                if len(text) >= 80 and text not in seen and turn.get("role") in by_role:
                    seen.add(text)
                    by_role[turn["role"]].append(text)
    return (
        by_role["assistant"],
        by_role["user"],
        (f"{path} ({len(by_role['assistant'])} assistant, {len(by_role['user'])} user turns)"),
    )


def clip_text(text: str, budget: int) -> str:
    """``text`` cut at a sentence or word end within ``budget`` characters."""
    budget = max(budget, 60)
    if len(text) <= budget:
        return text
    cut = max(text.rfind(". ", 0, budget), text.rfind("\n", 0, budget))
    if cut < budget // 2:
        cut = text.rfind(" ", 0, budget)
    return text[: cut + 1 if cut > 0 else budget].rstrip()


def fill_lines(
    lines: list[str], budget: int, more: Callable[[], str | None], cap: int = 400
) -> list[str]:
    """Append ``more()`` lines until ``budget`` characters (or None, or ``cap`` lines)."""
    total = sum(len(line) + 1 for line in lines)
    for _ in range(cap):
        if total >= budget:
            break
        line = more()
        if line is None:
            break
        lines.append(line)
        total += len(line) + 1
    return lines


def _sha(rng: random.Random, n: int = 7) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


class RealisticEventFactory(EventFactory):
    """Claude Code events over real source files of the project's share of the stdlib."""

    TOOLS = ["Bash", "Edit", "Read", "Stop", "Prompt"]
    TOOL_WEIGHTS = [0.42, 0.21, 0.27, 0.06, 0.04]

    def __init__(self, seed: int, prefix: str, corpus: RealisticCorpus) -> None:
        super().__init__(seed, prefix)
        self.corpus = corpus
        self.work: list[SourceFile] = []
        self.branch = "main"
        self.opening = False
        self.bash_kinds: list[tuple[Callable[[str, int], tuple[str, str, str, str]], float]] = [
            (self._pytest, 0.26),
            (self._python, 0.07),
            (self._git, 0.17),
            (self._grep, 0.14),
            (self._pip, 0.07),
            (self._docker, 0.09),
            (self._npm, 0.06),
            (self._lint, 0.14),
        ]

    # -- sessions and picks -------------------------------------------------------------------
    def _next_session(self) -> None:
        super()._next_session()
        files = self.corpus.projects[self.session["project"]].files
        self.work = self.rng.sample(files, min(len(files), self.rng.randint(3, 8)))
        _, name, _ = self._def(self.work[0])
        self.branch = self.rng.choice(["main", "main", f"fix/{name}", f"feature/{name}"])
        self.opening = True  # a session starts with the user's prompt

    def _files(self, project: str) -> ProjectFiles:
        return self.corpus.projects[project]

    def _file(self, project: str) -> SourceFile:
        """70% from the session's working set of files: sessions keep coming back to them."""
        if project == self.session.get("project") and self.rng.random() < 0.7:
            return self.rng.choice(self.work)
        return self.rng.choice(self._files(project).files)

    def _test_file(self, project: str) -> SourceFile:
        mine = [f for f in self.work if f.tests] if project == self.session.get("project") else []
        return self.rng.choice(
            mine if mine and self.rng.random() < 0.7 else self._files(project).tests
        )

    def _def(self, src: SourceFile) -> tuple[int, str, str]:
        if src.defs:
            return self.rng.choice(src.defs)
        stem = src.module.rpartition(".")[2]
        return 0, stem, stem

    def _raise(self, project: str, src: SourceFile | None = None) -> tuple[str, str]:
        if src is not None and src.raises and self.rng.random() < 0.5:
            return self.rng.choice(src.raises)
        return self.rng.choice(self._files(project).raises)

    def _identifier(self, src: SourceFile) -> str:
        if src.defs and self.rng.random() < 0.5:
            return self.rng.choice(src.defs)[1]
        for _ in range(30):
            idents = identifiers(self.rng.choice(src.lines))
            if idents:
                return self.rng.choice(idents)
        return self._def(src)[1]

    def _literal(self, project: str) -> str:
        """A real string literal (log messages, labels) from the project's files."""
        for _ in range(30):
            src = self._file(project)
            start = self.rng.randrange(len(src.lines))
            for line in src.lines[start : start + 80]:
                match = _LITERAL_RE.search(line)
                if match:
                    return match.group(2).strip()
        return self.rng.choice(self._files(project).raises)[1]

    def _window(
        self, src: SourceFile, budget: int, around: int | None = None
    ) -> tuple[int, list[str]]:
        """(first line index, lines) of about ``budget`` characters: from a def or a random
        line, or with ``around`` the lines around that one."""
        if around is not None:
            start = around
        elif src.defs and self.rng.random() < 0.5:
            start = self.rng.choice(src.defs)[0]
        else:
            start = self.rng.randrange(len(src.lines))
        end, total = start, 0
        down = budget // 2 if around is not None else budget
        while end < len(src.lines) and total < down:
            total += len(src.lines[end]) + 1
            end += 1
        while start > 0 and total < budget:  # then upwards (the file ended, or centring)
            start -= 1
            total += len(src.lines[start]) + 1
        while end < len(src.lines) and total < budget:
            total += len(src.lines[end]) + 1
            end += 1
        return start, src.lines[start:end]

    def _mutate(self, src: SourceFile, old: list[str]) -> list[str]:
        """A plausible edit of real lines: rename, renumber, insert a real line, drop one."""
        r, text = self.rng, "\n".join(old)
        roll = r.random()
        idents = identifiers(text)
        if roll < 0.35 and idents:
            return text.replace(r.choice(idents), self._identifier(src), 1).split("\n")
        if roll < 0.55 and _NUMBER_RE.search(text):
            return _NUMBER_RE.sub(
                lambda m: str(int(m.group()) + r.randint(1, 9)), text, count=1
            ).split("\n")
        last = old[-1]
        indent = last[: len(last) - len(last.lstrip())]
        if roll < 0.85 or len(old) == 1:
            return [*old, indent + (r.choice(src.lines).strip() or "pass")]
        return old[:-1]

    # -- events -------------------------------------------------------------------------------
    def _probe(self, size: int, token: str) -> dict[str, Any]:
        return self._bash(TOKEN_PROJECT, size, token)

    def _event(self, project: str, size: int) -> dict[str, Any]:
        tool = "Prompt" if self.opening else self.rng.choices(self.TOOLS, self.TOOL_WEIGHTS)[0]
        self.opening = False
        if tool == "Bash":
            return self._bash(project, size, None)
        if tool == "Edit":
            return self._edit(project, size)
        if tool == "Read":
            return self._read(project, size)
        if tool == "Stop":
            return {
                "hookType": "Stop",
                "toolOutput": {"last_assistant_message": self._reply(project, size - 250)},
            }
        return {"hookType": "UserPromptSubmit", "prompt": self._prompt(project, size - 220)}

    def _read(self, project: str, size: int) -> dict[str, Any]:
        src = self._file(project)
        path = f"/home/dev/src/{project}/{src.rel}"
        start, lines = self._window(src, max(size - 330, 60))
        tool_input: dict[str, Any] = {"file_path": path}
        if start or len(lines) < len(src.lines):
            tool_input.update(offset=start + 1, limit=len(lines))
        return {
            "toolName": "Read",
            "toolInput": tool_input,
            "toolOutput": {
                "type": "text",
                "file": {
                    "filePath": path,
                    "content": "\n".join(lines),
                    "numLines": len(lines),
                    "startLine": start + 1,
                    "totalLines": len(src.lines),
                },
            },
        }

    def _edit(self, project: str, size: int) -> dict[str, Any]:
        src = self._file(project)
        path = f"/home/dev/src/{project}/{src.rel}"
        start, lines = self._window(src, 400)
        at = self.rng.randrange(len(lines))
        while at < len(lines) - 1 and not lines[at].strip():
            at += 1
        old = lines[at : at + self.rng.randint(1, 3)]
        new = self._mutate(src, old)
        old_s, new_s = "\n".join(old), "\n".join(new)
        budget = max(size - 560 - 3 * (len(old_s) + len(new_s)), 60)
        _, original = self._window(src, budget, around=start + at)  # the file around the edit
        context = lines[max(0, at - 3) : at]
        after = lines[at + len(old) : at + len(old) + 3]
        line_no = start + at + 1 - len(context)
        return {
            "toolName": "Edit",
            "toolInput": {
                "file_path": path,
                "old_string": old_s,
                "new_string": new_s,
                "replace_all": False,
            },
            "toolOutput": {
                "filePath": path,
                "oldString": old_s,
                "newString": new_s,
                "originalFile": "\n".join(original),
                "structuredPatch": [
                    {
                        "oldStart": line_no,
                        "oldLines": len(context) + len(old) + len(after),
                        "newStart": line_no,
                        "newLines": len(context) + len(new) + len(after),
                        "lines": [
                            *(f" {x}" for x in context),
                            *(f"-{x}" for x in old),
                            *(f"+{x}" for x in new),
                            *(f" {x}" for x in after),
                        ],
                    }
                ],
                "userModified": False,
                "replaceAll": False,
            },
        }

    def _reply(self, project: str, budget: int) -> str:
        """End-of-turn message: LongMemEval assistant prose, or a coding summary."""
        if self.corpus.assistant and self.rng.random() < 0.5:
            return clip_text(self.rng.choice(self.corpus.assistant), budget)
        src = self._file(project)
        _, name, qual = self._def(src)
        error, message = self._raise(project, src)
        test = self.rng.choice(self._test_file(project).tests)[1]
        return clip_text(
            self.rng.choice(
                [
                    f"The failure came from `{qual}` in {src.rel}: it raised {error} ({message}). "
                    f"I changed `{name}` to check its input first and added a regression test; "
                    f"`pytest {src.dir}` passes now.",
                    f"Done. `{test}` passes again. The root cause was in `{qual}` ({src.rel}), "
                    f"which assumed the value was already validated.",
                    f"I read {src.rel} and `{qual}` is only called from two places. Renaming it is "
                    f"safe; I updated both call sites and the docs.",
                ]
            ),
            budget,
        )

    def _prompt(self, project: str, budget: int) -> str:
        """User prompt: a LongMemEval user turn, or a coding request naming real things."""
        if self.corpus.user and self.rng.random() < 0.3:
            return clip_text(self.rng.choice(self.corpus.user), budget)
        src = self._file(project)
        _, name, qual = self._def(src)
        error, message = self._raise(project, src)
        test_file = self._test_file(project)
        test = self.rng.choice(test_file.tests)[1]
        return self.rng.choice(
            [
                f"{test_file.rel}::{test} fails with {error}: {message}. Find the cause and fix it.",
                f"Why does {name} raise {error} when it is called twice? See {src.rel}",
                f"Refactor {qual} in {src.rel}: it is too long, split the parsing out.",
                f"Add a test for {qual} covering the '{message}' case",
                f"Run the tests under {src.dir} and fix whatever fails",
                f"Where is {name} used? I want to change its signature.",
            ]
        )

    # -- Bash ---------------------------------------------------------------------------------
    def _bash(self, project: str, size: int, token: str | None) -> dict[str, Any]:
        budget = max(size - 330, 80)
        if token:
            command, description, stdout, stderr = self._pytest(project, budget, token)
        else:
            kinds, weights = zip(*self.bash_kinds, strict=True)
            command, description, stdout, stderr = self.rng.choices(kinds, weights)[0](
                project, budget
            )
        return {
            "toolName": "Bash",
            "toolInput": {"command": command, "description": description},
            "toolOutput": {
                "stdout": stdout,
                "stderr": stderr,
                "interrupted": False,
                "isImage": False,
            },
        }

    def _pytest(
        self, project: str, budget: int, token: str | None = None
    ) -> tuple[str, str, str, str]:
        r = self.rng
        src = self._test_file(project)
        one = r.choice(src.tests)[1]
        command = (
            f"pytest {src.rel} -v -k {token}"
            if token
            else r.choice(
                [
                    f"pytest {src.rel} -v",
                    f"python -m pytest {src.rel} -x -v",
                    f"pytest {src.rel} -v -k {one.rpartition('::')[2]}",
                    f"pytest {src.dir} -v",
                ]
            )
        )
        failed = r.random() < 0.35
        head = [
            "=" * 29 + " test session starts " + "=" * 30,
            f"platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0 -- "
            f"/home/dev/src/{project}/.venv/bin/python",
            f"rootdir: /home/dev/src/{project}",
            "configfile: pyproject.toml",
        ]
        picked: list[tuple[SourceFile, int, str]] = []
        spent = sum(len(x) + 1 for x in head) + 250 + (budget // 3 if failed else 0)
        current, k = src, r.randrange(len(src.tests))
        left = len(src.tests)
        while spent < budget and len(picked) < 300:
            line, node = current.tests[k % len(current.tests)]
            picked.append((current, line, node))
            spent += len(current.rel) + len(node) + 16
            k, left = k + 1, left - 1
            if left == 0:
                current = r.choice(self._files(project).tests)
                k, left = r.randrange(len(current.tests)), len(current.tests)
        if not picked:
            picked.append((src, *src.tests[0]))
        failing = (
            set(r.sample(range(len(picked)), min(len(picked), r.randint(1, 3))))
            if failed
            else set()
        )
        out = [*head, f"collected {len(picked)} items", ""]
        for i, (f, _, node) in enumerate(picked):
            status = "FAILED" if i in failing else r.choices(["PASSED", "SKIPPED"], [19, 1])[0]
            out.append(f"{f.rel}::{node} {status} [{(i + 1) * 100 // len(picked):3d}%]")
        summary = []
        if failing:
            out += ["", "=" * 35 + " FAILURES " + "=" * 35]
            for i in sorted(failing):
                f, line, node = picked[i]
                error, message = self._raise(project)
                out.append(f"{'_' * 20} {node.replace('::', '.')} {'_' * 20}")
                body = f.lines[line : line + r.randint(3, 9)]
                out += [f"    {x}" for x in body[:-1]] + [f">   {body[-1]}" if body else ">"]
                inner = self._file(project)
                at, name, _ = self._def(inner)
                out += [
                    "",
                    f"{f.rel}:{line + len(body)}: ",
                    "_ " * 20,
                    "",
                    f"{inner.rel}:{at + 2}: in {name}",
                    f"    {inner.lines[min(at + 1, len(inner.lines) - 1)].strip()}",
                    f"E   {error}: {message}",
                ]
                summary.append(f"FAILED {f.rel}::{node} - {error}: {message}")
            out += ["=" * 27 + " short test summary info " + "=" * 28, *summary]
        passed = len(picked) - len(failing)
        result = f"{len(failing)} failed, {passed} passed" if failing else f"{passed} passed"
        out.append(f"{'=' * 20} {result} in {r.uniform(0.3, 40):.2f}s {'=' * 20}")
        return command, f"Run the tests in {src.rel}", "\n".join(out), ""

    def _traceback(self, project: str, prefix: str = "") -> list[str]:
        lines = [f"{prefix}Traceback (most recent call last):"]
        for _ in range(self.rng.randint(2, 6)):
            src = self._file(project)
            at, name, _ = self._def(src)
            code = src.lines[min(at + self.rng.randint(1, 12), len(src.lines) - 1)].strip()
            lines += [
                f'{prefix}  File "/home/dev/src/{project}/{src.rel}", line {at + 2}, in {name}',
                f"{prefix}    {code or src.lines[at].strip()}",
            ]
        error, message = self._raise(project)
        return [*lines, f"{prefix}{error}: {message}"]

    def _log_line(self, project: str, prefix: str = "") -> str:
        r = self.rng
        level = r.choices(["INFO", "DEBUG", "WARNING", "ERROR"], [60, 20, 15, 5])[0]
        return (
            f"{prefix}2025-06-{r.randint(10, 28)} {r.randint(0, 23):02d}:"
            f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d},{r.randint(0, 999):03d} "
            f"{level} [{self._file(project).module}] {self._literal(project)}"
        )

    def _python(self, project: str, budget: int) -> tuple[str, str, str, str]:
        src = self._file(project)
        _, name, _ = self._def(src)
        command = self.rng.choice(
            [
                f"python -m {src.module}",
                f"python {src.rel}",
                f"python -c 'from {src.module} import {name}; {name}()'",
            ]
        )
        trace = self._traceback(project) if self.rng.random() < 0.6 else []
        stdout = fill_lines(
            [], budget - sum(len(x) + 1 for x in trace), lambda: self._log_line(project)
        )
        return command, f"Run {src.module}", "\n".join(stdout), "\n".join(trace)

    def _git(self, project: str, budget: int) -> tuple[str, str, str, str]:
        r, files = self.rng, self._files(project).files
        kind = r.choices(["status", "diff", "log", "stat", "commit"], [25, 30, 20, 15, 10])[0]
        if kind == "status":
            changed = list(dict.fromkeys(self.work + r.sample(files, min(len(files), 5))))
            out = [
                f"On branch {self.branch}",
                f"Your branch is up to date with 'origin/{self.branch}'.",
                "",
                "Changes not staged for commit:",
                '  (use "git add <file>..." to update what will be committed)',
                *(f"\tmodified:   {f.rel}" for f in changed[: r.randint(1, len(changed))]),
                "",
                "Untracked files:",
                f"\t{r.choice(files).dir}/test_{self._def(r.choice(files))[1]}.py",
                "",
                'no changes added to commit (use "git add" and/or "git commit -a")',
            ]
            return "git status", "Show working tree status", "\n".join(out), ""
        if kind == "diff":
            out = []
            for _ in range(20):
                if sum(len(x) + 1 for x in out) >= budget:
                    break
                out += self._diff(self._file(project))
            return "git diff", "Show unstaged changes", "\n".join(out), ""
        if kind == "log":
            out = fill_lines(
                [], budget, lambda: f"{_sha(r)} {self._commit_message(project)}", cap=200
            )
            return f"git log --oneline -n {len(out)}", "Recent commits", "\n".join(out), ""
        if kind == "stat":
            picked = r.sample(files, min(len(files), max(1, budget // 70)))
            out, ins, dels = [], 0, 0
            for f in picked:
                a, d = r.randint(0, 40), r.randint(0, 25)
                ins, dels = ins + a, dels + d
                out.append(f" {f.rel:<48} | {a + d:3d} {'+' * min(a, 20)}{'-' * min(d, 12)}")
            out.append(f" {len(picked)} files changed, {ins} insertions(+), {dels} deletions(-)")
            return "git diff --stat main", "Summarise the branch", "\n".join(out), ""
        message = self._commit_message(project)
        n = r.randint(1, 6)
        out = [
            f"[{self.branch} {_sha(r)}] {message}",
            f" {n} files changed, {r.randint(1, 120)} insertions(+), "
            f"{r.randint(0, 60)} deletions(-)",
        ]
        return f"git commit -am {shlex.quote(message)}", "Commit the fix", "\n".join(out), ""

    def _diff(self, src: SourceFile) -> list[str]:
        r = self.rng
        at = r.randrange(len(src.lines))
        before = src.lines[max(0, at - 3) : at]
        old = src.lines[at : at + r.randint(1, 2)]
        new = self._mutate(src, old)
        after = src.lines[at + len(old) : at + len(old) + 3]
        start = at - len(before) + 1
        where = src.enclosing(at)
        return [
            f"diff --git a/{src.rel} b/{src.rel}",
            f"index {_sha(r)}..{_sha(r)} 100644",
            f"--- a/{src.rel}",
            f"+++ b/{src.rel}",
            f"@@ -{start},{len(before) + len(old) + len(after)} "
            f"+{start},{len(before) + len(new) + len(after)} @@"
            + (f" {src.lines[where[0]].strip()}" if where else ""),
            *(f" {x}" for x in before),
            *(f"-{x}" for x in old),
            *(f"+{x}" for x in new),
            *(f" {x}" for x in after),
        ]

    def _commit_message(self, project: str) -> str:
        r = self.rng
        src = self._file(project)
        _, name, qual = self._def(src)
        error, message = self._raise(project, src)
        dist = r.choice(self.corpus.dists)
        return r.choice(
            [
                f"Fix {error} in {qual}",
                f"{src.module}: handle '{message}'",
                f"Add tests for {name}",
                f"Refactor {src.module}: split {name}",
                f"Bump {dist[0]} to {dist[1]}",
                f"Merge pull request #{r.randint(10, 999)} from dev/{name}",
                f'Revert "Refactor {qual}"',
                f"Document {qual}",
            ]
        )

    def _grep(self, project: str, budget: int) -> tuple[str, str, str, str]:
        r = self.rng
        src = self._file(project)
        ident = self._identifier(src)
        where = src.dir if r.random() < 0.6 else "."
        command = r.choice(
            [f'grep -rn "{ident}" {where}', f"rg -n {ident} {where}", f'git grep -n "{ident}"']
        )
        pool = [
            f
            for f in self._files(project).files
            if f is not src and (where == "." or f.dir == where)
        ]
        candidates = [src, *r.sample(pool, min(len(pool), 60))]
        out: list[str] = []
        spent = 0
        for f in candidates:
            for i, line in enumerate(f.lines):
                if ident in line:
                    out.append(f"{f.rel}:{i + 1}:{line}")
                    spent += len(out[-1]) + 1
                    if spent >= budget:
                        break
            if spent >= budget:
                break
        return command, f"Find uses of {ident}", "\n".join(out), ""

    def _pip(self, project: str, budget: int) -> tuple[str, str, str, str]:
        r, dists = self.rng, self.corpus.dists
        site = "./.venv/lib/python3.11/site-packages"
        kind = r.choices(["install", "list", "show", "editable"], [40, 20, 20, 20])[0]
        name, version, summary, requires = r.choice(dists)
        if kind == "list":
            start = r.randrange(len(dists))
            rows = iter(dists[start:] + dists[:start])
            out = fill_lines(
                ["Package                   Version", "-" * 25 + " " + "-" * 12],
                budget,
                lambda: next((f"{d[0]:<25} {d[1]}" for d in rows), None),
            )
            return "pip list", "List installed packages", "\n".join(out), ""
        if kind == "show":
            required_by = [d[0] for d in dists if name.lower() in (q.lower() for q in d[3])]
            out = [
                f"Name: {name}",
                f"Version: {version}",
                f"Summary: {summary}",
                f"Location: /home/dev/src/{project}/.venv/lib/python3.11/site-packages",
                f"Requires: {', '.join(requires)}",
                f"Required-by: {', '.join(required_by)}",
            ]
            return f"pip show {name}", f"Show {name} details", "\n".join(out), ""
        queue = [(q, name) for q in requires]
        first = (
            f"Obtaining file:///home/dev/src/{project}"
            if kind == "editable"
            else f"Requirement already satisfied: {name} in {site} ({version})"
        )

        def more() -> str | None:
            while queue:
                req, parent = queue.pop(0)
                ver = self.corpus.versions.get(req.lower())
                if ver:
                    return f"Requirement already satisfied: {req} in {site} (from {parent}) ({ver})"
            return None

        out = fill_lines([first], budget, more)
        if kind == "editable":
            out.append(f"Successfully installed {project}-0.{r.randint(1, 9)}.0")
        return (
            "pip install -e ." if kind == "editable" else f"pip install {name}",
            "Install dependencies",
            "\n".join(out),
            "",
        )

    def _docker(self, project: str, budget: int) -> tuple[str, str, str, str]:
        r = self.rng
        service = self._pick(SERVICES)
        kind = r.choices(["logs", "ps", "build"], [60, 15, 25])[0]
        if kind == "ps":
            out = ["NAME" + " " * 20 + "IMAGE" + " " * 22 + "SERVICE    STATUS"]
            out += [
                f"{project}-{s}-1".ljust(24)
                + f"{project}-{s}:dev".ljust(27)
                + f"{s:<10} {r.choice(['Up 2 hours', 'Up 5 minutes', 'Restarting (1)'])}"
                for s in SERVICES
            ]
            return "docker compose ps", "List containers", "\n".join(out), ""
        if kind == "build":
            dists = self.corpus.dists
            out = [
                "#1 [internal] load build definition from Dockerfile",
                "#5 [3/6] COPY requirements.txt .",
                "#6 [4/6] RUN pip install -r requirements.txt",
            ]
            out = fill_lines(
                out,
                budget - 80,
                lambda: (
                    f"#6 {r.uniform(0.5, 60):.3f} Collecting {(d := r.choice(dists))[0]}=={d[1]}"
                ),
            )
            out += [
                f"#7 [5/6] COPY {self._file(project).dir} ./",
                "#8 exporting to image",
                f"#8 naming to docker.io/library/{project}:dev done",
            ]
            return f"docker build -t {project}:dev .", "Build the image", "\n".join(out), ""
        prefix = f"{service}-1  | "
        out = fill_lines([], budget, lambda: self._log_line(project, prefix))
        if r.random() < 0.3:
            out[len(out) // 2 : len(out) // 2] = self._traceback(project, prefix)
        return (
            f"docker compose logs {service} --tail {len(out)}",
            f"Show {service} logs",
            "\n".join(out),
            "",
        )

    def _npm(self, project: str, budget: int) -> tuple[str, str, str, str]:
        r, packages = self.rng, self.corpus.npm
        kind = r.choices(["ls", "install", "outdated"], [40, 40, 20])[0]
        if kind == "ls":
            start = r.randrange(len(packages))
            rows = iter(packages[start:] + packages[:start])
            out = fill_lines(
                [f"{project}@1.0.0 /home/dev/src/{project}"],
                budget,
                lambda: next((f"├── {n}@{v}" for n, v, _ in rows), None),
            )
            return "npm ls", "List JavaScript dependencies", "\n".join(out), ""
        if kind == "outdated":
            out = ["Package" + " " * 20 + "Current  Wanted   Latest"]
            out = fill_lines(
                out,
                budget,
                lambda: (
                    f"{(p := r.choice(packages))[0]:<27}{p[1]:<9}{p[1]:<9}"
                    f"{int(p[1].split('.')[0] or 0) + 1 if p[1][:1].isdigit() else p[1]}.0.0"
                ),
            )
            return "npm outdated", "Check outdated packages", "\n".join(out), ""
        name = r.choice(packages)[0]
        warns = fill_lines(
            [],
            budget - 200,
            lambda: (
                f"npm warn deprecated {(p := r.choice(packages))[0]}@{p[1]}: {p[2] or 'unsupported'}"
            ),
            cap=r.randint(0, 12),
        )
        out = [
            *warns,
            "",
            f"added {r.randint(1, 400)} packages, and audited "
            f"{r.randint(400, 900)} packages in {r.randint(2, 40)}s",
            "",
            f"{r.randint(10, 90)} packages are looking for funding",
            "  run `npm fund` for details",
            "",
            "found 0 vulnerabilities",
        ]
        return f"npm install {name}", f"Install {name}", "\n".join(out), ""

    def _lint(self, project: str, budget: int) -> tuple[str, str, str, str]:
        r = self.rng
        src = self._file(project)
        mypy = r.random() < 0.4
        where = r.choice([src.rel, src.dir, "."])
        pool = self._files(project).files
        files = [src, *(r.sample(pool, min(len(pool), 30)) if where != src.rel else [])]
        out: list[str] = []
        spent, checked = 0, 0
        for f in files:
            checked += 1
            for _ in range(r.randint(1, 6)):
                i = r.randrange(len(f.lines))
                line = f.lines[i]
                stripped = line.strip()
                col = len(line) - len(line.lstrip()) + 1
                found = _IMPORT_RE.match(stripped)
                idents = identifiers(stripped)
                if mypy:
                    if stripped.startswith(("def ", "async def ")):
                        text = (
                            f"{f.rel}:{i + 1}: error: Function is missing a return type "
                            f"annotation  [no-untyped-def]"
                        )
                    elif idents:
                        text = (
                            f'{f.rel}:{i + 1}: error: Item "None" of "{r.choice(idents)} | '
                            f'None" has no attribute "{r.choice(idents)}"  [union-attr]'
                        )
                    else:
                        continue
                elif found:
                    text = (
                        f"{f.rel}:{i + 1}:{col}: F401 [*] `{found.group(1) or found.group(2)}`"
                        f" imported but unused"
                    )
                elif len(line) > 88:
                    text = f"{f.rel}:{i + 1}:89: E501 Line too long ({len(line)} > 88)"
                elif idents:
                    text = (
                        f"{f.rel}:{i + 1}:{col}: F841 Local variable `{r.choice(idents)}` "
                        f"is assigned to but never used"
                    )
                else:
                    continue
                out.append(text)
                spent += len(text) + 1
            if spent >= budget:
                break
        if mypy:
            out.append(
                f"Found {len(out)} errors in {checked} files (checked "
                f"{checked + r.randint(0, 40)} source files)"
            )
            return f"mypy {where}", "Type-check", "\n".join(out), ""
        out += [
            f"Found {len(out)} errors.",
            f"[*] {r.randint(0, len(out))} fixable with the `--fix` option.",
        ]
        return f"ruff check {where}", "Lint", "\n".join(out), ""


CORPUS: RealisticCorpus | None = None
"""The realistic corpus when --corpus realistic; None for the dense worst case."""


def new_factory(seed: int, prefix: str) -> EventFactory:
    if CORPUS is None:
        return DenseEventFactory(seed, prefix)
    return RealisticEventFactory(seed, prefix, CORPUS)


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
                raise RuntimeError(
                    f"{proc.role} (pid {proc.pid}) exited with "
                    f"{proc.popen.returncode}; see the log tail:\n" + tail(proc.log_path)
                )


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def base_env(root: Path, broker: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        {
            "ENGRAM_SECRET": SECRET,
            "ENGRAM_DATA_DIR": str(root / "data"),
            "ENGRAM_CONFIG_DIR": str(root / "config"),
            # A stale editable install can make `api` resolve as a namespace package; putting the
            # repository first on the path runs the checked-out code whatever the install says.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
    )
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
    broker = (
        f"redis://127.0.0.1:{args.redis_port}/{args.redis_db}" if mode == "distributed" else None
    )
    env = base_env(root, broker)
    port = free_port()
    serve = spawn("serve", [ENGRAM, "serve", "--port", str(port), *dir_args(root)], env, log_dir)
    stack = Stack(mode, port, root, serve)
    probe = Api(port, timeout=5)
    up = wait_until(
        "GET /v1/livez",
        lambda: probe.call("GET", "/v1/livez").status == 200,
        stack,
        STARTUP_TIMEOUT_S,
    )
    log(f"  gateway answers /v1/livez after {up:.1f}s")
    if mode == "distributed":
        for i in (1, 2):
            stack.workers.append(
                spawn(
                    f"worker{i}",
                    [
                        ENGRAM,
                        "worker",
                        "--concurrency",
                        "1",
                        "--name",
                        f"bench{i}@%h",
                        *dir_args(root),
                    ],
                    env,
                    log_dir,
                )
            )
        stack.beat = spawn("beat", [ENGRAM, "beat", *dir_args(root)], env, log_dir)

        def two_workers() -> bool:
            status = probe.call("GET", "/v1/status").data or {}
            return int(status.get("workers", {}).get("alive", 0)) >= 2

        ready = wait_until(
            "2 workers answering in /v1/status", two_workers, stack, STARTUP_TIMEOUT_S
        )
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
        snap["workers"] = (
            sum(t[0] for t in totals),
            sum(t[1] for t in totals),
            sum(t[2] for t in totals),
        )
    if stack.beat:
        snap["beat"] = tree_mem_mb(stack.beat.pid)
    return snap


def fmt_mem(snap: dict[str, tuple[float, float, int]]) -> str:
    return ", ".join(
        f"{role} {rss:.0f} MB (peak {hwm:.0f}, {n} proc)" for role, (rss, hwm, n) in snap.items()
    )


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
                    reply = self.api.call(
                        "POST",
                        "/v1/search",
                        {
                            "query": " ".join(batch),
                            "project": TOKEN_PROJECT,
                            "mode": "bm25",
                            "limit": 50,
                        },
                    )
                except (OSError, http.client.HTTPException) as exc:
                    self.errors += 1
                    self.last_error = repr(exc)
                    time.sleep(0.5)
                    continue
                seen = time.perf_counter()
                texts = (
                    " ".join(i.get("text", "") for i in (reply.data or {}).get("items", []))
                    if reply.status == 200
                    else ""
                )
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


def send_concurrent(
    port: int,
    seed: int,
    prefix: str,
    count: int,
    threads: int,
    tracker: SearchableTracker | None = None,
    probe_every: int = 50,
) -> SendResult:
    """``count`` events from ``threads`` clients, each on its own keep-alive connection."""
    results = [SendResult() for _ in range(threads)]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            api, factory = Api(port), new_factory(seed * 1000 + i, f"{prefix}{i}")
            rng = random.Random(seed * 7 + i)
            for n in range(count // threads + (i < count % threads)):
                token = new_token(rng) if tracker and n % probe_every == probe_every // 2 else None
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
    factory, result = new_factory(seed, f"idle{seed}"), SendResult()
    delays, missing = [], 0
    for _ in range(samples):
        token = new_token(rng)
        reply = post_event(api, factory.next(token), result)
        accepted = time.perf_counter()
        if reply.status != 201:
            missing += 1
            continue
        while True:
            found = api.call(
                "POST",
                "/v1/search",
                {"query": token, "project": TOKEN_PROJECT, "mode": "bm25", "limit": 5},
            )
            now = time.perf_counter()
            if found.status == 200 and any(
                token in i.get("text", "") for i in found.data.get("items", [])
            ):
                delays.append(now - accepted)
                break
            if now - accepted > SEARCHABLE_TIMEOUT_S:
                missing += 1
                break
            time.sleep(SEARCH_POLL_S)
    api.close()
    return delays, missing


@dataclass
class SearchStats:
    """Search latency at one corpus size, overall and per query source."""

    dist: Dist
    mean_hits: float
    zero_hits: int  # queries answered 200 with no item
    statuses: Counter
    by_source: dict[str, tuple[Dist, float, int]]  # source -> (latency, mean hits, zero hits)

    def line(self) -> str:
        parts = [
            f"{self.dist.line()}; mean hits {self.mean_hits:.1f}; 0 hits "
            f"{self.zero_hits}/{self.dist.n}; statuses {dict(self.statuses)}"
        ]
        parts += [
            f"\n      {source} queries: {d.line()}; mean hits {h:.1f}; 0 hits {z}/{d.n}"
            for source, (d, h, z) in sorted(self.by_source.items())
        ]
        return "".join(parts)


def pick_query(rng: random.Random) -> tuple[str, str, str]:
    """(query, project, source). Dense: the code-ish QUERIES. Realistic: words and identifiers
    sampled from the project's own files, and the code-ish QUERIES (CODE_QUERY_SHARE)."""
    projects, weights = zip(*PROJECTS, strict=True)
    if CORPUS is None:
        query = rng.choice(QUERIES)
        return query, rng.choices(projects, weights)[0], "code-ish"
    project = rng.choices(projects, weights)[0]
    query, source = CORPUS.query(rng, project)
    return query, project, source


def search_latency(port: int, queries: int, seed: int) -> SearchStats:
    """Sequential project-scoped BM25 searches."""
    api, rng = Api(port), random.Random(seed)
    for q in QUERIES[:10]:  # warm-up: page cache and statement cache
        api.call("POST", "/v1/search", {"query": q, "project": "webshop", "mode": "bm25"})
    statuses = Counter[int]()
    samples: dict[str, list[tuple[float, int]]] = {}
    for _ in range(queries):
        query, project, source = pick_query(rng)
        body = {"query": query, "project": project, "mode": "bm25", "limit": 10}
        reply = api.call("POST", "/v1/search", body)
        statuses[reply.status] += 1
        hits = len(reply.data.get("items", [])) if reply.status == 200 else -1
        samples.setdefault(source, []).append((reply.seconds, hits))
    api.close()

    def summary(rows: list[tuple[float, int]]) -> tuple[Dist, float, int]:
        answered = [h for _, h in rows if h >= 0]
        return (
            Dist.of([s for s, _ in rows]),
            sum(answered) / len(answered) if answered else 0.0,
            answered.count(0),
        )

    every = [row for rows in samples.values() for row in rows]
    dist, mean_hits, zero = summary(every)
    return SearchStats(
        dist, mean_hits, zero, statuses, {source: summary(rows) for source, rows in samples.items()}
    )


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
        "id": obs_id,
        "eventId": event_id,
        "sessionId": body["sessionId"],
        "project": body["project"],
        "host": body["host"],
        "hookType": body["hookType"],
        "kind": c.kind,
        "toolName": body.get("toolName"),
        "title": c.title,
        "text": c.text,
        "filesRead": list(c.files_read),
        "filesModified": list(c.files_modified),
        "commands": list(c.commands),
        "errors": list(c.errors),
        "concepts": list(c.concepts),
        "createdAt": body["timestamp"],
        "storedAt": body["timestamp"],
    }


def load_by_import(port: int, count: int, seed: int, prefix: str) -> tuple[float, Counter]:
    api, factory, statuses = Api(port, timeout=600), new_factory(seed, prefix), Counter[int]()
    watch, sent = Stopwatch(), 0
    while sent < count:
        chunk = [export_observation(factory.next()) for _ in range(min(IMPORT_CHUNK, count - sent))]
        document = {
            "format": "engram-export",
            "version": 1,
            "sessions": [],
            "observations": chunk,
            "memories": [],
        }
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
    search: dict[int, SearchStats] = field(default_factory=dict)
    memory: dict[str, dict[str, tuple[float, float, int]]] = field(default_factory=dict)
    stored: dict[int, dict[str, int]] = field(default_factory=dict)
    dead: int = 0
    log_notes: list[str] = field(default_factory=list)
    error: str | None = None


def bring_to_size(
    stack: Stack, report: ModeReport, target: int, have: int, args: argparse.Namespace, seed: int
) -> int:
    """Add observations until ``target``; returns the new total. Picks observe or import."""
    missing = target - have
    if missing <= 0:
        return have
    rate = report.load_rates[-1] if report.load_rates else report.burst_process_rate
    estimate = missing / rate if rate > 0 else math.inf
    method = args.load
    if method == "auto":
        method = "observe" if estimate <= args.load_budget else "import"
    log(
        f"  loading {missing} observations to reach {target} via POST /v1/"
        f"{'observe' if method == 'observe' else 'import'} (estimated observe path: "
        f"{estimate:.0f}s at {rate:.0f} ev/s; budget {args.load_budget:.0f}s)"
    )
    watch = Stopwatch()
    if method == "observe":
        sent = send_concurrent(stack.port, seed, f"load{target}-", missing, args.threads)
        drain, counts = wait_drained(stack)
        total = watch.elapsed()
        rate_now = sent.accepted / total if total else 0.0
        report.load_rates.append(rate_now)
        report.dead = counts.get("dead", 0)
        note = (
            f"observe: {sent.accepted} accepted in {sent.seconds:.1f}s "
            f"({sent.accepted / sent.seconds:.0f} ev/s accepted), drained {drain:.1f}s later; "
            f"{rate_now:.0f} ev/s stored end to end; 503 inbox_full retries "
            f"{sent.inbox_full_retries}; statuses {dict(sent.statuses)}"
        )
        if sent.failures:
            note += f"; failures: {sent.failures}"
    else:
        seconds, statuses = load_by_import(stack.port, missing, seed, f"imp{target}-")
        note = (
            f"import: {missing} observations in {seconds:.1f}s "
            f"({missing / seconds:.0f}/s, chunks of {IMPORT_CHUNK}); statuses {dict(statuses)}"
        )
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
            report.search[size] = search_latency(stack.port, args.queries, seed + size)
            log(f"  search @ {size}: {report.search[size].line()}")
            report.memory[str(size)] = memory_snapshot(stack)
            log(f"  memory @ {size}: {fmt_mem(report.memory[str(size)])}")
    except Exception as exc:  # noqa: BLE001 - reported, then the other mode still runs
        report.error = f"{type(exc).__name__}: {exc}"
        for proc in stack.procs:
            if proc.popen.poll() is not None:
                report.error += (
                    f"\n  {proc.role} (pid {proc.pid}) had exited with "
                    f"{proc.popen.returncode}; its log ends:\n" + tail(proc.log_path, 40)
                )
        log(f"  FAILED: {report.error}")
    finally:
        for proc in stack.procs:
            n_err, n_tb, lines = log_problems(proc)
            if n_err or n_tb or lines:
                report.log_notes.append(
                    f"{proc.role}: {n_err} ERROR lines, {n_tb} tracebacks"
                    + "".join(f"\n      {ln[:240]}" for ln in lines)
                )
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
    warm = send_sequential(stack.port, new_factory(seed + 50, f"warm{seed}"), 50)
    log(f"  warm-up: 50 events, statuses {dict(warm.statuses)}")
    wait_drained(stack)

    log(f"  sequential observe x{args.observe_count} (one keep-alive connection)")
    report.seq = send_sequential(stack.port, new_factory(seed, f"seq{seed}"), args.observe_count)
    log(f"    latency {Dist.of(report.seq.latencies).line()}; statuses {dict(report.seq.statuses)}")
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
    report.burst = send_concurrent(
        stack.port, seed + 10, f"burst{seed}-", burst_n, args.threads, tracker
    )
    log(
        f"    {report.burst.accepted} accepted in {report.burst.seconds:.2f}s = "
        f"{report.burst.accepted / report.burst.seconds:.0f} ev/s; latency "
        f"{Dist.of(report.burst.latencies).line()}; statuses {dict(report.burst.statuses)}"
    )
    report.burst_drain_s, counts = wait_drained(stack)
    end_to_end = watch.elapsed()
    report.burst_process_rate = report.burst.accepted / end_to_end
    report.dead = counts.get("dead", 0)
    tracker.finish()
    report.load_searchable, report.load_missing = (
        tracker.delays,
        tracker.missing + len(tracker.pending),
    )
    log(
        f"    drained {report.burst_drain_s:.1f}s after the last accept; processing "
        f"{report.burst_process_rate:.0f} ev/s end to end; dead letters {report.dead}"
    )
    log(
        f"    accept->searchable under load {Dist.of(report.load_searchable).line()}; "
        f"not found {report.load_missing}; search errors {tracker.errors} {tracker.last_error}"
    )


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def print_table(
    reports: list[ModeReport], args: argparse.Namespace, command: str, total_s: float
) -> None:
    print()
    print("=" * 100)
    print("Engram spine benchmark")
    for line in machine_lines():
        print(line)
    print(f"command: {command}")
    print(
        f"run:     {total_s:.0f}s total; threads={args.threads} probes={args.probes} "
        f"queries={args.queries}; search limit 10, mode bm25, project-scoped"
    )
    print(f"corpus:  {corpus_line(args)}")
    if CORPUS is not None:
        print(
            f"queries: {1 - CODE_QUERY_SHARE:.0%} drawn from the project's own files "
            f"(identifiers on a line, module + function, error type + message words, test "
            f"names), {CODE_QUERY_SHARE:.0%} the code-ish list (e.g. {QUERIES[0]!r})"
        )
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
    row(
        "observe body bytes min/p50/max",
        lambda r: "/".join(str(int(percentile(r.seq.body_bytes, q))) for q in (0, 50, 100)),
    )
    row(
        f"observe {args.threads} thr accepted ev/s",
        lambda r: f"{r.burst.accepted / r.burst.seconds:.0f}",
    )
    row(f"observe {args.threads} thr p50/p95/p99 ms", lambda r: Dist.of(r.burst.latencies).short())
    row(f"observe {args.threads} thr max ms", lambda r: f"{Dist.of(r.burst.latencies).max:.1f}")
    row("observe burst statuses", lambda r: _statuses(r.burst.statuses))
    row("burst drain after last accept (s)", lambda r: f"{r.burst_drain_s:.1f}")
    row("processing ev/s (burst, e2e)", lambda r: f"{r.burst_process_rate:.0f}")
    row(
        "processing ev/s (bulk load, e2e)",
        lambda r: ", ".join(f"{x:.0f}" for x in r.load_rates) or "-",
    )
    row(
        "accept->searchable idle p50/p95 ms",
        lambda r: Dist.of(r.idle_searchable).short(False) + _missing(r.idle_missing),
    )
    row(
        "accept->searchable load p50/p95 ms",
        lambda r: Dist.of(r.load_searchable).short(False) + _missing(r.load_missing),
    )
    row("dead letters", lambda r: str(r.dead))
    for size in args.sizes:
        row(f"observations stored @{size}", lambda r, s=size: str(r.stored[s].get("observations")))
        row(f"search p50/p95 ms @{size}", lambda r, s=size: r.search[s].dist.short(False))
        row(
            f"search p99/max ms @{size}",
            lambda r, s=size: f"{r.search[s].dist.p99:.1f}/{r.search[s].dist.max:.1f}",
        )
        row(f"search mean hits @{size}", lambda r, s=size: f"{r.search[s].mean_hits:.1f}")
        row(
            f"search 0-hit queries @{size}",
            lambda r, s=size: f"{r.search[s].zero_hits}/{r.search[s].dist.n}",
        )
        if CORPUS is not None:
            for source in ("corpus", "code-ish"):
                row(
                    f"  {source} queries p50/p95 ms @{size}",
                    lambda r, s=size, q=source: r.search[s].by_source[q][0].short(False),
                )
                row(
                    f"  {source} queries mean hits @{size}",
                    lambda r, s=size, q=source: f"{r.search[s].by_source[q][1]:.1f}",
                )
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
    print(
        "RSS: VmRSS of the process (workers: both `engram worker` processes plus their prefork "
        "children), '(peak)' = VmHWM."
    )
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


def corpus_line(args: argparse.Namespace) -> str:
    if CORPUS is not None:
        return CORPUS.describe()
    return (
        "dense: WORST CASE, synthetic bodies from a ~70-word vocabulary (MODULES, FUNCS, "
        "KEYS, WORDS): every query word is in 20-50% of all documents, so a BM25 OR-query "
        "visits most of the index; real observations are far more varied"
    )


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
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Prints progress lines, then one table.",
    )
    p.add_argument(
        "--sizes",
        default="10000,50000",
        help="comma-separated corpus sizes for search latency and RSS (default 10000,50000)",
    )
    p.add_argument(
        "--observe-count",
        type=int,
        default=2000,
        help="sequential observe requests timed; the concurrent burst sends twice "
        "as many (default 2000)",
    )
    p.add_argument("--mode", choices=("embedded", "distributed", "both"), default="both")
    p.add_argument("--threads", type=int, default=4, help="concurrent clients (default 4)")
    p.add_argument(
        "--probes",
        type=int,
        default=30,
        help="accept->searchable samples on an idle system (default 30)",
    )
    p.add_argument("--queries", type=int, default=300, help="searches timed per size (default 300)")
    p.add_argument(
        "--load",
        choices=("auto", "observe", "import"),
        default="auto",
        help="how the corpus is grown to each size: POST /v1/observe (real path), "
        "POST /v1/import (bulk), or auto: observe when the measured processing "
        "rate fits --load-budget, else import (default auto)",
    )
    p.add_argument(
        "--load-budget",
        type=float,
        default=200.0,
        help="seconds one growth step may take through observe in auto (default 200)",
    )
    p.add_argument(
        "--corpus",
        choices=("realistic", "dense"),
        default="realistic",
        help="realistic: bodies built at run time from real Python stdlib sources "
        "(and LongMemEval prose under --data-dir), queries drawn from them "
        "plus code-ish ones; dense: WORST CASE, synthetic bodies from a ~70-word "
        "vocabulary, so every query word is in 20-50%% of documents "
        "(default realistic)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="folder with longmemeval/ for prose in the realistic corpus (default "
        "../shared/data beside the checkout; optional)",
    )
    p.add_argument("--redis-port", type=int, default=6379)
    p.add_argument(
        "--redis-db",
        type=int,
        default=13,
        help="dedicated Redis DB for distributed mode, flushed before and after (default 13)",
    )
    p.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the process logs (printed path) instead of deleting them",
    )
    args = p.parse_args(argv)
    args.sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    return args


def main(argv: list[str] | None = None) -> int:
    global CORPUS
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
        if args.corpus == "realistic":
            log("reading the realistic corpus sources")
            CORPUS = RealisticCorpus(args.data_dir)
        log(f"corpus: {corpus_line(args)}")
        if CORPUS is not None:
            rng = random.Random(0)
            log(
                "example queries: "
                + "; ".join(
                    f"{q!r} in {p} ({s})" for q, p, s in (pick_query(rng) for _ in range(8))
                )
            )
        for mode in modes:
            reports.append(run_mode(mode, args))
    except KeyboardInterrupt:
        log("interrupted: stopping every process started")
        return 130
    finally:
        stop_all()
        for root in TEMP_DIRS:
            shutil.rmtree(root, ignore_errors=True)
        if "distributed" in modes:  # again: a Ctrl-C while stopping skips run_mode's flush
            flush_redis(args.redis_port, args.redis_db)
    print_table(reports, args, command, watch.elapsed())
    return 1 if any(r.error for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
