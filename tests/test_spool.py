"""The spool, the transport's deadline and the eventId bounds, without a server: what happens to
torn lines, concurrent writers, a trickling peer and over-long ids."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram.agents.contract import MAX_ID_CHARS, HookEvent, event_id
from engram.agents.spool import Spool
from engram.agents.transport import GatewayLink
from engram.client import is_loopback_url
from engram.wire import Unreachable
from tests.support import free_port


def request(n: int) -> dict[str, object]:
    return {
        "method": "POST",
        "path": "/v1/observe",
        "body": {"eventId": f"e{n}", "sessionId": "s", "project": "p"},
    }


def ids(records: list[dict[str, object]]) -> list[str]:
    return [r["body"]["eventId"] for r in records]  # type: ignore[index]


def closed_gateway() -> GatewayLink:
    return GatewayLink(f"http://127.0.0.1:{free_port()}", None, explicit_secret=False)


def test_a_torn_line_does_not_swallow_the_next_event_and_is_counted(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20, 3600)
    spool.append([request(1)])
    with open(spool.events, "a") as out:  # a hook killed half-way through its line
        out.write('{"spooledAt": 1, "method": "POST", "path": "/v1/obs')
    spool.append([request(2), request(3)])
    assert ids(spool.pending()) == ["e1", "e2", "e3"]
    counts = spool.drain(closed_gateway(), timeout=0.5)
    assert counts is not None
    assert counts["unreadable"] == 1 and counts["left"] == 3
    assert spool.counters()["unreadable"] == 1
    assert ids(spool.pending()) == ["e1", "e2", "e3"]  # put back, in order


def test_counters_survive_concurrent_writers(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from engram.agents.spool import Spool\n"
        "spool = Spool(Path(sys.argv[1]), 1 << 20, 3600)\n"
        "for n in range(50):\n"
        "    spool.reject({'method': 'POST', 'path': '/v1/observe', 'body': {}}, 422, None)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(directory)]) for _ in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    spool = Spool(directory, 1 << 20, 3600)
    assert spool.counters()["rejected"] == 200
    assert len(spool.rejected_records()) == 200


def test_a_full_spool_drops_and_counts(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 400, 3600)
    kept = spool.append([request(n) for n in range(10)])
    assert 0 < kept < 10
    assert spool.counters()["droppedFull"] == 10 - kept
    assert spool.events.stat().st_size <= 400


def test_a_batch_a_drain_holds_counts_against_the_bound(tmp_path: Path) -> None:
    # A drain moves events.jsonl aside while it tries the gateway; hooks appending meanwhile
    # must still see the bytes it holds, or the spool grows past its bound when it puts them back.
    spool = Spool(tmp_path / "spool", 400, 3600)
    first = spool.append([request(n) for n in range(10)])
    spool.events.rename(spool.dir / "draining-4242.jsonl")
    assert spool.append([request(99)]) == 0
    assert spool.counters()["droppedFull"] == 10 - first + 1
    counts = spool.drain(closed_gateway(), timeout=0.5)
    assert counts is not None and counts["left"] == first
    assert spool.events.stat().st_size <= 400


def test_spooled_secrets_are_scrubbed(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20, 3600)
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    body = {"eventId": "e1", "toolOutput": f"GITHUB_TOKEN={key}"}
    spool.append([{"method": "POST", "path": "/v1/observe", "body": body}])
    assert key not in spool.events.read_text()


@pytest.fixture
def trickler() -> Iterator[int]:
    """A peer that accepts and answers one byte every 0.2 s, forever: a per-read timeout never
    fires on it, only a deadline on the whole request does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b"x")
                except OSError:
                    return
                time.sleep(0.2)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_the_deadline_bounds_the_whole_request_not_each_read(trickler: int) -> None:
    gateway = GatewayLink(f"http://127.0.0.1:{trickler}", None, explicit_secret=False)
    started = time.monotonic()
    with pytest.raises(Unreachable):
        gateway.send("POST", "/v1/observe", {}, time.monotonic() + 1.0)
    assert time.monotonic() - started < 1.5


def test_over_long_event_ids_stay_distinct_and_bounded() -> None:
    session = "s" * 190
    first, second = (
        HookEvent("raw", "PostToolUse", "tool_post", session_id=session, tool_use_id=f"call-{n}")
        for n in (1, 2)
    )
    a, b = event_id(first, 0.0), event_id(second, 0.0)
    assert a != b and len(a) <= MAX_ID_CHARS and len(b) <= MAX_ID_CHARS
    assert event_id(first, 5.0) == a  # stable: the replay is the same event


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8737", True),
        ("http://127.9.9.9", True),
        ("http://localhost:1", True),
        ("http://[::1]:8737", True),
        ("http://127.attacker.example:8737", False),
        ("http://10.0.0.5:8737", False),
        ("https://engram.example.com", False),
    ],
)
def test_the_secret_goes_only_to_loopback(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback
    assert (GatewayLink(url, "s3cret", explicit_secret=False).secret == "s3cret") is loopback


def test_pending_lists_leftover_batches_first(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20, 3600)
    spool.append([request(2)])
    (spool.dir / "draining-4242.jsonl").write_text(
        json.dumps({"spooledAt": time.time(), **request(1)}) + "\n"
    )
    assert ids(spool.pending()) == ["e1", "e2"]
