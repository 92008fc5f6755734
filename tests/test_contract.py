"""The REST contract (api/contract.py) is the app: every route is in `GET /v1/openapi.json`, the
types it declares are enforced, and Hypothesis driving every operation of the document with
bodies drawn from its schemas (then with one value made wrong) never gets a 5xx."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.api.contract import ANY, ROUTES
from tests.conftest import Api
from tests.test_fuzz_api import EXAMPLES, NASTY, send, url_text


def app_routes(api: Api) -> set[tuple[str, str]]:
    found = set()
    for rule in api.client.application.url_map.iter_rules():
        if rule.rule.startswith("/v1/"):
            found |= {(m, rule.rule) for m in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
    return found


def document(api: Api) -> dict[str, Any]:
    status, doc = api.get("/v1/openapi.json")
    assert status == 200
    return doc


def test_the_contract_is_exactly_the_apps_routes(api: Api) -> None:
    assert {(r.method, r.rule) for r in ROUTES} == app_routes(api)


def test_the_document_lists_every_operation_with_its_body_and_query(api: Api) -> None:
    doc = document(api)
    assert doc["openapi"].startswith("3.1")
    operations = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert operations == {(m, r.replace("<", "{").replace(">", "}")) for m, r in app_routes(api)}
    observe = doc["paths"]["/v1/observe"]["post"]["requestBody"]["content"]["application/json"]
    assert set(observe["schema"]["required"]) == {"sessionId", "project", "host", "hookType"}
    assert doc["paths"]["/v1/livez"]["get"]["security"] == []
    memory = doc["paths"]["/v1/memories/{memory_id}"]["get"]["parameters"]
    assert {p["name"] for p in memory} == {"memory_id", "project", "agentId"}
    json.dumps(doc)  # plain JSON


WRONG = {"string": 7, "integer": "7", "number": "7", "boolean": "yes", "object": [], "array": {}}


@pytest.mark.parametrize(
    ("method", "rule", "field"),
    [
        (r.method, r.rule, f.name)
        for r in ROUTES
        for f in r.body or ()
        if f.type != ANY and isinstance(f.type, str)
    ],
)
def test_every_declared_type_is_enforced(api: Api, method: str, rule: str, field: str) -> None:
    route = next(r for r in ROUTES if (r.method, r.rule) == (method, rule))
    declared = next(f for f in route.body or () if f.name == field)
    body = {**EXAMPLES.get(rule, {}), field: WRONG[str(declared.type)]}
    path = rule.replace("<session_id>", "s-contract").replace("<memory_id>", "mem_none")
    status, answer = api.call(method, path, body)
    assert status == 422, (rule, field, answer)
    assert field in answer["error"]["details"]["fields"], answer


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values a JSON schema (the subset the document uses) allows."""
    if "oneOf" in schema:
        return st.one_of([from_schema(s) for s in schema["oneOf"]])
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        return st.text(max_size=min(schema.get("maxLength", 60), 60))
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**31)), schema.get("maximum", 2**31))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=3)
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in properties.items() if k in required},
            optional={k: from_schema(v) for k, v in properties.items() if k not in required},
        )
    return st.none() | st.booleans() | st.integers() | st.text(max_size=20)


@pytest.mark.slow
@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_operation_of_the_document_answers_5xx(api: Api, data: st.DataObject) -> None:
    doc = document(api)
    path, operations = data.draw(st.sampled_from(sorted(doc["paths"].items())))
    method, operation = data.draw(st.sampled_from(sorted(operations.items())))
    rule = path.replace("{", "<").replace("}", ">")
    query = {}
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "query" and data.draw(st.booleans()):
            query[parameter["name"]] = str(data.draw(from_schema(parameter["schema"])))
    body = None
    if "requestBody" in operation:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        body = data.draw(from_schema(schema))
        if body and data.draw(st.booleans()):
            body[data.draw(st.sampled_from(sorted(body)))] = data.draw(NASTY)
    query = {k: v for k, v in query.items() if "\x00" not in v}
    send(api, method.upper(), rule, data.draw(url_text), query, body)
