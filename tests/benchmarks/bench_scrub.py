"""Time of every scrubber rule on its worst generated input, per 100 KB (target: under 50 ms).

    .venv/bin/python tests/benchmarks/bench_scrub.py [--size 100000] [--probe 8000]

For each rule, every adversarial unit of tests/adversarial.py is timed at `--probe` characters;
the rule's three slowest are re-timed at `--size` (best of three) and the worst is printed. Then
`scrub_text` as a whole (every rule, to a fixed point) on the slowest units overall, and on
ordinary text of the same size (a realistic tool output) for comparison.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from engram.privacy import _RULES, scrub_text  # noqa: E402
from tests.adversarial import repeated, seconds, worst_units  # noqa: E402

TARGET_MS = 50.0
ORDINARY = (
    "FAILED tests/test_api.py::test_observe - AssertionError: assert 503 == 202\n"
    'Traceback (most recent call last):\n  File "api/routes.py", line 88, in observe\n'
    "    raise Busy(inbox)\n+    return jsonify(status='queued'), 202\n"
    "commit 3f1c2a9 Fix the inbox bound (token budget 2,000; password reset flow unchanged)\n"
)


def best(fn: object, runs: int = 3) -> float:
    taken = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        taken.append(time.perf_counter() - started)
    return min(taken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--probe", type=int, default=8_000)
    args = parser.parse_args()
    per_kb = 100_000 / args.size
    rows, overall = [], []
    for index, rule, units in worst_units(args.probe):
        timed = [(best(lambda u=u, r=rule: seconds(r, repeated(u, args.size))), u) for u in units]
        taken, unit = max(timed)
        rows.append((taken * 1000 * per_kb, index, rule[0], unit))
        overall.append((taken, unit))
    print(f"{'ms/100KB':>9}  rule  marker                          worst unit")
    for ms, index, marker, unit in sorted(rows, reverse=True):
        flag = "  OVER" if ms > TARGET_MS else ""
        print(f"{ms:9.1f}  {index:4d}  {marker:30s}  {unit!r}{flag}")
    print(f"rules: {len(_RULES)}; over {TARGET_MS:.0f} ms: {sum(r[0] > TARGET_MS for r in rows)}")
    print("\nscrub_text, every rule to a fixed point:")
    for _, unit in sorted(overall, reverse=True)[:5]:
        text = repeated(unit, args.size)
        print(f"{best(lambda t=text: scrub_text(t)) * 1000 * per_kb:9.1f} ms/100KB  {unit!r}")
    issue = "curl " * (args.size // 5)
    print(f"{best(lambda: scrub_text(issue)) * 1000 * per_kb:9.1f} ms/100KB  'curl ' repeated")
    plain = repeated(ORDINARY, args.size)
    print(f"{best(lambda: scrub_text(plain)) * 1000 * per_kb:9.1f} ms/100KB  ordinary tool output")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
