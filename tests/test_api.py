"""The REST contract against an embedded gateway: real worker thread, real SQLite."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import text

from engram.schema import capture_inbox, event_ledger, observations
from tests.support import Api, count_rows, observe_body, wait_for

# --- auth, origin, content type, error shape ------------------------------------------------


def test_livez_and_health_are_public(api: Api) -> None:
    assert api.client.get("/v1/livez").status_code == 200
    health = api.client.get("/v1/health")
    assert health.status_code == 200 and health.get_json()["status"] == "ok"


@pytest.mark.parametrize(
    "path", ["/v1/status", "/v1/sessions?project=x", "/v1/export", "/v1/audit", "/v1/capture"]
)
def test_everything_else_needs_the_bearer_secret(api: Api, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": api.secret}):
        response = api.client.get(path, headers=headers)
        assert response.status_code == 401
        assert response.get_json()["error"]["code"] == "unauthorized"


def test_foreign_origin_is_refused_even_with_the_secret(api: Api) -> None:
    status, body = api.get("/v1/status", headers={"Origin": "https://evil.example"})
    assert status == 403 and body["error"]["code"] == "origin_not_allowed"
    assert api.get("/v1/status", headers={"Origin": "http://localhost:3000"})[0] == 200
    assert api.get("/v1/status", headers={"Origin": "http://127.0.0.1:8737"})[0] == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1.evil.example",
        "http://localhost.evil.example:8737",
        "http://127.evil.example",
        "http://[::1].evil.example",
        "null",
    ],
)
def test_origins_that_only_start_like_loopback_are_refused(api: Api, origin: str) -> None:
    status, body = api.get("/v1/status", headers={"Origin": origin})
    assert status == 403 and body["error"]["code"] == "origin_not_allowed"
    response = api.client.get("/v1/livez", headers={"Origin": origin})
    assert response.status_code == 403 and "Access-Control-Allow-Origin" not in response.headers


@pytest.mark.parametrize("host", ["localhost:8737", "127.0.0.1", "127.0.0.2:1", "[::1]:8737"])
def test_loopback_host_names_are_answered(api: Api, host: str) -> None:
    assert api.get("/v1/status", headers={"Host": host})[0] == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8737", "127.0.0.1.evil.example", "localhost.evil"]
)
def test_a_rebound_name_is_refused_on_every_route(api: Api, host: str) -> None:
    # DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser sends it as Host
    for path in ("/v1/livez", "/v1/health", "/v1/status"):
        status, body = api.get(path, headers={"Host": host})
        assert status == 403 and body["error"]["code"] == "host_not_allowed", (path, body)


def test_allowed_hosts_and_a_non_loopback_bind(tmp_path: Any) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    for env, answered, refused in (
        ({"ENGRAM_ALLOWED_HOSTS": "engram.internal"}, "engram.internal:443", "other.internal"),
        ({"ENGRAM_HOST": "0.0.0.0"}, "any.name.example", None),
    ):
        gw = build_gateway(make_settings(tmp_path, **env), start_worker=False)
        try:
            client = gw.app.test_client()
            assert client.get("/v1/livez", headers={"Host": answered}).status_code == 200
            if refused:
                assert client.get("/v1/livez", headers={"Host": refused}).status_code == 403
        finally:
            gw.close()


def test_bearer_scheme_is_case_insensitive(api: Api) -> None:
    response = api.client.get("/v1/status", headers={"Authorization": f"bearer {api.secret}"})
    assert response.status_code == 200


def test_allow_listed_origin_passes(tmp_path: Any) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    gw = build_gateway(
        make_settings(tmp_path, ENGRAM_ALLOWED_ORIGINS="https://app.example"), start_worker=False
    )
    try:
        client = gw.app.test_client()
        auth = {"Authorization": f"Bearer {gw.secret}"}
        assert client.get("/v1/livez", headers={"Origin": "https://app.example"}).status_code == 200
        assert (
            client.get("/v1/status", headers={**auth, "Origin": "https://app.example/"}).status_code
            == 200
        )
        assert (
            client.get(
                "/v1/status", headers={**auth, "Origin": "https://other.example"}
            ).status_code
            == 403
        )
        # CORS: a preflight needs no secret; real responses name the allowed origin
        preflight = client.options(
            "/v1/search",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 204
        assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
        response = client.get("/v1/status", headers={**auth, "Origin": "https://app.example"})
        assert response.headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert (
            client.options(
                "/v1/search",
                headers={
                    "Origin": "https://other.example",
                    "Access-Control-Request-Method": "POST",
                },
            ).status_code
            == 403
        )
    finally:
        gw.close()


def test_writes_must_be_json(api: Api) -> None:
    response = api.client.post(
        "/v1/memories",
        data="content=x",
        headers={**api.headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415
    assert response.get_json() == {
        "error": {
            "code": "unsupported_media_type",
            "message": "request bodies must be application/json",
        }
    }


@pytest.mark.parametrize(
    "method,path,status,code",
    [
        ("GET", "/v1/nope", 404, "not_found"),
        ("DELETE", "/v1/observe", 405, "method_not_allowed"),
        ("GET", "/v1/memories/mem_missing", 404, "not_found"),
        ("GET", "/v1/sessions?project=p&limit=0", 422, "validation_failed"),
        ("GET", "/v1/sessions?project=p&limit=1001", 422, "validation_failed"),
        ("GET", "/v1/sessions?project=p&cursor=garbage", 400, "bad_cursor"),
        ("GET", "/v1/sessions", 422, "scope_required"),
        ("GET", "/v1/audit?cursor=WyJ4Il0", 400, "bad_cursor"),  # ["x"]: right shape, wrong type
        ("GET", "/v1/sessions?project=p&cursor=WyJ4IiwgMV0", 400, "bad_cursor"),  # ["x", 1]
    ],
)
def test_one_error_shape(api: Api, method: str, path: str, status: int, code: str) -> None:
    got_status, body = api.call(method, path)
    assert got_status == status
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert set(body["error"]) <= {"code", "message", "details"}


def test_oversized_body_is_413(tmp_path: Any) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    gw = build_gateway(make_settings(tmp_path, ENGRAM_MAX_BODY_BYTES="1000"), start_worker=False)
    try:
        response = gw.app.test_client().post(
            "/v1/observe",
            json={"prompt": "x" * 5000},
            headers={"Authorization": f"Bearer {gw.secret}"},
        )
        assert response.status_code == 413
        assert response.get_json()["error"]["code"] == "payload_too_large"
    finally:
        gw.close()


# --- capture --------------------------------------------------------------------------------


def test_observe_accepts_then_answers_duplicate(api: Api, project: str) -> None:
    body = observe_body(project, "s-dup", 1)
    status, first = api.post("/v1/observe", body)
    assert status == 201 and first["status"] == "accepted"
    assert first["observationId"].startswith("obs_")
    status, again = api.post("/v1/observe", body)
    assert status == 200 and again["status"] == "duplicate"
    assert again["observationId"] == first["observationId"]
    api.wait_drained()
    stored = api.get(f"/v1/observations/{first['observationId']}")[1]
    assert stored["toolInput"] == body["toolInput"] and stored["toolOutput"] == body["toolOutput"]
    status, timeline = api.get("/v1/sessions/s-dup/observations")
    assert [o["id"] for o in timeline["items"]] == [first["observationId"]]
    assert api.post("/v1/observe", body)[1]["state"] == "stored"


def test_event_id_is_derived_when_missing(api: Api, project: str) -> None:
    body = observe_body(project, "s-derive", 1, timestamp="2026-01-02T03:04:05Z")
    del body["eventId"]
    status, first = api.post("/v1/observe", body)
    assert status == 201 and first["eventId"].startswith("derived:")
    # The same host event replayed is recognised ...
    assert api.post("/v1/observe", body)[1]["status"] == "duplicate"
    # ... while a second real call with the same content at another time is not merged.
    status, other = api.post("/v1/observe", {**body, "timestamp": "2026-01-02T03:04:06Z"})
    assert status == 201 and other["eventId"] != first["eventId"]


@pytest.mark.parametrize(
    "raw,content_type",
    [
        ("{not json", "application/json"),
        ("[1, 2]", "application/json"),
        ('"text"', "application/json"),
    ],
)
def test_malformed_observe_is_400_and_writes_nothing(api: Api, raw: str, content_type: str) -> None:
    api.wait_drained()
    before = (count_rows(api.store, event_ledger), count_rows(api.store, capture_inbox))
    response = api.client.post(
        "/v1/observe", data=raw, headers={**api.headers, "Content-Type": content_type}
    )
    assert response.status_code == 400
    body = response.get_json()
    assert body["status"] == "rejected" and body["error"]["code"] == "malformed_json"
    assert (count_rows(api.store, event_ledger), count_rows(api.store, capture_inbox)) == before


@pytest.mark.parametrize(
    "patch,field",
    [
        ({"sessionId": "s\x00"}, "sessionId"),
        ({"project": "\ud800"}, "project"),
        ({"toolInput": {"cmd": ["ok", "\udfff"]}}, "toolInput.cmd[1]"),
        ({"toolOutput": {"\x00": 1}}, "toolOutput.(a key)"),
        ({"timestamp": 10**30}, "timestamp"),
    ],
)
def test_text_no_store_can_hold_is_400_naming_the_field(
    api: Api, project: str, patch: dict[str, Any], field: str
) -> None:
    before = (count_rows(api.store, event_ledger), count_rows(api.store, capture_inbox))
    status, answer = api.post("/v1/observe", {**observe_body(project, "s-bad-text", 1), **patch})
    assert status == 400 and answer["status"] == "rejected", answer
    assert answer["error"]["code"] == "invalid_input"
    assert list(answer["error"]["details"]["fields"]) == [field]
    assert (count_rows(api.store, event_ledger), count_rows(api.store, capture_inbox)) == before


@pytest.mark.parametrize(
    "patch,field",
    [
        ({"sessionId": None}, "sessionId"),
        ({"project": ""}, "project"),
        ({"hookType": 7}, "hookType"),
        ({"host": "x" * 65}, "host"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"prompt": ["a"]}, "prompt"),
        ({"eventId": "a\nb"}, "eventId"),
        ({"sessionId": "x" * 201}, "sessionId"),
        ({"eventKind": "tool_done"}, "eventKind"),
    ],
)
def test_invalid_observe_is_422_with_field_errors_and_writes_nothing(
    api: Api, project: str, patch: dict[str, Any], field: str
) -> None:
    api.wait_drained()
    before = (count_rows(api.store, event_ledger), count_rows(api.store, capture_inbox))
    body = {**observe_body(project, "s-invalid", 1), **patch}
    status, answer = api.post("/v1/observe", body)
    assert status == 422
    assert answer["status"] == "rejected"
    assert field in answer["error"]["details"]["fields"]
    assert (count_rows(api.store, event_ledger), count_rows(api.store, capture_inbox)) == before


def test_secrets_never_reach_the_store(api: Api, project: str) -> None:
    token = "ghp_" + "Z9" * 18
    body = observe_body(project, "s-secret", 1, prompt=f"use token {token} please")
    body["toolInput"] = {"command": f"curl -H 'Authorization: Bearer {token}' https://api.x"}
    body["toolOutput"] = {"stdout": "password=hunter2hunter2", "exit_code": 0}
    assert api.post("/v1/observe", body)[0] == 201
    api.wait_drained()
    with api.store.read() as conn:
        dump = " ".join(
            str(v)
            for row in conn.execute(
                text("SELECT * FROM observations WHERE session_id = 's-secret'")
            )
            for v in row
        )
        fts = " ".join(str(r[0]) for r in conn.execute(text("SELECT body FROM kw_fts")))
    assert dump and token not in dump and "hunter2hunter2" not in dump
    assert token not in fts
    status, exported = api.get("/v1/export")
    assert token not in str(exported)


def test_store_failure_answers_503_retryable_and_writes_nothing(
    tmp_path: Any, project: str
) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    gw = build_gateway(make_settings(tmp_path), start_worker=False)
    api = Api(gw.app.test_client(), gw.secret, gw.store)
    try:
        with gw.store.write() as conn:
            conn.execute(text("ALTER TABLE capture_inbox RENAME TO capture_inbox_away"))
        response = api.client.post(
            "/v1/observe", json=observe_body(project, "s-down", 1), headers=api.headers
        )
        assert response.status_code == 503 and response.headers["Retry-After"]
        body = response.get_json()
        assert body["retryable"] is True and body["error"]["code"] == "store_unavailable"
        assert count_rows(gw.store, event_ledger) == 0
    finally:
        gw.close()


def test_failing_processing_retries_then_dead_letters_and_can_be_retried(
    tmp_path: Any, project: str
) -> None:
    """A real failure (the observations table is gone) goes retrying (202 on replay), then dead
    (visible in status), and a manual retry after the fix stores it exactly once."""
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    gw = build_gateway(
        make_settings(
            tmp_path,
            ENGRAM_TASK_MAX_ATTEMPTS="3",
            ENGRAM_RETRY_BASE_SECONDS="0.3",
            ENGRAM_RETRY_MAX_SECONDS="1",
            ENGRAM_SWEEP_INTERVAL_SECONDS="60",
        )
    )
    api = Api(gw.app.test_client(), gw.secret, gw.store)
    try:
        with gw.store.write() as conn:
            conn.execute(text("ALTER TABLE observations RENAME TO observations_away"))
        body = observe_body(project, "s-fail", 1)
        assert api.post("/v1/observe", body)[0] == 201
        status, replay = wait_for(
            lambda: (lambda r: r if r[0] == 202 else None)(api.post("/v1/observe", body)),
            10,
            message="retrying state",
        )
        assert replay["state"] == "retrying" and replay["status"] == "accepted"
        wait_for(lambda: api.get("/v1/capture?state=dead")[1]["items"], 15, message="dead letter")
        dead = api.get("/v1/capture?state=dead")[1]["items"][0]
        assert dead["eventId"] == body["eventId"] and dead["attempts"] == 3
        assert "observations" in dead["lastError"]
        with gw.store.write() as conn:
            conn.execute(text("ALTER TABLE observations_away RENAME TO observations"))
        status, report = api.get("/v1/status")
        assert report["deadLetters"] == 1 and not report["ok"]
        assert any(
            p["component"] == "capture" and "dead" in p["problem"] for p in report["problems"]
        )
        assert api.post("/v1/capture/retry", {"eventId": "nope"})[0] == 404
        status, retried = api.post("/v1/capture/retry", {"all": True})
        assert status == 200 and retried["eventIds"] == [body["eventId"]]
        api.wait_drained()
        assert count_rows(gw.store, observations) == 1
        assert api.get("/v1/status")[1]["deadLetters"] == 0
        audit = api.get("/v1/audit?action=capture.retry")[1]["items"]
        assert [a["targetId"] for a in audit] == [body["eventId"]]
    finally:
        gw.close()


def test_full_inbox_answers_503_retryable(tmp_path: Any, project: str) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    gw = build_gateway(make_settings(tmp_path, ENGRAM_INBOX_MAX="3"), start_worker=False)
    api = Api(gw.app.test_client(), gw.secret, gw.store)
    try:
        for n in range(3):
            assert api.post("/v1/observe", observe_body(project, "s-full", n))[0] == 201
        status, body = api.post("/v1/observe", observe_body(project, "s-full", 99))
        assert status == 503
        assert body["status"] == "rejected" and body["retryable"] is True
        assert body["error"]["code"] == "inbox_full"
        # A replay of an accepted event is still recognised while full.
        assert api.post("/v1/observe", observe_body(project, "s-full", 0))[0] == 200
        assert count_rows(gw.store, capture_inbox) == 3
    finally:
        gw.close()


def test_forgotten_observation_stays_a_duplicate(api: Api, project: str) -> None:
    body = observe_body(project, "s-forget", 1)
    observation_id = api.post("/v1/observe", body)[1]["observationId"]
    api.wait_drained()
    assert api.call("DELETE", f"/v1/observations/{observation_id}")[0] == 200
    assert api.get(f"/v1/observations/{observation_id}")[0] == 404
    status, replay = api.post("/v1/observe", body)
    assert status == 200 and replay["state"] == "forgotten"
    api.wait_drained()
    assert api.get(f"/v1/observations/{observation_id}")[0] == 404
    hits = api.post("/v1/search", {"query": "marker1x", "project": project})[1]["items"]
    assert hits == []
    audit = api.get(f"/v1/audit?targetId={observation_id}")[1]["items"]
    assert [a["action"] for a in audit] == ["observation.forget"]


# --- sessions, search, context ---------------------------------------------------------------


def _session(
    api: Api, project: str, session: str, prompt: str, tools: list[tuple[str, dict[str, Any], Any]]
) -> None:
    assert api.post(
        "/v1/sessions", {"sessionId": session, "project": project, "host": "claude-code"}
    )[0] in (200, 201)
    api.post(
        "/v1/observe",
        {
            "eventId": f"{session}:p",
            "sessionId": session,
            "project": project,
            "host": "claude-code",
            "hookType": "UserPromptSubmit",
            "prompt": prompt,
        },
    )
    for n, (tool, tool_input, output) in enumerate(tools):
        api.post(
            "/v1/observe",
            {
                "eventId": f"{session}:{n}",
                "sessionId": session,
                "project": project,
                "host": "claude-code",
                "hookType": "PostToolUse",
                "toolName": tool,
                "toolInput": tool_input,
                "toolOutput": output,
            },
        )


def test_session_lifecycle_with_summary(api: Api, project: str) -> None:
    _session(
        api,
        project,
        "s-life",
        "fix the flaky checkout test",
        [
            ("Read", {"file_path": "src/checkout.py"}, "def pay(): ..."),
            (
                "Bash",
                {"command": "pytest tests/test_checkout.py"},
                {"stdout": "FAILED test_pay - AssertionError", "exit_code": 1},
            ),
            ("Edit", {"file_path": "src/checkout.py", "old_string": "a", "new_string": "b"}, "ok"),
            (
                "Bash",
                {"command": "pytest tests/test_checkout.py"},
                {"stdout": "4 passed", "exit_code": 0},
            ),
        ],
    )
    status, ended = api.post("/v1/sessions/s-life/end")
    assert status == 200 and ended["session"]["status"] == "ended"
    session = wait_for(
        lambda: api.get("/v1/sessions/s-life")[1]["summary"] and api.get("/v1/sessions/s-life")[1],
        15,
        message="summary",
    )
    assert "checkout" in session["summary"]
    assert "src/checkout.py" in session["summaryData"]["filesChanged"]
    listed = api.get(f"/v1/sessions?project={project}")[1]
    assert [s["id"] for s in listed["items"]] == ["s-life"] and listed["nextCursor"] is None
    # reads by id honour a scope when one is given
    assert api.get(f"/v1/sessions/s-life?project={project}")[0] == 200
    assert api.get("/v1/sessions/s-life?project=elsewhere")[0] == 404
    assert api.get("/v1/sessions/s-life/observations?project=elsewhere")[0] == 404
    timeline = api.get("/v1/sessions/s-life/observations")[1]["items"]
    assert [o["kind"] for o in timeline] == ["prompt", "read", "command", "edit", "command"]
    hits = api.post(
        "/v1/search", {"query": "checkout test summary", "project": project, "kinds": ["summary"]}
    )[1]["items"]
    assert hits and hits[0]["kind"] == "summary" and hits[0]["sessionId"] == "s-life"
    assert api.post("/v1/sessions/nope/end")[0] == 404


def test_timeline_paginates_with_cursor(api: Api, project: str) -> None:
    for n in range(5):
        api.post("/v1/observe", observe_body(project, "s-page", n, timestamp=1_700_000_000 + n))
    api.wait_drained()
    seen: list[str] = []
    cursor = None
    while True:
        path = "/v1/sessions/s-page/observations?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(path)[1]
        assert len(page["items"]) <= 2
        seen += [o["eventId"] for o in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"s-page:{n}" for n in range(5)]


def test_search_is_scoped_by_project_and_agent(api: Api, project: str) -> None:
    other = project + "-other"
    for proj, session, agent in (
        (project, "s-a1", "alice"),
        (other, "s-b1", "alice"),
        (project, "s-a2", "bob"),
    ):
        api.post(
            "/v1/observe",
            {
                "eventId": f"{session}:1",
                "sessionId": session,
                "project": proj,
                "host": "codex",
                "hookType": "PostToolUse",
                "toolName": "Bash",
                "agentId": agent,
                "toolInput": {"command": "make deploy-widget"},
                "toolOutput": "widget deployed",
            },
        )
    api.wait_drained()
    hits = api.post("/v1/search", {"query": "deploy widget", "project": project})[1]["items"]
    assert {h["sessionId"] for h in hits} == {"s-a1", "s-a2"}
    hits = api.post(
        "/v1/search", {"query": "deploy widget", "project": project, "agentId": "alice"}
    )[1]["items"]
    assert {h["sessionId"] for h in hits} == {"s-a1"}
    status, body = api.post("/v1/search", {"query": "deploy widget"})
    assert status == 422 and body["error"]["code"] == "scope_required"
    everywhere = api.post("/v1/search", {"query": "deploy widget", "project": "*"})[1]["items"]
    assert {"s-a1", "s-a2", "s-b1"} <= {h["sessionId"] for h in everywhere}


def test_search_validation_and_modes(api: Api, project: str) -> None:
    assert api.post("/v1/search", {"query": "", "project": project})[0] == 422
    assert api.post("/v1/search", {"query": "x", "project": project, "mode": "magic"})[0] == 422
    assert api.post("/v1/search", {"query": "x", "project": project, "limit": 0})[0] == 422
    status, body = api.post("/v1/search", {"query": "x", "project": project, "mode": "vector"})
    assert status == 422 and body["error"]["code"] == "mode_unavailable"
    status, body = api.post("/v1/search", {"query": "x", "project": project, "mode": "hybrid"})
    assert status == 200 and body["streams"] == ["bm25", "graph"]  # no embedder configured


def test_search_in_a_time_window(api: Api, project: str) -> None:
    """since/until narrow every stream before it ranks: eight March events that match better
    never crowd out the June one, in keyword and hybrid mode alike."""
    text = "payments webhook timed out in src/payments/webhook.py"
    for n in range(8):
        stamp = f"2026-03-0{n + 1}T10:00:00Z"
        api.post(
            "/v1/observe",
            observe_body(project, f"s-mar{n}", n, toolOutput=f"{text} {text}", timestamp=stamp),
        )
    api.post(
        "/v1/observe",
        observe_body(project, "s-jun", 0, toolOutput=text, timestamp="2026-06-10T09:30:00Z"),
    )
    api.wait_drained()
    june = {"query": "payments webhook timeout", "project": project, "limit": 1}
    for mode in ("keyword", "hybrid"):
        for since in ("2026-06-01T00:00:00Z", 1780272000, 1780272000000):  # ISO, s, ms
            status, body = api.post("/v1/search", {**june, "mode": mode, "since": since})
            assert status == 200, body
            assert [h["sessionId"] for h in body["items"]] == ["s-jun"], (mode, since)
            assert body["items"][0]["createdAt"].startswith("2026-06-10")
    march = {**june, "limit": 20, "since": "2026-03-02", "until": "2026-03-05T00:00:00+00:00"}
    found = api.post("/v1/search", march)[1]["items"]
    assert {h["sessionId"] for h in found} == {"s-mar1", "s-mar2", "s-mar3"}
    after = api.post("/v1/search", {**june, "since": "2026-07-01T00:00:00Z"})[1]
    assert after["items"] == []
    for bad, field in (
        ({"since": "last tuesday"}, "since"),
        ({"until": True}, "until"),
        ({"since": 10**16}, "since"),
        ({"since": "2026-06-02", "until": "2026-06-01"}, "until"),
        ({"since": "2026-06-01", "until": "2026-06-01"}, "until"),
    ):
        status, body = api.post("/v1/search", {**june, **bad})
        assert status == 422 and field in body["error"]["details"]["fields"], (bad, body)


def test_a_question_that_names_a_time_gets_what_was_recorded_then_first(
    api: Api, project: str
) -> None:
    """ "two weeks ago" puts the observation recorded then above a better keyword match from
    today; the answer says which window it read; asked without a time, or with since/until
    given, the order is the streams' own."""
    now = time.time()
    then = datetime.fromtimestamp(now - 15 * 86400, timezone.utc).isoformat()
    today = datetime.fromtimestamp(now - 3600, timezone.utc).isoformat()
    api.post(
        "/v1/observe",
        observe_body(project, "s-then", 1, toolOutput="upload test flaky", timestamp=then),
    )
    api.post(
        "/v1/observe",
        observe_body(
            project, "s-today", 1, toolOutput="fixed the flaky upload test", timestamp=today
        ),
    )
    api.wait_drained()
    plain = {"query": "how did we fix the flaky upload test", "project": project}
    status, body = api.post("/v1/search", plain)
    assert status == 200 and [h["sessionId"] for h in body["items"]] == ["s-today", "s-then"]
    assert "times" not in body
    status, body = api.post("/v1/search", {**plain, "query": plain["query"] + " two weeks ago"})
    assert status == 200 and [h["sessionId"] for h in body["items"]] == ["s-then", "s-today"]
    (window,) = body["times"]
    assert window["since"] < then < window["until"] < today
    windowed = {**plain, "query": plain["query"] + " two weeks ago", "since": then[:10]}
    status, body = api.post("/v1/search", windowed)
    assert status == 200 and body["items"][0]["sessionId"] == "s-today" and "times" not in body


