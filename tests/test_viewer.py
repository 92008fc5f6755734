"""The viewer at the HTTP level: sign-in by one-time link, the cookie and CSRF rules, CSP, the
Host/Origin checks, static files, and the activity feed behind the live stream (resume, reset,
heartbeat, late ids). What a person does in the page is tests/test_viewer_browser.py."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from typing import Any

import pytest
from sqlalchemy import insert

from engram import activity
from engram.activity import Feed
from engram.schema import activity as activity_table
from engram.store import Store, dumps, now
from engram.webauth import COOKIE, CSRF_HEADER, LINK_SECONDS, ViewerAuth
from tests.support import Api, observe_body, wait_for


def _link(api: Api) -> str:
    status, body = api.post("/v1/viewer/links")
    assert status == 201, body
    assert body["path"].startswith("login?token=")
    return str(body["path"].split("=", 1)[1])


def _sign_in(api: Api) -> tuple[Any, str]:
    """A browser-like client (no bearer) signed in through a fresh link; its CSRF token."""
    browser = api.client.application.test_client()
    response = browser.get(f"/login?token={_link(api)}")
    assert response.status_code == 303
    page = browser.get("/")
    found = re.search(r'name="engram-csrf" content="([^"]+)"', page.get_data(as_text=True))
    assert found, page.get_data(as_text=True)
    return browser, found.group(1)


def test_a_link_signs_in_once_with_an_httponly_strict_cookie(api: Api) -> None:
    token = _link(api)
    browser = api.client.application.test_client()
    first = browser.get(f"/login?token={token}")
    assert first.status_code == 303
    assert first.headers["Location"] == "./"  # relative: works under a proxy's path prefix
    cookie = first.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Path=" not in cookie  # the directory of /login: the viewer's root behind a prefix
    assert first.headers["Referrer-Policy"] == "no-referrer"
    again = api.client.application.test_client().get(f"/login?token={token}")
    assert again.status_code == 403
    assert "already used" in again.get_data(as_text=True)
    assert COOKIE not in again.headers.get("Set-Cookie", "")
    assert api.client.application.test_client().get("/login?token=made-up").status_code == 403


def test_a_link_expires(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = ViewerAuth(store, session_hours=1)
    token = auth.mint_link()
    later = now() + LINK_SECONDS + 1
    monkeypatch.setattr("engram.webauth.now", lambda: later)
    assert auth.redeem(token) is None


def test_the_page_without_a_session_asks_to_sign_in_and_runs_nothing(api: Api) -> None:
    response = api.client.application.test_client().get("/")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "engram open" in html
    assert "<script" not in html and "engram-csrf" not in html
    assert "script-src 'nonce-" in response.headers["Content-Security-Policy"]


def test_the_shell_has_a_fresh_nonce_no_inline_code_and_no_secret(api: Api) -> None:
    browser, _ = _sign_in(api)
    pages = [browser.get("/") for _ in range(2)]
    nonces = []
    for page in pages:
        html = page.get_data(as_text=True)
        csp = page.headers["Content-Security-Policy"]
        nonce = re.search(r"'nonce-([^']+)'", csp)
        assert nonce
        nonces.append(nonce.group(1))
        scripts = re.findall(r"<script[^>]*>", html)
        assert scripts == [f'<script type="module" nonce="{nonce.group(1)}" src="static/app.js">']
        assert not re.search(r"\son[a-z]+\s*=", html), "no inline event handlers"
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert api.secret not in html
        assert page.headers["Cache-Control"] == "no-store"
    assert nonces[0] != nonces[1]
    for name in ("app.js", "api.js", "live.js", "overview.js", "sessions.js", "memories.js"):
        source = browser.get(f"/static/{name}").get_data(as_text=True)
        assert "innerHTML" not in source and "eval(" not in source, name
        assert not re.search(r"fetch\(\s*['\"`]/", source), f"{name}: URLs stay relative"


def test_the_cookie_reads_and_writes_only_with_the_csrf_token(api: Api, project: str) -> None:
    browser, csrf = _sign_in(api)
    assert browser.get("/v1/status").status_code == 200
    body = {"project": project, "content": "Deploys go through make release"}
    refused = browser.post("/v1/memories", json=body)
    assert refused.status_code == 403
    assert refused.get_json()["error"]["code"] == "csrf_failed"
    wrong = browser.post("/v1/memories", json=body, headers={CSRF_HEADER: csrf + "x"})
    assert wrong.status_code == 403
    made = browser.post("/v1/memories", json=body, headers={CSRF_HEADER: csrf})
    assert made.status_code == 201
    memory_id = made.get_json()["id"]
    forgot = browser.post(
        f"/v1/memories/forget?project={project}",
        json={"ids": [memory_id, "mem_nope"], "reason": "stale"},
        headers={CSRF_HEADER: csrf},
    )
    assert forgot.status_code == 200
    assert forgot.get_json() == {"forgotten": [memory_id], "missing": ["mem_nope"]}
    trail = api.get(f"/v1/audit?targetId={memory_id}")[1]["items"]
    assert {(e["action"], e["actor"]) for e in trail} == {
        ("memory.create", "viewer"),
        ("memory.forget", "viewer"),
    }
    assert [e for e in trail if e["action"] == "memory.forget"][0]["details"]["reason"] == "stale"
    # a browser session cannot mint more links; only the bearer secret can
    assert browser.post("/v1/viewer/links", headers={CSRF_HEADER: csrf}).status_code == 403
    # the cookie opens /v1/ only, not the MCP mount
    assert browser.post("/mcp", json={}, headers={CSRF_HEADER: csrf}).status_code == 401


def test_signing_out_ends_the_session(api: Api) -> None:
    browser, csrf = _sign_in(api)
    assert browser.post("/v1/viewer/logout", headers={CSRF_HEADER: csrf}).status_code == 200
    assert browser.get("/v1/status").status_code == 401
    assert "engram open" in browser.get("/").get_data(as_text=True)


def test_a_made_up_cookie_is_refused(api: Api) -> None:
    browser = api.client.application.test_client()
    browser.set_cookie(COOKIE, "forged")
    assert browser.get("/v1/status").status_code == 401


def test_host_and_origin_checks_cover_the_viewer(api: Api) -> None:
    browser, csrf = _sign_in(api)
    for path in ("/", "/login?token=x", "/static/app.js", "/v1/status"):
        assert browser.get(path, headers={"Host": "evil.example"}).status_code == 403, path
        # DNS rebinding: a name that resolves to 127.0.0.1 is still not a loopback name
        assert browser.get(path, headers={"Host": "127.0.0.1.nip.io"}).status_code == 403
    refused = browser.post(
        "/v1/memories",
        json={"project": "p", "content": "x"},
        headers={CSRF_HEADER: csrf, "Origin": "https://evil.example"},
    )
    assert refused.status_code == 403
    assert refused.get_json()["error"]["code"] == "origin_not_allowed"


def test_static_files_are_the_package_s_and_nothing_else(api: Api) -> None:
    browser = api.client.application.test_client()
    js = browser.get("/static/app.js")
    assert js.status_code == 200 and js.mimetype == "text/javascript"
    assert js.headers["X-Content-Type-Options"] == "nosniff"
    assert browser.get("/static/app.css").mimetype == "text/css"
    for bad in ("../__init__.py", "..%2f__init__.py", "nope.js", "app.py", ".hidden.js"):
        assert browser.get(f"/static/{bad}").status_code == 404, bad


def test_too_many_streams_are_refused_with_a_fix(tmp_path: Any) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    gw = build_gateway(make_settings(tmp_path, ENGRAM_VIEWER_MAX_STREAMS="1"))
    try:
        client = gw.app.test_client()
        headers = {"Authorization": f"Bearer {gw.secret}"}
        first = client.get("/v1/events", headers=headers, buffered=False)
        assert first.status_code == 200 and first.mimetype == "text/event-stream"
        second = client.get("/v1/events", headers=headers)
        assert second.status_code == 503
        assert second.get_json()["error"]["code"] == "too_many_streams"
        assert "ENGRAM_VIEWER_MAX_STREAMS" in second.get_json()["error"]["message"]
        first.close()  # the slot comes back when the server closes the stream
        third = client.get("/v1/events", headers=headers, buffered=False)
        assert third.status_code == 200
        third.close()
        bad = client.get("/v1/events", headers={**headers, "Last-Event-ID": "x"})
        assert bad.status_code == 422
    finally:
        gw.close()


# -- the feed ------------------------------------------------------------------------------


def _events(feed: Feed, last_id: int | None, seconds: float = 0.6) -> list[Any]:
    got = []
    for event in feed.listen(last_id, 0.2, time.monotonic() + seconds):
        got.append(event)
    return got


def test_changes_become_typed_events_in_their_transaction(store: Store, project: str) -> None:
    from engram import inbox, memories, sessions
    from engram.events import validate_event

    sessions.start(store, "s1", project, host="codex", agent_id=None, cwd=None)
    made = memories.remember(
        store, store.keyword, memories.validate({"project": project, "content": "a fact"})
    )
    memories.update_content(store, store.keyword, made["id"], "a better fact")
    memories.forget(store, store.keyword, made["id"], reason="wrong")
    sessions.end(store, "s1")
    event = validate_event(
        observe_body(project, "s2", 1), max_field_chars=10_000, received_at=now()
    )
    inbox.accept(store, event, 100)
    inbox.fail(store, event.event_id, "boom", attempts=1, max_attempts=1, base=1, cap=1)
    inbox.retry_dead(store, event.event_id)
    with store.read() as conn:
        rows = activity.after(conn, 0)
    assert [(e.type, e.data.get("id") or e.data.get("eventId")) for e in rows] == [
        ("session.started", "s1"),
        ("memory.created", made["id"]),
        ("memory.changed", made["id"]),
        ("memory.forgotten", made["id"]),
        ("session.ended", "s1"),
        ("capture.dead", event.event_id),
        ("capture.retried", None),
    ]
    assert rows[0].data == {"id": "s1", "project": project, "host": "codex"}
    assert rows[3].data["reason"] == "wrong"
    assert "a fact" not in json.dumps([e.data for e in rows])  # ids, never content
    assert [e.id for e in rows] == sorted(e.id for e in rows)


def _add(store: Store, n: int, type_: str = "session.started") -> None:
    with store.write() as conn:
        for i in range(n):
            activity.record(conn, type_, id=f"s{i}")


def test_a_listener_resumes_after_its_last_id_from_memory_or_the_table(store: Store) -> None:
    _add(store, 5)
    feed = Feed(store, poll_seconds=0.05)
    with store.read() as conn:
        ids = [e.id for e in activity.after(conn, 0)]
    resumed = [e for e in _events(feed, ids[1]) if e is not None and e.id is not None]
    assert [e.id for e in resumed] == ids[2:]  # from the table: the feed held nothing yet
    feed.poll()
    _add(store, 2)
    feed.poll()
    again = [e for e in _events(feed, ids[-1]) if e is not None and e.id is not None]
    assert [e.data["id"] for e in again] == ["s0", "s1"]  # the two new ones, from memory
    feed.close()


def test_a_listener_gets_each_event_once_and_nothing_it_had(store: Store) -> None:
    """A viewer that reconnects with the id it saw last gets only what came after, even when
    the feed still holds the older events (it re-sent them all, out of order, and the page's
    last id went backwards); one listening from now gets nothing that was there before it."""
    feed = Feed(store, poll_seconds=0.05)
    feed.poll()
    _add(store, 3)
    feed.poll()  # the feed holds all three
    with store.read() as conn:
        ids = [e.id for e in activity.after(conn, 0)]
    resumed = [e.id for e in _events(feed, ids[1]) if e is not None and e.id is not None]
    assert resumed == ids[2:]
    assert [e for e in _events(feed, None) if e is not None and e.id is not None] == []
    # held or not yet read, a new event reaches a listener from now exactly once
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.extend(_events(feed, None, seconds=1.5)))
    thread.start()
    time.sleep(0.3)
    _add(store, 1)
    thread.join()
    assert [e.data["id"] for e in got if e is not None and e.id is not None] == ["s0"]
    feed.close()


def test_a_listener_older_than_what_is_kept_is_told_to_reload(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(activity, "KEEP", 10)
    monkeypatch.setattr(activity, "PRUNE_EVERY", 10)
    _add(store, 25)
    with store.read() as conn:
        assert activity.oldest_id(conn) > 5  # pruned in the writers' transactions
    feed = Feed(store, poll_seconds=0.05)
    got = _events(feed, 1)
    assert got[0] is not None and got[0].type == "reset" and got[0].id is None
    feed.close()


def test_live_events_heartbeats_and_counts(store: Store) -> None:
    feed = Feed(store, poll_seconds=0.05)
    feed.poll()  # the floor: what exists now is not news
    got: list[Any] = []

    def listen() -> None:
        got.extend(_events(feed, None, seconds=1.5))

    thread = threading.Thread(target=listen)
    thread.start()
    time.sleep(0.3)
    _add(store, 1)
    thread.join()
    types = [None if e is None else e.type for e in got]
    assert "session.started" in types
    assert None in types  # a heartbeat while nothing happened
    counts = [e for e in got if e is not None and e.type == "counts"]
    assert counts and counts[-1].data["counts"]["sessions"] == 0  # activity rows, no sessions
    sse = [e for e in got if e is not None and e.type == "session.started"][0].sse()
    assert re.match(r"id: \d+\nevent: session.started\ndata: \{.*\}\n\n$", sse)
    feed.close()


def test_an_event_written_through_one_replica_reaches_another(store: Store) -> None:
    """Two gateway replicas share a store and nothing else: each one's feed sees the other's
    writes (on PostgreSQL this is the distributed deployment)."""
    other = Store.open(store.engine.url.render_as_string(hide_password=False))
    try:
        here, there = Feed(store, poll_seconds=0.05), Feed(other, poll_seconds=0.05)
        here.poll(), there.poll()
        with store.read() as conn:
            before = activity.latest_id(conn)
        with other.write() as conn:
            activity.record(conn, "session.started", id="from-replica-b")
        # listen after the id read before the write: "from now" (None) raced the feed's own
        # reader, which could take the event in before the listener marked what it holds as
        # already seen (a failed CI run); a window long enough for a loaded machine
        seen = [e for e in _events(here, before, seconds=3.0) if e is not None and e.id]
        assert [e.data["id"] for e in seen] == ["from-replica-b"]
        here.close(), there.close()
    finally:
        other.close()


def test_an_id_that_commits_late_is_still_delivered(store: Store) -> None:
    """PostgreSQL hands out ids at insert and shows rows at commit: id n+1 can be visible
    before id n. The feed holds the gap and delivers n when it appears."""
    feed = Feed(store, poll_seconds=0.05)
    with store.write() as conn:
        activity.record(conn, "session.started", id="first")
    feed.poll()
    with store.read() as conn:
        base = activity.latest_id(conn)

    def put(row_id: int, name: str) -> None:
        with store.write() as conn:
            conn.execute(
                insert(activity_table).values(
                    id=row_id, at=now(), type="session.started", data=dumps({"id": name})
                )
            )

    put(base + 2, "later")
    feed.poll()
    put(base + 1, "late")
    feed.poll()
    names = [e.data["id"] for e in _events(feed, base) if e is not None and e.id is not None]
    assert sorted(names) == ["late", "later"]
    feed.close()


# -- the stream over real HTTP ----------------------------------------------------------------


def _read_stream(url: str, headers: dict[str, str], seconds: float) -> str:
    """What a stream sent in its first ``seconds`` (raw HTTP, as a browser would see it)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=seconds) as sock:
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        sock.sendall(f"GET /v1/events HTTP/1.1\r\nHost: {host}\r\n{lines}\r\n".encode())
        data = b""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace").replace("\r", "")


