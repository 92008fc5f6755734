"""Sessions: start (with the context block), end (enqueues the summary), list, timeline."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from engram import context, observations, sessions
from engram.api.errors import ApiError
from engram.api.util import (
    actor,
    found_in_scope,
    in_callers_scope,
    json_body,
    limit_arg,
    page,
    parsed_body,
    scope_from,
    settings,
    store,
    vectors,
)
from engram.events import parse_timestamp
from engram.wire import MAX_ID_CHARS

bp = Blueprint("sessions", __name__)


def _str_field(
    body: dict[str, Any],
    key: str,
    errors: dict[str, str],
    required: bool = False,
    limit: int = MAX_ID_CHARS,
) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            errors[key] = "required"
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        errors[key] = f"must be a non-empty string of at most {limit} characters"
        return None
    return value.strip()


@bp.post("/v1/sessions")
def start() -> Any:
    body = json_body()
    errors: dict[str, str] = {}
    session_id = _str_field(body, "sessionId", errors, required=True)
    project = _str_field(body, "project", errors, required=True)
    cwd = _str_field(body, "cwd", errors, limit=4096)
    host = _str_field(body, "host", errors, limit=64)
    agent_id = _str_field(body, "agentId", errors)
    budget = body.get("budgetTokens", settings().context_budget_tokens)
    if not isinstance(budget, int) or isinstance(budget, bool) or not 0 < budget <= 100_000:
        errors["budgetTokens"] = "an integer 1-100000"
    at = _timestamp(body, errors)
    if errors:
        raise ApiError(422, "invalid session", details={"fields": errors})
    assert session_id and project
    session, created = sessions.start(
        store(), session_id, project, host=host, agent_id=agent_id, cwd=cwd, at=at
    )
    # A session keeps the project and agent it started with; a re-announce cannot move it.
    scope = scope_from(session["project"], session["agentId"])
    block = context.build(
        store(),
        scope,
        session_id=session_id,
        query=body.get("query") if isinstance(body.get("query"), str) else None,
        budget_tokens=budget,
        vectors=vectors(),
        **settings().fusion_options("context"),
    )
    return jsonify({"session": session, **block}), 201 if created else 200


def _timestamp(body: dict[str, Any], errors: dict[str, str]) -> float | None:
    """The host's time of a start or end (``timestamp``), or None when not given."""
    if body.get("timestamp") is None:
        return None
    try:
        return parse_timestamp(body["timestamp"])
    except ValueError as exc:
        errors["timestamp"] = str(exc)
        return None


@bp.post("/v1/sessions/<session_id>/end")
def end(session_id: str) -> Any:
    """End a session. A body with ``project`` (and ``host``, ``cwd``, ``agentId``) first creates
    a session not seen yet: a hook's end may arrive before a worker stored the session's first
    event, or after its start was lost."""
    body = parsed_body() if request.content_length else None
    if body is not None:
        if not isinstance(body, dict):
            raise ApiError(400, "body must be a JSON object", code="malformed_json")
        errors: dict[str, str] = {}
        project = _str_field(body, "project", errors)
        host = _str_field(body, "host", errors, limit=64)
        cwd = _str_field(body, "cwd", errors, limit=4096)
        agent_id = _str_field(body, "agentId", errors)
        at = _timestamp(body, errors)
        if errors:
            raise ApiError(422, "invalid session", details={"fields": errors})
        if project and sessions.get(store(), session_id) is None:
            sessions.start(
                store(), session_id, project, host=host, agent_id=agent_id, cwd=cwd, at=at
            )
    else:
        project = agent_id = at = None
    session = sessions.end(store(), session_id, project, agent_id, at=at)
    if session is None:
        raise ApiError(404, f"no session {session_id!r}")
    current_app.extensions["engram.enqueue_summary"](session_id)
    return jsonify({"session": session, "summary": "enqueued"})


@bp.get("/v1/sessions")
def list_() -> Any:
    scope = scope_from(request.args.get("project"), request.args.get("agentId"))
    items, cursor = sessions.list_sessions(
        store(), scope, limit_arg(), request.args.get("cursor"), request.args.get("status") or None
    )
    return jsonify(page(items, cursor))


@bp.get("/v1/sessions/<session_id>")
def get(session_id: str) -> Any:
    return jsonify(found_in_scope(sessions.get(store(), session_id), "session", session_id))


@bp.get("/v1/sessions/<session_id>/observations")
def timeline(session_id: str) -> Any:
    found_in_scope(sessions.get(store(), session_id), "session", session_id)
    items, cursor = observations.timeline(
        store(), session_id, limit_arg(), request.args.get("cursor")
    )
    return jsonify(page(items, cursor))


@bp.get("/v1/observations/<observation_id>")
def get_observation(observation_id: str) -> Any:
    item = observations.get(store(), observation_id)
    return jsonify(found_in_scope(item, "observation", observation_id))


@bp.delete("/v1/observations/<observation_id>")
def forget_observation(observation_id: str) -> Any:
    in_callers_scope(
        lambda: observations.get(store(), observation_id), "observation", observation_id
    )
    if not observations.forget(store(), store().keyword, observation_id, actor=actor()):
        raise ApiError(404, f"no observation {observation_id!r}")
    return jsonify({"forgotten": observation_id})