def test_a_stretch_up_to_now_gets_what_was_recorded_then_first(api: Api, project: str) -> None:
    """ "in the past two weeks" (or "over the last 5 days") puts what was recorded then above a
    better keyword match from six weeks ago; a stretch that holds both leaves the streams'
    order."""
    now = time.time()
    midnight = datetime.fromtimestamp(now, timezone.utc).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    recent = midnight - timedelta(days=3) + timedelta(hours=12)
    old = datetime.fromtimestamp(now - 42 * 86400, timezone.utc)
    api.post(
        "/v1/observe",
        observe_body(
            project, "s-recent", 1, toolOutput="upload test flaky", timestamp=recent.isoformat()
        ),
    )
    api.post(
        "/v1/observe",
        observe_body(
            project, "s-old", 1, toolOutput="fixed the flaky upload test",
            timestamp=old.isoformat(),
        ),
    )  # fmt: skip
    api.wait_drained()
    plain = {"query": "how did we fix the flaky upload test", "project": project}
    status, body = api.post("/v1/search", plain)
    assert status == 200 and [h["sessionId"] for h in body["items"]] == ["s-old", "s-recent"]
    for named in ("in the past two weeks", "over the last 5 days"):
        status, body = api.post("/v1/search", {**plain, "query": f"{plain['query']} {named}"})
        assert status == 200, body
        assert [h["sessionId"] for h in body["items"]] == ["s-recent", "s-old"], named
        assert any(w["since"] < recent.isoformat() < w["until"] for w in body["times"]), named
    status, body = api.post("/v1/search", {**plain, "query": plain["query"] + " in the past year"})
    assert status == 200 and [h["sessionId"] for h in body["items"]] == ["s-old", "s-recent"]
    assert len(body["times"]) == 1


