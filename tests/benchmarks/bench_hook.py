"""Wall time of `engram hook` as a host runs it (a new process per event), against
`python -c pass` on the same interpreter and machine.

    .venv/bin/python tests/benchmarks/bench_hook.py [--runs 60]

Starts a real `engram serve` (embedded) in a temporary dir, then times, each as fresh processes:
the baseline, a PostToolUse hook (gateway up), a SessionStart hook (gateway up, answers the
context block), a UserPromptSubmit hook that asks for the prompt's context (the store holds
Engram's coding set, 24 sessions, with the local embedder on; the prompts are its questions) and
a PostToolUse hook with the gateway stopped (the event is spooled). Prints
p50/p95 in ms and the ratio to the baseline (aim: under 3x). Bytecode is compiled first, as an
installed package has it.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support import ENGRAM, Cluster  # noqa: E402

FIXTURES = REPO.parent / "shared" / "fixtures" / "hosts"


def timed(
    cmd: list[str], stdin: bytes | None, env: dict[str, str], runs: int, vary: bool = False
) -> list[float]:
    times = []
    for n in range(runs):
        data = stdin
        if vary and stdin is not None:  # a new tool call each time, as a real session makes
            payload = json.loads(stdin)
            payload["tool_use_id"] = f"toolu_bench_{n}_{time.time_ns()}"
            data = json.dumps(payload).encode()
        start = time.perf_counter()
        subprocess.run(cmd, input=data, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def fill(cluster: Cluster) -> None:
    """The coding set's sessions through the gateway (observe, end), then wait until every
    event is stored, summarised and embedded."""
    from engram.bench.context import load_coding, observe_bodies

    for session in load_coding().sessions:
        bodies = observe_bodies(session)
        for body in bodies:
            assert cluster.request("POST", "/v1/observe", body)[0] in (200, 201)
        end = {"project": session["project"], "timestamp": bodies[-1]["timestamp"]}
        cluster.request("POST", f"/v1/sessions/{session['id']}/end", end)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = cluster.request("GET", "/v1/status")[1]
        derived = status.get("derived", {})
        waiting = status.get("inbox", {}).get("waiting", 1) + sum(
            (v or {}).get("pending", 0) for v in derived.values() if isinstance(v, dict)
        )
        if not waiting:
            return
        time.sleep(1)
    raise SystemExit("the coding set was not stored and indexed within 5 minutes")


def prompt_runs(hook: list[str], env: dict[str, str], runs: int) -> tuple[list[float], int]:
    """UserPromptSubmit with the coding set's ledger-api questions as prompts, one session per
    run; returns the wall times and how many printed context."""
    from engram.bench.context import load_coding

    questions = [q.text for q in load_coding().questions if q.project == "ledger-api"]
    payload = json.loads((FIXTURES / "claude-code-UserPromptSubmit.json").read_text())
    times, given = [], 0
    for n in range(runs):
        data = dict(payload, session_id=f"bench-prompt-{n}", prompt=questions[n % len(questions)])
        start = time.perf_counter()
        done = subprocess.run(
            hook + ["UserPromptSubmit"],
            input=json.dumps(data).encode(),
            env=env,
            capture_output=True,
            check=True,
        )
        times.append((time.perf_counter() - start) * 1000)
        given += bool(done.stdout.strip())
    return times, given


def row(name: str, times: list[float], baseline: float | None) -> str:
    ordered = sorted(times)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    ratio = f"{p50 / baseline:4.1f}x" if baseline else "  1.0x"
    return f"{name:<34} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms   {ratio}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    compileall.compile_dir(str(REPO / "agents"), quiet=1)
    compileall.compile_dir(str(REPO / "engram"), quiet=1)
    post = (FIXTURES / "claude-code-PostToolUse.json").read_bytes()
    start = (FIXTURES / "claude-code-SessionStart.json").read_bytes()
    load = os.getloadavg()[0]
    # a spooling hook leaves a detached drain child that may still write into the data dir
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        cluster = Cluster(Path(tmp), ENGRAM_PROJECT="ledger-api", ENGRAM_EMBEDDER="local")
        env = cluster.env
        try:
            cluster.serve()
            fill(cluster)
            hook = [ENGRAM, "hook", "claude-code"]
            timed(hook + ["PostToolUse"], post, env, 5, vary=True)  # warm the server
            base = timed([sys.executable, "-c", "pass"], None, env, args.runs)
            up = timed(hook + ["PostToolUse"], post, env, args.runs, vary=True)
            session = timed(hook + ["SessionStart"], start, env, args.runs)
            prompts, given = prompt_runs(hook, env, args.runs)
        finally:
            cluster.stop_all()
        down = timed(hook + ["PostToolUse"], post, env, args.runs, vary=True)
    baseline = statistics.median(base)
    print(
        f"engram hook wall time, {args.runs} runs each, load {load:.1f}, "
        f"{os.cpu_count()} cores, {sys.version.split()[0]}"
    )
    print(row("python -c pass (baseline)", base, None))
    print(row("hook PostToolUse, gateway up", up, baseline))
    print(row("hook SessionStart (context)", session, baseline))
    print(
        row("hook UserPromptSubmit (its context)", prompts, baseline)
        + f"   context added to {given} of {len(prompts)}"
    )
    print(row("hook PostToolUse, gateway down", down, baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
