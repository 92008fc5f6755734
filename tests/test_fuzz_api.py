"""No input makes the gateway answer 5xx: every route, driven with generated and mutated input.

A 500 tells a hook to retry, so a body that can never succeed would be resent from its spool
forever; the answer to bad input is a 4xx naming the field. For every route in the app's URL
map, Hypothesis sends: a valid example with one field replaced by arbitrary JSON (lone
surrogates, NUL, huge integers, deep nesting, wrong types), arbitrary JSON bodies, raw bytes
that are not JSON, and path segments and query parameters of arbitrary text. Any 5xx fails.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Api

SESSION = "fz-session"
EXAMPLES: dict[str, dict[str, Any]] = {
    "/v1/observe": {
        "eventId": "fz-1",
        "sessionId": SESSION,
        "project": "fz",
        "host": "raw",
        "hookType": "PostToolUse",
        "toolName": "Bash",
        "toolInput": {"command": "pytest -q"},
        "toolOutput": {"stdout": "1 failed", "exitCode": 1},
        "timestamp": "2026-12-01T10:00:00Z",
    },
    "/v1/capture/retry": {"eventIds": ["fz-1"]},
    "/v1/sessions": {"sessionId": SESSION, "project": "fz", "cwd": "/src/fz", "budgetTokens": 500},
    "/v1/sessions/<session_id>/end": {"project": "fz", "host": "raw"},
    "/v1/search": {"query": "failed test", "project": "fz", "mode": "hybrid", "kinds": ["memory"]},
    "/v1/context": {"project": "fz", "query": "tests", "budgetTokens": 800},
    "/v1/graph/query": {"project": "fz", "entity": "billing.py", "depth": 2, "limit": 5},
    "/v1/memories": {"content": "Use uv for dependencies", "project": "fz", "tags": ["tools"]},
    "/v1/memories/<memory_id>": {"content": "Use uv, pinned", "reason": "edited"},
    "/v1/memories/<memory_id>/restore": {},
    "/v1/memories/forget": {"ids": ["mem_fz1"], "reason": "stale"},
    "/v1/viewer/links": {},
    "/v1/viewer/logout": {},
    "/v1/sync/files": {
        "user": "dev",
        "project": "fz",
        "tool": "codex",
        "root": "0123456789ab",
        "relpath": "AGENTS.md",
        "path": "/src/fz/AGENTS.md",
        "contentHash": "0" * 64,
        "facts": [{"anchor": "conventions/use-uv", "content": "Use uv"}],
    },
    "/v1/import": {
        "strategy": "merge",
        "data": {"version": 1, "memories": [{"id": "mem_fz1", "project": "fz", "content": "x"}]},
    },
}
QUERY_NAMES = (
    "project", "agentId", "limit", "cursor", "scope", "state", "status", "action", "targetId",
    "path", "query", "reason", "since", "until", "kind",
)  # fmt: skip

text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)  # surrogates too
url_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)  # what a URL carries
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
deep = st.integers(min_value=60, max_value=5000).map(lambda n: "[" * n + "]" * n)
raw_bodies = (
    st.binary(max_size=64)
    | deep.map(str.encode)
    | st.sampled_from(
        [b'{"a": NaN}', b'{"a": Infinity}', b'{"a": 1e999}', b'{"a": "\\ud800"}', b"\xff\xfe{}"]
    )
)


def routes(api: Api) -> list[tuple[str, str]]:
    app = api.client.application
    found = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1/"):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((method, rule.rule))
    return found


def send(api: Api, method: str, rule: str, segment: str, query: dict[str, str], body: Any) -> None:
    path = rule
    for name in ("<session_id>", "<memory_id>", "<observation_id>"):
        path = path.replace(name, quote(segment, safe=""))
    if isinstance(body, bytes):
        data = body
    elif body is None:
        data = b""
    else:
        data = json.dumps(body).encode()  # ensure_ascii: a lone surrogate travels as \ud800
    response = api.client.open(
        path,
        method=method,
        query_string=query or None,
        data=data if method in ("POST", "PATCH", "PUT", "DELETE") else None,
        headers={**api.headers, "Content-Type": "application/json"},
    )
    try:
        assert response.status_code < 500, (method, path, query, body, response.get_data()[:300])
        if response.status_code >= 400:
            error = response.get_json()["error"]
            assert error["code"] and error["message"], error
    finally:
        response.close()  # as a server does: a live stream (/v1/events) gives its slot back


NASTY = st.sampled_from(
    [[[]], [{}], {}, [], 10**30, -(10**30), -1, 0, 1e300, -1e-300, "\ud800", "a\x00b", "", " ",
     "x" * 5000, True, None, [None], ["x"] * 300, {"": None}, "../../etc/passwd", "*"]
)  # fmt: skip


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside an example a value can be replaced at (keys and list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value.get(head), rest, new)}
    copy = list(value)
    copy[head] = replaced(copy[head], rest, new)
    return copy


def mutated(example: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The example with one value anywhere inside it replaced, or a key added."""
    places = paths(example)
    where = st.sampled_from(places) if places else st.just(("extra",))
    new_key = text.map(lambda k: (k,))
    return st.tuples(where | new_key, NASTY | json_values).map(
        lambda pv: replaced(example, pv[0], pv[1])
    )


FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_every_route_is_covered(api: Api) -> None:
    posted = {rule for method, rule in routes(api) if method in ("POST", "PATCH")}
    assert posted <= set(EXAMPLES), posted - set(EXAMPLES)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_no_route_answers_5xx_to_mutated_examples(api: Api, data: st.DataObject) -> None:
    method, rule = data.draw(st.sampled_from(routes(api)))
    example = EXAMPLES.get(rule, {})
    body = data.draw(mutated(example)) if method in ("POST", "PATCH") else None
    send(api, method, rule, data.draw(url_text), {}, body)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_no_route_answers_5xx_to_arbitrary_bodies(api: Api, data: st.DataObject) -> None:
    method, rule = data.draw(
        st.sampled_from([r for r in routes(api) if r[0] in ("POST", "PATCH", "DELETE")])
    )
    body = data.draw(json_values | raw_bodies)
    send(api, method, rule, data.draw(url_text), {}, body)


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_no_route_answers_5xx_to_arbitrary_paths_and_queries(api: Api, data: st.DataObject) -> None:
    method, rule = data.draw(st.sampled_from(routes(api)))
    query = data.draw(st.dictionaries(st.sampled_from(QUERY_NAMES), url_text, max_size=4))
    body = EXAMPLES.get(rule) if method in ("POST", "PATCH") else None
    send(api, method, rule, data.draw(url_text), query, body)


# The classes a probe of the gateway found answering 500, one request each.
KNOWN = [
    ("POST", "/v1/search", {"query": "x", "project": "fz", "kinds": [[]]}),
    ("POST", "/v1/search", {"query": "x", "project": "fz", "kinds": [{"a": 1}]}),
    ("POST", "/v1/observe", {**EXAMPLES["/v1/observe"], "sessionId": "\ud800"}),
    ("POST", "/v1/observe", {**EXAMPLES["/v1/observe"], "project": "a\x00b"}),
    ("POST", "/v1/observe", {**EXAMPLES["/v1/observe"], "timestamp": 10**30}),
    ("POST", "/v1/observe", {**EXAMPLES["/v1/observe"], "timestamp": 1e300}),
    ("POST", "/v1/sessions", {**EXAMPLES["/v1/sessions"], "timestamp": -(10**20)}),
    ("POST", "/v1/memories", {"content": "x", "project": "fz", "tags": [[], {}]}),
    ("POST", "/v1/import", {"data": {"version": 1, "memories": [[1, 2]]}}),
    ("POST", "/v1/import", {"data": {"version": 1, "sessions": [{"id": 5, "project": []}]}}),
    ("POST", "/v1/import", {"data": {"version": 1, "observations": ["x"]}}),
    ("POST", "/v1/import", {"data": {"version": 10**40}}),
    ("POST", "/v1/import", {"data": []}),
    ("POST", "/v1/graph/query", {"project": "fz", "entity": "x", "depth": 10**30}),
    ("POST", "/v1/sync/files", {**EXAMPLES["/v1/sync/files"], "facts": [None, 1, "x"]}),
    ("POST", "/v1/capture/retry", {"eventIds": [[]]}),
    ("GET", "/v1/sessions?project=fz&cursor=" + "9" * 400, None),
    ("GET", "/v1/audit?cursor=eyJ0IjogMWUzMDB9&limit=99999999999999999999", None),
    ("GET", "/v1/observations?project=fz&limit=-1", None),
]


@pytest.mark.parametrize(("method", "rule", "body"), KNOWN)
def test_known_bad_input_is_a_4xx(api: Api, method: str, rule: str, body: Any) -> None:
    send(api, method, rule, "x", {}, body)


def test_deep_json_is_a_400_naming_the_depth(api: Api) -> None:
    response = api.client.post(
        "/v1/observe",
        data=b'{"toolInput": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        headers={**api.headers, "Content-Type": "application/json"},
    )
    assert (
        response.status_code == 400 and "nested deeper" in response.get_json()["error"]["message"]
    )