def test_a_time_counted_back_orders_the_hits_and_the_rest_of_the_question_ranks_them(
    api: Api, project: str
) -> None:
    """ "two weeks ago" is when, not what: of two observations recorded then, the one about the
    question's subject comes first, not the one that repeats "two weeks"; the answer still
    reads the window the phrase names."""
    now = time.time()
    then = datetime.fromtimestamp(now - 14 * 86400, timezone.utc).isoformat()
    for session, output in (
        ("s-standup", "standup: two weeks ago we said two more weeks, still two weeks out"),
        ("s-kitchen", "unboxed the new air fryer, a kitchen appliance for the office"),
    ):
        api.post(
            "/v1/observe", observe_body(project, session, 1, toolOutput=output, timestamp=then)
        )
    api.wait_drained()
    question = {"query": "which kitchen appliance did we buy two weeks ago", "project": project}
    status, body = api.post("/v1/search", question)
    assert status == 200 and body["items"][0]["sessionId"] == "s-kitchen", body["items"]
    (window,) = body["times"]
    assert window["since"] < then < window["until"]


def test_a_time_named_finds_what_was_recorded_then_beyond_the_best_40_of_everything(
    api: Api, project: str
) -> None:
    """For a page of 5 BM25 ranks its best 40 of the scope; with 45 better matches from today,
    what was recorded two weeks ago is not among them. Named in the question, that time makes
    BM25 read deeper and keep what was recorded then, and that observation comes first."""
    now = time.time()
    then = datetime.fromtimestamp(now - 15 * 86400, timezone.utc).isoformat()
    today = datetime.fromtimestamp(now - 3600, timezone.utc).isoformat()
    api.post(
        "/v1/observe",
        observe_body(project, "s-old-fix", 7, toolOutput="upload test flaky", timestamp=then),
    )
    for n in range(45):
        output = f"fixed the flaky upload test, attempt {n}"
        api.post(
            "/v1/observe",
            observe_body(project, f"s-new-fix-{n}", 1, toolOutput=output, timestamp=today),
        )
    api.wait_drained()
    question = {"query": "how did we fix the flaky upload test", "project": project, "limit": 5}
    status, body = api.post("/v1/search", question)
    found = [h["sessionId"] for h in body["items"]]
    assert status == 200 and found and "s-old-fix" not in found, body
    status, body = api.post(
        "/v1/search", {**question, "query": question["query"] + " two weeks ago"}
    )
    assert status == 200 and body["items"] and body["items"][0]["sessionId"] == "s-old-fix", body


