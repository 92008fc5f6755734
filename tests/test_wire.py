"""The wire rules clients and the gateway share (engram/wire.py): one reading of an error body,
one answer to "would a resend change this?", one derived eventId, one backoff."""

from __future__ import annotations

import io
import json
import socket
import threading
from pathlib import Path

import pytest

from engram.backoff import Throttle, backoff_seconds, doubled
from engram.client import GatewayError
from engram.watcher.delivery import REJECTED, TRANSIENT, classify
from engram.wire import (
    AUTH,
    PERMANENT,
    derived_event_id,
    error_body,
    error_message,
    error_parts,
    is_permanent,
    is_transient,
)


def test_error_body_round_trip() -> None:
    body = error_body(
        "invalid_event",
        "invalid event",
        {"fields": {"sessionId": "required"}},
        extra={"retryAfterSeconds": 2},
    )
    assert body == {
        "retryAfterSeconds": 2,
        "error": {
            "code": "invalid_event",
            "message": "invalid event",
            "details": {"fields": {"sessionId": "required"}},
        },
    }
    assert error_parts(body) == ("invalid_event", "invalid event", {"sessionId": "required"})
    assert error_message(422, body) == "HTTP 422: invalid event (sessionId: required)"
    assert (
        error_message(503, error_body("inbox_full", "the inbox is full"))
        == "HTTP 503: the inbox is full"
    )
    # not an error body: its start, never a traceback
    assert error_message(502, "<html>Bad Gateway</html>") == "HTTP 502: <html>Bad Gateway</html>"
    assert error_message(500, None) == "HTTP 500"
    assert error_parts({"error": "flat"}) == ("", "", {})
    assert (
        str(GatewayError(404, error_body("not_found", "no such memory")))
        == "HTTP 404: no such memory"
    )


@pytest.mark.parametrize("status", sorted(PERMANENT))
def test_every_client_treats_a_permanent_answer_alike(status: int) -> None:
    """The hook and its spool keep a PERMANENT answer aside as refused; the transcript and
    memory-file paths reject it: neither retries it (413 and 404 were transient for the
    watchers, permanent for the hook)."""
    assert is_permanent(status) and not is_transient(status)
    assert classify(status, error_body("x", "refused")).status == REJECTED


@pytest.mark.parametrize("status", [0, 408, 429, 500, 502, 503])
def test_transient_answers_are_retried(status: int) -> None:
    assert is_transient(status) and not is_permanent(status)
    if status:
        outcome = classify(status, None)
        assert outcome.status == TRANSIENT and outcome.busy == (status == 503)


@pytest.mark.parametrize("status", sorted(AUTH))
def test_a_setup_problem_stops_the_watchers(status: int) -> None:
    with pytest.raises(GatewayError):
        classify(status, error_body("unauthorized", "wrong secret"))


def test_derived_event_ids_are_stable_and_distinct() -> None:
    content = ["Bash", {"command": "ls"}, "a b", None]
    first = derived_event_id("s1", "PostToolUse", 1700000000.0, content)
    # ids already in ledgers must not change across upgrades: this is the recipe's value
    # before it moved here (engram/events.py and agents/contract.py each had a copy)
    assert first == "derived:6e9d92f947b62ab2c74955a472ea2063"
    assert derived_event_id("s1", "PostToolUse", 1700000000.0, list(content)) == first
    assert derived_event_id("s1", "PostToolUse", 1700000001.0, content) != first
    assert derived_event_id("s2", "PostToolUse", 1700000000.0, content) != first


def test_one_backoff_sequence() -> None:
    waits = [backoff_seconds(n, 2.0, 30.0) for n in range(1, 7)]
    assert waits == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    previous, seen = 0.0, []
    for _ in range(6):
        previous = doubled(previous, 2.0, 30.0)
        seen.append(previous)
    assert seen == waits


def test_a_throttle_lets_one_go_per_interval() -> None:
    throttle = Throttle(60.0)
    assert throttle.ready() and not throttle.ready() and not throttle.ready()
    assert Throttle(0.0).ready() and Throttle(0.0).ready()


# --- the gateway client over a real socket ---------------------------------------------------


def _one_answer(raw: bytes) -> tuple[int, threading.Thread]:
    """A server on a free port that reads one request, sends ``raw`` and closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(raw)
        server.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return server.getsockname()[1], thread


def test_download_copies_the_stream_and_says_how_it_failed(tmp_path: Path) -> None:
    from engram.client import Client, Unreachable

    body = b'{"sessions": [\n' + b",\n".join(b'{"id": "s%d"}' % n for n in range(2000)) + b"\n]}"
    chunked = (
        b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:5000], body[5000:])) + b"0\r\n\r\n"
    )
    port, _ = _one_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
    out = io.BytesIO()
    assert Client(f"http://127.0.0.1:{port}", None).download("/v1/export", out) == len(body)
    assert out.getvalue() == body

    # the gateway stopped part-way: Unreachable (the CLI says so), not an http.client traceback
    port, _ = _one_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked[:3000])
    with pytest.raises(Unreachable, match="127.0.0.1"):
        Client(f"http://127.0.0.1:{port}", None).download("/v1/export", io.BytesIO())

    refusal = error_body("bad secret", "unauthorized")
    text = json.dumps(refusal).encode()
    port, _ = _one_answer(
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(text), text)
    )
    with pytest.raises(GatewayError) as refused:
        Client(f"http://127.0.0.1:{port}", None).download("/v1/export", io.BytesIO())
    assert refused.value.status == 401

    # an error writing the file is the file's, not the gateway's
    port, _ = _one_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnull")
    full = (tmp_path / "out.json").open("wb")
    full.close()
    with pytest.raises(ValueError, match="closed file"):
        Client(f"http://127.0.0.1:{port}", None).download("/v1/export", full)

    with socket.socket() as probe:  # nothing listens here: refused, never sent
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with pytest.raises(Unreachable) as down:
        Client(f"http://127.0.0.1:{free}", None).download("/v1/export", io.BytesIO())
    assert down.value.refused
