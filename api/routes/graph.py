"""The knowledge graph: POST /v1/graph/query (entity lookup and neighbourhood)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from engram import graph, search
from engram.api.errors import ApiError
from engram.api.util import json_body, limit_arg, scope_from, store
from engram.graph import facts

bp = Blueprint("graph", __name__)
MAX_NAME_CHARS = 300
MAX_QUERY_CHARS = 4000
NODE_TYPES = graph.NODE_TYPES


@bp.post("/v1/graph/query")
def graph_query() -> Any:
    body = json_body()
    errors: dict[str, str] = {}
    entity, text = body.get("entity"), body.get("query")
    if entity is not None and (
        not isinstance(entity, str) or not entity.strip() or len(entity) > MAX_NAME_CHARS
    ):
        errors["entity"] = f"a non-empty string of at most {MAX_NAME_CHARS} characters"
    if text is not None and (
        not isinstance(text, str) or not text.strip() or len(text) > MAX_QUERY_CHARS
    ):
        errors["query"] = f"a non-empty string of at most {MAX_QUERY_CHARS} characters"
    if entity is None and text is None:
        errors["entity"] = "entity or query is required"
    elif entity is not None and text is not None:
        errors["query"] = "give entity or query, not both"
    kind = body.get("type")
    if kind is not None and kind not in NODE_TYPES:
        errors["type"] = "one of " + ", ".join(NODE_TYPES)
    depth = body.get("depth", 1)
    if depth not in (1, 2) or isinstance(depth, bool):
        errors["depth"] = "1 or 2"
    limit = body.get("limit", 20)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
        errors["limit"] = "an integer 1-100"
    if errors:
        raise ApiError(422, "invalid graph query", details={"fields": errors})
    scope = scope_from(body.get("project"), body.get("agentId"))
    with store().read() as conn:
        answer = graph.query(
            conn, scope, name=entity, text=text, type=kind, depth=depth, limit=limit
        )
        items = search.hydrate(conn, answer.hits)
    return jsonify({"entities": answer.entities, "neighbours": answer.neighbours, "items": items})


@bp.get("/v1/graph/facts")
def graph_facts() -> Any:
    """Facts between named things (with a provider set, read from sessions by the LLM), with
    when each held; ``history=true`` adds the ended ones."""
    scope = scope_from(request.args.get("project"), request.args.get("agentId"))
    if scope.all_projects:
        raise ApiError(
            422, "facts are per project", details={"fields": {"project": "one project, not *"}}
        )
    history = (request.args.get("history") or "false").lower()
    if history not in ("true", "false"):
        raise ApiError(
            422, "history must be true or false", details={"fields": {"history": "true or false"}}
        )
    entity = request.args.get("entity")
    if entity is not None and (not entity.strip() or len(entity) > MAX_NAME_CHARS):
        raise ApiError(
            422,
            "invalid entity",
            details={"fields": {"entity": f"1-{MAX_NAME_CHARS} characters"}},
        )
    with store().read() as conn:
        items = facts.about(
            conn, scope.project, entity, history=history == "true", limit=limit_arg()
        )
    return jsonify({"items": items})