def test_search_diversifies_at_most_three_per_session(api: Api, project: str) -> None:
    for n in range(6):
        api.post(
            "/v1/observe",
            observe_body(project, "s-many", n, toolOutput="kubernetes rollout restarted"),
        )
    api.post(
        "/v1/observe", observe_body(project, "s-one", 1, toolOutput="kubernetes rollout restarted")
    )
    api.wait_drained()
    hits = api.post("/v1/search", {"query": "kubernetes rollout", "project": project, "limit": 10})[
        1
    ]["items"]
    sessions = [h["sessionId"] for h in hits]
    assert sessions.count("s-many") == 3 and "s-one" in sessions
    # perSession asks for more (or fewer) of one session; a bad one is named in the 422
    wider = {"query": "kubernetes rollout", "project": project, "limit": 10, "perSession": 6}
    sessions = [h["sessionId"] for h in api.post("/v1/search", wider)[1]["items"]]
    assert sessions.count("s-many") == 6 and "s-one" in sessions
    one = [h["sessionId"] for h in api.post("/v1/search", {**wider, "perSession": 1})[1]["items"]]
    assert sorted(one) == ["s-many", "s-one"]
    for bad in (0, 101, "3", True):
        status, body = api.post("/v1/search", {**wider, "perSession": bad})
        assert status == 422 and "perSession" in body["error"]["details"]["fields"], body


