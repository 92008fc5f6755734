"""A session belongs to one project: a caller from project B who knows (or guesses) project A's
session id gets a 409 or a 404, never A's data, and changes nothing of A's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import inbox, sessions
from engram.errors import SessionConflict
from engram.events import validate_event
from tests.conftest import Api
from tests.support import observe_body, wait_for

SECRET_OF_A = "zebra-quartz-7731"  # a phrase only A's data holds


@pytest.fixture
def owned(api: Api, project: str) -> dict[str, Any]:
    """Project A's session with one stored event, a memory, and its id; B is another project."""
    a, b = f"{project}-a", f"{project}-b"
    session = f"{project}-sess"
    assert api.post("/v1/sessions", {"sessionId": session, "project": a})[0] == 201
    body = observe_body(a, session, 1, prompt=f"remember {SECRET_OF_A}")
    assert api.post("/v1/observe", body)[0] == 201
    api.wait_drained()
    status, memory = api.post("/v1/memories", {"project": a, "content": f"A's {SECRET_OF_A}"})
    assert status == 201
    observation = api.get(f"/v1/sessions/{session}/observations")[1]["items"][0]
    return {
        "a": a,
        "b": b,
        "session": session,
        "memory": memory["memory"]["id"] if "memory" in memory else memory["id"],
        "observation": observation["id"],
    }


def snapshot(api: Api, owned: dict[str, Any]) -> str:
    session = api.get(f"/v1/sessions/{owned['session']}")[1]
    timeline = api.get(f"/v1/sessions/{owned['session']}/observations")[1]["items"]
    memory = api.get(f"/v1/memories/{owned['memory']}")[1]
    return json.dumps([session, timeline, memory], sort_keys=True)


def test_starting_ending_or_observing_as_another_project_is_refused(
    api: Api, owned: dict[str, Any]
) -> None:
    before = snapshot(api, owned)
    status, body = api.post("/v1/sessions", {"sessionId": owned["session"], "project": owned["b"]})
    assert status == 409 and body["error"]["code"] == "session_conflict"
    assert SECRET_OF_A not in json.dumps(body)
    status, body = api.post(f"/v1/sessions/{owned['session']}/end", {"project": owned["b"]})
    assert status == 409
    status, body = api.post("/v1/observe", observe_body(owned["b"], owned["session"], 2))
    assert status == 409 and body["status"] == "rejected"
    assert snapshot(api, owned) == before
    assert api.get(f"/v1/sessions/{owned['session']}")[1]["status"] == "active"


def test_an_event_that_raced_past_the_gateway_is_a_dead_letter_not_a_b_observation(
    api: Api, owned: dict[str, Any]
) -> None:
    # Accepted while the session did not exist yet (no check possible), stored after A's was.
    event = validate_event(
        observe_body(owned["b"], owned["session"], 3), max_field_chars=1000, received_at=1.0
    )
    with pytest.raises(SessionConflict), api.store.write() as conn:
        sessions.ensure(conn, event.session_id, event.project)
    before = snapshot(api, owned)
    inbox.accept(api.store, event, 1000)
    api.client.application.extensions["engram.dispatch"](event.event_id)
    wait_for(lambda: api.get("/v1/capture?state=dead")[1]["items"], 15, message="dead letter")
    dead = [
        d for d in api.get("/v1/capture?state=dead")[1]["items"] if d["eventId"] == event.event_id
    ]
    assert dead and dead[0]["attempts"] == 1 and "another project" in dead[0]["lastError"]
    assert snapshot(api, owned) == before


B_REQUESTS = [
    ("GET", "/v1/sessions/{session}?project={b}", None),
    ("GET", "/v1/sessions/{session}/observations?project={b}", None),
    ("GET", "/v1/sessions?project={b}", None),
    ("GET", "/v1/observations/{observation}?project={b}", None),
    ("GET", "/v1/observations?project={b}", None),
    ("GET", "/v1/memories/{memory}?project={b}", None),
    ("GET", "/v1/memories?project={b}", None),
    ("GET", "/v1/projects/profile?project={b}", None),
    ("GET", "/v1/files/history?project={b}&path=tests/test_1.py", None),
    ("POST", "/v1/search", {"query": SECRET_OF_A, "project": "{b}"}),
    ("POST", "/v1/search", {"query": "pytest remember", "project": "{b}", "mode": "keyword"}),
    ("POST", "/v1/context", {"project": "{b}", "query": SECRET_OF_A, "sessionId": "{session}"}),
    ("POST", "/v1/sessions", {"sessionId": "{session}", "project": "{b}", "query": SECRET_OF_A}),
    ("POST", "/v1/sessions/{session}/end", {"project": "{b}"}),
    ("POST", "/v1/observe", "observe"),
    ("POST", "/v1/graph/query", {"project": "{b}", "query": f"tests/test_1.py {SECRET_OF_A}"}),
    ("PATCH", "/v1/memories/{memory}?project={b}", {"content": "B was here"}),
    ("DELETE", "/v1/memories/{memory}?project={b}", None),
    ("DELETE", "/v1/observations/{observation}?project={b}", None),
]


def fill(template: Any, owned: dict[str, Any]) -> Any:
    if isinstance(template, str):
        return template.format(**owned)
    if isinstance(template, dict):
        return {k: fill(v, owned) for k, v in template.items()}
    return template


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(order=st.lists(st.sampled_from(range(len(B_REQUESTS))), min_size=1, max_size=6))
def test_no_request_made_as_b_returns_or_changes_a(
    api: Api, owned: dict[str, Any], order: list[int]
) -> None:
    before = snapshot(api, owned)
    for index in order:
        method, path, body = B_REQUESTS[index]
        if body == "observe":
            body = observe_body(owned["b"], owned["session"], 100 + index)
        status, answer = api.call(method, fill(path, owned), fill(body, owned))
        assert status < 500, (method, path, answer)
        assert SECRET_OF_A not in json.dumps(answer), (method, path, answer)
        if status < 400:  # an error may name the id B sent; an answer never holds A's items
            assert owned["observation"] not in json.dumps(answer), (method, path, answer)
    assert snapshot(api, owned) == before