def test_the_stream_over_waitress_resumes_from_last_event_id(served: Any, project: str) -> None:
    cluster = served
    auth = {"Authorization": f"Bearer {cluster.secret}"}
    for n in (1, 2):
        assert cluster.request("POST", "/v1/observe", observe_body(project, "live", n))[0] == 201
    wait_for(
        lambda: cluster.request("GET", f"/v1/observations?project={project}")[1]["items"][1:],
        message="both stored",
    )
    text = _read_stream(cluster.url, {**auth, "Last-Event-ID": "0"}, 1.5)
    assert "HTTP/1.1 200" in text and "text/event-stream" in text
    stored = re.findall(r"^id: (\d+)\nevent: observation.stored\ndata: (.*)$", text, re.M)
    assert [json.loads(d)["sessionId"] for _, d in stored] == ["live", "live"], text
    assert "event: counts" in text
    # resume after the first: the second arrives again, the first does not
    first, second = (int(i) for i, _ in stored)
    rest = _read_stream(cluster.url, {**auth, "Last-Event-ID": str(first)}, 1.5)
    resumed = [int(i) for i in re.findall(r"^id: (\d+)$", rest, re.M)]
    assert second in resumed and first not in resumed
    # without a secret or a cookie there is no stream
    assert "HTTP/1.1 401" in _read_stream(cluster.url, {}, 1.0)