def test_session_support_ranks_a_matching_session_above_a_lone_match(
    api: Api, project: str
) -> None:
    """Two hits with the same text (BM25 scores the lone one a little higher: its indexed
    document is shorter): with session support the one whose session another hit also matches
    ranks first; without it (ranked search's default, and keyword mode always) BM25's order
    stands."""
    from engram import search
    from engram.scope import Scope

    text = "checkout webhook signature verifier rejected the payload"
    api.post("/v1/observe", observe_body(project, "s-lone", 1, toolOutput=text))
    api.post("/v1/observe", observe_body(project, "s-topic", 1, toolOutput=text))
    other = "webhook verifier fixed: secret rotated"
    api.post("/v1/observe", observe_body(project, "s-topic", 2, toolOutput=other))
    api.wait_drained()
    query = "checkout webhook signature verifier"

    def sessions(mode: str, support: float) -> list[str]:
        found = search.search(api.store, query, Scope(project), mode=mode, session_support=support)
        return [hit["sessionId"] for hit in found["items"]]

    assert sessions("keyword", 0.3) == ["s-lone", "s-topic", "s-topic"]
    assert sessions("hybrid", 0.0) == ["s-lone", "s-topic", "s-topic"]
    assert sessions("hybrid", 0.3) == ["s-topic", "s-lone", "s-topic"]
    status, body = api.post("/v1/search", {"query": query, "project": project})
    assert status == 200 and [h["sessionId"] for h in body["items"]][0] == "s-lone"


