"""What the viewer's activity row costs the capture path.

Stores N realistic events (a long test run with a traceback, a 120-line diff) through
``observations.store`` on SQLite, with the activity row and with ``activity.record`` made a no-op,
alternating three rounds; prints milliseconds per stored event.

    .venv/bin/python tests/benchmarks/bench_activity.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engram import activity, observations
from engram.compress import compress
from engram.events import validate_event
from engram.privacy import scrub
from engram.store import Store, now

TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "src/app/mod{i}.py", line {i * 7}, in handler{i}\n'
        f"    result = process(payload[{i}])\n"
        for i in range(30)
    )
    + "KeyError: 'user_id'\n"
)
TEST_RUN = (
    "".join(f"tests/test_mod{i}.py::test_case_{j} PASSED\n" for i in range(40) for j in range(5))
    + TRACEBACK
)
DIFF = "".join(f"- old line {i}\n+ new line {i} with data.get('k{i}')\n" for i in range(120))


def bodies(n: int, tag: str) -> Iterator[dict[str, Any]]:
    for i in range(n):
        body: dict[str, Any] = {
            "eventId": f"{tag}:{i}",
            "sessionId": f"{tag}-s{i // 50}",
            "project": "bench",
            "host": "claude-code",
            "hookType": "PostToolUse",
        }
        if i % 3 == 2:
            body.update(
                toolName="Edit",
                toolInput={
                    "file_path": f"src/app/mod{i % 40}.py",
                    "old_string": DIFF[:3000],
                    "new_string": DIFF[3000:6000],
                },
            )
        else:
            body.update(
                toolName="Bash",
                toolInput={"command": f"pytest tests/test_mod{i % 40}.py"},
                toolOutput={"stdout": TEST_RUN, "exit_code": i % 3},
            )
        yield body


def per_event_ms(store: Store, n: int, tag: str, record: Callable[..., None]) -> float:
    activity.record = record
    prepared = []
    for body in bodies(n, tag):
        event = validate_event(body, max_field_chars=100_000, received_at=now())
        prepared.append((event, compress(scrub(event.to_payload()))))  # type: ignore[arg-type]
    start = time.perf_counter()
    for event, compressed in prepared:
        with store.write() as conn:
            observations.store(conn, store.keyword, event, compressed)
    return (time.perf_counter() - start) / n * 1000


def _no_row(*_args: Any, **_kwargs: Any) -> None:
    return None


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    real = activity.record
    store = Store.open(f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}")
    figures: dict[str, list[float]] = {"with the activity row": [], "without": []}
    for round_ in range(3):
        figures["with the activity row"].append(per_event_ms(store, n, f"w{round_}", real))
        figures["without"].append(per_event_ms(store, n, f"o{round_}", _no_row))
    activity.record = real
    for name, values in figures.items():
        shown = " / ".join(f"{v:.3f}" for v in values)
        print(f"{name}: {shown} ms per stored event (median {sorted(values)[1]:.3f})")
    store.close()


if __name__ == "__main__":
    main()
