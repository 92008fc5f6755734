"""Graph stream latency at scale: N synthetic coding-agent observations (edits, test runs with
errors, reads, installs) over a few hundred files, then p50/p95 of ``graph.stream``.

    .venv/bin/python tests/benchmarks/bench_graph.py [N] [database-url]
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time

from engram import graph, observations
from engram.compress import compress
from engram.drains import drain_graph
from engram.events import Event
from engram.scope import Scope
from engram.store import Store

ERRORS = [
    "ValueError",
    "KeyError",
    "TypeError",
    "IntegrityError",
    "TimeoutError",
    "ConnectionRefusedError",
    "AssertionError",
    "ZeroDivisionError",
]


def payloads(n: int, rng: random.Random):  # type: ignore[no-untyped-def]
    modules = [f"src/pkg{i % 20}/module_{i}.py" for i in range(400)]
    for i in range(n):
        session = f"s{i // 40}"
        path = modules[min(int(rng.paretovariate(1.2)) - 1, len(modules) - 1)]
        test = "tests/test_" + path.rpartition("/")[2]
        kind = i % 4
        base = {
            "eventId": f"e{i}",
            "sessionId": session,
            "project": "bench",
            "host": "claude-code",
            "hookType": "PostToolUse",
            "timestamp": 1.7e9 + i,
            "agentId": None if i % 3 else f"agent{i % 2}",
        }
        if kind == 0:
            yield {
                **base,
                "toolName": "Edit",
                "toolInput": {
                    "file_path": path,
                    "old_string": f"def handler_{i}(x):",
                    "new_string": f"def handler_{i}(x, retry=True):  # uses HttpClient.fetch()",
                },
            }
        elif kind == 1:
            err = rng.choice(ERRORS)
            yield {
                **base,
                "toolName": "Bash",
                "toolInput": {"command": f"pytest {test} -q"},
                "toolOutput": {
                    "stdout": f"FAILED {test}::test_case_{i % 7} - {err}: bad\n1 failed",
                    "exit_code": 1,
                },
            }
        elif kind == 2:
            yield {
                **base,
                "toolName": "Read",
                "toolInput": {"file_path": path},
                "toolOutput": {"content": "import requests\nfrom sqlalchemy import select\n"},
            }
        else:
            yield {
                **base,
                "toolName": "Bash",
                "toolInput": {
                    "command": f"pip install pkg-{i % 50} && git commit -am 'touch {path}'"
                },
                "toolOutput": {"stdout": "ok", "exit_code": 0},
            }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    url = sys.argv[2] if len(sys.argv) > 2 else f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    store = Store.open(url)
    rng = random.Random(7)
    started = time.perf_counter()
    batch = []
    for payload in payloads(n, rng):
        batch.append(payload)
        if len(batch) == 500:
            with store.write() as conn:
                for p in batch:
                    observations.store(conn, store.keyword, Event.from_payload(p), compress(p))
            batch = []
    if batch:
        with store.write() as conn:
            for p in batch:
                observations.store(conn, store.keyword, Event.from_payload(p), compress(p))
    stored = time.perf_counter() - started
    started = time.perf_counter()
    applied = drain_graph(store, batch=500)
    drained = time.perf_counter() - started
    with store.read() as conn:
        print(
            f"{n} observations stored in {stored:.1f}s; graph built in {drained:.1f}s "
            f"({drained / max(applied, 1) * 1000:.2f} ms/doc); {graph.stats(conn)}"
        )
        queries = [
            "why does module_3.py fail",
            "ValueError in module_250.py",
            "tests/test_module_17.py",
            "IntegrityError",
            "pytest",
            "HttpClient.fetch",
            "git commit of src/pkg4/module_44.py",
            "nothing known in this one",
        ]
        for scope in (Scope("bench"), Scope("bench", "agent1")):
            times = []
            for _ in range(25):
                for q in queries:
                    t = time.perf_counter()
                    graph.stream(conn, q, scope, 40)
                    times.append((time.perf_counter() - t) * 1000)
            times.sort()
            print(
                f"stream {scope}: p50 {statistics.median(times):.2f} ms, "
                f"p95 {times[int(len(times) * 0.95)]:.2f} ms, max {times[-1]:.2f} ms"
            )
            for q in queries:
                t = time.perf_counter()
                hits = graph.stream(conn, q, scope, 40)
                print(f"  {q!r}: {len(hits)} hits, {(time.perf_counter() - t) * 1000:.2f} ms")
    store.close()


if __name__ == "__main__":
    main()