def test_context_fits_the_budget_and_never_cuts_an_item(api: Api, project: str) -> None:
    for n in range(30):
        api.post(
            "/v1/memories",
            {"project": project, "content": f"Lesson {n}: " + "use the retry helper " * 8},
        )
    for budget in (60, 150, 400, 2000):
        status, block = api.post("/v1/context", {"project": project, "budgetTokens": budget})
        assert status == 200
        assert block["tokens"] <= budget
        for line in block["context"].splitlines():
            if line.startswith("- Lesson"):
                assert line.endswith("use the retry helper"), line
    small = api.post("/v1/context", {"project": project, "budgetTokens": 150})[1]
    big = api.post("/v1/context", {"project": project, "budgetTokens": 2000})[1]
    assert big["items"] > small["items"] > 0 and small["omitted"] > 0
    assert big["context"].startswith(f"# Engram memory: {project}")


def test_session_start_returns_context_with_last_summary_and_memories(
    api: Api, project: str
) -> None:
    api.post("/v1/memories", {"project": project, "content": "Deploys go through make ship"})
    _session(
        api,
        project,
        "s-prev",
        "migrate the orders table",
        [("Bash", {"command": "alembic upgrade head"}, {"stdout": "done", "exit_code": 0})],
    )
    api.post("/v1/sessions/s-prev/end")
    wait_for(lambda: api.get("/v1/sessions/s-prev")[1]["summary"], 15, message="summary")
    status, started = api.post("/v1/sessions", {"sessionId": "s-next", "project": project})
    assert status == 201
    assert "Deploys go through make ship" in started["context"]
    assert "## Last session" in started["context"] and "orders" in started["context"]
    assert started["tokens"] <= 2000


# --- memories ---------------------------------------------------------------------------------


def test_memory_versions_forget_and_audit(api: Api, project: str) -> None:
    status, memory = api.post(
        "/v1/memories",
        {"project": project, "content": "The API port is 8080", "concepts": ["Ports"]},
    )
    assert status == 201 and memory["version"] == 1 and memory["concepts"] == ["ports"]
    status, updated = api.call(
        "PATCH", f"/v1/memories/{memory['id']}", {"content": "The API port is 9090"}
    )
    assert status == 200 and updated["version"] == 2
    hits = api.post("/v1/search", {"query": "API port", "project": project})[1]["items"]
    assert [h["text"] for h in hits] == ["The API port is 9090"]  # superseded never returns
    assert api.get(f"/v1/memories/{memory['id']}?project=elsewhere")[0] == 404
    assert api.get(f"/v1/memories/{memory['id']}?project={project}&agentId=bob")[0] == 200
    full = api.get(f"/v1/memories/{memory['id']}")[1]
    assert [v["content"] for v in full["versions"]] == [
        "The API port is 8080",
        "The API port is 9090",
    ]
    assert full["versions"][0]["supersededAt"] is not None
    listed = api.get(f"/v1/memories?project={project}&query=port")[1]["items"]
    assert [m["id"] for m in listed] == [memory["id"]]
    assert api.call("DELETE", f"/v1/memories/{memory['id']}")[0] == 200
    assert api.call("DELETE", f"/v1/memories/{memory['id']}")[0] == 404
    assert api.post("/v1/search", {"query": "API port", "project": project})[1]["items"] == []
    actions = [a["action"] for a in api.get(f"/v1/audit?targetId={memory['id']}")[1]["items"]]
    assert actions == ["memory.forget", "memory.update", "memory.create"]
    assert "8080" not in str(api.get(f"/v1/audit?targetId={memory['id']}")[1])


def test_memory_validation_and_global_scope(api: Api, project: str) -> None:
    status, body = api.post("/v1/memories", {"content": "no project"})
    assert status == 422 and "project" in body["error"]["details"]["fields"]
    assert api.post("/v1/memories", {"project": project, "content": ""})[0] == 422
    status, glob = api.post(
        "/v1/memories", {"scope": "global", "content": "Always run ruff before committing"}
    )
    assert status == 201 and glob["project"] == ""
    hits = api.post("/v1/search", {"query": "ruff committing", "project": project})[1]["items"]
    assert glob["id"] in [h["id"] for h in hits]


def test_list_limit_and_cursor(api: Api, project: str) -> None:
    ids = [
        api.post("/v1/memories", {"project": project, "content": f"fact {n}"})[1]["id"]
        for n in range(5)
    ]
    # scope=project leaves out global memories other tests of the module may have saved
    first = api.get(f"/v1/memories?project={project}&scope=project&limit=3")[1]
    assert len(first["items"]) == 3 and first["nextCursor"]
    second = api.get(
        f"/v1/memories?project={project}&scope=project&limit=3&cursor={first['nextCursor']}"
    )[1]
    assert second["nextCursor"] is None
    assert sorted(m["id"] for m in first["items"] + second["items"]) == sorted(ids)


