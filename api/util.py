"""Small request helpers shared by the blueprints."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import current_app, g, request

from engram import inputs
from engram.api.contract import BY_RULE, problems
from engram.api.errors import ApiError
from engram.pagination import parse_limit
from engram.privacy import scrub
from engram.rerank import Reranker, RerankError, reranker_from_settings
from engram.scope import Scope, ScopeError
from engram.settings import Settings
from engram.store import Store
from engram.vectors import Vectors

log = logging.getLogger("engram.api")


def bad_input(exc: inputs.BadInput, extra: dict[str, Any] | None = None) -> ApiError:
    """The 400 for input no route can use (engram.inputs), naming the field when there is one."""
    if not exc.field:
        return ApiError(
            400, f"body is not usable: {exc.problem}", code="malformed_json", extra=extra
        )
    return ApiError(
        400,
        f"{exc.field}: {exc.problem}",
        code="invalid_input",
        details={"fields": {exc.field: exc.problem}},
        extra=extra,
    )


def parsed_body(extra: dict[str, Any] | None = None, *, scrubbed: bool = True) -> Any:
    """The request body, parsed and checked by engram.inputs (depth, text, numbers) and scrubbed
    of secrets in every field, key and identifier (engram.privacy.scrub) before a route sees
    it; 400 when it is not usable JSON, 413 when it is over the route's size limit."""
    if "engram_raw" not in g:  # parsed once a request (the contract check reads it first)
        try:
            g.engram_raw = inputs.parse_json(request.get_data(cache=True))
        except inputs.BadInput as exc:
            raise bad_input(exc, extra) from None
    if not scrubbed:  # the caller scrubs: the contract check, and capture (validate_event)
        return g.engram_raw
    if "engram_body" not in g:
        g.engram_body = scrub(g.engram_raw)
    return g.engram_body


def json_body(extra: dict[str, Any] | None = None, *, scrubbed: bool = True) -> dict[str, Any]:
    """The request's JSON object; 400 when it is not JSON or not an object."""
    body = parsed_body(extra, scrubbed=scrubbed)
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object", code="malformed_json", extra=extra)
    return body


def check_contract() -> None:
    """Before a route: its body is what the contract (api/contract.py) declares; 422 naming
    every field that is not."""
    rule = request.url_rule
    route = BY_RULE.get((request.method, rule.rule)) if rule is not None else None
    if route is None or route.body is None or not request.content_length:
        return
    extra = {"status": "rejected"} if route.capture else None
    body = parsed_body(extra, scrubbed=False)  # types as sent; nothing of it is stored here
    found = problems(route, body) if isinstance(body, dict) else {}
    if found:
        raise ApiError(422, "invalid request", details={"fields": found}, extra=extra)


def check_request_text() -> None:
    """Query parameters and path segments are text a store can hold (before any route)."""
    try:
        for name, value in request.args.items(multi=True):
            inputs.check_text(name, "(a query parameter name)")
            inputs.check_text(value, name)
        for name, value in (request.view_args or {}).items():
            if isinstance(value, str):
                inputs.check_text(value, name)
    except inputs.BadInput as exc:
        raise bad_input(exc) from None


def limit_arg(raw: Any = None) -> int:
    try:
        return parse_limit(request.args.get("limit") if raw is None else raw)
    except ValueError as exc:
        raise ApiError(422, str(exc), details={"fields": {"limit": str(exc)}}) from None


def scope_from(project: Any, agent_id: Any = None) -> Scope:
    try:
        return Scope.resolve(project, agent_id)
    except ScopeError as exc:
        raise ApiError(
            422, str(exc), code="scope_required", details={"fields": {"project": str(exc)}}
        ) from None


def found_in_scope(item: dict[str, Any] | None, what: str, ident: str) -> dict[str, Any]:
    """A read by id: 404 when the item is missing, or outside the scope the caller passed as
    ``?project=`` (and ``agentId=``); ids are addresses, the scope is still honoured."""
    if item is not None and (request.args.get("project") or request.args.get("agentId")):
        scope = scope_from(request.args.get("project") or "*", request.args.get("agentId"))
        in_project = scope.all_projects or item.get("project") in scope.projects()
        owner = item.get("agentId")
        if not in_project or (scope.agent_id is not None and owner not in (None, scope.agent_id)):
            item = None
    if item is None:
        raise ApiError(404, f"no {what} {ident!r}")
    return item


def in_callers_scope(fetch: Callable[[], dict[str, Any] | None], what: str, ident: str) -> None:
    """Before a change by id: a caller that names its scope (``?project=``, ``?agentId=``) may
    change only what is in it (404 otherwise, as a read would answer)."""
    if request.args.get("project") or request.args.get("agentId"):
        found_in_scope(fetch(), what, ident)


def actor() -> str:
    """Who the audit trail says made a change: the viewer (signed-in browser) or the API."""
    return str(g.get("engram_actor", "api"))


def store() -> Store:
    return current_app.extensions["engram.store"]


def vectors() -> Vectors | None:
    return current_app.extensions.get("engram.vectors")


def settings() -> Settings:
    return current_app.extensions["engram.settings"]


def reranker() -> tuple[Reranker | None, str | None]:
    """The search reranker ENGRAM_RERANKER names (None for off), or the reason it cannot be
    built; made on first use (a local model loads at its first search)."""
    found = current_app.extensions.get("engram.reranker")
    if found is None:
        try:
            found = (reranker_from_settings(settings()), None)
        except RerankError as exc:
            log.warning("reranker off: %s", exc)
            found = (None, str(exc))
        current_app.extensions["engram.reranker"] = found
    return found


def page(items: list[Any], next_cursor: str | None) -> dict[str, Any]:
    return {"items": items, "nextCursor": next_cursor}
