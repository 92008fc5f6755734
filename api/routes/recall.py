"""Reads that rank: POST /v1/search and POST /v1/context."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

from engram import context, memories, search
from engram.api.errors import ApiError
from engram.api.util import json_body, reranker, scope_from, settings, store, vectors
from engram.events import parse_timestamp
from engram.scope import Window

bp = Blueprint("recall", __name__)
MAX_QUERY_CHARS = 4000
KINDS = ("observation", "memory", "summary")


@bp.post("/v1/search")
def search_() -> Any:
    body = json_body()
    errors: dict[str, str] = {}
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        errors["query"] = "required, a non-empty string"
    elif len(query) > MAX_QUERY_CHARS:
        errors["query"] = f"at most {MAX_QUERY_CHARS} characters"
    mode = body.get("mode", search.DEFAULT_MODE)
    if mode not in search.MODES:
        errors["mode"] = "one of " + ", ".join(search.MODES)
    limit = body.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
        errors["limit"] = "an integer 1-100"
    per_session = body.get("perSession", search.DEFAULT_PER_SESSION)  # checked by the contract
    kinds = body.get("kinds")
    if kinds is not None and (
        not isinstance(kinds, list) or not all(isinstance(k, str) and k in KINDS for k in kinds)
    ):
        errors["kinds"] = "a list of " + ", ".join(KINDS)
    window = _window(body, errors)
    if errors or not isinstance(query, str):
        raise ApiError(422, "invalid search", details={"fields": errors})
    scope = scope_from(body.get("project"), body.get("agentId"))
    chosen, problem = reranker()
    try:
        result = search.search(
            store(),
            query,
            scope,
            limit=limit,
            mode=mode,
            per_session=per_session,
            kinds=tuple(kinds) if kinds else None,
            vectors=vectors(),
            **settings().fusion_options("search"),
            reranked_support=dict(settings().session_support)["reranked"],
            reranked_neighbour_support=dict(settings().neighbour_support)["reranked"],
            reranker=chosen,
            rerank_depth=settings().rerank_depth,
            rerank_budget_ms=settings().rerank_budget_ms,
            window=window,
        )
    except search.SearchUnavailable as exc:
        raise ApiError(422, str(exc), code="mode_unavailable") from None
    if problem is not None:
        result.setdefault("degraded", {})["rerank"] = problem
    used = memories.due_for_touch(
        [hit["id"] for hit in result["items"] if hit.get("kind") == "memory"]
    )
    if used:  # a memory found is a memory used: its decay starts over
        with store().write() as conn:
            memories.touch(conn, used)
    return jsonify(result)


def _window(body: dict[str, Any], errors: dict[str, str]) -> Window | None:
    """``since`` / ``until`` as a window, each an ISO 8601 time or epoch seconds or ms; what
    is wrong with them goes into ``errors``."""
    bounds: dict[str, float] = {}
    for name in ("since", "until"):
        value = body.get(name)
        if value is None:
            continue
        try:
            bounds[name] = parse_timestamp(value)
        except ValueError as exc:
            errors[name] = f"{exc}: an ISO 8601 time, or epoch seconds or milliseconds"
    if not bounds:
        return None
    if "since" in bounds and "until" in bounds and bounds["since"] >= bounds["until"]:
        errors["until"] = "must be later than since"
    return Window(bounds.get("since"), bounds.get("until"))


@bp.post("/v1/context")
def context_() -> Any:
    body = json_body()
    scope = scope_from(body.get("project"), body.get("agentId"))
    budget = body.get("budgetTokens", settings().context_budget_tokens)
    if not isinstance(budget, int) or isinstance(budget, bool) or not 0 < budget <= 100_000:
        raise ApiError(
            422,
            "budgetTokens must be an integer 1-100000",
            details={"fields": {"budgetTokens": "an integer 1-100000"}},
        )
    query = body.get("query")
    if query is not None and not isinstance(query, str):
        raise ApiError(422, "query must be a string", details={"fields": {"query": "a string"}})
    session_id = body.get("sessionId") if isinstance(body.get("sessionId"), str) else None
    if body.get("forPrompt"):
        return jsonify(_for_prompt(scope, query, session_id, body.get("budgetTokens")))
    return jsonify(
        context.build(
            store(),
            scope,
            query=query or None,
            session_id=session_id,
            budget_tokens=budget,
            vectors=vectors(),
            **settings().fusion_options("context"),
        )
    )


def _for_prompt(scope: Any, query: Any, session_id: str | None, budget: Any) -> dict[str, Any]:
    """A prompt hook's request: the prompt is the query, the session is the one it belongs to."""
    missing = {
        name: "required with forPrompt"
        for name, value in (("query", query), ("sessionId", session_id))
        if not value
    }
    if missing:
        raise ApiError(
            422, "forPrompt needs the prompt and its session", details={"fields": missing}
        )
    tokens = settings().prompt_context_tokens if budget is None else budget
    if not tokens:  # ENGRAM_PROMPT_CONTEXT_TOKENS=0: per-prompt context is off
        return {
            "context": "",
            "tokens": 0,
            "budgetTokens": 0,
            "items": 0,
            "omitted": 0,
            "cited": [],
        }
    return context.for_prompt(
        store(),
        scope,
        query,
        session_id,  # type: ignore[arg-type]
        budget_tokens=tokens,
        vectors=vectors(),
        **settings().fusion_options("context"),
    )