# --- export / import -----------------------------------------------------------------------------


def test_export_import_strategies(api: Api, project: str) -> None:
    _session(
        api,
        project,
        "s-exp",
        "export me",
        [("Bash", {"command": "echo exported-marker"}, "exported-marker")],
    )
    memory = api.post("/v1/memories", {"project": project, "content": "original fact"})[1]
    api.wait_drained()
    exported = api.get("/v1/export")[1]
    mine = {
        "format": "engram-export",
        "version": 1,
        "sessions": [s for s in exported["sessions"] if s["project"] == project],
        "observations": [o for o in exported["observations"] if o["project"] == project],
        "memories": [m for m in exported["memories"] if m["project"] == project],
    }
    assert len(mine["observations"]) == 2 and len(mine["memories"]) == 1

    # skip: everything exists already
    status, result = api.post("/v1/import", {"data": mine, "strategy": "skip"})
    assert status == 200 and result["imported"]["observations"] == 0
    assert result["imported"]["skipped"] >= 3

    # merge: the imported memory content wins as a new version
    changed = {**mine, "memories": [{**mine["memories"][0], "content": "imported fact"}]}
    result = api.post("/v1/import", {"data": changed, "strategy": "merge"})[1]
    assert result["imported"]["updated"] >= 1
    current = api.get(f"/v1/memories/{memory['id']}")[1]
    assert current["content"] == "imported fact" and current["version"] == 2

    # invalid documents are refused whole
    status, body = api.post("/v1/import", {"data": {"version": 99}, "strategy": "merge"})
    assert status == 422 and "version" in body["error"]["details"]["fields"]
    assert api.post("/v1/import", {"data": mine, "strategy": "sideways"})[0] == 422


def test_import_replace_into_a_fresh_store(tmp_path: Any, api: Api, project: str) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import make_settings

    _session(
        api,
        project,
        "s-rep",
        "replace me",
        [("Bash", {"command": "echo replace-marker"}, "replace-marker")],
    )
    api.wait_drained()
    document = api.get("/v1/export")[1]
    gw = build_gateway(make_settings(tmp_path), start_worker=False)
    other = Api(gw.app.test_client(), gw.secret, gw.store)
    try:
        other.post("/v1/memories", {"project": project, "content": "will vanish"})
        status, result = other.post("/v1/import", {"data": document, "strategy": "replace"})
        assert status == 200
        assert result["imported"]["observations"] == len(document["observations"])
        assert other.post("/v1/search", {"query": "vanish", "project": project})[1]["items"] == []
        hits = other.post("/v1/search", {"query": "replace-marker", "project": project})[1]
        assert hits["items"] and hits["items"][0]["sessionId"] == "s-rep"
        # imported eventIds are known: a replay is a duplicate, not a second copy
        replay = {
            "eventId": "s-rep:0",
            "sessionId": "s-rep",
            "project": project,
            "host": "claude-code",
            "hookType": "PostToolUse",
        }
        assert other.post("/v1/observe", replay)[0] == 200
    finally:
        gw.close()


def test_status_reports_components(api: Api) -> None:
    status, report = api.get("/v1/status")
    assert status == 200
    assert report["mode"] == "embedded"
    assert report["store"]["ok"] and report["store"]["dialect"] == "sqlite"
    assert report["broker"]["ok"] and report["workers"]["alive"] == 1
    assert {"pending", "processing", "retrying", "dead", "waiting", "capacity"} <= set(
        report["inbox"]
    )
    assert report["indexes"]["keyword"]["backend"] == "fts5"
    # the embedded server sweeps its inbox when it starts
    assert report["sweeper"]["lastSweepSecondsAgo"] is not None
    # its memory against the budget, and how far the derived indexes are behind
    assert report["memory"]["budgetMb"] == 300
    assert (
        20
        < report["memory"]["processes"]["server"]["rssMb"]
        <= report["memory"]["processes"]["server"]["peakRssMb"]
    )
    assert {"pending", "lagSeconds"} <= set(report["derived"]["graph"])


def test_status_names_a_process_over_its_memory_budget(tmp_path: Path) -> None:
    from engram.cli.server import build_gateway
    from tests.conftest import api_for, make_settings

    built = build_gateway(make_settings(tmp_path, ENGRAM_MEMORY_BUDGET_MB="10"))
    try:
        status, report = api_for(built).get("/v1/status")
    finally:
        built.close()
    assert status == 200 and not report["ok"]
    problem = next(p for p in report["problems"] if p["component"] == "memory")
    assert "of a 10 MB budget" in problem["problem"] and "ENGRAM_MEMORY_BUDGET_MB" in problem["fix"]


def test_context_lists_unresolved_errors_of_the_last_session_as_open_items(
    api: Api, project: str
) -> None:
    _session(
        api,
        project,
        "s-open",
        "make the build green",
        [
            (
                "Bash",
                {"command": "make build"},
                {"stdout": "error: linker failed: undefined symbol foo_init", "exit_code": 2},
            )
        ],
    )
    api.post("/v1/sessions/s-open/end")
    wait_for(lambda: api.get("/v1/sessions/s-open")[1]["summary"], 15, message="summary")
    block = api.post("/v1/context", {"project": project})[1]["context"]
    # the heading names the session, so the items read right when its summary did not fit
    heading = "## Open items (s-open)"
    assert heading in block and "undefined symbol foo_init" in block.split(heading)[1]


def test_a_late_replayed_start_does_not_reopen_an_ended_session(api: Api, project: str) -> None:
    """A hook spools a session's start while the gateway is down and sends the end directly
    later: the start, replayed after the end, must not reopen the session."""
    started = time.time() - 60
    assert (
        api.post("/v1/sessions/late-1/end", {"project": project, "host": "claude-code"})[0] == 200
    )
    status, answer = api.post(
        "/v1/sessions", {"sessionId": "late-1", "project": project, "timestamp": started}
    )
    assert status == 200 and answer["session"]["status"] == "ended"
    # A real resume (the host's start after the end) reopens it.
    status, answer = api.post(
        "/v1/sessions", {"sessionId": "late-1", "project": project, "timestamp": time.time() + 1}
    )
    assert answer["session"]["status"] == "active"
    assert (
        api.post(
            "/v1/sessions", {"sessionId": "late-2", "project": project, "timestamp": "yesterday"}
        )[0]
        == 422
    )


