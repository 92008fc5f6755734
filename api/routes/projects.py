"""Per-project reads: GET /v1/projects/profile, GET /v1/observations (newest first) and
GET /v1/files/history."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from engram import context, observations
from engram.api.errors import ApiError
from engram.api.util import limit_arg, page, scope_from, store

bp = Blueprint("projects", __name__)
MAX_PATH_CHARS = 4096


@bp.get("/v1/projects/profile")
def profile() -> Any:
    """What a project is about: sessions and observations recorded, top files, commands and
    concepts (the profile the context block starts with). The project is a query parameter, as
    everywhere: project names may hold a slash (``org/repo``)."""
    scope = scope_from(request.args.get("project"), request.args.get("agentId"))
    return jsonify(context.profile(store(), scope))


@bp.get("/v1/observations")
def recent() -> Any:
    """The scope's observations, newest first."""
    scope = scope_from(request.args.get("project"), request.args.get("agentId"))
    items, cursor = observations.recent(store(), scope, limit_arg(), request.args.get("cursor"))
    return jsonify(page(items, cursor))


@bp.get("/v1/files/history")
def file_history() -> Any:
    """Observations that read or changed a file, newest first."""
    path = request.args.get("path", "")
    if not path.strip() or len(path) > MAX_PATH_CHARS:
        raise ApiError(
            422,
            "path is required",
            details={
                "fields": {"path": f"a non-empty file path of at most {MAX_PATH_CHARS} characters"}
            },
        )
    scope = scope_from(request.args.get("project"), request.args.get("agentId"))
    items, cursor = observations.file_history(
        store(), scope, path.strip(), limit_arg(), request.args.get("cursor")
    )
    return jsonify(page(items, cursor))
