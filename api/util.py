"""Small request helpers shared by the blueprints."""

from __future__ import annotations

from typing import Any

from flask import current_app, request

from engram.api.errors import ApiError
from engram.pagination import parse_limit
from engram.scope import Scope, ScopeError
from engram.settings import Settings
from engram.store import Store
from engram.vectors import Vectors


def json_body() -> dict[str, Any]:
    """The request's JSON object; 400 when it is not JSON or not an object."""
    body = request.get_json(silent=True)
    if body is None:
        raise ApiError(400, "body is not valid JSON", code="malformed_json")
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object", code="malformed_json")
    return body


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


def store() -> Store:
    return current_app.extensions["engram.store"]


def vectors() -> Vectors | None:
    return current_app.extensions.get("engram.vectors")


def settings() -> Settings:
    return current_app.extensions["engram.settings"]


def page(items: list[Any], next_cursor: str | None) -> dict[str, Any]:
    return {"items": items, "nextCursor": next_cursor}