def test_ending_an_unknown_session_with_its_project_creates_it(api: Api, project: str) -> None:
    assert api.post("/v1/sessions/unknown-1/end")[0] == 404
    status, answer = api.post("/v1/sessions/unknown-2/end", {"project": project, "cwd": "/x"})
    assert status == 200 and answer["session"]["status"] == "ended"
    assert answer["session"]["project"] == project and answer["session"]["cwd"] == "/x"
    assert api.post("/v1/sessions/unknown-3/end", {"project": 7})[0] == 422


def test_a_session_is_dated_by_the_hosts_clock_not_by_when_it_was_processed(
    api: Api, project: str
) -> None:
    """A transcript imported weeks later, or a spooled hook replayed, still says when it ran."""
    started, ended = "2026-03-02T09:14:00Z", "2026-03-02T10:02:30Z"
    status, _ = api.post(
        "/v1/sessions", {"sessionId": "dated-1", "project": project, "timestamp": started}
    )
    assert status == 201
    status, answer = api.post("/v1/sessions/dated-1/end", {"project": project, "timestamp": ended})
    assert status == 200
    assert answer["session"]["startedAt"].startswith("2026-03-02T09:14:00")
    assert answer["session"]["endedAt"].startswith("2026-03-02T10:02:30")
    assert api.post("/v1/sessions/dated-1/end", {"timestamp": "last week"})[0] == 422


def test_file_history_and_project_profile(api: Api, project: str) -> None:
    edits = [
        ("/home/dev/src/shop/app/login.py", "Edit"),
        ("/home/dev/src/shop/app/login_test.py", "Edit"),
        ("/home/dev/src/shop/app/login.py", "Read"),
    ]
    session = f"fh-{project}"
    for n, (path, tool) in enumerate(edits):
        key = "file_path"
        assert (
            api.post(
                "/v1/observe",
                observe_body(
                    project,
                    session,
                    n,
                    toolName=tool,
                    hookType="PostToolUse",
                    toolInput={key: path, "old_string": "a", "new_string": "b"}
                    if tool == "Edit"
                    else {key: path},
                ),
            )[0]
            == 201
        )
    wait_for(lambda: len(api.get(f"/v1/sessions/{session}/observations")[1].get("items", [])) == 3)
    status, page_ = api.get(f"/v1/files/history?project={project}&path=app/login.py")
    assert status == 200
    assert [o["toolName"] for o in page_["items"]] == ["Read", "Edit"]  # newest first
    assert (
        api.get(f"/v1/files/history?project={project}&path=login.py")[1]["items"].__len__() == 2
    )  # a suffix at a path boundary: login_test.py does not match
    assert api.get(f"/v1/files/history?project=other-{project}&path=app/login.py")[1]["items"] == []
    assert api.get(f"/v1/files/history?project={project}&path=")[0] == 422
    assert api.get("/v1/files/history?path=app/login.py")[0] == 422  # no scope: fails closed
    # case matters (SQLite's LIKE would ignore it): App/Login.py is another file
    assert api.get(f"/v1/files/history?project={project}&path=App/Login.py")[1]["items"] == []
    status, prof = api.get(f"/v1/projects/profile?project={project}")
    assert status == 200 and prof["observations"] == 3 and prof["sessions"] == 1
    assert "/home/dev/src/shop/app/login.py" in prof["topFiles"]
    newest = api.get(f"/v1/observations?project={project}&limit=2")[1]
    assert [o["toolName"] for o in newest["items"]] == ["Read", "Edit"] and newest["nextCursor"]
    rest = api.get(f"/v1/observations?project={project}&cursor={newest['nextCursor']}")[1]
    assert [o["toolName"] for o in rest["items"]] == ["Edit"]


def test_file_history_matches_odd_characters_literally(api: Api, project: str) -> None:
    paths = ["/r/100%_done.py", "/r/a_b.py", "/r/it's [x] *.py", '/r/q\\"uote.py', "/r/é.py"]
    for n, path in enumerate(paths):
        api.post(
            "/v1/observe",
            observe_body(
                project,
                f"odd-{project}",
                n,
                toolName="Read",
                hookType="PostToolUse",
                toolInput={"file_path": path},
            ),
        )
    wait_for(lambda: len(api.get(f"/v1/observations?project={project}")[1]["items"]) == 5)
    for path in paths:
        found = api.get(f"/v1/files/history?project={project}&path={quote(path)}")[1]["items"]
        assert len(found) == 1, path
    for wildcard in ("%", "_", "*", "?", "[x]", "a%b.py", "a?b.py"):
        assert (
            api.get(f"/v1/files/history?project={project}&path={quote(wildcard)}")[1]["items"] == []
        ), wildcard


def test_sync_files_endpoint(api: Api, project: str) -> None:
    body = {
        "user": "alice",
        "project": project,
        "tool": "codex",
        "root": "a1b2c3d4e5f6",
        "relpath": "AGENTS.md",
        "path": "/src/AGENTS.md",
        "contentHash": "1" * 64,
        "facts": [{"anchor": "build", "content": "Run make check", "hash": "x"}],
    }
    status, out = api.post("/v1/sync/files", body)
    assert status == 200 and out["outcome"] == "imported" and out["created"] == 1
    status, found = api.post(
        "/v1/search", {"query": "make check", "project": project, "mode": "keyword"}
    )
    assert found["items"][0]["id"] == out["memories"]["build"]
    assert api.post("/v1/sync/files", body)[1]["outcome"] == "unchanged"
    status, error = api.post("/v1/sync/files", {**body, "tool": "vim", "facts": "x"})
    assert status == 422 and set(error["error"]["details"]["fields"]) == {"tool", "facts"}


def test_context_for_a_prompt_needs_its_session_and_says_so(api: Api, project: str) -> None:
    status, answer = api.post("/v1/context", {"project": project, "forPrompt": True, "query": "x"})
    assert status == 422
    assert answer["error"] == {
        "code": "validation_failed",
        "message": "forPrompt needs the prompt and its session",
        "details": {"fields": {"sessionId": "required with forPrompt"}},
    }
    status, answer = api.post(
        "/v1/context",
        {"project": project, "forPrompt": True, "query": "zzz nothing", "sessionId": "s-x"},
    )
    assert status == 200 and answer["context"] == "" and answer["cited"] == []
